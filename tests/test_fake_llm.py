"""Drive the real ``openai`` client against the scripted FakeLLMServer."""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_llm import (  # noqa: E402
    FakeLLMServer,
    delay,
    drop,
    empty,
    garbage,
    reply,
    reply_fn,
    status,
)

MSGS: list[Any] = [{"role": "user", "content": "What is RAG? [P1] [P7]"}]


@pytest.fixture
def srv() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


def client(srv: FakeLLMServer, **kw: Any) -> openai.OpenAI:
    kw.setdefault("max_retries", 0)
    return openai.OpenAI(base_url=srv.base_url, api_key="test", **kw)


def ask(c: openai.OpenAI, **kw: Any) -> str | None:
    return c.chat.completions.create(model="fake-model", messages=MSGS, **kw).choices[0].message.content


def test_plain_reply_and_wire_format(srv: FakeLLMServer) -> None:
    srv.script(reply("Hello there."))
    resp = client(srv).chat.completions.create(model="m1", messages=MSGS)
    assert resp.choices[0].message.content == "Hello there."
    assert resp.choices[0].message.role == "assistant"
    assert resp.choices[0].finish_reason == "stop"
    assert resp.object == "chat.completion" and resp.model == "m1" and resp.id.startswith("chatcmpl-")
    assert resp.usage is not None and resp.usage.total_tokens == resp.usage.prompt_tokens + 2
    assert srv.request_count == 1 and srv.requests[0]["messages"] == MSGS


def test_default_responder_and_keepalive(srv: FakeLLMServer) -> None:
    c = client(srv)
    assert [ask(c) for _ in range(3)] == ["I don't know."] * 3  # same pooled connection
    with FakeLLMServer(default=lambda req: f"model={req['model']}") as other:
        assert ask(client(other)) == "model=fake-model"


def test_reply_fn_reads_request(srv: FakeLLMServer) -> None:
    srv.script(reply_fn(lambda req: " ".join(re.findall(r"\[P\d+\]", req["messages"][-1]["content"]))))
    assert ask(client(srv)) == "[P1] [P7]"


def test_streaming_reply_assembles(srv: FakeLLMServer) -> None:
    text = "Retrieval-augmented generation combines search with an LLM [P1]."
    srv.script(reply(text), reply("second"))
    c = client(srv)
    chunks = list(c.chat.completions.create(model="m", messages=MSGS, stream=True))
    deltas = [ch.choices[0].delta.content for ch in chunks]
    assert len([d for d in deltas if d]) >= 3
    assert "".join(d or "" for d in deltas) == text
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(ch.object == "chat.completion.chunk" for ch in chunks)
    # the connection was closed after the stream; the next request still works
    assert ask(c) == "second"


