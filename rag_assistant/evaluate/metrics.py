"""Evaluation metrics as pure functions over plain data. Every definition is spelled out in eval/README.md
and checked against hand-worked examples in tests/test_evaluate_metrics.py.

Paper matching: a retrieved (or cited) paper counts as gold paper g when its id is g or g is among its
`duplicates` (other ids of the same abstract in overlapping corpora). One paper matches at most one gold id."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Metrics = dict[str, float | None]
# Lower is better for these; higher for every other metric.
LOWER_IS_BETTER = ("false_abstention_rate", "latency", "tokens")


def main_metrics(k: int) -> list[str]:
    """The metrics shown in tables (terminal, report.html, eval-compare), in order."""
    return [
        f"recall@{k}",
        f"precision@{k}",
        "mrr",
        "ndcg@10",
        "citation_validity",
        "citation_precision",
        "citation_recall",
        "citation_f1",
        "cited_sentence_share",
        "support_recall",
        "support_precision",
        "abstention_accuracy",
        "false_abstention_rate",
        "near_miss_rate",
        "survey_precision",
        "survey_recall",
        "survey_recall@20",
        "survey_cited",
        "latency_p50",
        "latency_p95",
        "tokens",
    ]


def lower_is_better(metric: str) -> bool:
    return metric.startswith(LOWER_IS_BETTER)


@dataclass
class Judged:
    """One answer sentence as the support judge saw it."""

    citations: list[str]  # valid (retrieved) cited ids
    support: dict[str, float] = field(default_factory=dict)  # cited id -> support of the sentence, 0..1
    joint: bool | None = None  # verdict on all cited abstracts together; None: the best single citation decides
    invalid: int = 0  # citations removed because they pointed outside the retrieved papers


# -- paper matching


def match_gold(paper_id: str, duplicates: Iterable[str], gold: Sequence[str], used: set[str]) -> str | None:
    """The first gold id not yet matched that is this paper (by id or by one of its duplicate ids)."""
    ids = {paper_id, *duplicates}
    return next((g for g in gold if g not in used and g in ids), None)


def canonical_ranking(ranking: Sequence[Mapping[str, Any]], gold: Sequence[str]) -> list[str]:
    """Retrieved paper ids, best first, each replaced by the gold id it matches (if any)."""
    used: set[str] = set()
    out: list[str] = []
    for source in ranking:
        g = match_gold(source["paper_id"], source.get("duplicates") or (), gold, used)
        if g is not None:
            used.add(g)
        out.append(g or source["paper_id"])
    return out


# -- retrieval (through ranx)


def retrieval_names(k: int, depth: int) -> list[str]:
    return [f"recall@{i}" for i in range(1, depth + 1)] + [f"precision@{k}", "mrr", "ndcg@10"]


def retrieval_metrics(
    rankings: Mapping[str, Sequence[str]], gold: Mapping[str, Sequence[str]], k: int, depth: int
) -> dict[str, Metrics]:
    """Per question: recall@1..depth, precision@k, MRR (cut at depth) and nDCG@10 with binary relevance,
    computed by ranx. `rankings` hold canonical ids (see canonical_ranking). Questions without gold papers
    get no retrieval metrics; a question with nothing retrieved scores 0."""
    names = retrieval_names(k, depth)
    qids = [q for q in rankings if gold.get(q)]
    out: dict[str, Metrics] = {q: dict.fromkeys(names, 0.0) for q in qids}
    scored = [q for q in qids if rankings[q]]
    if not scored:
        return out
    import warnings

    from numba.core.errors import NumbaWarning
    from ranx import evaluate

    # Plain dicts, not ranx's Qrels/Run: those re-sort query ids inside numba, and mapping the scores back
    # through Python's sort put another question's scores under q1 on a CI machine. ranx scores plain
    # dicts in their insertion order, which is ours, so no sort order has to agree with another.
    qrels = {q: dict.fromkeys(gold[q], 1) for q in scored}
    run = {q: {pid: float(depth - i) for i, pid in enumerate(list(rankings[q])[:depth])} for q in scored}
    ranx_names = [n if n != "mrr" else f"mrr@{depth}" for n in names]
    with warnings.catch_warnings():
        # numba compiles ranx's kernels on an install's first run and warns about their casts, on stderr in
        # ANSI bold ("unsafe cast from uint64 to int64"): ranx's business, nothing a user can act on
        warnings.simplefilter("ignore", NumbaWarning)
        values = evaluate(qrels, run, ranx_names, return_mean=False)
    for name, ranx_name in zip(names, ranx_names, strict=True):
        for q, value in zip(scored, values[ranx_name], strict=True):
            out[q][name] = round(float(value), 6)
    return out


# -- citations


def citation_validity(sentences: Sequence[Judged]) -> float | None:
    """Share of the answer's citations that point to a retrieved paper; None when it cites nothing."""
    valid = sum(len(set(s.citations)) for s in sentences)
    total = valid + sum(s.invalid for s in sentences)
    return valid / total if total else None


def cited_sentence_share(sentences: Sequence[Judged]) -> float | None:
    """Share of answer sentences with at least one (valid) citation; None for an empty answer."""
    return sum(bool(s.citations) for s in sentences) / len(sentences) if sentences else None


