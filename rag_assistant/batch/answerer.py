"""Batch answering of one row: the shared chain and its lock, the one builder of a failed row's Answer, and
the stop after STOP_AFTER systemic failures of one kind in a row.

Threads: in llm mode `concurrency` questions are in flight at once, all through one AnswerChain. The
chain's CPU work (retrieval, embedding, citation checks, the provenance log) is not safe to share across
threads -- the embedder's cache, the lazily built keyword index and the HF tokenizer ("Already borrowed")
are not -- and would not run faster in parallel anyway, so the chain's `prepare` and `finish` phases run under
one lock, and only its `generate` phase in llm mode (the request to the model) runs outside it. The LLM client
builds one `openai` client (one httpx pool, thread-safe) for all of them."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, Protocol

from rag_assistant.answer.models import Answer
from rag_assistant.batch.inputs import InputRow
from rag_assistant.batch.journal import make_record
from rag_assistant.config import Settings
from rag_assistant.errors import (
    STOP_AFTER,
    BatchStoppedError,
    ConfigError,
    IndexStoreError,
    PromptError,
    RagAssistantError,
    failure_streak,
)
from rag_assistant.index.keyword_fields import FieldFilter

if TYPE_CHECKING:
    from rag_assistant.answer.chain import Job

# Errors that would fail every question alike (no index, bad settings, broken prompt): stop the batch
# instead of writing the same failure thousands of times. LLM errors stay per question, except that
# STOP_AFTER systemic failures of one kind in a row stop the batch too (errors.SYSTEMIC_REASONS).
FATAL = (IndexStoreError, ConfigError, PromptError, BatchStoppedError)


class Chain(Protocol):
    """What the batch needs of an AnswerChain, phase by phase (tests pass a stub)."""

    @property
    def mode(self) -> str: ...

    def prepare(self, question: str, k: int | None = None, filters: Sequence[FieldFilter] | None = None) -> Job: ...

    def generate(self, job: Job) -> None: ...

    def finish(self, job: Job, kind: str = "ask", session: str | None = None) -> Answer: ...


class Answerer:
    """One chain shared by the worker threads; see the module docstring for the locking."""

    def __init__(
        self,
        settings: Settings,
        k: int | None,
        session: str,
        chain: Chain | None = None,
        filters: Sequence[FieldFilter] = (),
    ) -> None:
        from rag_assistant.answer.redact import secrets_of

        self.lock = threading.Lock()
        self.k = k
        self.session = session
        self.secrets = secrets_of(settings)
        self.streak: list[str] = []  # reasons of the systemic failures since the last success
        if chain is None:
            from rag_assistant.answer.chain import AnswerChain

            chain = AnswerChain(settings)
        self.chain = chain
        if filters:  # the command's --author/--year/--topic/--where, for every row: a bad one stops the batch
            chain.retriever.restrict(filters)  # type: ignore[attr-defined]

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
            return make_record(row, self._failed(row, row.error))
        try:
            with self.lock:
                started = time.perf_counter()  # waiting for other questions' CPU work is not this one's time
                own = {"filters": row.filters} if row.filters else {}  # a row's own filter, for that row only
                job = self.chain.prepare(row.question, self.k, **own)
            with nullcontext() if self.mode == "llm" else self.lock:  # the extractive generator embeds: locked
                self.chain.generate(job)
            with self.lock:
                answer = self.chain.finish(job, kind="batch", session=self.session)
            self._count(None)
        except FATAL:
            raise
        except RagAssistantError as exc:
            self._count(exc)
            answer = self._failed(row, self._clean(str(exc)))
        except Exception as exc:  # one odd question must not sink a long batch; the error is kept
            answer = self._failed(row, self._clean(f"{type(exc).__name__}: {exc}"))
        answer.timings.setdefault("total", round(time.perf_counter() - started, 4))
        return make_record(row, answer)

    def _failed(self, row: InputRow, error: str) -> Answer:
        """The Answer of a row that has none: its question, this run's mode and model, and why."""
        return Answer(question=row.question, mode=self.mode, model=self.model, error=error)

    def _clean(self, text: str) -> str:
        from rag_assistant.answer.redact import scrub

        return scrub(text, self.secrets)

    def _count(self, exc: RagAssistantError | None) -> None:
        """Raise BatchStoppedError on the STOP_AFTER-th systemic failure of one kind in a row."""
        with self.lock:
            self.streak = failure_streak(self.streak, exc)
            stop = len(self.streak) >= STOP_AFTER
            reason = self.streak[-1] if self.streak else None
        if stop and exc is not None:
            raise BatchStoppedError(
                f"stopped: {STOP_AFTER} questions in a row failed alike: {self._clean(exc.message)}",
                (exc.hint + "; " if exc.hint else "") + "rerun the same command to resume once it is fixed",
                reason=reason or "other",
            ) from None
