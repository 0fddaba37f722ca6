"""`rag-assistant eval-generate` as one library call: plan the slots (sampling.py), write and check candidates
on worker threads (candidates.py), journal each one (journal.py), select the set (selection.py) and write it.

Rounds: each round starts, for every kind whose quota is not yet met, as many new slots as questions it still
lacks (a failed slot of an earlier run first); the round's candidates run `concurrency` at a time; then the
selection is recomputed. A kind stops when its quota is met or its slots (quota x attempts, at most one per
paper) run out. A rerun of the same command resumes from the candidates file."""

from __future__ import annotations

import hashlib
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rag_assistant.config import Settings
from rag_assistant.errors import (
    STOP_AFTER,
    BatchStoppedError,
    ConfigError,
    EmptyIndexError,
    IndexStoreError,
    OutputError,
    PromptError,
    RagAssistantError,
    failure_streak,
)
from rag_assistant.evaluate.generate.asker import WRITER_PROMPTS, Asker
from rag_assistant.evaluate.generate.candidates import Context, candidate
from rag_assistant.evaluate.generate.checks import MAX_OVERLAP
from rag_assistant.evaluate.generate.journal import Candidates, candidates_path
from rag_assistant.evaluate.generate.sampling import KINDS, Slot, quotas, slots
from rag_assistant.evaluate.generate.selection import Selection, dataset_record, select

FATAL = (PromptError, ConfigError, IndexStoreError)  # would fail every slot alike


@dataclass
class GenerateOptions:
    output: Path
    n: int = 200
    kinds: Sequence[str] = KINDS
    seed: int = 0
    concurrency: int = 1
    attempts: int = 3  # candidates written per question asked for, at most
    max_overlap: float = MAX_OVERLAP
    judge: str | None = None
    judge_base_url: str | None = None
    fresh: bool = False

    def __post_init__(self) -> None:
        unknown = [k for k in self.kinds if k not in KINDS]
        if unknown or not self.kinds:
            raise ConfigError(
                f"unknown question kind(s): {', '.join(unknown) or 'none given'}", f"use {','.join(KINDS)}"
            )
        if self.output.suffix.lower() != ".jsonl":
            raise ConfigError(f"-o {self.output}: a question set is a .jsonl file", "name it e.g. set.jsonl")
        if self.judge_base_url and not self.judge:
            raise ConfigError("--judge-base-url needs --judge MODEL", "name the judge model with --judge")


@dataclass
class Progress:
    """After each candidate: how many were written in this run, passed the filters so far, failed."""

    done: int
    passed: int
    failed: int
    slot: str
    removed_by: str | None


@dataclass
class GenerateSummary:
    output: str
    candidates_file: str
    requested: dict[str, int]
    kept: dict[str, int]
    candidates: int = 0  # slots with a finished record, this run and earlier ones
    resumed: int = 0  # of them, from an earlier run
    removed: dict[str, int] = field(default_factory=dict)  # filter -> candidates it removed
    surplus: int = 0
    failed: int = 0  # slots whose model calls failed (retried on the next run)
    mean_overlap: float | None = None  # of the kept single-paper questions
    seconds: float = 0.0
    made_by: dict[str, Any] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed or not sum(self.kept.values()) else 0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "exit_code": self.exit_code}


def _fingerprint(ids: Sequence[str]) -> str:
    return f"{len(ids)} papers, {hashlib.sha1(' '.join(sorted(ids)).encode()).hexdigest()[:12]}"


class Generation:
    """One run: its context (models, index, corpus), its candidates file and its plan."""

    def __init__(self, settings: Settings, options: GenerateOptions) -> None:
        from rag_assistant.retrieve import Retriever

        if not settings.llm_configured:
            raise ConfigError(
                "eval-generate needs an LLM: no API key or base URL is configured",
                "set OPENAI_API_KEY and/or OPENAI_BASE_URL (or --llm-base-url); there is no offline generator",
            )
        self.options = options
        retriever = Retriever(settings)
        if retriever.count() == 0:
            raise EmptyIndexError("the index is empty", "run `rag-assistant ingest` first")
        hidden = retriever.reader.hidden(retriever.reader.checked_info())
        papers = {p.paper_id: p for p in retriever.reader.stored_papers() if p.paper_id not in hidden}
        self.ctx = Context(
            Asker(settings, options.judge, options.judge_base_url), retriever, papers, options.max_overlap
        )
        made = self.ctx.asker.describe()
        self.header = {
            **made,
            "seed": options.seed,
            "max_overlap": options.max_overlap,
            "corpus": _fingerprint(list(papers)),
        }
        self.quotas = quotas(options.n, options.kinds)
        self.plan = {
            k: slots(list(papers.values()), k, options.seed, q * options.attempts) for k, q in self.quotas.items()
        }
        self.journal = Candidates(candidates_path(options.output))

    def made_by(self, kind: str) -> dict[str, Any]:
        """A kept question's provenance, besides its slot and paper."""
        prompts = self.ctx.asker.prompts
        judge = prompts["judge_criterion" if kind == "survey" else "judge_answers"].version
        keys = ("model", "judge", "temperature")
        return {**{k: self.header[k] for k in keys}, "prompt": prompts[WRITER_PROMPTS[kind]].version,
                "judge_prompt": judge, "seed": self.options.seed}  # fmt: skip

    def records(self) -> list[dict[str, Any]]:
        """The journal's records of this plan's slots."""
        ids = {s.id for planned in self.plan.values() for s in planned}
        return [r for slot, r in self.journal.records.items() if slot in ids]

    def selection(self) -> Selection:
        with self.ctx.lock:
            embed = self.ctx.retriever.embedder.embed
            return select(self.records(), list(self.options.kinds), self.quotas, embed)

    def next_round(self, tried: set[str]) -> list[Slot]:
        """Per unmet kind, as many slots as questions it lacks, not yet done (or failed before) nor tried now."""
        chosen = self.selection()
        todo: list[Slot] = []
        for kind, planned in self.plan.items():
            lacking = self.quotas[kind] - chosen.count(kind)
            fresh = [s for s in planned if s.id not in tried and self._open(s.id)]
            todo += fresh[: max(lacking, 0)]
        return todo

    def _open(self, slot_id: str) -> bool:
        record = self.journal.records.get(slot_id)
        return record is None or record["status"] != "ok"

    def run_slot(self, slot: Slot) -> dict[str, Any]:
        try:
            return candidate(slot, self.ctx)
        except FATAL:
            raise
        except RagAssistantError as exc:
            return {"slot": slot.id, "kind": slot.kind, "index": slot.index, "seed_paper": slot.seed_paper,
                    "status": "failed", "error": str(exc), "reason": getattr(exc, "reason", None)}  # fmt: skip