def test_streaming_include_usage(srv: FakeLLMServer) -> None:
    srv.script(reply("a b c"))
    chunks = list(
        client(srv).chat.completions.create(
            model="m", messages=MSGS, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 3
    assert all(ch.usage is None for ch in chunks[:-1])


def test_completions_and_models(srv: FakeLLMServer) -> None:
    c = client(srv)
    srv.script(reply("done"), reply("streamed text"))
    assert c.completions.create(model="m", prompt="hi").choices[0].text == "done"
    stream = c.completions.create(model="m", prompt="hi", stream=True)
    assert "".join(ch.choices[0].text for ch in stream) == "streamed text"
    with FakeLLMServer(models=["a", "b"]) as other:
        assert [m.id for m in client(other).models.list()] == ["a", "b"]


def test_429_then_success_with_retries(srv: FakeLLMServer, caplog: pytest.LogCaptureFixture) -> None:
    srv.script(status(429), status(429), reply("ok"))
    with caplog.at_level(logging.INFO, logger="openai._base_client"):
        assert ask(client(srv, max_retries=2)) == "ok"
    assert srv.request_count == 3
    # The SDK logs each wait it takes: retry-after-ms: 1 must replace its default ~0.5 s backoff.
    waits = [float(m) for m in re.findall(r"Retrying request to \S+ in ([0-9.]+) seconds", caplog.text)]
    assert waits == [0.001, 0.001]


def test_429_without_retries_raises_rate_limit(srv: FakeLLMServer) -> None:
    srv.script(status(429))
    with pytest.raises(openai.RateLimitError) as exc:
        ask(client(srv))
    assert exc.value.status_code == 429
    assert isinstance(exc.value.body, dict) and exc.value.body["type"] == "rate_limit_exceeded"


def test_500_and_503_raise_internal_server_error(srv: FakeLLMServer) -> None:
    srv.script(status(500), status(503, body={"error": {"message": "overloaded", "type": "x", "code": None}}))
    c = client(srv)
    with pytest.raises(openai.InternalServerError) as exc:
        ask(c)
    assert exc.value.status_code == 500
    with pytest.raises(openai.InternalServerError, match="overloaded"):
        ask(c)


def test_400_raises_bad_request(srv: FakeLLMServer) -> None:
    srv.script(status(400))
    with pytest.raises(openai.BadRequestError):
        ask(client(srv))


def test_timeout_raises_api_timeout_error(srv: FakeLLMServer) -> None:
    srv.script(delay(30.0, then=reply("too late")))
    with pytest.raises(openai.APITimeoutError):  # the reply would come only after 30 s
        ask(client(srv, timeout=0.5))


def test_delay_then_answers(srv: FakeLLMServer) -> None:
    srv.script(delay(0.2, then=reply("late but fine")))
    assert ask(client(srv, timeout=5)) == "late but fine"


def test_slow_request_does_not_block_others(srv: FakeLLMServer) -> None:
    srv.script(delay(30.0))
    slow_client = client(srv, timeout=60)

    def slow() -> None:
        with contextlib.suppress(openai.APIConnectionError):  # server is stopped mid-delay at teardown
            ask(slow_client)

    slow_thread = threading.Thread(target=slow, daemon=True)
    slow_thread.start()
    deadline = time.monotonic() + 30  # generous: only a request that never arrives ends here
    while srv.request_count < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert srv.request_count == 1, "the slow request never reached the server"
    assert ask(client(srv)) == "I don't know."
    # Answered while the slow request still sleeps: a server that handled one request at a time would only
    # have answered after the slow one's 30 s, and the slow thread would have finished by then.
    assert slow_thread.is_alive()


def test_stop_is_prompt_while_delay_sleeping() -> None:
    srv = FakeLLMServer().start()
    srv.script(delay(30.0))
    errors: list[BaseException] = []

    def call() -> None:
        try:
            ask(client(srv, timeout=10))
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=call, daemon=True)
    t.start()
    deadline = time.monotonic() + 30  # generous: only a request that never arrives ends here
    while srv.request_count < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert srv.request_count == 1, "the request never reached the server"
    srv.stop()
    t.join(timeout=30)
    # A stop that waited for the 30 s delay would let the client's own 10 s timeout fire first
    # (APITimeoutError); a prompt stop closes the connection under it (a plain connection error).
    assert len(errors) == 1 and isinstance(errors[0], openai.APIConnectionError)
    assert not isinstance(errors[0], openai.APITimeoutError)


def test_garbage_json_raises_json_decode_error(srv: FakeLLMServer) -> None:
    # The SDK does not wrap this: a 200 with an unparsable JSON body surfaces as a raw
    # json.JSONDecodeError (a ValueError), not as an openai.OpenAIError subclass.
    srv.script(garbage())
    with pytest.raises(json.JSONDecodeError):
        ask(client(srv))


def test_garbage_stream_yields_nothing(srv: FakeLLMServer) -> None:
    # Non-SSE lines are ignored by the SDK's SSE decoder, so the stream is simply empty.
    srv.script(garbage())
    assert list(client(srv).chat.completions.create(model="m", messages=MSGS, stream=True)) == []


def test_empty_completion(srv: FakeLLMServer) -> None:
    srv.script(empty(), empty(no_choices=True))
    c = client(srv)
    assert ask(c) == ""
    assert c.chat.completions.create(model="m", messages=MSGS).choices == []


def test_drop_raises_connection_error(srv: FakeLLMServer) -> None:
    srv.script(drop())
    with pytest.raises(openai.APIConnectionError) as exc:
        ask(client(srv))
    assert not isinstance(exc.value, openai.APITimeoutError)
    assert ask(client(srv)) == "I don't know."  # server still healthy afterwards
