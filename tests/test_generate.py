"""eval-generate end to end: the shipped CLI over the bundled corpus, with a scripted OpenAI-compatible model
(tests/gen_scenarios.py) that writes good questions, or bad ones of one kind for each filter to catch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import cli_command
from fake_llm import Delay, FakeLLMServer, Reply, Status
from gen_scenarios import responder


def llm_env(server: FakeLLMServer) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "test-key",
        "RAG_ASSISTANT_LLM_MODEL": "fake-model",
        "RAG_ASSISTANT_LLM_MAX_RETRIES": "0",
        "RAG_ASSISTANT_LLM_TIMEOUT": "30",
    }


def generate(cli, server: FakeLLMServer, out: Path, *args: str) -> tuple[Any, dict[str, Any]]:
    res = cli("eval-generate", "-o", str(out), "--json", *args, env=llm_env(server), timeout=600)
    assert res.stdout.strip(), res.stderr
    return res, json.loads(res.stdout)


def candidates(out: Path) -> list[dict[str, Any]]:
    lines = [json.loads(x) for x in out.with_name(f"{out.stem}.candidates.jsonl").read_text().splitlines()]
    return [x for x in lines if "slot" in x]


def writer_requests(server: FakeLLMServer) -> int:
    return sum("You write evaluation questions" in r["messages"][0]["content"] for r in server.requests)


def test_without_an_llm_it_says_so_and_exits_2(cli, ready, tmp_path: Path) -> None:
    res = cli("eval-generate", "-n", "5", "-o", str(tmp_path / "set.jsonl"))
    assert res.returncode == 2, res.stderr
    assert "eval-generate needs an LLM" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "set.jsonl").exists()


@pytest.mark.slow
def test_fifty_generated_questions_run_in_eval(cli, ready, tmp_path: Path) -> None:
    out = tmp_path / "set.jsonl"
    with FakeLLMServer(responder()) as server:
        res, summary = generate(cli, server, out, "-n", "50", "-c", "4")
    assert res.returncode == 0, res.stderr
    assert summary["kept"] == dict.fromkeys(["known-item", "method", "result", "survey", "unanswerable"], 10)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 50 and len({r["id"] for r in rows}) == 50
    for row in rows:
        kind = row["tags"][1]
        assert row["tags"][0] == "generated" and row["tags"][2] in ("dev", "heldout")
        assert row["provenance"]["model"] == "fake-model" and row["provenance"]["seed"] == 0
        assert row["provenance"]["prompt"].startswith("gen_") and row["provenance"]["judge_prompt"].startswith("judge_")
        assert (row["gold_papers"] == []) == (kind == "unanswerable")
        assert len(row["gold_papers"]) >= 2 if kind == "survey" else True
        assert row.get("criterion") if kind == "survey" else row["provenance"]["overlap"] <= 0.3
    seeds = {r["provenance"]["seed_paper"] for r in rows}
    assert {s.split(":")[0] for s in seeds} == {"000", "004"}  # both files of the bundled corpus are sampled
    run = cli("eval", str(out), "--out", str(tmp_path / "run"), "--json", timeout=900)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["counts"]["questions"] == 50 and not result["warnings"]  # every gold paper is in the index
    assert {"generated", "survey", "unanswerable", "known-item"} <= set(result["by_tag"])


# mode of the writer, mode of the judge, kinds asked for -> the filter that must remove every candidate
BAD = {
    "malformed JSON": ("malformed", "good", "known-item", "malformed"),
    "not a question": ("ill-formed", "good", "method", "ill-formed"),
    "copied phrases": ("copied", "good", "result", "copied"),
    "gold abstract does not answer": ("not-answered", "good", "known-item", "not-answered-by-gold"),
    "judge quotes what the abstract does not say": ("good", "false-quote", "method", "not-answered-by-gold"),
    "judge unreadable": ("good", "unreadable", "result", "not-answered-by-gold"),
    "another paper answers it as well": ("generic", "good", "known-item", "answered-by-other"),
    "survey criterion every paper meets": ("too-broad", "good", "survey", "too-broad"),
    "survey criterion one paper meets": ("too-narrow", "good", "survey", "not-answered-by-gold"),
    "unanswerable but answerable": ("answerable", "good", "unanswerable", "answerable"),
    "unanswerable and off the corpus": ("off-topic", "good", "unanswerable", "off-topic"),
}


@pytest.mark.parametrize("case", BAD)
def test_each_filter_removes_what_it_should(case: str, cli, ready, tmp_path: Path) -> None:
    mode, judge_mode, kind, expected = BAD[case]
    out = tmp_path / "set.jsonl"
    with FakeLLMServer(responder(mode, judge_mode)) as server:
        res, summary = generate(cli, server, out, "-n", "3", "--kinds", kind, "--attempts", "1")
    assert res.returncode == 1, res.stderr  # nothing kept
    assert summary["removed"] == {expected: 3} and summary["kept"] == {kind: 0}
    assert [c["removed_by"] for c in candidates(out)] == [expected] * 3
    assert all(c["why"] for c in candidates(out))
    assert out.read_text() == ""
    assert "short of -n" in res.stderr


def test_good_questions_pass_every_filter(cli, ready, tmp_path: Path) -> None:
    """The same three slots as the cases above, written well: all kept (so each case above fails by its fault)."""
    out = tmp_path / "set.jsonl"
    with FakeLLMServer(responder()) as server:
        res, summary = generate(cli, server, out, "-n", "3", "--kinds", "known-item", "--attempts", "1")
    assert res.returncode == 0, res.stderr
    assert summary["removed"] == {} and summary["kept"] == {"known-item": 3}
    checks = [c for cand in candidates(out) for c in cand["checks"]]
    assert {c["role"] for c in checks} == {"gold", "other"} and all(
        c["verified"] for c in checks if c["role"] == "gold"
    )


def test_near_duplicates_are_removed(cli, ready, tmp_path: Path) -> None:
    out = tmp_path / "set.jsonl"
    with FakeLLMServer(responder("same")) as server:  # every survey question is the same
        res, summary = generate(cli, server, out, "-n", "2", "--kinds", "survey", "--attempts", "2")
    assert summary["kept"] == {"survey": 1} and summary["removed"] == {"near-duplicate": 3}, res.stderr
    assert [json.loads(x)["question"] for x in out.read_text().splitlines()] == [
        "Which papers in the collection discuss attention?"
    ]


def test_the_summary_table_says_once_what_is_missing(cli, ready, tmp_path: Path) -> None:
    out = tmp_path / "set.jsonl"
    with FakeLLMServer(responder("same")) as server:
        args = ("-n", "2", "--kinds", "survey", "--attempts", "2")
        res = cli("eval-generate", "-o", str(out), *args, env=llm_env(server), timeout=600)
    assert res.returncode == 0, res.stderr  # one question kept: short of -n is a warning, not a failure
    assert "Generated 1 of 2 questions" in res.stdout and "near-duplicate: 3" in res.stdout
    assert res.stderr.count("1 question(s) short of -n") == 1, res.stderr


def test_same_seed_same_set_whatever_the_concurrency(cli, ready, tmp_path: Path) -> None:
    with FakeLLMServer(responder()) as server:
        one, _ = generate(cli, server, tmp_path / "a.jsonl", "-n", "8", "--seed", "7")
        four, _ = generate(cli, server, tmp_path / "b.jsonl", "-n", "8", "--seed", "7", "-c", "4")
        other, _ = generate(cli, server, tmp_path / "c.jsonl", "-n", "8", "--seed", "8")
    assert one.returncode == four.returncode == other.returncode == 0
    a, b, c = ((tmp_path / f"{x}.jsonl").read_text() for x in "abc")
    assert a == b and a != c


def test_a_rerun_with_other_settings_is_refused(cli, ready, tmp_path: Path) -> None:
    out = tmp_path / "set.jsonl"
    with FakeLLMServer(responder()) as server:
        generate(cli, server, out, "-n", "2", "--kinds", "method")
        res = cli("eval-generate", "-n", "2", "--kinds", "method", "-o", str(out), "--seed", "3", env=llm_env(server))
        assert res.returncode == 2 and "seed" in res.stderr and "--fresh" in res.stderr
        mine = tmp_path / "mine.jsonl"
        mine.write_text('{"id": "q1", "question": "hand-written?", "gold_papers": []}\n')
        res = cli("eval-generate", "-n", "2", "-o", str(mine), env=llm_env(server))
        assert res.returncode == 2 and "not written by eval-generate" in res.stderr
        assert mine.read_text().startswith('{"id": "q1"')


def test_a_failed_candidate_is_retried_on_the_next_run(cli, ready, tmp_path: Path) -> None:
    out = tmp_path / "set.jsonl"
    good, failed = responder(), []

    def flaky(req: dict[str, Any]) -> Any:
        if "You write evaluation questions" in req["messages"][0]["content"] and not failed:
            failed.append(req)
            return Status(500)  # the server fails the first candidate once
        return good(req)

    with FakeLLMServer(flaky) as server:
        res, summary = generate(cli, server, out, "-n", "2", "--kinds", "result", "--attempts", "1")
        assert res.returncode == 1 and summary["failed"] == 1 and summary["kept"] == {"result": 1}
        res, summary = generate(cli, server, out, "-n", "2", "--kinds", "result", "--attempts", "1")
    assert res.returncode == 0 and summary["failed"] == 0 and summary["kept"] == {"result": 2}
    assert summary["resumed"] == 1 and len(failed) == 1


@pytest.mark.slow
def test_a_killed_run_continues_where_it_stopped(ready, tmp_path: Path) -> None:
    good = responder()

    def slow(req: dict[str, Any]) -> Any:
        return Delay(0.3, then=Reply(good(req)))

    with FakeLLMServer(responder()) as server:
        clean = tmp_path / "clean.jsonl"
        subprocess.run(
            [*cli_command(), "eval-generate", "-n", "6", "-o", str(clean)],
            env={**os.environ, **llm_env(server)},
            check=True,
            capture_output=True,
            timeout=600,
        )
        clean_writes = writer_requests(server)
    out = tmp_path / "set.jsonl"
    journal = tmp_path / "set.candidates.jsonl"
    with FakeLLMServer(slow) as server:
        proc = subprocess.Popen(
            [*cli_command(), "eval-generate", "-n", "6", "-o", str(out)],
            env={**os.environ, **llm_env(server)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and (not journal.exists() or journal.read_text().count("\n") < 4):
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    done = len(candidates(out))
    assert 3 <= done < clean_writes and not out.exists()
    with FakeLLMServer(responder()) as server:
        res = subprocess.run(
            [*cli_command(), "eval-generate", "-n", "6", "-o", str(out)],
            env={**os.environ, **llm_env(server)},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert res.returncode == 0, res.stderr
        assert f"resuming: {done} candidate(s)" in res.stderr
        assert writer_requests(server) == clean_writes - done  # nothing written twice
    assert out.read_text() == clean.read_text()


@pytest.mark.slow
def test_ctrl_c_stops_at_once_and_the_rerun_resumes(ready, tmp_path: Path) -> None:
    good = responder()
    out = tmp_path / "set.jsonl"
    journal = tmp_path / "set.candidates.jsonl"
    command = [*cli_command(), "eval-generate", "-n", "4", "--kinds", "known-item", "-o", str(out)]
    with FakeLLMServer(lambda req: Delay(0.5, then=Reply(good(req)))) as server:
        env = {**os.environ, **llm_env(server)}
        proc = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # even if pytest runs with it ignored
        )  # fmt: skip
        while proc.poll() is None and (not journal.exists() or journal.read_text().count("\n") < 3):
            time.sleep(0.05)
        time.sleep(0.7)  # in the middle of the next candidate's calls
        proc.send_signal(signal.SIGINT)
        sent = server.request_count
        assert proc.wait(60) == 130, proc.stderr.read()
        assert server.request_count <= sent + 1  # no call started after the one in flight
    done = len(candidates(out))
    assert done >= 2 and not out.exists()
    with FakeLLMServer(good) as server:
        res = subprocess.run(
            command, env={**os.environ, **llm_env(server)}, capture_output=True, text=True, timeout=600
        )
    assert res.returncode == 0 and f"resuming: {done} candidate(s)" in res.stderr, res.stderr
    assert len(out.read_text().splitlines()) == 4
