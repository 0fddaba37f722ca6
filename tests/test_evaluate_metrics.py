"""Evaluation metrics against hand-worked examples (definitions: eval/README.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rag_assistant.answer.models import Answer, SentenceCheck
from rag_assistant.corpus.models import Paper
from rag_assistant.evaluate.compare import compare
from rag_assistant.evaluate.dataset import DatasetError, EvalItem, load_dataset
from rag_assistant.evaluate.judge import OfflineJudge, parse_verdict
from rag_assistant.evaluate.metrics import (
    Judged,
    abstention_metrics,
    aggregate,
    canonical_ranking,
    citation_prf,
    citation_validity,
    cited_sentence_share,
    percentile,
    retrieval_metrics,
    support_metrics,
)
from rag_assistant.evaluate.runner import score_answer
from rag_assistant.retrieve import Source

# -- paper matching and retrieval


def test_canonical_ranking_counts_duplicates_as_the_gold_id() -> None:
    ranking = [
        {"paper_id": "x", "duplicates": []},
        {"paper_id": "a", "duplicates": ["g1"]},  # same abstract as gold g1 under another id
        {"paper_id": "g2", "duplicates": []},
        {"paper_id": "b", "duplicates": ["g2"]},  # g2 already matched: one paper, one gold id
    ]
    assert canonical_ranking(ranking, ["g1", "g2"]) == ["x", "g1", "g2", "b"]
    assert canonical_ranking([], ["g1"]) == []


@pytest.mark.slow  # imports ranx (numba)
def test_retrieval_metrics_hand_worked() -> None:
    rankings = {"q1": ["x", "g1", "y", "g2"], "q2": ["g"], "q3": [], "q4": ["z"], "q10": ["n", "m", "g"]}
    gold = {"q1": ["g1", "g2", "g3"], "q2": ["g"], "q3": ["g"], "q4": [], "q10": ["g"]}
    got = retrieval_metrics(rankings, gold, k=2, depth=4)
    assert set(got) == {"q1", "q2", "q3", "q10"}  # q4 has no gold papers: no retrieval metrics
    q1 = got["q1"]
    assert q1["recall@1"] == 0 and q1["recall@2"] == pytest.approx(1 / 3, abs=1e-6)
    assert q1["recall@4"] == pytest.approx(2 / 3, abs=1e-6)
    assert q1["precision@2"] == pytest.approx(1 / 2) and q1["mrr"] == pytest.approx(1 / 2)
    # DCG = 1/log2(3) + 1/log2(5); ideal DCG for 3 gold papers = 1 + 1/log2(3) + 1/log2(4)
    ndcg = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3) + 1 / 2)
    assert q1["ndcg@10"] == pytest.approx(ndcg, abs=1e-5)
    assert got["q2"] == {**dict.fromkeys(got["q2"], 1.0), "precision@2": 0.5}  # precision divides by k
    assert all(v == 0.0 for v in got["q3"].values())  # nothing retrieved
    q10 = got["q10"]  # ids sort "q10" < "q2" as strings: results must follow the ids, not positions
    assert q10["recall@2"] == 0 and q10["recall@3"] == 1 and q10["mrr"] == pytest.approx(1 / 3)
    assert retrieval_metrics({"q": ["a"]}, {"q": []}, k=1, depth=1) == {}


# -- citations


def test_citation_validity_counts_removed_citations_and_duplicates_once() -> None:
    sentences = [Judged(["a"], invalid=1), Judged(["a", "b", "b"]), Judged([])]
    assert citation_validity(sentences) == pytest.approx(3 / 4)  # a, a, b valid; one removed
    assert citation_validity([Judged([]), Judged([])]) is None  # no citations: undefined
    assert citation_validity([Judged([], invalid=2)]) == 0.0


def test_cited_sentence_share() -> None:
    assert cited_sentence_share([Judged(["a"]), Judged([]), Judged(["b", "a"])]) == pytest.approx(2 / 3)
    assert cited_sentence_share([Judged([])]) == 0.0
    assert cited_sentence_share([]) is None


def test_citation_prf_hand_worked() -> None:
    got = citation_prf(["a", "b", "a"], ["a", "c"])  # duplicate citation of a counts once
    assert got == {"citation_precision": 0.5, "citation_recall": 0.5, "citation_f1": 0.5}
    got = citation_prf(["a", "b"], ["a", "c", "d"])
    p, r = 1 / 2, 1 / 3
    assert got["citation_f1"] == pytest.approx(2 * p * r / (p + r))
    # b is the same abstract as gold c under another id
    assert citation_prf(["a", "b"], ["a", "c"], {"b": ["c"]})["citation_f1"] == 1.0
    assert citation_prf([], ["a"]) == dict.fromkeys(("citation_precision", "citation_recall", "citation_f1"), 0.0)
    assert set(citation_prf(["a"], []).values()) == {None}  # no gold papers: scored by abstention
    assert citation_prf(["x"], ["a"])["citation_f1"] == 0.0


# -- support


def test_support_offline_threshold() -> None:
    sentences = [
        Judged(["a"], {"a": 0.9}),  # supported, precise
        Judged(["a", "b"], {"a": 0.2, "b": 0.6}),  # supported by b; a is an irrelevant citation
        Judged(["c"], {"c": 0.3}),  # unsupported, imprecise
        Judged([]),  # uncited: counts against recall, adds no citation
    ]
    got = support_metrics(sentences, threshold=0.45)
    assert got["support_recall"] == pytest.approx(2 / 4)
    assert got["support_precision"] == pytest.approx(2 / 4)


def test_support_joint_verdicts_and_duplicate_citations() -> None:
    sentences = [
        Judged(["a", "b"], {"a": 0.5, "b": 0.5}, joint=True),  # only together: both contribute
        Judged(["a", "b"], {"a": 0.0, "b": 0.5}, joint=True),  # a adds nothing
        Judged(["a", "b"], {"a": 0.5, "b": 0.5}, joint=False),
        Judged(["a", "a"], {"a": 1.0}),  # duplicate citation counts once
    ]
    got = support_metrics(sentences, threshold=1.0)
    assert got["support_recall"] == pytest.approx(3 / 4)
    assert got["support_precision"] == pytest.approx(4 / 7)  # precise: a,b | b | - | a of 2+2+2+1


def test_support_edge_cases() -> None:
    assert support_metrics([], 0.45) == {"support_recall": None, "support_precision": None}
    assert support_metrics([Judged([]), Judged([])], 0.45) == {"support_recall": 0.0, "support_precision": None}


# -- abstention and aggregation


def test_abstention_rates() -> None:
    rows = [
        abstention_metrics(answerable=False, abstained=True),
        abstention_metrics(answerable=False, abstained=True),
        abstention_metrics(answerable=False, abstained=False),
        abstention_metrics(answerable=True, abstained=True),
        abstention_metrics(answerable=True, abstained=False),
        abstention_metrics(answerable=True, abstained=False),
        abstention_metrics(answerable=True, abstained=False),
    ]
    means, counts = aggregate(rows)
    assert means["abstention_accuracy"] == pytest.approx(2 / 3, abs=1e-6) and counts["abstention_accuracy"] == 3
    assert means["false_abstention_rate"] == 0.25 and counts["false_abstention_rate"] == 4


def test_percentile_matches_numpy_linear() -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0], 95) == pytest.approx(3.85)
    assert percentile([None, 7.0], 95) == 7.0 and percentile([], 50) is None


def test_aggregate_skips_undefined_values() -> None:
    means, counts = aggregate([{"m": 1.0, "n": None}, {"m": 0.0}, {"m": None, "n": None}])
    assert means == {"m": 0.5, "n": None} and counts == {"m": 2, "n": 0}


# -- per-question scoring


def _answer(**kw) -> Answer:
    sources = [Source(Paper("a", "A.", "t.txt", 0), 1.0, duplicates=["g"]), Source(Paper("b", "B.", "t.txt", 1), 0.5)]
    return Answer(question="q", sources=sources, timings={"total": 0.5}, **kw)


def test_abstained_answers_are_scored_only_by_abstention() -> None:
    item = EvalItem("q1", "q", gold_papers=("g",))
    answer = _answer(abstained=True)
    got = score_answer(item, answer, None, 0.45)
    assert got == {"abstention_accuracy": None, "false_abstention_rate": 1.0, "near_miss_rate": 0.0, "latency_s": 0.5}
    near = _answer(abstained=False)
    near.near_miss = {"missing": ["video"], "closest": ["g"]}  # "no paper here does X": it declines too
    unanswerable = score_answer(EvalItem("q2", "q"), near, None, 0.45)
    assert unanswerable["abstention_accuracy"] == 1.0 and unanswerable["near_miss_rate"] == 1.0


def test_answer_scored_through_duplicates_and_offline_judge() -> None:
    sentences = [
        SentenceCheck("One [a].", ["a"], {"a": 0.8}),
        SentenceCheck("Two [b].", ["b"], {"b": 0.3}, ["weak_support", "invalid_citation_removed"]),
        SentenceCheck("Three.", [], {}, ["uncited"]),
    ]
    answer = _answer(sentences=sentences, citations=["a", "b"])
    judged = OfflineJudge(0.45).judge(answer)
    got = score_answer(EvalItem("q1", "q", gold_papers=("g",)), answer, judged, 0.45)
    assert got["citation_precision"] == 0.5 and got["citation_recall"] == 1.0  # a is g's duplicate
    assert got["citation_validity"] == pytest.approx(2 / 3)
    assert got["cited_sentence_share"] == pytest.approx(2 / 3)
    assert got["support_recall"] == pytest.approx(1 / 3) and got["support_precision"] == 0.5
    assert got["false_abstention_rate"] == 0.0 and got["abstention_accuracy"] is None


def test_parse_verdict() -> None:
    assert parse_verdict("SUPPORTED") == 1.0
    assert parse_verdict("Unsupported.") == 0.0
    assert parse_verdict("The claim is NOT supported") == 0.0
    assert parse_verdict("partial") == 0.5
    assert parse_verdict("<think>maybe SUPPORTED?</think> UNSUPPORTED") == 0.0
    assert parse_verdict("I cannot tell") is None


# -- dataset and comparison


def test_load_dataset_reports_file_and_line(tmp_path: Path) -> None:
    good = {"id": "a", "question": "Q?", "gold_papers": ["000:1"], "tags": ["single"]}
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(good) + "\n\n" + json.dumps({**good, "id": "b", "gold_papers": []}) + "\n")
    items = load_dataset(path)
    assert [i.id for i in items] == ["a", "b"] and items[0].answerable and not items[1].answerable
    assert [i.id for i in load_dataset(path, limit=1)] == ["a"]

    path.write_text(json.dumps(good) + "\n{oops\n" + json.dumps({"id": "c", "question": "Q"}) + "\n" + json.dumps(good))
    with pytest.raises(DatasetError) as exc:
        load_dataset(path)
    details = "\n".join(exc.value.details)
    assert f"{path}:2: invalid JSON" in details
    assert f"{path}:3: 'gold_papers' is required" in details
    assert f"{path}:4: duplicate id 'a'" in details
    path.write_text(json.dumps({**good, "gold_papers": "000:1"}))
    with pytest.raises(DatasetError, match=r"d\.jsonl:1: 'gold_papers' must be a list"):
        load_dataset(path)
    with pytest.raises(DatasetError, match="not found"):
        load_dataset(tmp_path / "missing.jsonl")


def test_compare_directions() -> None:
    a = {"run": {"k": 5}, "overall": {"recall@5": 0.5, "false_abstention_rate": 0.2, "latency_p50": 1.0, "mrr": 0.7}}
    b = {"run": {"k": 5}, "overall": {"recall@5": 0.75, "false_abstention_rate": 0.1, "latency_p50": 1.5, "mrr": None}}
    rows = {r.metric: r for r in compare(a, b)}
    assert rows["recall@5"].delta == 0.25 and rows["recall@5"].better is True
    assert rows["false_abstention_rate"].delta == pytest.approx(-0.1) and rows["false_abstention_rate"].better
    assert rows["latency_p50"].better is False
    assert rows["mrr"].delta is None and rows["mrr"].better is None
