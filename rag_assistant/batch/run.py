"""Batch runs: run_batch (plan, answer, resume, final file), the BatchSummary it returns and RowDone progress.

Resume: the JSONL journal (the .jsonl output itself, or OUT.partial.jsonl beside a .csv/.md output) holds
one line per finished row. A rerun answers only the rows whose id has no `ok` line for the same question;
failed rows are retried and their line replaced when the final file is written."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rag_assistant.batch.answerer import Answerer, Chain
from rag_assistant.batch.inputs import BatchInputError, InputRow, read_input
from rag_assistant.batch.journal import Journal, is_done, journal_path, read_final_status
from rag_assistant.batch.outputs import (
    OUTPUT_KINDS,
    summary_lines,
    write_atomic,
    write_csv,
    write_jsonl,
    write_markdown,
)
from rag_assistant.config import Settings
from rag_assistant.index.keyword_fields import FieldFilter


@dataclass
class RowDone:
    """Progress report after each finished row."""

    done: int
    failed: int
    total: int  # rows to answer in this run
    row_id: str
    status: str
    seconds: float
    error: str | None


@dataclass
class BatchSummary:
    output: str
    total: int  # input rows
    answered: int = 0  # in this run, not abstained
    abstained: int = 0  # in this run
    failed: int = 0  # in this run (malformed rows included)
    skipped: int = 0  # already done by an earlier run
    wall_seconds: float = 0.0
    mean_seconds: float | None = None
    p95_seconds: float | None = None
    mode: str = ""
    model: str = ""
    failed_ids: list[str] = field(default_factory=list)
    dropped: int = 0  # rows of an earlier run whose id is no longer in the input
    journal: str | None = None  # kept beside a .csv/.md output while some rows failed

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "exit_code": self.exit_code}

    def lines(self) -> list[str]:
        return summary_lines(
            (self.total, self.answered, self.abstained, self.failed),
            self.mode or "-",
            self.model,
            skipped=self.skipped,
            times=(self.wall_seconds, self.mean_seconds, self.p95_seconds),
            dropped=self.dropped,
        )


class _Recorder:
    """The callback for each finished row of a run: journal its record, count it, report progress."""

    def __init__(
        self, journal: Journal, summary: BatchSummary, todo: int, progress: Callable[[RowDone], None] | None
    ) -> None:
        self.journal = journal
        self.summary = summary
        self.todo = todo
        self.progress = progress
        self.seconds: list[float] = []

    def __call__(self, record: dict[str, Any]) -> None:
        self.journal.append(record)
        summary = self.summary
        if record["status"] != "ok":
            summary.failed += 1
            summary.failed_ids.append(record["id"])
        elif record.get("abstained"):
            summary.abstained += 1
        else:
            summary.answered += 1
        total = (record.get("timings") or {}).get("total")
        if total is not None:
            self.seconds.append(float(total))
        if self.progress is not None:
            done = summary.answered + summary.abstained + summary.failed
            row_id, status, error = record["id"], record["status"], record.get("error")
            self.progress(RowDone(done, summary.failed, self.todo, row_id, status, float(total or 0.0), error))

    def set_times(self) -> None:
        """The mean and the nearest-rank p95 of this run's question times."""
        if self.seconds:
            ordered = sorted(self.seconds)
            self.summary.mean_seconds = round(sum(ordered) / len(ordered), 4)
            self.summary.p95_seconds = round(ordered[max(0, -(-95 * len(ordered) // 100) - 1)], 4)


def output_kind(path: Path) -> str:
    if path.suffix.lower() not in OUTPUT_KINDS:
        raise BatchInputError(f"unsupported output file type: {path.name}", "use -o with .jsonl, .csv or .md")
    return path.suffix.lower()


def run_batch(
    input_path: Path,
    output: Path,
    settings: Settings,
    *,
    concurrency: int = 1,
    k: int | None = None,
    fresh: bool = False,
    progress: Callable[[RowDone], None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
    chain: Chain | None = None,
    filters: Sequence[FieldFilter] = (),
) -> BatchSummary:
    """Answer every question of `input_path` not already done in `output`; see the module docstring.
    `on_start(to_answer, already_done)` is called once the plan is known, before the models load; `filters`
    (parsed, not yet resolved) restrict every row (a row's own filter replaces them for the fields it names)."""
    started = time.perf_counter()
    kind = output_kind(output)
    if output.resolve() == input_path.resolve():
        raise BatchInputError("the output file is the question file", "choose another -o path")
    rows = read_input(input_path)
    journal_file = journal_path(output)
    if fresh:
        journal_file.unlink(missing_ok=True)
        output.unlink(missing_ok=True)
    summary = BatchSummary(output=str(output), total=len(rows))
    if kind != ".jsonl" and output.exists() and not journal_file.exists():
        return _finished_earlier(rows, output, journal_file, summary, started)

    journal = Journal(journal_file)
    journal.load()
    todo = [r for r in rows if not is_done(journal.entries.get(r.id), r)]
    summary.skipped = len(rows) - len(todo)
    if on_start is not None:
        on_start(len(todo), summary.skipped)
    answerer = Answerer(settings, k, f"batch:{output.name}", chain, filters) if todo else None
    recorder = _Recorder(journal, summary, len(todo), progress)
    try:
        if answerer is not None:
            summary.mode, summary.model = answerer.mode, answerer.model
            workers = concurrency if answerer.mode == "llm" else 1  # extractive answering is CPU-bound
            _execute(todo, answerer, workers, recorder)
        else:
            first = next(iter(journal.entries.values()), None)
            summary.mode, summary.model = (first.mode, first.model) if first else (settings.resolved_mode(), "")
        position = {r.id: n for n, r in enumerate(rows)}
        summary.failed_ids.sort(key=position.__getitem__)  # completion order means nothing to the reader
        summary.dropped = len(journal.entries.keys() - position.keys())
        _write_final(kind, output, journal, rows, summary)
    finally:
        journal.close()
    summary.wall_seconds = round(time.perf_counter() - started, 3)
    recorder.set_times()
    return summary


def _execute(
    todo: Sequence[InputRow], answerer: Answerer, workers: int, finished: Callable[[dict[str, Any]], None]
) -> None:
    """Answer `todo`, calling `finished` in this thread for each record as it completes."""
    if workers <= 1:
        for row in todo:
            finished(answerer.answer(row))
        return
    pool = ThreadPoolExecutor(workers, thread_name_prefix="batch")
    pending: set[Future[dict[str, Any]]] = set()
    done: set[Future[dict[str, Any]]] = set()
    rows = iter(todo)
    try:
        while True:
            # Only a few rows are queued at a time, so an interrupt does not leave thousands queued behind it.
            while len(pending) < 2 * workers and (row := next(rows, None)) is not None:
                pending.add(pool.submit(answerer.answer, row))
            if not pending:
                break
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            while done:  # popped first, so that on an error `done` holds exactly the unrecorded ones
                finished(done.pop().result())
    except BaseException:  # Ctrl-C or a fatal error: stop queueing, but keep what is being answered anyway
        for future in pending:
            future.cancel()
        for future in done | pending:
            if not future.cancelled():  # a running thread cannot be stopped: journal its answer, not waste it
                with contextlib.suppress(Exception):
                    finished(future.result())
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _write_final(kind: str, output: Path, journal: Journal, rows: list[InputRow], summary: BatchSummary) -> None:
    ids = [r.id for r in rows]
    if kind == ".jsonl":
        # Appends are in completion order and a retried row has two lines: rewrite once, in input order,
        # one line per input id. An in-order journal (the common single-thread run) is left as is.
        if journal.sequence != ids:
            write_atomic(output, lambda f: write_jsonl(f, journal.records(ids)))
        return
    if kind == ".csv":
        columns = list(dict.fromkeys(name for r in rows for name in r.fields))
        write_atomic(output, lambda f: write_csv(f, journal.records(ids), columns))
    else:
        lines = _report_lines(journal, ids, summary)
        write_atomic(output, lambda f: write_markdown(f, journal.records(ids), "Batch answers", lines))
    journal.close()
    if any(journal.entries[i].status != "ok" for i in ids if i in journal.entries):
        summary.journal = str(journal.path)  # kept: the failed rows are retried from it on the next run
    else:
        journal.path.unlink(missing_ok=True)


def _report_lines(journal: Journal, ids: list[str], summary: BatchSummary) -> list[str]:
    """The .md report's summary: every input row's latest state, this run's or an earlier one's."""
    entries = [journal.entries[i] for i in ids if i in journal.entries]
    ok = [e for e in entries if e.status == "ok"]
    times = [e.seconds for e in ok if e.seconds is not None]
    counts = (len(ids), sum(not e.abstained for e in ok), sum(e.abstained for e in ok), len(entries) - len(ok))
    mean = sum(times) / len(times) if times else None
    return summary_lines(counts, summary.mode, summary.model, times=(None, mean, None))


def _finished_earlier(
    rows: list[InputRow], output: Path, journal_file: Path, summary: BatchSummary, started: float
) -> BatchSummary:
    """A .csv/.md output without its journal is a batch that completed with every row ok."""
    entries = read_final_status(output)
    missing = [r.id for r in rows if not is_done(entries.get(r.id), r)]
    if missing:
        raise BatchInputError(
            f"{output} exists but {len(missing)} question(s) are not answered in it, and its journal "
            f"{journal_file.name} is gone, so it cannot be resumed",
            "pass --fresh to answer every question again, or choose another output file",
        )
    first = next(iter(entries.values()), None)
    summary.skipped = len(rows)
    summary.mode, summary.model = (first.mode, first.model) if first else ("", "")
    summary.wall_seconds = round(time.perf_counter() - started, 3)
    return summary
