"""batch: a file of questions -> .jsonl/.csv/.md, one durable line per question, resumable after kill -9.

The end-to-end test runs the real console script in llm mode against the scripted server (killed, then
resumed), then retries in-process; formats and edge cases run in-process against a stub chain (no model)."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NoReturn

import pytest
from fake_llm import FakeLLMServer, Step, garbage, status

from rag_assistant.answer.models import Answer, AnswerWarning, Reference, WarningKind
from rag_assistant.batch import BatchInputError, journal_path, read_input, run_batch
from rag_assistant.config import Settings
from rag_assistant.errors import IndexStoreError, LLMError

REPO = Path(__file__).resolve().parents[1]
QUERIES = [json.loads(line)["query"] for line in (REPO / "tests/data/retrieval_queries.jsonl").read_text().splitlines()]
OFF_TOPIC = [  # cosine < 0.2 to every abstract: abstained before any LLM call
    "Who won the 1998 football world cup?",
    "How tall is the Eiffel tower?",
    "How do I repair a leaking bicycle tyre?",
    "Which bird migrates the farthest?",
    "What is a good recipe for banana bread?",
    "What is the best pizza topping in Naples?",
]
QUESTIONS = (
    QUERIES
    + [f"What do recent papers say about {q}?" for q in QUERIES]
    + [f"Summarize the work on {q}." for q in QUERIES[:4]]
    + OFF_TOPIC
)
FAILING = {  # scripted by question text, which stays deterministic with concurrent requests
    QUESTIONS[3]: lambda: status(500),
    QUESTIONS[11]: lambda: status(500),
    QUESTIONS[17]: garbage,
    QUESTIONS[25]: garbage,
    QUESTIONS[31]: lambda: "",  # empty completion
    QUESTIONS[40]: lambda: "",
}
NOT_COVERED = {QUESTIONS[7], QUESTIONS[22]}  # the LLM itself says the corpus does not cover them


class Responder:
    """Cites the first source of the prompt; fails the FAILING questions while `failing` is set."""

    def __init__(self) -> None:
        self.failing = True
        self.lock = threading.Lock()
        self.asked: list[str] = []

    def __call__(self, req: dict[str, Any]) -> str | Step:
        user = req["messages"][-1]["content"]
        question = user.rsplit("Question: ", 1)[-1].split("\n\nAnswer with", 1)[0].strip()
        with self.lock:
            self.asked.append(question)
        if self.failing and question in FAILING:
            return FAILING[question]()
        if question in NOT_COVERED:
            return "The corpus does not cover this question."
        time.sleep(0.1)  # slow enough to kill the batch mid-run
        first = re.findall(r"^\[([^\]\n]+)\]", user, re.MULTILINE)[0]
        return f"The closest paper studies this question directly [{first}]."


def _command(*args: str) -> list[str]:
    exe = Path(sys.executable).with_name("rag-assistant")
    return [*([str(exe)] if exe.exists() else [sys.executable, "-m", "rag_assistant"]), *args]


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_llm_batch_killed_resumed_and_retried(cli, own_ready: Path, tmp_path: Path) -> None:
    questions = tmp_path / "questions.txt"
    questions.write_text("# fifty questions\n\n" + "\n".join(QUESTIONS) + "\n")
    ids = [str(n) for n in range(3, 53)]  # line numbers: a comment and a blank line come first
    out = tmp_path / "answers.jsonl"
    responder = Responder()
    with FakeLLMServer(default=responder) as srv:
        env = {"OPENAI_BASE_URL": srv.base_url, "OPENAI_API_KEY": "test", "RAG_ASSISTANT_LLM_MAX_RETRIES": "0"}
        args = ("batch", str(questions), "-o", str(out), "--concurrency", "4")

        # 1. kill -9 once some lines are durable, then fake a torn write at the end of the journal
        with open(tmp_path / "stderr1", "w") as log:
            proc = subprocess.Popen(_command(*args), env={**os.environ, **env}, stdout=log, stderr=log)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and proc.poll() is None:
                if out.exists() and out.read_bytes().count(b"\n") >= 8:
                    break
                time.sleep(0.02)
            assert proc.poll() is None, "the batch finished before it could be killed"
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        data = out.read_bytes()
        first = [json.loads(line) for line in data[: data.rfind(b"\n") + 1].splitlines()]  # the kill may tear one
        assert 8 <= len(first) < 50 and len({r["id"] for r in first}) == len(first)
        with open(out, "ab") as f:
            f.write(b'{"id": "52", "status": "ok", "question": "half a li')

        # 2. resume: only the rows without an ok line are answered; injected failures are rows, not crashes
        res = cli(*args, env=env)
        assert res.returncode == 1, res.stderr
        counts = re.search(r"50 questions: (\d+) answered, (\d+) abstained, (\d+) failed, (\d+) skipped", res.stdout)
        assert counts, res.stdout
        answered, abstained, failed, skipped = map(int, counts.groups())
        assert skipped == sum(r["status"] == "ok" for r in first)
        assert f"resuming: {skipped} question(s) already done" in res.stderr
        assert failed == len(FAILING) and "6 question(s) failed" in res.stdout, res.stdout
        assert answered + abstained + failed + skipped == 50
        assert "mode llm · model gpt-4o-mini" in res.stdout and "p95 per question" in res.stdout
        assert "failed" in res.stderr  # plain progress lines when stderr is not a terminal
        rows = _lines(out)
        assert [r["id"] for r in rows] == ids  # one line per input id, in input order
        by_question = {r["question"]: r for r in rows}
        assert sum(r["status"] == "failed" for r in rows) == len(FAILING)
        assert "HTTP 500" in by_question[QUESTIONS[3]]["error"]
        assert "malformed" in by_question[QUESTIONS[17]]["error"]
        assert "empty completion" in by_question[QUESTIONS[31]]["error"]
        assert all(by_question[q]["abstained"] for q in [*OFF_TOPIC, *NOT_COVERED])
        ok = [r for r in rows if r["status"] == "ok" and not r["abstained"]]
        assert ok and all(r["citations"] and r["mode"] == "llm" and r["sources"] for r in ok)

        # 3. rerun with a healthy server, in-process this time (the model is already loaded here, which saves
        # a third cold start): only the failed rows are asked again, and their lines replaced
        responder.failing = False
        before = len(responder.asked)
        settings = Settings(llm_base_url=srv.base_url, llm_api_key="test", llm_max_retries=0)
        summary = run_batch(questions, out, settings, concurrency=4)
        assert summary.exit_code == 0 and summary.failed == 0 and summary.skipped == 50 - len(FAILING)
        assert sorted(responder.asked[before:]) == sorted(FAILING)
        rows = _lines(out)
        assert [r["id"] for r in rows] == ids and all(r["status"] == "ok" for r in rows)

    from rag_assistant.answer.provenance import recent

    logged = recent(own_ready, limit=100, kind="batch")
    assert logged and all(r["session"] == "batch:answers.jsonl" for r in logged)


def test_llm_requests_overlap_while_the_chains_own_work_never_does(own_ready: Path, tmp_path: Path) -> None:
    """The real chain in llm mode with 4 in flight: the model's requests meet at a barrier (it breaks unless
    two are in flight at once), while the chain's own phases, under the batch's lock, never run together."""
    from llm_helpers import cited_answer

    from rag_assistant.answer.chain import AnswerChain

    meet = threading.Barrier(2, timeout=60)
    active, peak = [0], [0]

    def both_in_flight(req: dict[str, Any]) -> str:
        meet.wait()
        return cited_answer(req)

    def counted(phase: Any) -> Any:  # noqa: ANN401
        def run(*args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
            active[0] += 1
            peak[0] = max(peak[0], active[0])
            time.sleep(0.01)  # a phase that let another in would be caught overlapping here
            try:
                return phase(*args, **kwargs)
            finally:
                active[0] -= 1

        return run

    questions = tmp_path / "q.txt"
    questions.write_text("".join(f"How does ShadowKV reduce KV cache memory? ({n})\n" for n in range(4)))
    with pytest.MonkeyPatch.context() as patch, FakeLLMServer(default=both_in_flight) as srv:
        for name in ("prepare", "finish"):
            patch.setattr(AnswerChain, name, counted(getattr(AnswerChain, name)))
        settings = Settings(llm_base_url=srv.base_url, llm_api_key="test", llm_max_retries=0, llm_timeout=120)
        summary = run_batch(questions, tmp_path / "out.jsonl", settings, concurrency=4)
    assert summary.answered == 4 and summary.failed == 0, _lines(tmp_path / "out.jsonl")
    assert peak[0] == 1 and len(srv.requests) == 4


def test_usage_errors_exit_2(cli, tmp_path: Path) -> None:
    questions = tmp_path / "questions.pdf"
    questions.write_text("What?\n")
    res = cli("batch", str(questions), "-o", str(tmp_path / "out.jsonl"), "--concurrency", "3")
    assert res.returncode == 2 and "unsupported question file type" in res.stderr
    assert "ignored in extractive mode" in res.stderr and "Traceback" not in res.stderr
    res = cli("batch", str(tmp_path / "missing.txt"), "-o", str(tmp_path / "out.csv"))
    assert res.returncode == 2 and "no such file" in res.stderr and "Traceback" not in res.stderr


# -- in-process: a stub chain stands in for retrieval + LLM ----------------------------------------------


class StubChain:
    """The chain's three phases: the question goes through them, the LLM's failure comes in `generate`."""

    mode = "llm"

    def __init__(self, fail: set[str] | None = None) -> None:
        self.generator = SimpleNamespace(model="stub-model")
        self.fail = fail or set()
        self.asked: list[str] = []

    def prepare(self, question: str, k: int | None = None) -> str:
        self.asked.append(question)
        return question

    def generate(self, question: str) -> None:
        if question in self.fail:
            raise LLMError("the LLM server failed (HTTP 500)")

    def finish(self, question: str, kind: str = "ask", session: str | None = None) -> Answer:
        ref = Reference("p:1", "papers.txt", 1, None, "A snippet.")
        off = "pizza" in question
        return Answer(
            question=question,
            answer="Out of scope." if off else f"An answer to {question} [p:1].",
            citations=[] if off else ["p:1"],
            references=[] if off else [ref],
            mode="llm",
            model="stub-model",
            abstained=off,
            warnings=[AnswerWarning(WarningKind.WEAK_SUPPORT, "weakly supported")] if "weak" in question else [],
            timings={"total": 0.01},
        )


def _run(src: Path, out: Path, chain: StubChain, **kw: Any) -> Any:
    return run_batch(src, out, Settings(), chain=chain, **kw)


def test_txt_ids_skip_comments_and_blank_lines(tmp_path: Path) -> None:
    src = tmp_path / "q.txt"
    src.write_text("# header\n\nfirst question\n  second question  \n#skip\nthird\n")
    rows = read_input(src)
    assert [(r.id, r.question) for r in rows] == [("3", "first question"), ("4", "second question"), ("6", "third")]


def test_jsonl_keeps_fields_and_records_malformed_rows(tmp_path: Path) -> None:
    src = tmp_path / "q.jsonl"
    src.write_text(
        '{"id": "a", "question": "alpha?", "topic": "x", "answer": "gold"}\n'
        "{broken\n"
        "\n"
        '{"question": "  "}\n'
        '{"topic": "no question here"}\n'
        '{"id": 7, "question": "beta about pizza?"}\n'
    )
    out = tmp_path / "out.jsonl"
    chain = StubChain()
    summary = _run(src, out, chain)
    assert summary.exit_code == 1 and summary.failed == 3 and summary.answered == 1 and summary.abstained == 1
    assert chain.asked == ["alpha?", "beta about pizza?"]  # malformed rows never reach the chain
    rows = {r["id"]: r for r in _lines(out)}
    assert list(rows) == ["a", "2", "4", "5", "7"]
    a = rows["a"]
    assert a["topic"] == "x" and a["input_answer"] == "gold" and a["answer"].startswith("An answer")
    assert a["status"] == "ok" and a["error"] is None and a["citations"] == ["p:1"] and "sentences" in a
    assert rows["2"]["status"] == "failed" and "q.jsonl:2: invalid JSON" in rows["2"]["error"]
    assert "empty question" in rows["4"]["error"] and "missing question" in rows["5"]["error"]
    assert rows["5"]["topic"] == "no question here"


def test_csv_in_csv_out_and_rerun_is_a_no_op(tmp_path: Path) -> None:
    src = tmp_path / "q.csv"
    src.write_text('id,question,topic\nq1,"a question, with a comma",x\n,"two\nlines about weak support",y\n')
    out = tmp_path / "out.csv"
    summary = _run(src, out, StubChain())
    assert summary.exit_code == 0 and summary.answered == 2
    with open(out, newline="") as f:
        reader = csv.DictReader(f)
        table = list(reader)
    assert reader.fieldnames is not None and reader.fieldnames[:3] == ["id", "question", "status"]
    assert reader.fieldnames[-1] == "topic"
    assert [r["id"] for r in table] == ["q1", "3"] and table[1]["question"] == "two\nlines about weak support"
    assert table[0]["citations"] == "p:1" and table[0]["n_warnings"] == "0" and table[1]["n_warnings"] == "1"
    assert table[0]["topic"] == "x" and table[0]["mode"] == "llm" and table[0]["total_seconds"] == "0.01"
    assert not journal_path(out).exists()  # removed after the final write, since nothing failed

    chain = StubChain()
    again = _run(src, out, chain)
    assert chain.asked == [] and again.skipped == 2 and again.exit_code == 0


def test_markdown_report_keeps_journal_while_rows_fail(tmp_path: Path) -> None:
    src = tmp_path / "q.txt"
    src.write_text("What is alpha?\nWhat about pizza?\nWhat is broken?\n")
    out = tmp_path / "report.md"
    summary = _run(src, out, StubChain(fail={"What is broken?"}))
    assert summary.exit_code == 1 and summary.journal == str(journal_path(out))
    text = out.read_text()
    assert "## 1. What is alpha?" in text and "[p:1] A snippet." in text and "**References**" in text
    assert "## 3. What is broken?" in text and "**Failed:** the LLM server failed (HTTP 500)" in text
    assert "## Summary" in text and "3 questions: 1 answered, 1 abstained, 1 failed" in text

    chain = StubChain()
    again = _run(src, out, chain)
    assert chain.asked == ["What is broken?"] and again.exit_code == 0 and again.skipped == 2
    assert "**Failed:**" not in out.read_text() and not journal_path(out).exists()


def test_resume_redoes_a_torn_last_line_and_failed_rows(tmp_path: Path) -> None:
    src = tmp_path / "q.txt"
    src.write_text("".join(f"question {n}?\n" for n in range(1, 11)))
    out = tmp_path / "out.jsonl"
    _run(src, out, StubChain(fail={"question 4?"}))
    data = out.read_bytes()
    out.write_bytes(data[: data.rfind(b"\n", 0, -1) + 1 + 25])  # the last line cut mid-write, as by kill -9
    chain = StubChain()
    summary = _run(src, out, chain)
    assert chain.asked == ["question 4?", "question 10?"] and summary.skipped == 8 and summary.exit_code == 0
    rows = _lines(out)
    assert [r["id"] for r in rows] == [str(n) for n in range(1, 11)] and all(r["status"] == "ok" for r in rows)


def test_concurrent_rows_land_once_each_in_input_order(tmp_path: Path) -> None:
    src = tmp_path / "q.jsonl"
    src.write_text("".join(json.dumps({"id": f"r{n}", "question": f"q{n}"}) + "\n" for n in range(50)))
    out = tmp_path / "out.jsonl"
    events: list[Any] = []
    summary = _run(src, out, StubChain(fail={"q7"}), concurrency=4, progress=events.append)
    assert summary.failed == 1 and summary.failed_ids == ["r7"] and len(events) == 50 and events[-1].done == 50
    assert [r["id"] for r in _lines(out)] == [f"r{n}" for n in range(50)]


def test_fatal_error_stops_the_batch_and_keeps_finished_rows(tmp_path: Path) -> None:
    src = tmp_path / "q.txt"
    src.write_text("".join(f"q{n}\n" for n in range(20)))
    out = tmp_path / "out.csv"
    broken = StubChain()
    broken.prepare = lambda question, *a, **kw: (  # type: ignore[method-assign]
        _raise(IndexStoreError("the index is gone")) if question == "q10" else StubChain.prepare(broken, question)
    )
    with pytest.raises(IndexStoreError):
        _run(src, out, broken, concurrency=4)
    assert not out.exists()  # the final file is only written by a run that finishes
    kept = {r["question"] for r in _lines(journal_path(out))}
    assert kept and "q10" not in kept
    chain = StubChain()
    summary = _run(src, out, chain, concurrency=4)
    assert summary.exit_code == 0 and set(chain.asked) == {f"q{n}" for n in range(20)} - kept
    with open(out, newline="") as f:
        assert [r["id"] for r in csv.DictReader(f)] == [str(n) for n in range(1, 21)]


def _raise(exc: Exception) -> NoReturn:
    raise exc


def test_fresh_starts_over(tmp_path: Path) -> None:
    src = tmp_path / "q.txt"
    src.write_text("one?\ntwo?\n")
    out = tmp_path / "out.jsonl"
    _run(src, out, StubChain())
    chain = StubChain()
    _run(src, out, chain, fresh=True)
    assert chain.asked == ["one?", "two?"] and len(_lines(out)) == 2


@pytest.mark.parametrize(
    ("name", "content", "out_name", "expected"),
    [
        ("q.txt", "What?\n", "out.txt", "unsupported output file type"),
        ("q.csv", "prompt\nWhat?\n", "out.jsonl", "no `question` column"),
        ("q.txt", "# only a comment\n\n", "out.jsonl", "no questions"),
        ("q.jsonl", '{"id": "x", "question": "a?"}\n{"id": "x", "question": "b?"}\n', "out.jsonl", "duplicate"),
        ("q.jsonl", '{"question": "a?"}\n', "q.jsonl", "the output file is the question file"),
        ("q.txt", "What?\n", "notes.jsonl", "is not a batch output"),
        ("q.txt", "What?\n", "draft.jsonl", "is not a batch output"),  # no newline: must not be cut as torn
    ],
)
def test_bad_files_are_usage_errors(tmp_path: Path, name: str, content: str, out_name: str, expected: str) -> None:
    src = tmp_path / name
    src.write_text(content)
    (tmp_path / "notes.jsonl").write_text('{"note": "my own data"}\n')
    (tmp_path / "draft.jsonl").write_text("an unfinished thought")
    chain = StubChain()
    with pytest.raises(BatchInputError) as info:
        _run(src, tmp_path / out_name, chain)
    assert expected in str(info.value) and info.value.exit_code == 2 and chain.asked == []
    assert (tmp_path / "notes.jsonl").read_text() == '{"note": "my own data"}\n'
    assert (tmp_path / "draft.jsonl").read_text() == "an unfinished thought"