def generate(
    settings: Settings,
    options: GenerateOptions,
    on_progress: Callable[[Progress], None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
) -> GenerateSummary:
    """Write (or resume) a generated question set; see the module docstring. `on_start(asked, resumed)` is
    called once the plan is known."""
    started = time.perf_counter()
    if options.fresh:
        options.output.unlink(missing_ok=True)
        candidates_path(options.output).unlink(missing_ok=True)
    elif options.output.exists() and not candidates_path(options.output).exists():
        raise OutputError(
            f"{options.output} exists and was not written by eval-generate", "choose another -o, or pass --fresh"
        )
    run = Generation(settings, options)
    run.journal.load(run.header)
    resumed = len([r for r in run.records() if r["status"] == "ok"])
    if on_start is not None:
        on_start(options.n, resumed)
    try:
        _rounds(run, on_progress)
    finally:
        run.journal.close()
    summary = _summarize(run, run.selection(), resumed)
    _write_set(run, run.selection(), options.output)
    summary.seconds = round(time.perf_counter() - started, 2)
    return summary


def _rounds(run: Generation, on_progress: Callable[[Progress], None] | None) -> None:
    tried: set[str] = set()
    done = failed = 0
    streak: list[str] = []
    passed = len(run.selection().kept)
    with ThreadPoolExecutor(max(1, run.options.concurrency), thread_name_prefix="generate") as pool:
        while todo := run.next_round(tried):
            tried.update(s.id for s in todo)
            futures = [pool.submit(run.run_slot, s) for s in todo]
            try:
                for future in as_completed(futures):
                    record = future.result()
                    run.journal.append(record)
                    done += 1
                    failed += record["status"] != "ok"
                    passed += record["status"] == "ok" and record["removed_by"] is None
                    streak = _streak(streak, record)
                    if on_progress is not None:
                        on_progress(Progress(done, passed, failed, record["slot"], record.get("removed_by")))
            except BaseException:  # Ctrl-C or a stop: no new call; what is journaled stays, the rest is redone
                run.ctx.asker.stop.set()
                for future in futures:
                    future.cancel()
                raise


class _Failure(RagAssistantError):
    def __init__(self, record: dict[str, Any]) -> None:
        super().__init__(record.get("error") or "")
        self.reason = record.get("reason")


def _streak(streak: list[str], record: dict[str, Any]) -> list[str]:
    """Systemic model failures in a row (wrong key, server down): STOP_AFTER of one kind stop the run."""
    streak = failure_streak(streak, _Failure(record) if record["status"] != "ok" else None)
    if len(streak) >= STOP_AFTER:
        raise BatchStoppedError(
            f"eval-generate stopped: {STOP_AFTER} candidates in a row failed alike: {record.get('error')}",
            "the candidates written so far are kept: fix the model server, then rerun the same command",
            reason=streak[-1],
        )
    return streak


def _summarize(run: Generation, chosen: Selection, resumed: int) -> GenerateSummary:
    records = run.records()
    ok = [r for r in records if r["status"] == "ok"]
    removed = Counter(r["removed_by"] for r in ok if r["removed_by"])
    if chosen.duplicates:
        removed["near-duplicate"] = len(chosen.duplicates)
    overlaps = [r["overlap"] for r in chosen.kept if r["kind"] not in ("survey", "unanswerable")]
    asker = run.ctx.asker
    return GenerateSummary(
        output=str(run.options.output),
        candidates_file=str(run.journal.path),
        requested=dict(run.quotas),
        kept={kind: chosen.count(kind) for kind in run.quotas},
        candidates=len(ok),
        resumed=resumed,
        removed=dict(removed),
        surplus=len(chosen.surplus),
        failed=len(records) - len(ok),
        mean_overlap=round(sum(overlaps) / len(overlaps), 4) if overlaps else None,
        made_by=run.header,
        calls=dict(asker.calls),
        usage=dict(asker.usage),
    )


def _write_set(run: Generation, chosen: Selection, output: Path) -> None:
    """The set, replaced whole (a temporary file renamed over it): a kill never leaves half a set."""
    import json

    from rag_assistant.files import private_dir, write_private

    lines = [json.dumps(dataset_record(r, run.made_by(r["kind"])), ensure_ascii=False) for r in chosen.kept]
    private_dir(output.parent)
    partial = output.with_name(f".{output.name}.partial")
    write_private(partial, "".join(line + "\n" for line in lines))
    os.replace(partial, output)
