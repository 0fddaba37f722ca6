"""Issue 12 end to end: batch stops on failures that would repeat for every row, eval never overwrites or
loses a run, and a planted secret appears in no output, log, row or file."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from fake_llm import FakeLLMServer, delay, status
from llm_helpers import cited_answer
from llm_scenarios import SCENARIOS

from rag_assistant.batch import run_batch
from rag_assistant.config import load_settings
from rag_assistant.errors import STOP_AFTER, BatchStoppedError

SECRET = "sk-planted-SECRET-77e1b0"
DEV = Path(__file__).resolve().parents[1] / "eval" / "dev.jsonl"


def _questions(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "q.txt"
    path.write_text("".join(f"What does paper number {i} say about KV cache memory?\n" for i in range(n)))
    return path


@pytest.mark.parametrize(
    ("reason", "default", "timeout"),
    [("auth", status(401), "5"), ("timeout", delay(30, then=status(500)), "0.5"), ("connect", None, "5")],
)
def test_batch_stops_after_a_few_identical_systemic_failures(
    monkeypatch: pytest.MonkeyPatch, ready: Path, tmp_path: Path, reason: str, default, timeout: str
) -> None:
    with FakeLLMServer(default=lambda req: default) as srv:
        url = srv.base_url
        if default is None:
            srv.stop()  # nothing listens there any more: connection refused
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        monkeypatch.setenv("RAG_ASSISTANT_LLM_TIMEOUT", timeout)
        monkeypatch.setenv("RAG_ASSISTANT_LLM_MAX_RETRIES", "1")
        out = tmp_path / "out.jsonl"
        started = time.perf_counter()
        with pytest.raises(BatchStoppedError, match=f"{STOP_AFTER} questions in a row failed alike") as info:
            run_batch(_questions(tmp_path, 20), out, load_settings())
        assert time.perf_counter() - started < 30
    assert info.value.reason == reason and "s in all)" in info.value.message and SECRET not in str(info.value)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == STOP_AFTER - 1 and all(r["status"] == "failed" for r in rows)  # journaled, retried later


def test_batch_keeps_going_when_failures_differ_or_succeed(monkeypatch: pytest.MonkeyPatch, own_ready: Path, tmp_path):
    calls = {"n": 0}

    def flaky(req: dict) -> object:
        calls["n"] += 1
        return status(401) if calls["n"] % 2 else cited_answer(req)

    with FakeLLMServer(default=flaky) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        summary = run_batch(_questions(tmp_path, 6), tmp_path / "out.jsonl", load_settings(llm_max_retries=0))
    assert summary.failed == 3 and summary.answered == 3


@pytest.mark.slow
def test_eval_out_is_checked_before_answering(cli, ready: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = ("eval", str(DEV), "--limit", "2", "--mode", "extractive", "--out")
    assert cli(*args, str(run), timeout=600).returncode == 0
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    again = cli(*args, str(run), timeout=600)
    assert again.returncode == 2 and "already holds a run" in again.stderr and "--force" in again.stderr
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before and "Traceback" not in again.stderr
    as_file = tmp_path / "file.txt"
    as_file.write_text("keep me")
    res = cli(*args, str(as_file), timeout=600)
    assert res.returncode == 2 and "is a file" in res.stderr and "Traceback" not in res.stderr
    assert "evaluated" not in res.stderr and as_file.read_text() == "keep me"
    assert cli(*args, str(run), "--force", timeout=600).returncode == 0


def _env(data: Path, **more: str) -> dict[str, str]:
    return {"RAG_ASSISTANT_DATA_DIR": str(data), **more}


@pytest.mark.slow
def test_planted_secret_and_fabricated_ids_appear_nowhere(cli, ready: Path, tmp_path: Path) -> None:
    data = tmp_path / "own"
    shutil.copytree(ready, data)
    fabricated = SCENARIOS["not_found_then_fabricated"][0]

    def answer(req: dict) -> object:
        text = str(req["messages"][-1]["content"])
        if "number 1 " in text:
            return status(500)  # one failed batch row: its error is written into the output
        return fabricated.text if "number" in text or "ShadowKV" in text else cited_answer(req)

    with FakeLLMServer(default=answer) as srv:
        env = _env(
            data,
            OPENAI_BASE_URL=f"http://user:{SECRET}@127.0.0.1:{srv.port}/v1",
            OPENAI_API_KEY=SECRET,
            RAG_ASSISTANT_LLM_MODEL="fake-model",
            RAG_ASSISTANT_LLM_MAX_RETRIES="0",
        )
        results = [cli("ask", "How does ShadowKV reduce KV cache memory?", "--json", env=env)]
        results.append(cli("batch", str(_questions(tmp_path, 3)), "-o", str(tmp_path / "b.jsonl"), env=env))
        results.append(cli("eval", str(DEV), "--limit", "3", "--out", str(tmp_path / "run"), env=env))
        results.append(cli("log", "--json", env=env))
        srv.stop()
        results.append(cli("ask", "How does ShadowKV reduce KV cache memory?", env=env))
    assert [r.returncode for r in results] == [0, 1, 0, 0, 3], [r.stderr[-500:] for r in results]
    assert "cannot connect" in results[-1].stderr and "***@127.0.0.1" in results[-1].stderr
    answer_json = json.loads(results[0].stdout)
    assert "777:1" not in answer_json["answer"] and any("[777:1]" in w for w in answer_json["warnings"])
    files = [p for p in [*data.rglob("*"), *tmp_path.rglob("*")] if p.is_file()]
    texts = [r.stdout + r.stderr for r in results] + [p.read_bytes().decode("latin-1") for p in files]
    assert all(SECRET not in t for t in texts)
    written = [json.loads(line) for line in (tmp_path / "b.jsonl").read_text().splitlines()]
    written += [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    written += json.loads(results[3].stdout)
    for row in written:
        assert "777:1" not in row["answer"] and "004:99" not in row["answer"]
    assert any(r["status"] == "failed" and "HTTP 500" in r["error"] for r in written if "status" in r)
