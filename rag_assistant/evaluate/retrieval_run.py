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
from rag_assistant.errors import RagAssistantError
from rag_assistant.evaluate import metrics as m
from rag_assistant.evaluate import records
from rag_assistant.evaluate.dataset import DatasetError, EvalItem
from rag_assistant.evaluate.records import EvalRun, Progress
from rag_assistant.index.keyword_fields import FieldFilter
from rag_assistant.retrieve import Retriever

MODE = "retrieval-only"
NO_JUDGE = {"name": "none (retrieval only)", "kind": "none"}


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


def run_retrieval(
    items: Sequence[EvalItem],
    settings: Settings,
    k: int | None = None,
    on_progress: Progress | None = None,
    retriever: Retriever | None = None,
    filters: Sequence[FieldFilter] = (),
) -> EvalRun:
    """Rank every question to depth max(k, 10) and score the rankings; `retriever` lets a benchmark reuse
    one loaded model and index across settings; `filters` restrict every search (eval's filter options)."""
    started = time.time()
    k = k or settings.top_k
    depth = max(k, records.MIN_DEPTH)
    retriever = retriever or Retriever(settings)
    if filters:
        retriever.restrict(filters)
    warnings = records.warm_up(retriever, items)
    phases = {"setup": time.time() - started}
    results: list[dict[str, Any]] = []
    for n, item in enumerate(items, start=1):
        t = time.perf_counter()
        sources, error = [], None
        try:
            sources = retriever.search(item.question, depth)
        except RagAssistantError as exc:
            error = str(exc)
        result = records.record(item, None, records.ranking(sources), None)
        elapsed = round(time.perf_counter() - t, 4)
        result.update(error=error, timings={"retrieve": elapsed, "total": elapsed})
        result["metrics"] = {"latency_s": elapsed}  # the search alone: there is no answer to time
        results.append(result)
        if on_progress is not None:
            on_progress(n, len(items), result)
    phases["questions"] = time.time() - started - phases["setup"]
    records.score_rankings(results, k, depth)
    phases["retrieval_metrics"] = time.time() - started - phases["setup"] - phases["questions"]
    described = {"mode": MODE, "model": None, "k": k, "depth": depth, "judge": NO_JUDGE}
    search_p50 = round(m.percentile((r["timings"]["retrieve"] for r in results), 50) or 0.0, 4)
    return EvalRun(results, records.run_info(settings, started, phases, described, search_p50_s=search_p50), warnings)
