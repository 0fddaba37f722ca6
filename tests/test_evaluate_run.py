"""Evaluation runs end to end: the LLM judge over real HTTP, a tiny run over the bundled index whose
summary is recomputed by hand from results.jsonl, and the eval / eval-compare commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLMServer, reply

from rag_assistant.answer.models import Answer, SentenceCheck
from rag_assistant.config import Settings
from rag_assistant.corpus.models import Paper
from rag_assistant.evaluate.judge import LLMJudge
from rag_assistant.evaluate.metrics import support_metrics
from rag_assistant.retrieve import Source

REPO = Path(__file__).resolve().parents[1]
TINY = ["q001", "q004", "q055", "q077"]  # single, single, multi (2 gold papers), unanswerable


def _tiny_dataset(path: Path) -> Path:
    rows = [json.loads(line) for line in (REPO / "eval" / "dev.jsonl").read_text().splitlines() if line.strip()]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows if r["id"] in TINY))
    return path


def _judge_reply(request: dict[str, Any]) -> str:
    """alpha in claim and abstract: supported; beta: partial; the joint call on both abstracts: supported."""
    prompt = request["messages"][-1]["content"].lower()
    abstract, claim = prompt.split("abstract:", 1)[1].split("claim:", 1)
    if "[p1]" in abstract and "[p2]" in abstract:  # the joint call on both cited abstracts
        return "SUPPORTED"
    if "alpha" in claim and "alpha" in abstract:
        return "Supported."
    return "PARTIAL" if "beta" in claim and "beta" in abstract else "UNSUPPORTED"


def test_llm_judge_talks_http_to_an_openai_compatible_server() -> None:
    sources = [
        Source(Paper("p1", "We study alpha and beta.", "t.txt", 0, "Alpha"), 1.0),
        Source(Paper("p2", "Beta and gamma are shown.", "t.txt", 1), 0.5),
    ]
    sentences = [
        SentenceCheck("Alpha is studied [p1].", ["p1"], {"p1": 0.9}),
        SentenceCheck("Beta and gamma both hold [p1][p2].", ["p1", "p2"], {"p1": 0.5, "p2": 0.7}),
        SentenceCheck("Delta is new [p2].", ["p2"], {"p2": 0.6}),
        SentenceCheck("An uncited claim.", [], {}, ["uncited"]),
    ]
    answer = Answer(question="q", sources=sources, sentences=sentences, citations=["p1", "p2"])
    with FakeLLMServer(default=_judge_reply, models=["judge-model"]) as srv:
        judge = LLMJudge(Settings(), "judge-model", srv.base_url)
        judged = judge.judge(answer)
        requests = srv.requests
    # 4 (sentence, paper) pairs + 1 joint call for the two-citation sentence that no single paper supports
    assert len(requests) == 5 and {r["model"] for r in requests} == {"judge-model"}
    assert "[p1]" not in requests[0]["messages"][-1]["content"].split("Claim:")[1]  # citations stripped
    assert [j.support for j in judged] == [{"p1": 1.0}, {"p1": 0.5, "p2": 0.5}, {"p2": 0.0}, {}]
    assert [j.joint for j in judged] == [None, True, None, None]
    got = support_metrics(judged, judge.threshold)
    assert got["support_recall"] == pytest.approx(2 / 4)  # sentences 1 and 2 (jointly)
    assert got["support_precision"] == pytest.approx(3 / 4)  # p1 | p1, p2 (partial, joint) | not p2
    info = judge.describe()
    assert info["kind"] == "llm" and info["calls"] == 5 and info["usage"]["total_tokens"] > 0


def test_llm_judge_error_is_an_llm_error() -> None:
    from rag_assistant.errors import LLMError

    answer = Answer(
        question="q",
        sources=[Source(Paper("p1", "T.", "t.txt", 0), 1.0)],
        sentences=[SentenceCheck("Claim [p1].", ["p1"], {"p1": 1.0})],
    )
    with FakeLLMServer(models=["judge-model"]) as srv:
        judge = LLMJudge(Settings(llm_max_retries=0), "judge-model", srv.base_url)
        srv.script(reply("SUPPORTED"))
        assert judge.judge(answer)[0].support == {"p1": 1.0}
    with pytest.raises(LLMError, match="cannot connect"):
        LLMJudge(Settings(llm_max_retries=0), "m", srv.base_url).judge(answer)


@pytest.mark.slow
def test_tiny_run_writes_three_files_and_summary_is_reproducible(ready: Path, tmp_path: Path) -> None:
    from rag_assistant.evaluate.dataset import load_dataset
    from rag_assistant.evaluate.judge import OfflineJudge
    from rag_assistant.evaluate.report import summarize, write_run
    from rag_assistant.evaluate.runner import run_eval

    dataset = _tiny_dataset(tmp_path / "tiny.jsonl")
    settings = Settings(mode="extractive")
    run = run_eval(load_dataset(dataset), settings, OfflineJudge(settings.support_threshold))
    summary = summarize(run, dataset)
    paths = write_run(tmp_path / "run", run, summary)
    assert all(p.is_file() and p.stat().st_size > 0 for p in paths.values())
    html = paths["report.html"].read_text()
    assert "<svg" in html and "Worst" in html and "<script" not in html

    saved = json.loads(paths["summary.json"].read_text())
    results = [json.loads(line) for line in paths["results.jsonl"].read_text().splitlines()]
    assert [r["id"] for r in results] == TINY and saved["counts"]["questions"] == 4
    assert saved["run"]["judge"]["kind"] == "offline" and saved["run"]["mode"] == "extractive"

    # recall@5 by hand: gold ids among the top 5 retrieved (or their duplicates), over answerable questions
    def recall(r: dict[str, Any]) -> float:
        found = {g for s in r["ranking"][:5] for g in r["gold_papers"] if g in [s["paper_id"], *s["duplicates"]]}
        return len(found) / len(r["gold_papers"])

    answerable = [r for r in results if r["gold_papers"]]
    assert saved["overall"]["recall@5"] == pytest.approx(sum(map(recall, answerable)) / len(answerable), abs=1e-6)

    # citation precision by hand: distinct cited papers that are gold, over answered answerable questions
    answered = [r for r in answerable if not r["abstained"]]
    by_hand = [sum(c in r["gold_papers"] for c in set(r["citations"])) / len(set(r["citations"])) for r in answered]
    assert saved["overall"]["citation_precision"] == pytest.approx(sum(by_hand) / len(by_hand), abs=1e-6)
    # the off-topic question abstains
    assert saved["overall"]["abstention_accuracy"] == 1.0 and results[-1]["abstained"] is True


@pytest.mark.slow
def test_eval_and_eval_compare_commands(cli, ready: Path, tmp_path: Path) -> None:
    dataset = _tiny_dataset(tmp_path / "tiny.jsonl")
    with FakeLLMServer(default="SUPPORTED", models=["judge-model"]) as srv:
        res = cli(
            "eval", str(dataset), "--out", str(tmp_path / "a"), "--mode", "extractive", "--limit", "2",
            "--judge", "judge-model", "--judge-base-url", srv.base_url, "--json", timeout=300,
        )  # fmt: skip
        judged = srv.request_count
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["counts"]["questions"] == 2 and summary["run"]["judge"]["kind"] == "llm"
    assert judged == summary["run"]["judge"]["calls"] > 0 and summary["overall"]["support_recall"] == 1.0
    assert {p.name for p in (tmp_path / "a").iterdir()} == {"results.jsonl", "summary.json", "report.html"}

    other = json.loads((tmp_path / "a" / "summary.json").read_text())
    other["overall"]["recall@5"] = summary["overall"]["recall@5"] - 0.5
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "summary.json").write_text(json.dumps(other))
    res = cli("eval-compare", str(tmp_path / "a"), str(tmp_path / "b"))
    assert res.returncode == 0, res.stderr
    assert "recall@5" in res.stdout and "-0.500" in res.stdout and "judge: LLM judge judge-model" in res.stdout
    res = cli("eval-compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json")
    rows = {r["metric"]: r for r in json.loads(res.stdout)}
    assert rows["recall@5"]["delta"] == -0.5 and rows["recall@5"]["better"] is False


def test_eval_cli_rejects_bad_dataset_and_missing_run(cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "question": "Q?", "gold_papers": []}\n{"id": "b"}\n')
    res = cli("eval", str(bad))
    assert res.returncode == 2 and f"{bad}:2: 'question' is required" in res.stderr
    res = cli("eval-compare", str(tmp_path), str(tmp_path))
    assert res.returncode == 2 and "summary.json missing" in res.stderr
