"""eval --judge MODEL grades each answer on answer relevance and context precision (evaluate/grading.py),
shown in the summary, per tag and in report.html; eval --export ragas writes the run as RAGAS reads it."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLMServer

from rag_assistant.corpus import bundled_corpus_path, load_corpus
from rag_assistant.evaluate.grading import context_precision

QUESTIONS = ["q001", "q003", "q049", "q067", "q068"]  # single, single, multi, unanswerable x 2 (eval/dev.jsonl)
REPO = Path(__file__).resolve().parents[1]


def test_context_precision_is_ragas_average_precision() -> None:
    assert context_precision([True, False, True]) == pytest.approx((1 / 1 + 2 / 3) / 2)
    assert context_precision([False, True]) == pytest.approx(0.5)
    assert context_precision([False, False]) == 0.0 and context_precision([]) == 0.0
    assert context_precision([True, True, False]) == 1.0


def _long_word(question: str) -> str:
    return max(re.findall(r"[A-Za-z]{4,}", question), key=len).lower()


def judge(req: dict[str, Any]) -> str:
    """Support: always SUPPORTED. Relevance: YES when the answer holds the question's longest word, else
    PARTIAL. A retrieved abstract answers the question (YES) when it holds that word."""
    system, text = req["messages"][0]["content"], req["messages"][-1]["content"]
    if "You verify claims" in system:
        return "SUPPORTED"
    question = text.split("Question: ", 1)[1].split("\n", 1)[0]
    word = _long_word(question)
    if text.startswith("Does the answer below address"):
        answer = text.split("Answer:\n", 1)[1].rsplit("\n\nReply", 1)[0]
        return "YES" if word in answer.lower() else "PARTIAL"
    abstract = text.split("Abstract:\n", 1)[1].rsplit("\n\nReply", 1)[0]
    return f"YES: {abstract.split('. ')[0]}" if word in abstract.lower() else "NO"


@pytest.mark.slow
def test_answer_metrics_in_summary_tags_report_and_ragas_export(cli, ready, tmp_path: Path) -> None:
    rows = [json.loads(x) for x in (REPO / "eval" / "dev.jsonl").read_text().splitlines() if x.strip()]
    dataset = tmp_path / "set.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows if r["id"] in QUESTIONS))
    out = tmp_path / "run"
    with FakeLLMServer(judge) as server:
        res = cli(
            "eval", str(dataset), "--out", str(out), "--judge", "fake-judge", "--judge-base-url", server.base_url,
            "--export", "ragas", "--mode", "extractive", "--json", env={"OPENAI_API_KEY": "k"}, timeout=600,
        )  # fmt: skip
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    texts = {
        p.paper_id: f"{p.title}. {p.text}" if p.title else p.text for p in load_corpus([bundled_corpus_path()]).papers
    }
    graded = [r for r in results if not r["abstained"] and not r["near_miss"]]
    assert graded and all(r["metrics"]["support_recall"] == 1.0 for r in graded)
    assert len(graded) < len(results)  # one declined, and is not graded
    for r in results:
        word = _long_word(r["question"])
        if r in graded:
            relevant = [word in texts[s["paper_id"]].lower() for s in r["ranking"][:5]]
            assert r["metrics"]["context_precision"] == pytest.approx(context_precision(relevant))
            assert r["metrics"]["answer_relevance"] == (1.0 if word in r["answer"].lower() else 0.5)
        else:  # declined: no answer to grade
            assert "answer_relevance" not in r["metrics"] and "context_precision" not in r["metrics"]
    for name in ("answer_relevance", "context_precision"):
        values = [r["metrics"][name] for r in graded]
        assert summary["overall"][name] == pytest.approx(sum(values) / len(values), abs=1e-6)
        assert summary["n"][name] == len(graded)
        assert name in summary["by_tag"]["single"]["metrics"]
    assert summary["run"]["judge"]["answer_metrics"]["calls"] > 0
    report = (out / "report.html").read_text()
    assert "answer_relevance" in report and "context_precision" in report

    samples = [json.loads(x) for x in (out / "ragas.jsonl").read_text().splitlines()]
    assert [s["user_input"] for s in samples] == [r["question"] for r in results]
    first = samples[0]
    assert set(first) == {
        "user_input", "response", "retrieved_contexts", "reference_contexts", "reference",
        "retrieved_context_ids", "reference_context_ids",
    }  # fmt: skip
    assert first["retrieved_contexts"][0] == texts[results[0]["ranking"][0]["paper_id"]]
    assert first["reference_contexts"] == [texts[g] for g in results[0]["gold_papers"]]
    assert first["response"] == results[0]["answer"]
    table = list(csv.DictReader((out / "ragas.csv").open(newline="")))
    assert [row["id"] for row in table] == QUESTIONS
    by_id = {r["id"]: r for r in results}
    for row in table:
        metrics = by_id[row["id"]]["metrics"]
        assert row["faithfulness"] == str(metrics.get("support_recall", ""))
        assert row["answer_relevancy"] == str(metrics.get("answer_relevance", ""))
        assert row["id_based_context_recall"] == str(metrics.get("recall@5", ""))
        assert json.loads(row["retrieved_context_ids"]) == [s["paper_id"] for s in by_id[row["id"]]["ranking"][:5]]


def test_an_unknown_export_format_is_refused(cli, ready, tmp_path: Path) -> None:
    res = cli("eval", str(REPO / "eval" / "dev.jsonl"), "--export", "deepeval", "--out", str(tmp_path / "r"))
    assert res.returncode == 2 and "--export deepeval: unknown format" in res.stderr
