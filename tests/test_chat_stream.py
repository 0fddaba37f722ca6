"""Issue 22, item 4: a streamed LLM answer in a terminal is bounded like a whole one (llm_max_tokens x
CHARS_PER_TOKEN_MAX characters) and shown in output linear in its length. A model that ignores max_tokens and
streams 168 KB made `ask` re-render the whole text at every token: 18 MB of terminal output in 4 minutes,
without ending. Driven through a real pseudo-terminal against the scripted server; nothing here is timed."""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

import pexpect
import pytest
from fake_llm import FakeLLMServer, reply
from test_chat import _spawn

from rag_assistant.answer.llm_client import CHARS_PER_TOKEN_MAX

pytestmark = pytest.mark.slow

MAX_TOKENS = 512  # the default llm_max_tokens
LIMIT = MAX_TOKENS * CHARS_PER_TOKEN_MAX  # 8,192 characters: where a whole completion is cut
SENTENCE = "ShadowKV keeps the low-rank key cache on the GPU and offloads the value cache [1]. "
HUGE = SENTENCE * (168_000 // len(SENTENCE))  # 168 KB, in deltas of about four characters like real tokens
DELTAS = len(HUGE) // 4
# What the terminal may receive: the draft shown while streaming, its status line, the verified answer with
# its references and warnings: each at most about the limit. The old display wrote ~100x the text.
BOUND = 4 * LIMIT
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _env(srv: FakeLLMServer, data: Path) -> dict[str, str]:
    return {
        **os.environ,
        "RAG_ASSISTANT_DATA_DIR": str(data),
        "OPENAI_BASE_URL": srv.base_url,
        "OPENAI_API_KEY": "test",
        "RAG_ASSISTANT_LLM_MODEL": "fake-model",
        "RAG_ASSISTANT_LLM_MAX_TOKENS": str(MAX_TOKENS),
        "NO_COLOR": "1",
        "TERM": "xterm",
        "PROMPT_TOOLKIT_NO_CPR": "1",
    }


def _read_until(child: pexpect.spawn, pattern: str, seen: list[str]) -> str:
    """Everything the terminal receives until `pattern`, failing as soon as it passes the bound (the old
    display would have run for minutes)."""
    got = ""
    while not re.search(pattern, ANSI.sub("", got)):
        try:
            got += child.read_nonblocking(65536, timeout=120)
        except pexpect.EOF:
            break
        assert len(got) + sum(map(len, seen)) <= BOUND, (
            f"{len(got):,} characters of terminal output and still streaming (bound {BOUND:,})"
        )
    seen.append(got)
    return ANSI.sub("", got)


def _check_answer(screen: str) -> None:
    assert "ShadowKV keeps the low-rank key cache" in screen
    assert "References" in screen and "[004:17]" in screen
    assert "far more than llm_max_tokens" in re.sub(r"\s+", " ", screen), screen[-2000:]


def _check_logged(data: Path) -> None:
    """The answer kept is the bounded one, as without a terminal."""
    from rag_assistant.answer.provenance import recent

    (row,) = recent(data, 5)
    kept = row["answer"].count("offloads the value cache")  # its citations now read [004:17], not [1]
    assert 0 < kept <= LIMIT // len(SENTENCE) + 1, len(row["answer"])


def test_ask_streams_a_huge_completion_within_the_limit(own_ready: Path) -> None:
    with FakeLLMServer() as srv:
        srv.script(reply(HUGE, chunks=DELTAS))
        exe = str(Path(sys.executable).with_name("rag-assistant"))
        child = pexpect.spawn(
            exe,
            ["ask", "How does ShadowKV reduce KV cache memory?", "--mode", "llm"],
            env=_env(srv, own_ready),
            encoding="utf-8",
            dimensions=(40, 120),
            use_poll=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        try:
            screen = _read_until(child, r"mode: llm[^\n]*\d+\.\ds", [])
            child.expect(pexpect.EOF, timeout=60)
        finally:
            child.close(force=True)
    assert child.exitstatus == 0
    _check_answer(screen)
    _check_logged(own_ready)


def test_chat_streams_a_huge_completion_within_the_limit(own_ready: Path) -> None:
    with FakeLLMServer() as srv:
        child = _spawn(own_ready, _env(srv, own_ready))
        try:
            srv.script(reply(HUGE, chunks=DELTAS))
            seen: list[str] = []
            child.sendline("How does ShadowKV reduce KV cache memory?")
            screen = _read_until(child, r"mode: llm[^\n]*\d+\.\ds[\s\S]*you>", seen)  # answered, prompt back
            _check_answer(screen)
            child.sendline("/quit")
            child.expect("bye")
        finally:
            child.close(force=True)
    _check_logged(own_ready)


def test_a_streamed_completion_is_read_no_further_than_the_limit() -> None:
    from rag_assistant.answer.llm_client import LLMClient
    from rag_assistant.config import Settings

    with FakeLLMServer() as srv:
        srv.script(reply(HUGE, chunks=DELTAS))
        client = LLMClient(Settings(llm_base_url=srv.base_url, llm_model="fake-model", llm_max_tokens=MAX_TOKENS))
        shown: list[str] = []
        completion = client.stream("system", "user", shown.append)
    assert LIMIT < len(completion.text) <= LIMIT + 8 and "".join(shown) == completion.text
    text, warnings = client.bounded(completion.text, completion.finish)
    assert len(text) <= LIMIT and "only the first 8,192 were kept" in warnings[0]
