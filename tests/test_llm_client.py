"""The one LLM client (rag_assistant/answer/llm_client.py) on its own, against the scripted server: whole and
streamed completions, the judge's overrides, the truncation check, an error without the key, and what a failure
after the client's retries says."""

from __future__ import annotations

import pytest
from fake_llm import FakeLLMServer, garbage, reply, status

from rag_assistant.answer.llm_client import CHARS_PER_TOKEN_MAX, LLMClient
from rag_assistant.config import Settings
from rag_assistant.errors import LLMError

SECRET = "sk-test-SECRET-do-not-print-123"


@pytest.fixture
def srv():
    with FakeLLMServer(models=["fake-model", "judge-model"]) as server:
        yield server


def _settings(srv: FakeLLMServer, **extra: object) -> Settings:
    extra.setdefault("llm_max_retries", 0)
    return Settings(llm_model="fake-model", llm_base_url=srv.base_url, llm_api_key=SECRET, **extra)


def test_complete_returns_text_usage_and_finish_reason(srv: FakeLLMServer) -> None:
    srv.script(reply("Short answer.", finish="length"))
    done = LLMClient(_settings(srv)).complete("system", "user")
    assert done.text == "Short answer." and done.finish == "length" and done.usage["total_tokens"] > 0
    req = srv.requests[0]
    assert req["model"] == "fake-model" and not req.get("stream")
    assert [m["role"] for m in req["messages"]] == ["system", "user"]


def test_stream_passes_every_piece_on(srv: FakeLLMServer) -> None:
    srv.script(reply("One two three four five.", chunks=3))
    pieces: list[str] = []
    done = LLMClient(_settings(srv)).stream("system", "user", pieces.append)
    assert len(pieces) > 1 and "".join(pieces) == done.text == "One two three four five."
    assert done.finish == "stop" and srv.requests[0]["stream"] is True


def test_overrides_leave_the_settings_alone(srv: FakeLLMServer) -> None:
    settings = Settings(llm_model="answer-model", llm_base_url="http://user:pw-123@elsewhere:1/v1?key=abc")
    client = LLMClient(settings, model="judge-model", base_url=srv.base_url, temperature=0.0, max_tokens=16)
    srv.script(reply("SUPPORTED"))
    assert client.complete("s", "u").text == "SUPPORTED"
    req = srv.requests[0]
    assert req["model"] == "judge-model" and req["max_tokens"] == 16 and req["temperature"] == 0.0
    assert settings.llm_model == "answer-model" and client.settings.llm_max_tokens == 16
    assert LLMClient(settings).where() == "http://***@elsewhere:1/v1?key=***"


def test_bounded_cuts_a_runaway_completion_and_a_half_citation(srv: FakeLLMServer) -> None:
    client = LLMClient(_settings(srv, llm_max_tokens=16))
    limit = 16 * CHARS_PER_TOKEN_MAX
    text, warnings = client.bounded("x" * (limit + 10), "stop")
    assert len(text) == limit and len(warnings) == 2 and "only the first" in warnings[0]
    assert client.bounded("It works [1]. Then [00", "length")[0] == "It works [1]. Then"
    assert client.bounded("Done.", "stop") == ("Done.", [])


def test_errors_are_classified_without_the_key(srv: FakeLLMServer) -> None:
    srv.script(status(401))
    with pytest.raises(LLMError) as info:
        LLMClient(_settings(srv)).complete("s", "u")
    assert info.value.reason == "auth" and "rejected the API key" in info.value.message
    assert SECRET not in info.value.message and SECRET not in (info.value.hint or "")


@pytest.mark.parametrize(
    ("steps", "reason", "said"),
    [
        ([status(503), status(401)], "auth", "rejected the API key (HTTP 401) (2 attempts, "),
        ([status(500), garbage()], "malformed", "sent a malformed response (2 attempts, "),
        ([status(502)] * 3, "server", "failed (HTTP 502) for fake-model at "),
    ],
)
def test_a_failure_counts_every_attempt(srv: FakeLLMServer, steps: list, reason: str, said: str) -> None:
    """Retried failures (here 5xx) and the one that ends the call are counted alike, whatever its kind."""
    srv.script(*steps)
    with pytest.raises(LLMError) as info:
        LLMClient(_settings(srv, llm_max_retries=2)).complete("s", "u")
    assert info.value.reason == reason and said in info.value.message and "s in all)" in info.value.message
    assert srv.request_count == len(steps) and f"({len(steps)} attempts, " in info.value.message


def test_a_retry_after_over_a_minute_is_reported_not_waited_for(srv: FakeLLMServer) -> None:
    """README: Retry-After is honoured up to 60 s; the openai client alone would wait up to 2 minutes."""
    srv.script(status(429, headers={"retry-after": "90"}), reply("never asked for"))
    with pytest.raises(LLMError) as info:
        LLMClient(_settings(srv, llm_max_retries=3)).complete("s", "u")
    assert info.value.reason == "rate_limit" and "it asks to retry after 90s (1 attempt, " in info.value.message
    assert srv.request_count == 1


def test_the_retries_are_the_openai_clients_own(srv: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 25 item 5: the client retries (max_retries = llm_max_retries); no loop of ours around a client
    whose retries are off."""
    import openai

    built: list[int] = []
    init = openai.OpenAI.__init__

    def spy(self: openai.OpenAI, *args: object, **kwargs: object) -> None:
        init(self, *args, **kwargs)  # type: ignore[arg-type]
        built.append(self.max_retries)

    monkeypatch.setattr(openai.OpenAI, "__init__", spy)
    srv.script(status(503), status(502), reply("Third time lucky."))
    assert LLMClient(_settings(srv, llm_max_retries=2)).complete("s", "u").text == "Third time lucky."
    assert built == [2] and srv.request_count == 3
