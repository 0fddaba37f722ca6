"""LLM mode through the real openai client against a scripted server on 127.0.0.1."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from fake_llm import FakeLLMServer, delay, empty, garbage, reply, reply_fn, status
from llm_helpers import cited_answer, source_ids, source_sentence, use_llm_server

from rag_assistant.answer.chain import AnswerChain
from rag_assistant.answer.models import WarningKind
from rag_assistant.config import load_settings
from rag_assistant.errors import LLMError

QUESTION = "How does ShadowKV reduce KV cache memory?"
SECRET = "sk-test-SECRET-do-not-print-123"


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch, ready: Path):
    with FakeLLMServer(default=cited_answer) as server:
        use_llm_server(monkeypatch, server.base_url, SECRET, retries=2, timeout=1.5)
        yield server


def _chain(**overrides: object) -> AnswerChain:
    return AnswerChain(load_settings(**overrides), log=False)


def test_correct_cited_answer(srv: FakeLLMServer) -> None:
    answer = _chain().ask(QUESTION)
    assert answer.mode == "llm" and answer.model == "fake-model"
    assert answer.citations == ["004:17"] and not answer.warnings
    assert answer.sentences[0].support["004:17"] > 0.9
    assert answer.prompt_version and answer.prompt_version.startswith("answer_system@")
    assert answer.usage.get("total_tokens", 0) > 0
    req = srv.requests[0]
    assert req["model"] == "fake-model" and req["messages"][0]["role"] == "system"
    sources = req["messages"][1]["content"].split("\n\n")
    assert source_ids(req)[0] == "1" and "ShadowKV" in sources[1] and QUESTION in sources[-2]


def test_citation_to_unretrieved_paper_is_removed_and_warned(srv: FakeLLMServer) -> None:
    srv.script(reply_fn(lambda req: f"{source_sentence(req, '1')} [1][zz:99]. It is fast [123:456]."))
    answer = _chain().ask(QUESTION)
    assert "zz:99" not in answer.answer and "123:456" not in answer.answer
    assert answer.citations == ["004:17"]
    assert any("[zz:99]" in w.detail for w in answer.warnings) and any("[123:456]" in w.detail for w in answer.warnings)
    assert all("zz:99" not in c for s in answer.sentences for c in s.citations)


def test_uncited_sentence_is_flagged(srv: FakeLLMServer) -> None:
    srv.script(reply_fn(lambda req: cited_answer(req) + " This makes it the best system ever built."))
    answer = _chain().ask(QUESTION)
    assert answer.sentences[-1].flags == ["uncited"]
    assert any(w.kind is WarningKind.UNCITED for w in answer.warnings)


def test_model_saying_not_in_corpus_abstains(srv: FakeLLMServer) -> None:
    srv.script(reply("The corpus does not cover this question."))
    answer = _chain().ask(QUESTION)
    assert answer.abstained and answer.citations == []


def test_streaming_tokens_arrive_and_match_answer(srv: FakeLLMServer) -> None:
    tokens: list[str] = []
    answer = _chain().ask(QUESTION, on_token=tokens.append)
    assert len(tokens) >= 2
    assert srv.requests[0].get("stream") is True
    assert "".join(tokens).strip() == answer.answer  # the stream already shows [1] as the paper id it names


def test_429_then_success(srv: FakeLLMServer) -> None:
    srv.script(status(429), reply_fn(cited_answer))
    answer = _chain().ask(QUESTION)
    assert answer.citations == ["004:17"] and srv.request_count == 2


def test_500_every_time_fails_after_bounded_retries(srv: FakeLLMServer) -> None:
    srv.script(*[status(500)] * 10)
    with pytest.raises(LLMError, match="HTTP 500"):
        _chain().ask(QUESTION)
    assert srv.request_count == 3  # 1 + llm_max_retries


def test_timeout(srv: FakeLLMServer) -> None:
    srv.script(delay(5), delay(5))
    with pytest.raises(LLMError, match="did not answer within 1.5s"):
        _chain(llm_max_retries=1).ask(QUESTION)


def test_garbage_json(srv: FakeLLMServer) -> None:
    srv.script(garbage())
    with pytest.raises(LLMError, match="malformed"):
        _chain().ask(QUESTION)


def test_empty_completion(srv: FakeLLMServer) -> None:
    srv.script(empty())
    with pytest.raises(LLMError, match="empty completion"):
        _chain().ask(QUESTION)


def test_connection_refused(monkeypatch: pytest.MonkeyPatch, ready: Path) -> None:
    from chroma_server import free_port

    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(LLMError, match="cannot connect"):
        _chain(llm_max_retries=0).ask(QUESTION)


def test_mode_llm_without_configuration_is_a_config_error(ready: Path) -> None:
    from rag_assistant.errors import ConfigError

    with pytest.raises(ConfigError, match="no API key or base URL"):
        _chain(mode="llm")


@pytest.mark.slow
def test_cli_ask_llm_json_logs_and_hides_key(srv: FakeLLMServer, cli, own_ready: Path) -> None:
    data = own_ready
    env = {"RAG_ASSISTANT_DATA_DIR": str(data)}
    res = cli("ask", QUESTION, "--json", env=env)
    assert res.returncode == 0, res.stderr
    answer = json.loads(res.stdout)
    assert answer["mode"] == "llm" and "004:17" in answer["citations"]
    srv.script(*[status(503)] * 5)
    failed = cli("ask", QUESTION, "--json", env=env)
    assert failed.returncode == 3 and failed.stdout == ""
    assert "HTTP 503" in failed.stderr and "Traceback" not in failed.stderr
    rows = sqlite3.connect(data / "provenance.sqlite").execute("SELECT mode, answer FROM answers").fetchall()
    assert len(rows) == 1 and rows[0][0] == "llm"  # the failed answer was not logged
    logged = cli("log", "--json", env=env)
    assert json.loads(logged.stdout)[0]["citations"] == ["004:17"]
    for text in (
        res.stdout,
        res.stderr,
        failed.stderr,
        logged.stdout,
        (data / "provenance.sqlite").read_bytes().decode("latin-1"),
    ):
        assert SECRET not in text
    assert "ShadowKV" in srv.requests[0]["messages"][1]["content"].split("\n\n")[1]
