"""The one progress display of the long commands (ingest, eval, batch): a transient rich bar on stderr when
stderr is a terminal, plain lines (`note`) when it is a log file or a pipe. rich is imported on entry."""

from __future__ import annotations

from typing import Any

from rag_assistant.cli.common import err


class ProgressBar:
    """`with ProgressBar("embedding", "chunks") as bar: bar.update(done, total); bar.note("...")`.

    Columns: the label, the bar, done/total, `columns` (rich text templates such as
    "[red]{task.fields[failed]} failed[/]" with `fields` as their start values), then the time remaining
    (or elapsed with `elapsed=True`). `hidden` keeps the bar out of sight until the first update."""

    def __init__(
        self,
        label: str,
        *columns: str,
        total: int | None = None,
        elapsed: bool = False,
        hidden: bool = False,
        **fields: Any,
    ) -> None:
        self.label, self.columns, self.total = label, columns, total
        self.elapsed, self.hidden, self.fields = elapsed, hidden, fields
        self.live = False

    def __enter__(self) -> ProgressBar:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.live = err().is_terminal
        self.bar = Progress(
            TextColumn(self.label),
            BarColumn(),
            MofNCompleteColumn(),
            *(TextColumn(c) for c in self.columns),
            TimeElapsedColumn() if self.elapsed else TimeRemainingColumn(),
            console=err(),
            transient=True,
        )
        self.task = self.bar.add_task(self.label, total=self.total, visible=not self.hidden, **self.fields)
        if self.live:
            self.bar.start()
        return self

    def update(self, done: int | None = None, total: int | None = None, **fields: Any) -> None:
        """Move the bar (and show it); None leaves `done` or `total` as they were."""
        self.bar.update(self.task, completed=done, total=total, visible=True, **fields)

    def note(self, line: str) -> None:
        """A plain progress line on stderr, printed only where there is no live bar (logs and pipes)."""
        if not self.live:
            err().print(line)

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()
