"""Batch answering: many questions from a file, one durable output line per question, resumable after a kill.

Resume: the JSONL journal (the .jsonl output itself, or OUT.partial.jsonl beside a .csv/.md output) holds
one line per finished row. A rerun answers only the rows whose id has no `ok` line for the same question;
failed rows are retried and their line replaced when the final file is written.

Threads: in llm mode `concurrency` questions are in flight at once, all through one AnswerChain. The
chain's CPU work (retrieval, embedding, citation checks, the provenance log) is not safe to share across
threads -- the embedder's cache, the lazily built keyword index and the HF tokenizer ("Already borrowed")
are not -- and would not run faster in parallel anyway, so it runs under one lock that only the LLM
request releases. The OpenAI client under LlamaIndex's OpenAILike is thread-safe (one httpx pool)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rag_assistant.answer.models import Answer, Draft
from rag_assistant.batch.inputs import (
    BatchInputError,
    Entry,
    InputRow,
    Journal,
    make_record,
    output_kind,
    read_final_status,
    read_input,
    write_atomic,
    write_csv,
    write_jsonl,
    write_markdown,
)
from rag_assistant.config import Settings
from rag_assistant.errors import (
    STOP_AFTER,
    SYSTEMIC_REASONS,
    BatchStoppedError,
    ConfigError,
    IndexStoreError,
    LLMError,
    PromptError,
    RagAssistantError,
)

if TYPE_CHECKING:
    from rag_assistant.answer.chain import Generator
    from rag_assistant.retrieve import Source

# Errors that would fail every question alike (no index, bad settings, broken prompt): stop the batch
# instead of writing the same failure thousands of times. LLM errors stay per question, except that
# STOP_AFTER systemic failures of one kind in a row stop the batch too (errors.SYSTEMIC_REASONS).
FATAL = (IndexStoreError, ConfigError, PromptError, BatchStoppedError)


class Chain(Protocol):
    """What the batch needs of an AnswerChain (tests pass a stub)."""

    @property
    def mode(self) -> str: ...

    def ask(self, question: str, k: int | None = None, *, kind: str = "ask", session: str | None = None) -> Answer: ...


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
        lines = [
            f"{self.total} questions: {self.answered} answered, {self.abstained} abstained, {self.failed} failed, "
            f"{self.skipped} skipped (already done)",
            f"mode {self.mode or '-'}" + (f" · model {self.model}" if self.model else ""),
        ]
        if self.mean_seconds is not None:
            lines.append(
                f"wall time {self.wall_seconds:.1f}s · {self.mean_seconds:.2f}s mean, "
                f"{self.p95_seconds:.2f}s p95 per question"
            )
        if self.dropped:
            lines.append(f"{self.dropped} row(s) of an earlier run are not in the input any more and were dropped")
        return lines


class _UnlockedGenerator:
    """Wraps the LLM generator so the request runs outside the chain lock its caller holds."""

    def __init__(self, inner: Generator, lock: threading.Lock) -> None:
        self.inner = inner
        self.lock = lock
        self.mode = inner.mode
        self.model = inner.model

    def answer(self, question: str, sources: list[Source]) -> Draft:
        self.lock.release()
        try:
            return self.inner.answer(question, sources)
        finally:
            self.lock.acquire()


class Answerer:
    """One chain shared by the worker threads; see the module docstring for the locking."""

    def __init__(self, settings: Settings, k: int | None, session: str, chain: Chain | None = None) -> None:
        from rag_assistant.answer.redact import secrets_of

        self.lock = threading.Lock()
        self.k = k
        self.session = session
        self.secrets = secrets_of(settings)
        self.streak: list[str] = []  # reasons of the systemic failures since the last success
        if chain is None:
            from rag_assistant.answer.chain import AnswerChain, make_generator
            from rag_assistant.retrieve import Retriever

            retriever = Retriever(settings)
            generator = make_generator(settings, retriever)
            if generator.mode == "llm":
                # Build the LlamaIndex client now, in one thread, rather than racing to build it lazily.
                getattr(generator, "llm", None)
                generator = _UnlockedGenerator(generator, self.lock)
            chain = AnswerChain(settings, retriever, generator)
        self.chain = chain

    @property
    def mode(self) -> str:
        return self.chain.mode

    @property
    def model(self) -> str:
        generator = getattr(self.chain, "generator", None)
        return str(getattr(generator, "model", "") or "")

    def answer(self, row: InputRow) -> dict[str, Any]:
        """The output record of one row; per-question failures become failed rows, FATAL ones propagate."""
        started = time.perf_counter()
        if row.error:  # never asked, so not timed: it must not drag the mean time per question down
            return make_record(row, Answer(question=row.question, mode=self.mode, model=self.model, error=row.error))
        try:
            with self.lock:
                started = time.perf_counter()  # waiting for other questions' CPU work is not this one's time
                answer = self.chain.ask(row.question, self.k, kind="batch", session=self.session)
            self._count(None)
        except FATAL:
            raise
        except RagAssistantError as exc:
            self._count(exc)
            answer = Answer(question=row.question, mode=self.mode, model=self.model, error=self._clean(str(exc)))
        except Exception as exc:  # one odd question must not sink a long batch; the error is kept
            error = self._clean(f"{type(exc).__name__}: {exc}")
            answer = Answer(question=row.question, mode=self.mode, model=self.model, error=error)
        answer.timings.setdefault("total", round(time.perf_counter() - started, 4))
        return make_record(row, answer)

    def _clean(self, text: str) -> str:
        from rag_assistant.answer.redact import scrub

        return scrub(text, self.secrets)

    def _count(self, exc: RagAssistantError | None) -> None:
        """Raise BatchStoppedError on the STOP_AFTER-th systemic failure of one kind in a row."""
        reason = exc.reason if isinstance(exc, LLMError) and exc.reason in SYSTEMIC_REASONS else None
        with self.lock:
            self.streak = [] if reason is None else [*self.streak, reason] if self.streak[-1:] == [reason] else [reason]
            stop = len(self.streak) >= STOP_AFTER
        if stop and exc is not None:
            raise BatchStoppedError(
                f"stopped: {STOP_AFTER} questions in a row failed alike: {self._clean(exc.message)}",
                (exc.hint + "; " if exc.hint else "") + "rerun the same command to resume once it is fixed",
                reason=reason or "other",
            ) from None


def journal_path(output: Path) -> Path:
    return output if output.suffix.lower() == ".jsonl" else output.with_name(output.name + ".partial.jsonl")


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
) -> BatchSummary:
    """Answer every question of `input_path` not already done in `output`; see the module docstring.
    `on_start(to_answer, already_done)` is called once the plan is known, before the models load."""
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
    todo = [r for r in rows if not _done(journal.entries.get(r.id), r)]
    summary.skipped = len(rows) - len(todo)
    if on_start is not None:
        on_start(len(todo), summary.skipped)
    answerer = Answerer(settings, k, f"batch:{output.name}", chain) if todo else None
    seconds: list[float] = []
    try:
        if answerer is not None:
            summary.mode, summary.model = answerer.mode, answerer.model

            def finished(record: dict[str, Any]) -> None:
                journal.append(record)
                if record["status"] != "ok":
                    summary.failed += 1
                    summary.failed_ids.append(record["id"])
                elif record.get("abstained"):
                    summary.abstained += 1
                else:
                    summary.answered += 1
                total = (record.get("timings") or {}).get("total")
                if total is not None:
                    seconds.append(float(total))
                if progress is not None:
                    done = summary.answered + summary.abstained + summary.failed
                    error = record.get("error")
                    row_id, status = record["id"], record["status"]
                    progress(RowDone(done, summary.failed, len(todo), row_id, status, float(total or 0.0), error))

            workers = concurrency if answerer.mode == "llm" else 1  # extractive answering is CPU-bound
            _execute(todo, answerer, workers, finished)
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
    if seconds:
        ordered = sorted(seconds)
        summary.mean_seconds = round(sum(ordered) / len(ordered), 4)
        summary.p95_seconds = round(ordered[max(0, -(-95 * len(ordered) // 100) - 1)], 4)  # nearest rank
    return summary


def _done(entry: Entry | None, row: InputRow) -> bool:
    # An edited question under the same id (a txt line rewritten in place) is answered again.
    return entry is not None and entry.status == "ok" and entry.question == row.question


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
        counts = _final_counts(journal, ids)
        lines = [
            f"{len(ids)} questions: {counts['answered']} answered, {counts['abstained']} abstained, "
            f"{counts['failed']} failed",
            f"mode {summary.mode}" + (f" · model {summary.model}" if summary.model else ""),
        ]
        if counts["mean"] is not None:
            lines.append(f"{counts['mean']:.2f}s mean per question")
        write_atomic(output, lambda f: write_markdown(f, journal.records(ids), "Batch answers", lines))
    journal.close()
    if any(journal.entries[i].status != "ok" for i in ids if i in journal.entries):
        summary.journal = str(journal.path)  # kept: the failed rows are retried from it on the next run
    else:
        journal.path.unlink(missing_ok=True)


def _final_counts(journal: Journal, ids: list[str]) -> dict[str, Any]:
    entries = [journal.entries[i] for i in ids if i in journal.entries]
    ok = [e for e in entries if e.status == "ok"]
    times = [e.seconds for e in ok if e.seconds is not None]
    return {
        "answered": sum(not e.abstained for e in ok),
        "abstained": sum(e.abstained for e in ok),
        "failed": len(entries) - len(ok),
        "mean": sum(times) / len(times) if times else None,
    }


def _finished_earlier(
    rows: list[InputRow], output: Path, journal_file: Path, summary: BatchSummary, started: float
) -> BatchSummary:
    """A .csv/.md output without its journal is a batch that completed with every row ok."""
    entries = read_final_status(output)
    missing = [r.id for r in rows if not _done(entries.get(r.id), r)]
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
