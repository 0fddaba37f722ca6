"""Issue 12: every named scenario of tests/fake_llm.py through the real openai client. Whatever the model
writes, the answer shown, logged or written cites only retrieved papers, and every removal is a warning."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
from fake_llm import FakeLLMServer
from llm_helpers import use_llm_server
from llm_scenarios import FABRICATED, SCENARIOS

from rag_assistant.answer.chain import MODEL_ABSTAIN_TEXT, AnswerChain
from rag_assistant.answer.models import Answer
from rag_assistant.answer.refs import Resolver
from rag_assistant.config import load_settings
from rag_assistant.errors import LLMError

QUESTION = "How does ShadowKV reduce KV cache memory?"
SECRET = "sk-planted-SECRET-4f1d9c"
CONTENT = [
    "not_found_then_fabricated",
    "echoes_prompt",
    "not_found_only",
    "not_found_twice_with_fake_id",
    "fabricated_shapes",
    "valid_and_fabricated_together",
    "footnotes_and_reference_list",
    "citation_after_blank_line",
    "truncated_at_max_tokens",
    "huge_completion",
]


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch, ready: Path):
    with FakeLLMServer(default="The corpus does not cover this question.") as server:
        use_llm_server(monkeypatch, server.base_url, SECRET, retries=1, timeout=1)
        yield server


def shown_references(text: str, retrieved: set[str]) -> list[str]:
    """Every piece of anything reference-like in `text` that is not a retrieved id."""
    return [p for span in Resolver(()).find(text) for p in span.pieces if p not in retrieved]


def assert_trustworthy(answer: Answer) -> None:
    retrieved = {s["paper_id"] for s in answer.sources}
    assert shown_references(answer.answer, retrieved) == [], answer.answer
    assert set(answer.citations) <= retrieved
    for s in answer.sentences:
        assert set(s.citations) <= retrieved and shown_references(s.text, retrieved) == []
        assert s.citations or "uncited" in s.flags  # no uncited sentence hidden
    for fake in ("777:1", "004:99", "FAKE", "arXiv", "Smith", "doc-7", "[9]"):
        assert fake not in answer.answer
    assert not answer.answer.endswith("[00")  # a citation half-written when max_tokens cut the answer


@pytest.mark.parametrize("name", CONTENT)
def test_content_scenario(srv: FakeLLMServer, name: str) -> None:
    srv.script(*SCENARIOS[name])
    answer = AnswerChain(load_settings()).ask(QUESTION)
    assert_trustworthy(answer)
    logged = sqlite3.connect(load_settings().data_dir / "provenance.sqlite").execute("SELECT record FROM answers")
    assert json.loads(logged.fetchall()[-1][0])["answer"] == answer.answer
    if name in ("not_found_only", "not_found_twice_with_fake_id"):
        assert answer.abstained and answer.answer == MODEL_ABSTAIN_TEXT and answer.citations == []
    else:
        assert not answer.abstained, answer.answer
    if name == "not_found_twice_with_fake_id":
        assert "removed citation [FAKE-1]: not among the retrieved papers" in answer.warnings


def test_not_found_phrase_does_not_switch_verification_off(srv: FakeLLMServer) -> None:
    srv.script(*SCENARIOS["not_found_then_fabricated"])
    answer = AnswerChain(load_settings(), log=False).ask(QUESTION)
    assert not answer.abstained and answer.citations == []
    assert {"removed citation [777:1]: not among the retrieved papers", "the answer cites no retrieved paper"} <= set(
        answer.warnings
    )
    assert all("uncited" in s.flags for s in answer.sentences)


def test_every_fabricated_shape_is_removed_and_warned(srv: FakeLLMServer) -> None:
    srv.script(*SCENARIOS["fabricated_shapes"])
    answer = AnswerChain(load_settings(), log=False).ask(QUESTION)
    for ref in FABRICATED:
        assert f"removed citation {ref}: not among the retrieved papers" in answer.warnings
    assert "removed citation (Smith et al., 2023): not among the retrieved papers" in answer.warnings


def test_valid_label_kept_fabricated_neighbour_removed(srv: FakeLLMServer) -> None:
    srv.script(*SCENARIOS["valid_and_fabricated_together"])
    answer = AnswerChain(load_settings(), log=False).ask(QUESTION)
    assert answer.citations == ["004:17"] and answer.answer.endswith("[004:17].")
    assert answer.warnings == ["removed citation [FAKE_2]: not among the retrieved papers"]


def test_citation_is_not_moved_across_a_blank_line(srv: FakeLLMServer) -> None:
    srv.script(*SCENARIOS["citation_after_blank_line"])
    answer = AnswerChain(load_settings(), log=False).ask(QUESTION)
    first, second = answer.sentences
    assert first.text == "It has many applications." and first.flags == ["uncited"]
    assert second.citations == ["004:17"] and second.support["004:17"] > 0.9
    assert answer.answer.startswith("It has many applications.\n\n")
    assert any("standing alone" in w for w in answer.warnings)


def test_truncated_and_huge_completions_are_reported(srv: FakeLLMServer) -> None:
    srv.script(*SCENARIOS["truncated_at_max_tokens"], *SCENARIOS["huge_completion"])
    chain = AnswerChain(load_settings(), log=False)
    cut = chain.ask(QUESTION)
    assert any("cut at llm_max_tokens" in w for w in cut.warnings) and cut.citations == ["004:17"]
    huge = chain.ask(QUESTION)
    assert any("100,000 characters" in w or "characters, far more" in w for w in huge.warnings)
    assert len(huge.answer) < 12_000  # 130,000 characters were sent; 8,192 kept (ids are longer than labels)


@pytest.mark.parametrize(
    ("name", "reason", "text"),
    [
        ("auth_rejected", "auth", "rejected the API key (HTTP 401)"),
        ("hanging", "timeout", "did not answer within 1s per attempt (2 attempts"),
        ("dropped_mid_stream", "dropped", "closed the connection"),
        ("retry_after_too_long", "rate_limit", "asks to retry after 120s (1 attempt"),
    ],
)
def test_failure_scenarios_say_what_happened(srv: FakeLLMServer, name: str, reason: str, text: str) -> None:
    srv.script(*SCENARIOS[name])
    with pytest.raises(LLMError) as info:
        AnswerChain(load_settings(), log=False).ask(QUESTION)
    assert info.value.reason == reason and text in info.value.message and "s in all)" in info.value.message
    assert SECRET not in str(info.value)


def test_stream_dropped_after_some_text(srv: FakeLLMServer) -> None:
    srv.script(*SCENARIOS["dropped_mid_stream"])
    with pytest.raises(LLMError, match="closed the connection after 15 characters of the answer") as info:
        AnswerChain(load_settings(), log=False).ask(QUESTION, on_token=lambda t: None)
    assert srv.request_count == 1 and "RemoteProtocolError" not in str(info.value)


def test_credentials_in_the_base_url_are_never_shown(srv: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://user:{SECRET}@127.0.0.1:{srv.port}/v1?api-key={SECRET}x")
    srv.script(*SCENARIOS["auth_rejected"])
    with pytest.raises(LLMError) as info:
        AnswerChain(load_settings(), log=False).ask(QUESTION)
    assert SECRET not in str(info.value) and "***@127.0.0.1" in str(info.value)


@pytest.mark.parametrize("name", ["fabricated_shapes", "not_found_then_fabricated", "valid_and_fabricated_together"])
def test_streamed_tokens_never_show_a_fabricated_id(srv: FakeLLMServer, name: str) -> None:
    srv.script(*SCENARIOS[name])
    tokens: list[str] = []
    answer = AnswerChain(load_settings(), log=False).ask(QUESTION, on_token=tokens.append)
    streamed = "".join(tokens)
    for fake in ("777:1", "004:99", "FAKE", "arXiv", "doc-7", "[9]", "[1]"):
        assert fake not in streamed, streamed
    assert set(answer.citations) <= {s["paper_id"] for s in answer.sources}


def test_retry_after_is_waited_for(srv: FakeLLMServer) -> None:
    from fake_llm import reply_fn, status
    from llm_helpers import cited_answer

    srv.script(status(429, headers={"retry-after": "2"}), reply_fn(cited_answer))
    started = time.perf_counter()
    answer = AnswerChain(load_settings(), log=False).ask(QUESTION)
    assert time.perf_counter() - started >= 2.0 and answer.citations == ["004:17"] and srv.request_count == 2
