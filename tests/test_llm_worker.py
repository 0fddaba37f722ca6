"""The worker process of a one-off LLM answer (answer/llm_worker.py), against the scripted server through the
real `openai` client: the same completion, stream and errors as in process, and no lost answer when the
worker is gone."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from subprocess import PIPE

import pytest
from fake_llm import FakeLLMServer, reply, status

from rag_assistant.answer.llm_worker import LLMWorker, WorkerClient
from rag_assistant.config import Settings
from rag_assistant.errors import LLMError

SECRET = "sk-worker-SECRET-never-shown"


@pytest.fixture
def srv() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(default="A default answer [1].") as server:
        yield server


def _client(srv: FakeLLMServer) -> WorkerClient:
    settings = Settings(llm_base_url=srv.base_url, llm_model="fake-model", llm_api_key=SECRET, llm_max_retries=0)
    worker = LLMWorker.start()
    if worker is None:
        pytest.skip("one core: the worker is not started")
    return WorkerClient(settings, worker)


def test_completion_and_usage_come_back_from_the_worker(srv: FakeLLMServer) -> None:
    client = _client(srv)
    worker = client._worker
    done = client.complete("system prompt", "user prompt")
    assert done.text == "A default answer [1]." and done.usage.get("total_tokens", 0) > 0
    assert worker is not None and worker.proc.returncode is not None  # it served its one request and ended
    assert srv.requests[0]["messages"][1]["content"] == "user prompt"
    assert srv.requests[0]["model"] == "fake-model"


def test_stream_pieces_arrive_in_order(srv: FakeLLMServer) -> None:
    srv.script(reply("Streamed in several pieces, cited [1].", chunks=4))
    pieces: list[str] = []
    done = _client(srv).stream("s", "u", pieces.append)
    assert len(pieces) > 1 and "".join(pieces) == done.text == "Streamed in several pieces, cited [1]."


def test_errors_are_the_clients_own_without_the_key(srv: FakeLLMServer) -> None:
    srv.script(status(401))
    with pytest.raises(LLMError) as caught:
        _client(srv).complete("s", "u")
    assert caught.value.reason == "auth" and "HTTP 401" in caught.value.message
    assert SECRET not in str(caught.value)


def test_a_worker_gone_before_answering_leaves_the_request_to_the_client(srv: FakeLLMServer) -> None:
    client = _client(srv)
    assert client._worker is not None
    client._worker.proc.kill()  # e.g. by the OS, before the request
    client._worker.proc.wait()
    assert client.complete("s", "u").text == "A default answer [1]."
    assert len(srv.requests) == 1  # made once, in process


def test_a_worker_that_dies_mid_answer_is_a_dropped_answer(srv: FakeLLMServer) -> None:
    # a stand-in worker: reads the request, sends one piece of the answer, and ends
    code = "import sys, json; sys.stdin.readline(); print(json.dumps({'token': 'Part of an'}), flush=True)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=PIPE, stdout=PIPE, encoding="utf-8")
    settings = Settings(llm_base_url=srv.base_url, llm_model="fake-model", llm_max_retries=0)
    pieces: list[str] = []
    with pytest.raises(LLMError) as caught:
        WorkerClient(settings, LLMWorker(proc)).stream("s", "u", pieces.append)
    assert pieces == ["Part of an"]
    assert caught.value.reason == "dropped" and "10 characters of the answer" in caught.value.message
    assert not srv.requests  # not asked again: the reader has seen part of an answer
