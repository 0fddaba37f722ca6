"""Retrieval-only evaluation: rank every question's papers and score the ranking, without answering.

Answering (extractive quoting or an LLM) is most of an eval run's time; ranking alone takes a few
milliseconds per question, so retrieval can be tuned over hundreds of questions a minute. The records have
the shape of `run_eval`'s (no answer, no citations), so summary.json, report.html and eval-compare work
on them, and their retrieval metrics equal those of a full run with the same settings."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from rag_assistant.config import Settings
from rag_assistant.errors import EmptyIndexError, RagAssistantError
from rag_assistant.evaluate import metrics as m
from rag_assistant.evaluate.dataset import DatasetError, EvalItem
from rag_assistant.evaluate.runner import (
    MIN_DEPTH,
    REPORTED_SETTINGS,
    EvalRun,
    Progress,
    _ranking,
    _record,
    missing_gold,
)
from rag_assistant.retrieve import Retriever

MODE = "retrieval-only"


def select_tags(items: Sequence[EvalItem], groups: Sequence[str]) -> list[EvalItem]:
    """The questions carrying, for every group, at least one of its comma-separated tags: `--tag dev
    --tag single,multi` keeps the dev questions that are single or multi. No group keeps everything."""
    wanted = [{t.strip() for t in g.split(",") if t.strip()} for g in groups]
    wanted = [w for w in wanted if w]
    kept = [item for item in items if all(w & set(item.tags) for w in wanted)]
    if wanted and not kept:
        known = sorted({t for item in items for t in item.tags})
        raise DatasetError(
            f"no question carries the tags {' and '.join('/'.join(sorted(w)) for w in wanted)}",
            f"tags in this dataset: {', '.join(known) or 'none'}",
        )
    return kept


def score_rankings(results: list[dict[str, Any]], k: int, depth: int) -> None:
    """Add the retrieval metrics (ranx) to each record's `metrics`; a failed retrieval is not scored."""
    rankings = {
        r["id"]: m.canonical_ranking(r["ranking"], r["gold_papers"])
        for r in results
        if r["error"] is None or r["ranking"]
    }
    gold = {r["id"]: r["gold_papers"] for r in results}
    by_id = {r["id"]: r for r in results}
    for qid, values in m.retrieval_metrics(rankings, gold, k, depth).items():
        by_id[qid]["metrics"].update(values)


def run_retrieval(
    items: Sequence[EvalItem],
    settings: Settings,
    k: int | None = None,
    on_progress: Progress | None = None,
    retriever: Retriever | None = None,
) -> EvalRun:
    """Rank every question to depth max(k, 10) and score the rankings; `retriever` lets a benchmark reuse
    one loaded model and index across settings."""
    started = time.time()
    k = k or settings.top_k
    depth = max(k, MIN_DEPTH)
    retriever = retriever or Retriever(settings)
    if retriever.count() == 0:
        raise EmptyIndexError("the index is empty", "run `rag-assistant ingest` first")
    warnings = missing_gold(retriever, items)
    retriever.embedder.embed(["warm-up"])  # load the model and the keyword index before timing questions
    _ = retriever.keyword
    phases = {"setup": time.time() - started}
    results: list[dict[str, Any]] = []
    for n, item in enumerate(items, start=1):
        t = time.perf_counter()
        sources, error = [], None
        try:
            sources = retriever.search(item.question, depth)
        except RagAssistantError as exc:
            error = str(exc)
        record = _record(item, None, _ranking(sources), None)
        elapsed = round(time.perf_counter() - t, 4)
        record.update(error=error, timings={"retrieve": elapsed, "total": elapsed})
        record["metrics"] = {"latency_s": elapsed}  # the search alone: there is no answer to time
        results.append(record)
        if on_progress is not None:
            on_progress(n, len(items), record)
    phases["questions"] = time.time() - started - phases["setup"]
    score_rankings(results, k, depth)
    phases["retrieval_metrics"] = time.time() - started - phases["setup"] - phases["questions"]
    info = {
        "mode": MODE,
        "model": None,
        "k": k,
        "depth": depth,
        "judge": {"name": "none (retrieval only)", "kind": "none"},
        "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
        "duration_s": round(time.time() - started, 2),
        "phases_s": {name: round(v, 2) for name, v in phases.items()},
        "search_p50_s": round(m.percentile((r["timings"]["retrieve"] for r in results), 50) or 0.0, 4),
        "settings": settings.model_dump(include=REPORTED_SETTINGS),
    }
    return EvalRun(results, info, warnings)