def citation_prf(
    cited: Sequence[str],
    gold: Sequence[str],
    duplicates: Mapping[str, Sequence[str]] | None = None,
    borderline: Sequence[str] = (),
    prefix: str = "citation",
) -> Metrics:
    """Precision, recall and F1 of the distinct cited papers against the gold papers; a cited borderline paper
    (arguable, see eval/README.md) counts neither way. No gold papers: all None (the question is scored by
    abstention). No citations: all 0."""
    names = (f"{prefix}_precision", f"{prefix}_recall", f"{prefix}_f1")
    gold = list(dict.fromkeys(gold))
    if not gold:
        return dict.fromkeys(names)
    arguable = set(borderline)
    papers = [p for p in dict.fromkeys(cited) if not ({p, *(duplicates or {}).get(p, ())} & arguable)]
    if not papers:  # nothing cited: 0; only borderline papers cited: nothing right or wrong, nothing found
        return dict.fromkeys(names, 0.0) if not cited else dict(zip(names, (None, 0.0, 0.0), strict=True))
    used: set[str] = set()
    hits = 0
    for pid in papers:
        g = match_gold(pid, (duplicates or {}).get(pid, ()), gold, used)
        if g is not None:
            used.add(g)
            hits += 1
    p, r = hits / len(papers), len(used) / len(gold)
    return dict(zip(names, (p, r, 2 * p * r / (p + r) if p + r else 0.0), strict=True))


def survey_metrics(
    cited: Sequence[str], survey: Mapping[str, Any] | None, gold: Sequence[str], borderline: Sequence[str]
) -> Metrics:
    """A survey question's own scores: cited precision and recall as citation_prf (borderline papers counted
    neither way), how many papers the answer cites, and the recall of the answer's ranking at 20 (every
    candidate by match probability; 0 when the question was not answered as a survey)."""
    duplicates = dict((survey or {}).get("duplicates") or {})
    out = citation_prf(cited, gold, duplicates, borderline, prefix="survey")
    out.pop("survey_f1")
    out["survey_cited"] = float(len(set(cited)))
    used: set[str] = set()
    for pid in list((survey or {}).get("ranking") or [])[:20]:
        g = match_gold(pid, duplicates.get(pid, ()), gold, used)
        if g is not None:
            used.add(g)
    out["survey_recall@20"] = len(used) / len(set(gold)) if gold else None
    return out


# -- support (ALCE-style)


def is_supported(sentence: Judged, threshold: float) -> bool:
    """A sentence is supported when its cited abstracts jointly support it; uncited sentences never are."""
    if not sentence.citations:
        return False
    if sentence.joint is not None:
        return sentence.joint
    return max(sentence.support.get(c, 0.0) for c in sentence.citations) >= threshold


def support_metrics(sentences: Sequence[Judged], threshold: float) -> Metrics:
    """ALCE citation recall: share of all answer sentences that are supported by their citations.
    ALCE citation precision (simplified): share of citations that are precise -- the cited abstract alone
    supports the sentence (score >= threshold), or the sentence is supported only jointly (no single citation
    suffices) and this citation contributes partial support (score > 0). Duplicate citations count once."""
    if not sentences:
        return {"support_recall": None, "support_precision": None}
    supported = precise = total = 0
    for s in sentences:
        cites = list(dict.fromkeys(s.citations))
        ok = is_supported(s, threshold)
        supported += ok
        alone = {c for c in cites if s.support.get(c, 0.0) >= threshold}
        for c in cites:
            total += 1
            precise += c in alone or (ok and not alone and s.support.get(c, 0.0) > 0)
    return {"support_recall": supported / len(sentences), "support_precision": precise / total if total else None}


# -- abstention


def abstention_metrics(answerable: bool, abstained: bool) -> Metrics:
    """Per question: abstention_accuracy is defined on unanswerable questions (1 = abstained, correct);
    false_abstention_rate on answerable ones (1 = abstained, wrong). Their means are the reported rates."""
    return {
        "abstention_accuracy": None if answerable else float(abstained),
        "false_abstention_rate": float(abstained) if answerable else None,
    }


# -- aggregation


def mean(values: Iterable[float | None]) -> float | None:
    defined = [v for v in values if v is not None]
    return sum(defined) / len(defined) if defined else None


def percentile(values: Iterable[float | None], q: float) -> float | None:
    """Linear-interpolation percentile (numpy's default) of the defined values."""
    defined = sorted(v for v in values if v is not None)
    if not defined:
        return None
    pos = (len(defined) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(defined) - 1)
    return defined[lo] + (defined[hi] - defined[lo]) * (pos - lo)


def aggregate(rows: Sequence[Mapping[str, float | None]]) -> tuple[Metrics, dict[str, int]]:
    """Macro average of each metric over the questions where it is defined, and how many those are."""
    names = list(dict.fromkeys(name for row in rows for name in row))
    means = {n: mean(row.get(n) for row in rows) for n in names}
    counts = {n: sum(row.get(n) is not None for row in rows) for n in names}
    return {n: None if v is None else round(v, 6) for n, v in means.items()}, counts
