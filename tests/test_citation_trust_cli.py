"""Issue 22 through the CLI, as a user drives it: an LLM answer of nothing but citations is an abstention in
`ask` and `batch`; references hidden in math and a leaked key are neither shown, nor logged, nor written; an
abstract's own bracketed text stays where it is in an extractive answer."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from fake_llm import FakeLLMServer
from llm_helpers import source_sentence

from rag_assistant.answer.chain import EMPTY_ABSTAIN_TEXT

QUESTION = "How does ShadowKV reduce KV cache memory?"
SECRET = "sk-planted-SECRET-22c0de"


def _env(url: str) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": url,
        "OPENAI_API_KEY": SECRET,
        "RAG_ASSISTANT_LLM_MODEL": "fake-model",
        "RAG_ASSISTANT_LLM_MAX_RETRIES": "0",
    }


@pytest.mark.slow
def test_an_answer_of_only_citations_abstains_in_ask_and_batch(cli, own_ready: Path, tmp_path: Path) -> None:
    """Item 7: "[1][2][3]" leaves nothing once checked: exit 0, abstained, and the warning says why."""
    questions = tmp_path / "q.txt"
    questions.write_text(f"{QUESTION}\nWhat does Best-of-N sampling do to reward models?\n")
    with FakeLLMServer(default="[1][2][3]") as srv:
        as_json = cli("ask", QUESTION, "--json", env=_env(srv.base_url))
        shown = cli("ask", QUESTION, env=_env(srv.base_url))
        batch = cli("batch", str(questions), "-o", str(tmp_path / "out.jsonl"), env=_env(srv.base_url))
    assert [as_json.returncode, shown.returncode, batch.returncode] == [0, 0, 0], batch.stderr
    answer = json.loads(as_json.stdout)
    assert answer["abstained"] and answer["answer"] == EMPTY_ABSTAIN_TEXT and answer["citations"] == []
    assert any("only references" in w for w in answer["warnings"])
    assert EMPTY_ABSTAIN_TEXT in shown.stdout and "Closest papers" in shown.stdout
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [(r["status"], r["abstained"], r["answer"]) for r in rows] == [("ok", True, EMPTY_ABSTAIN_TEXT)] * 2
    assert "0 answered, 2 abstained, 0 failed" in batch.stdout, batch.stdout


@pytest.mark.slow
def test_math_wrapped_references_and_a_leaked_key_reach_no_output_or_log(cli, own_ready: Path) -> None:
    """Items 1 and 6 through `ask` (its request in process) and `log`: the terminal, the JSON, the provenance log."""

    def answer(req: dict) -> str:
        top = source_sentence(req, "1")
        return f"{top} $[999:1]$ [1]. The key is {SECRET} $\\left[777:1\\right]$ [1]."

    with FakeLLMServer(default=answer) as srv:
        results = [cli("ask", QUESTION, *flag, env=_env(srv.base_url)) for flag in ((), ("--json",))]
        results.append(cli("log", "--json", env=_env(srv.base_url)))
    assert [r.returncode for r in results] == [0, 0, 0], [r.stderr for r in results]
    logged = sqlite3.connect(own_ready / "provenance.sqlite").execute("SELECT answer, record FROM answers").fetchall()
    assert all(SECRET not in text for text in [*(r.stdout for r in results), *(c for row in logged for c in row)])
    records = [json.loads(results[1].stdout), *(json.loads(record) for _, record in logged)]
    shown = [line for line in results[0].stdout.splitlines() if not line.startswith("warning:")]  # these name them
    shown += [row["answer"] for row in json.loads(results[2].stdout)] + [answer for answer, _ in logged]
    shown += [r["answer"] for r in records] + [s["text"] for r in records for s in r["sentences"]]
    for text in shown:
        assert "999:1" not in text and "777:1" not in text, text
    answer_json = json.loads(results[1].stdout)
    assert answer_json["answer"].endswith("The key is *** [004:17].")
    for warning in ("removed citation [999:1]", "removed citation [777:1]", "held a secret of this client"):
        assert any(warning in w for w in answer_json["warnings"]), answer_json["warnings"]


def test_an_abstracts_own_brackets_stay_where_they_are(cli, tmp_path: Path) -> None:
    """Item 13: a sentence quoted from an abstract that starts with "[bold]" is cited at its end, "[bold]" left
    in place (it was moved after the citation as if it were one: "... thresholds [rich1] [bold].")."""
    corpus = tmp_path / "rich.jsonl"
    abstract = (
        "[bold] We propose gating that opens when a query passes calibrated thresholds. Experiments on three "
        "benchmarks show higher recall at equal cost."
    )
    corpus.write_text(json.dumps({"id": "rich1", "abstract": abstract}) + "\n")
    assert cli("ingest", str(corpus)).returncode == 0
    result = cli("ask", "How does the gating use calibrated thresholds?", "--json")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["answer"].startswith(
        "[bold] We propose gating that opens when a query passes calibrated thresholds [rich1]."
    ), answer["answer"]
    assert "[rich1] [bold]" not in answer["answer"] and answer["warnings"] == []
