"""batch: answer a file of questions into a .jsonl, .csv or .md file; rerunning resumes.

The command parses its options, calls rag_assistant.batch.run_batch and renders the progress and summary."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rag_assistant.cli.common import err, out, print_json
from rag_assistant.cli.options import (
    AuthorOpt,
    BaseUrlOpt,
    ModelOpt,
    ModeOpt,
    TopicOpt,
    TopKOpt,
    WhereOpt,
    YearOpt,
    answer_settings,
    parsed_filters,
)

if TYPE_CHECKING:
    from rag_assistant.batch import BatchSummary, RowDone
    from rag_assistant.cli.progress import ProgressBar


def batch(
    ctx: typer.Context,
    file: Annotated[
        Path,
        typer.Argument(
            help="Questions: .txt (one per line, # comments), .jsonl (a `question` field) or .csv (a `question` "
            "column). Other fields are kept; an `id` field names the row, else its line number; a `filter` object "
            "(keys author, year, topic or any stored field: docs/batch.md) restricts that row.",
            show_default=False,
        ),
    ],
    output: Annotated[
        Path, typer.Option("-o", "--output", help="Answers: .jsonl (full records), .csv (flat) or .md (a report).")
    ],
    concurrency: Annotated[
        int, typer.Option("-c", "--concurrency", help="Questions in flight at once (llm mode only).", min=1, max=64)
    ] = 1,
    k: TopKOpt = None,
    mode: ModeOpt = None,
    llm_model: ModelOpt = None,
    llm_base_url: BaseUrlOpt = None,
    fresh: Annotated[
        bool, typer.Option("--fresh", help="Discard an earlier (partial) output and answer every question again.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    author: AuthorOpt = None,
    year: YearOpt = None,
    topic: TopicOpt = None,
    where: WhereOpt = None,
) -> None:
    """Answer every question of FILE into OUTPUT. Rerun the same command to resume after an interruption:
    questions already answered are skipped, failed ones retried. Exit 1 when some question failed."""
    from rag_assistant.batch import run_batch
    from rag_assistant.cli.progress import ProgressBar

    settings = answer_settings(ctx, k, mode, llm_model, llm_base_url)
    filters = parsed_filters(author, year, topic, where)  # malformed: exit 2 before anything is read
    if concurrency > 1 and settings.resolved_mode() != "llm":
        err().print("note: --concurrency is ignored in extractive mode (answering is CPU-bound); using 1")
        concurrency = 1
    with ProgressBar("answering", "[red]{task.fields[failed]} failed[/]", failed=0) as bar:
        summary = run_batch(
            file,
            output,
            settings,
            concurrency=concurrency,
            fresh=fresh,
            progress=lambda event: _row_done(bar, event),
            on_start=lambda todo, done: _planned(bar, todo, done),
            filters=filters,
        )
    _print_summary(summary, as_json)
    if summary.exit_code:
        raise typer.Exit(summary.exit_code)


def _planned(bar: ProgressBar, todo: int, done: int) -> None:
    """The plan is known: say what a resumed run skips, and size the bar."""
    if done:
        err().print(f"resuming: {done} question(s) already done, {todo} to answer")
    if bar.live:
        bar.update(total=todo)


def _row_done(bar: ProgressBar, event: RowDone) -> None:
    """Move the bar (done, failed, ETA), or one plain line per question when stderr is not a terminal."""
    if bar.live:
        bar.update(event.done, event.total, failed=event.failed)
        return
    from rag_assistant.cli.safe import safe

    line = f"[{event.done}/{event.total}] {event.row_id} {event.status} {event.seconds:.2f}s"
    if event.error:
        line += f": {event.error}"
    bar.note(safe(line))


def _print_summary(summary: BatchSummary, as_json: bool) -> None:
    if as_json:
        print_json(summary.as_dict())
        return
    from rag_assistant.cli.safe import safe

    out().print(f"[bold]Batch done[/] -> {safe(summary.output)}")
    for line in summary.lines():
        out().print(f"  {safe(line)}")
    if summary.failed:
        shown = ", ".join(summary.failed_ids[:10]) + (" ..." if len(summary.failed_ids) > 10 else "")
        out().print(
            f"[red]{summary.failed} question(s) failed[/] (ids {safe(shown)}): see their `error`; "
            "rerun the same command to retry them"
        )
    if summary.journal:
        out().print(f"  journal kept for the retry: {safe(summary.journal)}")


def register(app: typer.Typer) -> None:
    app.command()(batch)
