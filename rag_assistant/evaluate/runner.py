"""Run one AnswerChain over a dataset and score every question (results.jsonl records).

One chain (one embedding model, one index connection) serves every question: loading the model is the
slow part. Retrieval is recorded to depth max(k, 10) for the ranking metrics; the answerer sees the first
k of that same ranking (identical to `ask -k K` while `candidates` >= 4 * depth, as by default)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rag_assistant.answer.chain import AnswerChain
from rag_assistant.answer.models import Answer
from rag_assistant.config import Settings
from rag_assistant.errors import STOP_AFTER, SYSTEMIC_REASONS, BatchStoppedError, EmptyIndexError, RagAssistantError
from rag_assistant.evaluate import metrics as m
from rag_assistant.evaluate.dataset import EvalItem
from rag_assistant.evaluate.judge import Judge, OfflineJudge
from rag_assistant.retrieve import Retriever, Source

MIN_DEPTH = 10
REPORTED_SETTINGS = {
    "top_k", "candidates", "fusion", "dense_weight", "rrf_k", "fuse_per", "feedback_papers", "feedback_weight",
    "answer_sentences", "abstain_threshold",
    "support_threshold", "embedding_model", "collection",
}  # fmt: skip
Progress = Callable[[int, int, dict[str, Any]], None]


class RecordingRetriever(Retriever):
    """Searches to `depth`, keeps the whole ranking in `last`, hands the chain the first k."""

    def __init__(self, settings: Settings, depth: int) -> None:
        super().__init__(settings)
        self.depth = depth
        self.last: list[Source] = []

    def search(self, query: str, k: int | None = None) -> list[Source]:
        k = k or self.settings.top_k
        self.last = super().search(query, max(k, self.depth))
        return self.last[:k]


@dataclass
class EvalRun:
    results: list[dict[str, Any]]
    info: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


def _ranking(sources: Sequence[Source]) -> list[dict[str, Any]]:
    return [
        {
            "rank": s.rank,
            "paper_id": s.paper_id,
            "duplicates": list(s.duplicates),
            "score": round(s.score, 6),
            "dense_score": None if s.dense_score is None else round(s.dense_score, 4),
            "title": s.paper.title,
        }
        for s in sources
    ]


def score_answer(item: EvalItem, answer: Answer | None, judged: list[m.Judged] | None, threshold: float) -> m.Metrics:
    """Every per-question metric except the retrieval ones (computed for all questions at once)."""
    out: m.Metrics = {}
    if answer is None:
        return out
    out.update(m.abstention_metrics(item.answerable, answer.abstained))
    out["latency_s"] = answer.timings.get("total")
    if answer.usage:
        out["tokens"] = float(answer.usage.get("total_tokens", 0))
    if answer.abstained:
        return out
    # the judge failed: validity and sentence share need no judge, support is left undefined
    sentences = judged if judged is not None else OfflineJudge(threshold).judge(answer)
    duplicates = {s["paper_id"]: s.get("duplicates") or [] for s in answer.sources}
    out["citation_validity"] = m.citation_validity(sentences)
    out.update(m.citation_prf(answer.citations, item.gold_papers, duplicates))
    out["cited_sentence_share"] = m.cited_sentence_share(sentences)
    if judged is not None:
        out.update(m.support_metrics(judged, threshold))
    return out


def _record(
    item: EvalItem, answer: Answer | None, ranking: list[dict[str, Any]], judged: list[m.Judged] | None
) -> dict[str, Any]:
    sentences = []
    if answer is not None:
        for i, s in enumerate(answer.sentences):
            j = judged[i] if judged is not None and i < len(judged) else None
            sentences.append(
                {
                    "text": s.text,
                    "citations": s.citations,
                    "support": j.support if j else s.support,
                    "joint": j.joint if j else None,
                    "flags": s.flags,
                }
            )
    return {
        "id": item.id,
        "question": item.question,
        "tags": list(item.tags),
        "gold_papers": list(item.gold_papers),
        "answerable": item.answerable,
        "error": None,
        "judge_error": None,
        "abstained": None if answer is None else answer.abstained,
        "relevance": getattr(answer, "relevance", None),  # the score abstention is decided on
        "answer": "" if answer is None else answer.answer,
        "citations": [] if answer is None else answer.citations,
        "sentences": sentences,
        "ranking": ranking,
        "warnings": [] if answer is None else answer.warnings,
        "timings": {} if answer is None else answer.timings,
        "usage": {} if answer is None else answer.usage,
    }


def _streak(streak: list[str], exc: RagAssistantError) -> list[str]:
    """The systemic failures in a row including `exc`; raises BatchStoppedError at STOP_AFTER of one kind."""
    reason = getattr(exc, "reason", None)
    if reason not in SYSTEMIC_REASONS:
        return []
    streak = [*streak, reason] if streak[-1:] == [reason] else [reason]
    if len(streak) >= STOP_AFTER:
        raise BatchStoppedError(
            f"eval stopped: {STOP_AFTER} questions in a row failed alike: {exc.message}",
            (exc.hint + "; " if exc.hint else "") + "nothing was written; rerun once it is fixed",
            reason=str(reason),
        ) from None
    return streak


def missing_gold(retriever: Retriever, items: Sequence[EvalItem]) -> list[str]:
    """Gold ids that are not in the index: the dataset and the ingested corpus disagree."""
    wanted = list(dict.fromkeys(g for item in items for g in item.gold_papers))
    present = retriever.papers(wanted) if wanted else {}
    return [
        f"{item.id}: gold paper {g} is not in the index" for item in items for g in item.gold_papers if g not in present
    ]


def run_eval(
    items: Sequence[EvalItem],
    settings: Settings,
    judge: Judge,
    k: int | None = None,
    on_progress: Progress | None = None,
) -> EvalRun:
    """Answer and score every question; a question whose chain (or judge) raises a RagAssistantError is
    recorded with its error and scored only where possible."""
    started = time.time()
    k = k or settings.top_k
    depth = max(k, MIN_DEPTH)
    retriever = RecordingRetriever(settings, depth)
    if retriever.count() == 0:
        raise EmptyIndexError("the index is empty", "run `rag-assistant ingest` first")
    chain = AnswerChain(settings, retriever=retriever, log=False)
    warnings = missing_gold(retriever, items)
    retriever.embedder.embed(["warm-up"])  # load the model and the keyword index before timing questions
    _ = retriever.keyword
    phases = {"setup": time.time() - started}
    results: list[dict[str, Any]] = []
    streak: list[str] = []  # systemic LLM failures in a row (see errors.SYSTEMIC_REASONS)
    for n, item in enumerate(items, start=1):
        retriever.last = []
        answer: Answer | None = None
        error = judge_error = None
        try:
            answer = chain.ask(item.question, k=k)
        except RagAssistantError as exc:
            error = str(exc)
            streak = _streak(streak, exc)
        if answer is not None:
            streak = []
        judged: list[m.Judged] | None = None
        t = time.perf_counter()
        if answer is not None and not answer.abstained:
            try:
                judged = judge.judge(answer)
            except RagAssistantError as exc:
                judge_error = str(exc)
        record = _record(item, answer, _ranking(retriever.last), judged)
        record.update(error=error, judge_error=judge_error, judge_s=round(time.perf_counter() - t, 4))
        record["metrics"] = score_answer(item, answer, judged, judge.threshold)
        results.append(record)
        if on_progress is not None:
            on_progress(n, len(items), record)

    phases["questions"] = time.time() - started - phases["setup"]
    by_id = {r["id"]: r for r in results}
    rankings = {
        r["id"]: m.canonical_ranking(r["ranking"], r["gold_papers"])
        for r in results
        if r["error"] is None or r["ranking"]  # a failed retrieval is not scored; a failed answer is
    }
    gold = {r["id"]: r["gold_papers"] for r in results}
    for qid, values in m.retrieval_metrics(rankings, gold, k, depth).items():
        by_id[qid]["metrics"].update(values)
    phases["retrieval_metrics"] = time.time() - started - phases["setup"] - phases["questions"]
    info = {
        "mode": chain.mode,
        "model": chain.generator.model,
        "k": k,
        "depth": depth,
        "judge": judge.describe(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
        "duration_s": round(time.time() - started, 2),
        "phases_s": {name: round(v, 2) for name, v in phases.items()},
        "settings": settings.model_dump(include=REPORTED_SETTINGS),
    }
    return EvalRun(results, info, warnings)
