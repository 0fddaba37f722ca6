"""Run one AnswerChain over a dataset and score every question (results.jsonl records).

One chain (one embedding model, one index connection) serves every question: loading the model is the
slow part. Retrieval is recorded to depth max(k, 10) for the ranking metrics; the answerer sees the first
k of that same ranking (identical to `ask -k K` while `candidates` >= 4 * depth, as by default)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from rag_assistant.answer.chain import AnswerChain
from rag_assistant.answer.models import Answer
from rag_assistant.config import Settings
from rag_assistant.errors import STOP_AFTER, BatchStoppedError, RagAssistantError, failure_streak
from rag_assistant.evaluate import metrics as m
from rag_assistant.evaluate.dataset import EvalItem
from rag_assistant.evaluate.judge import Judge, OfflineJudge
from rag_assistant.evaluate.records import (
    MIN_DEPTH,
    EvalRun,
    Progress,
    ranking,
    record,
    run_info,
    score_rankings,
    warm_up,
)
from rag_assistant.index.keyword_fields import FieldFilter
from rag_assistant.retrieve import Retriever, Source


def score_answer(item: EvalItem, answer: Answer | None, judged: list[m.Judged] | None, threshold: float) -> m.Metrics:
    """Every per-question metric except the retrieval ones (computed for all questions at once)."""
    out: m.Metrics = {}
    if answer is None:
        return out
    # a near miss ("no paper here does X; the closest are ...") declines to answer as abstention does
    out.update(m.abstention_metrics(item.answerable, answer.abstained or answer.near_miss is not None))
    out["near_miss_rate"] = float(answer.near_miss is not None)
    out["latency_s"] = answer.timings.get("total")
    if answer.usage:
        out["tokens"] = float(answer.usage.get("total_tokens", 0))
    if "survey" in item.tags and item.answerable:  # an abstained survey found none of its papers
        out.update(m.survey_metrics(answer.citations, answer.survey, item.gold_papers, item.borderline_papers))
    if answer.abstained:
        return out
    # the judge failed: validity and sentence share need no judge, support is left undefined
    sentences = judged if judged is not None else OfflineJudge(threshold).judge(answer)
    duplicates = {s.paper_id: s.duplicates for s in answer.sources}
    out["citation_validity"] = m.citation_validity(sentences)
    out.update(m.citation_prf(answer.citations, item.gold_papers, duplicates, item.borderline_papers))
    out["cited_sentence_share"] = m.cited_sentence_share(sentences)
    if judged is not None:
        out.update(m.support_metrics(judged, threshold))
    return out


def _streak(streak: list[str], exc: RagAssistantError) -> list[str]:
    """The systemic failures in a row including `exc`; raises BatchStoppedError at STOP_AFTER of one kind."""
    streak = failure_streak(streak, exc)
    if len(streak) >= STOP_AFTER:
        raise BatchStoppedError(
            f"eval stopped: {STOP_AFTER} questions in a row failed alike: {exc.message}",
            (exc.hint + "; " if exc.hint else "") + "nothing was written; rerun once it is fixed",
            reason=streak[-1],
        ) from None
    return streak


def _answer_one(
    chain: AnswerChain, judge: Judge, item: EvalItem, k: int, depth: int
) -> tuple[dict[str, Any], RagAssistantError | None]:
    """One question answered, judged and scored into its record; a RagAssistantError of the chain or the
    judge is recorded in it, not raised. Also returns the chain's error (for the failure streak)."""
    answer: Answer | None = None
    error: RagAssistantError | None = None
    judge_error = None
    retrieved: list[Source] = []  # the ranking to `depth`, kept when the generator fails after retrieval
    try:
        job = chain.prepare(item.question, k=k, depth=depth)
        retrieved = job.ranking
        chain.generate(job)
        answer = chain.finish(job)
    except RagAssistantError as exc:
        error = exc
    judged: list[m.Judged] | None = None
    graded: m.Metrics = {}
    t = time.perf_counter()
    if answer is not None and not answer.abstained:
        try:
            judged = judge.judge(answer)
            if answer.near_miss is None:  # answer metrics: on the answers that did not decline (grading.py)
                graded = judge.grade(item.question, answer, k)
        except RagAssistantError as exc:
            judge_error = str(exc)
    ranked = ranking(retrieved)
    if answer is not None and answer.survey:  # a survey's ranking is its own: every candidate by match probability
        by_id = {r["paper_id"]: r for r in ranked}
        ranked = [{**by_id[p], "rank": i} for i, p in enumerate(answer.survey["ranking"], start=1) if p in by_id]
    result = record(item, answer, ranked, judged)
    result.update(
        error=None if error is None else str(error), judge_error=judge_error, judge_s=round(time.perf_counter() - t, 4)
    )
    result["metrics"] = {**score_answer(item, answer, judged, judge.threshold), **graded}
    return result, error


def run_eval(
    items: Sequence[EvalItem],
    settings: Settings,
    judge: Judge,
    k: int | None = None,
    on_progress: Progress | None = None,
    filters: Sequence[FieldFilter] = (),
) -> EvalRun:
    """Answer and score every question; a question whose chain (or judge) raises a RagAssistantError is
    recorded with its error and scored only where possible. STOP_AFTER systemic failures in a row stop the run."""
    started = time.time()
    k = k or settings.top_k
    depth = max(k, MIN_DEPTH)
    retriever = Retriever(settings)
    if filters:  # eval's --author/--year/--topic/--where: every question searches the subset
        retriever.restrict(filters)
    warnings = warm_up(retriever, items)
    chain = AnswerChain(settings, retriever=retriever, log=False)
    phases = {"setup": time.time() - started}
    results: list[dict[str, Any]] = []
    streak: list[str] = []  # systemic LLM failures in a row (see errors.SYSTEMIC_REASONS)
    for n, item in enumerate(items, start=1):
        result, error = _answer_one(chain, judge, item, k, depth)
        streak = [] if error is None else _streak(streak, error)
        results.append(result)
        if on_progress is not None:
            on_progress(n, len(items), result)
    phases["questions"] = time.time() - started - phases["setup"]
    score_rankings(results, k, depth)
    phases["retrieval_metrics"] = time.time() - started - phases["setup"] - phases["questions"]
    described = {"mode": chain.mode, "model": chain.generator.model, "k": k, "depth": depth, "judge": judge.describe()}
    # the chain's settings: the thresholds it decided by are those of the index's kind of sentence vectors
    return EvalRun(results, run_info(chain.settings, started, phases, described), warnings)
