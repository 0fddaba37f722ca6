"""The shape of an evaluation run, shared by the full run (runner.py) and the retrieval-only run
(retrieval_run.py): one question's record (a results.jsonl line), its recorded ranking, the retrieval
metrics added to every record, the run's `info` block, and the index checks and warm-up before timing."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rag_assistant.corpus.models import DUPLICATE_IDS
from rag_assistant.evaluate import metrics as m

if TYPE_CHECKING:
    from rag_assistant.answer.models import Answer
    from rag_assistant.config import Settings
    from rag_assistant.evaluate.dataset import EvalItem
    from rag_assistant.retrieve import Retriever, Source

MIN_DEPTH = 10
REPORTED_SETTINGS = {
    "top_k", "candidates", "fusion", "dense_weight", "rrf_k", "fuse_per", "feedback_papers", "feedback_weight",
    "answer_sentences", "abstain_threshold", "survey_abstain_threshold", "near_miss_threshold", "survey_include",
    "survey_possible", "support_threshold", "embedding_model", "embedding_backend", "collection",
}  # fmt: skip
Progress = Callable[[int, int, dict[str, Any]], None]


@dataclass
class EvalRun:
    results: list[dict[str, Any]]
    info: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


def ranking(sources: Sequence[Source]) -> list[dict[str, Any]]:
    """A results.jsonl ranking: each source as users see it (Source.as_dict), without its text."""
    keys = ("rank", "paper_id", "duplicates", "score", "dense_score", "title")
    return [{key: shown[key] for key in keys} for shown in (s.as_dict() for s in sources)]


def _sentences(answer: Answer | None, judged: list[m.Judged] | None) -> list[dict[str, Any]]:
    sentences = []
    for i, s in enumerate(answer.sentences if answer is not None else []):
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
    return sentences


def _survey(survey: dict[str, Any]) -> dict[str, Any]:
    """What results.jsonl keeps of a survey: the papers listed, possibly related, groups and the count."""
    keep = ("papers", "possible", "groups", "capped", "considered", "probabilities")
    return {key: survey[key] for key in keep if key in survey}


def record(
    item: EvalItem, answer: Answer | None, ranked: list[dict[str, Any]], judged: list[m.Judged] | None
) -> dict[str, Any]:
    """One question's results.jsonl line, before its `metrics` (no answer: a retrieval-only record)."""
    return {
        "id": item.id,
        "question": item.question,
        "tags": list(item.tags),
        "gold_papers": list(item.gold_papers),
        "answerable": item.answerable,
        "error": None,
        "judge_error": None,
        "abstained": None if answer is None else answer.abstained,
        "plan": {} if answer is None else answer.plan,
        "near_miss": None if answer is None else answer.near_miss,
        "survey": None if answer is None or not answer.survey else _survey(answer.survey),
        "relevance": getattr(answer, "relevance", None),  # the score abstention is decided on
        "answer": "" if answer is None else answer.answer,
        "citations": [] if answer is None else answer.citations,
        "sentences": _sentences(answer, judged),
        "ranking": ranked,
        "warnings": [] if answer is None else [w.detail for w in answer.warnings],
        "timings": {} if answer is None else answer.timings,
        "usage": {} if answer is None else answer.usage,
    }


def score_rankings(results: list[dict[str, Any]], k: int, depth: int) -> None:
    """Add the retrieval metrics (ranx) to each record's `metrics`; a failed retrieval is not scored (a
    failed answer is)."""
    rankings = {
        r["id"]: m.canonical_ranking(r["ranking"], r["gold_papers"])
        for r in results
        if r["error"] is None or r["ranking"]
    }
    gold = {r["id"]: r["gold_papers"] for r in results}
    by_id = {r["id"]: r for r in results}
    for qid, values in m.retrieval_metrics(rankings, gold, k, depth).items():
        by_id[qid]["metrics"].update(values)


def missing_gold(retriever: Retriever, items: Sequence[EvalItem]) -> list[str]:
    """Gold ids that are not in the index: the dataset and the ingested corpus disagree. An id the load merged
    into another paper (the same abstract twice, corpus/loader.py) is in it, under that paper's id: evaluation
    matches it, so it is not reported."""
    wanted = list(dict.fromkeys(g for item in items for g in item.gold_papers))
    present: set[str] = set(retriever.papers(wanted)) if wanted else set()
    if set(wanted) - present:  # every stored paper read (about a second on 3,339) only when one seems missing
        present |= {d for p in retriever.reader.stored_papers() for d in p.metadata.get(DUPLICATE_IDS, ())}
    return [
        f"{item.id}: gold paper {g} is not in the index" for item in items for g in item.gold_papers if g not in present
    ]


def warm_up(retriever: Retriever, items: Sequence[EvalItem]) -> list[str]:
    """Refuse an empty index, then load the model and the keyword index before questions are timed.
    Returns the run's warnings (gold papers missing from the index)."""
    from rag_assistant.errors import EmptyIndexError

    if retriever.count() == 0:
        raise EmptyIndexError("the index is empty", "run `rag-assistant ingest` first")
    warnings = missing_gold(retriever, items)
    retriever.embedder.embed(["warm-up"])
    _ = retriever.keyword
    return warnings


def run_info(
    settings: Settings, started: float, phases: dict[str, float], described: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    """summary.json's `run`: `described` (mode, model, k, depth, judge), when and how long, `extra`, settings."""
    return {
        **described,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
        "duration_s": round(time.time() - started, 2),
        "phases_s": {name: round(v, 2) for name, v in phases.items()},
        **extra,
        "settings": settings.model_dump(include=REPORTED_SETTINGS),
    }
