"""chat in a real pseudo-terminal (pexpect): ask, follow up, every slash command, quit; both modes."""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from pathlib import Path

import pexpect
import pytest
from fake_llm import FakeLLMServer, delay, reply
from llm_helpers import cited_answer, user_text

# A fresh prompt starts a line; prompt-toolkit also redraws "you>" while echoing input, mid-line.
PROMPT = r"\r\n(?:\x1b\[[0-9;?]*[A-Za-z])*you>"
pytestmark = pytest.mark.slow


def _spawn(data: Path, extra_env: dict[str, str] | None = None) -> pexpect.spawn:
    exe = str(Path(sys.executable).with_name("rag-assistant"))
    env = {
        **os.environ,
        "RAG_ASSISTANT_DATA_DIR": str(data),
        "PROMPT_TOOLKIT_NO_CPR": "1",
        "NO_COLOR": "1",
        "COLUMNS": "250",
        "TERM": "xterm",
        **(extra_env or {}),
    }
    child = pexpect.spawn(
        exe,
        ["chat"],
        env=env,
        encoding="utf-8",
        timeout=90,
        dimensions=(60, 250),
        use_poll=True,  # select() fails on descriptors above 1024, which a long test worker can reach
        # a terminal delivers Ctrl-C; a runner that started the tests in the background may have set it ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    child.expect("session [0-9a-f]{8}")
    child.expect(PROMPT)
    return child


def _ask(child: pexpect.spawn, line: str) -> str:
    child.sendline(line)
    child.expect(r"mode: \w+[^\n]*\d+\.\ds")
    text = child.before + child.after
    child.expect(PROMPT)
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def _slash(child: pexpect.spawn, line: str) -> str:
    child.sendline(line)
    child.expect(PROMPT)
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", child.before)


@pytest.fixture
def data(own_ready: Path) -> Path:
    return own_ready


def _session_walkthrough(child: pexpect.spawn, tmp_path: Path) -> None:
    first = _ask(child, "Which papers study jailbreak attacks on language models?")
    cited = re.findall(r"\[(\d{3}:\d+)\]", first)
    assert len(set(cited)) >= 2, first
    sources = _slash(child, "/sources")
    assert "1. [" in sources and "score" in sources
    papers = _slash(child, "/papers")
    assert "cited" in papers
    show = _slash(child, "/show 004:17")
    assert "ShadowKV" in show and "004_f08e38e0363d2af7.txt #17" in show
    assert "No paper" in _slash(child, "/show 999:999")
    assert "/save FILE" in _slash(child, "/help")
    saved = tmp_path / "conversation.md"
    assert "Saved 1 turn(s)" in _slash(child, f"/save {saved}")
    text = saved.read_text()
    assert text.startswith("# rag-assistant conversation") and "**References**" in text
    assert "Conversation cleared" in _slash(child, "/reset")
    assert "No answer yet" in _slash(child, "/sources")
    assert "Unknown command" in _slash(child, "/frobnicate")


def test_chat_extractive(data: Path, tmp_path: Path) -> None:
    child = _spawn(data)
    _session_walkthrough(child, tmp_path)
    # A follow-up that only makes sense with the first answer: "the second one" is its second citation.
    first = _ask(child, "Which papers study jailbreak attacks on language models?")
    second_id = re.findall(r"\[(\d{3}:\d+)\]", first.split("References")[1])[1]
    follow = _ask(child, "What does the second one propose?")
    assert f"searched for: What does the second one propose? [{second_id}]" in follow
    assert re.findall(r"\[(\d{3}:\d+)\]", follow.split("References")[0]) and {
        *re.findall(r"\[(\d{3}:\d+)\]", follow.split("References")[0])
    } == {second_id}
    more = _ask(child, "tell me more about [004:17]")
    assert "ShadowKV" in more and "[004:17]" in more
    assert "mode: extractive" in _slash(child, "/mode")
    assert "llm mode needs an LLM" in _slash(child, "/mode llm")
    child.sendcontrol("d")
    child.expect("bye")
    child.expect(pexpect.EOF)
    from rag_assistant.answer.provenance import recent

    logged = recent(data, 10, kind="chat")
    assert len(logged) == 4 and len({row["session"] for row in logged}) == 2


def _fake_llm(req: dict) -> str:
    text = user_text(req)
    if "Standalone question:" in text:
        # Resolve "the second one" the way a model would: the second id cited in the last answer.
        history = text.split("Last message:")[0]
        ids = re.findall(r"\[([^\]\s]+:\d+)\]", history.split("Assistant:")[-1])
        return f"What does the paper [{ids[1]}] propose?"
    return (
        cited_answer(req)
        + " "
        + (" ".join(f"Also relevant [{i}]." for i in re.findall(r"^\[([^\]]+)\] ", text, re.M)[1:3]))
    )


def test_chat_llm_mode_streams_and_condenses(data: Path, tmp_path: Path) -> None:
    with FakeLLMServer(default=_fake_llm) as srv:
        child = _spawn(
            data, {"OPENAI_BASE_URL": srv.base_url, "OPENAI_API_KEY": "test", "RAG_ASSISTANT_LLM_MODEL": "fake-model"}
        )
        _session_walkthrough(child, tmp_path)
        # Ctrl-C cancels an answer in progress and the chat goes on.
        srv.script(delay(30, then=reply("too late")))
        child.sendline("How does ShadowKV reduce KV cache memory?")
        deadline = time.monotonic() + 60
        while srv.pending:  # the delayed step is taken when the answer request arrives
            assert time.monotonic() < deadline, "the answer request never reached the server"
            time.sleep(0.2)
        # Linux may hand the tty's SIGINT to another thread while the main one waits on the socket; the
        # main thread then sleeps on until the reply. A user presses Ctrl-C again; so does this test.
        for _ in range(5):
            child.sendintr()
            if child.expect(["cancelled", pexpect.TIMEOUT], timeout=4) == 0:
                break
        else:
            pytest.fail(f"Ctrl-C never cancelled the answer: {child.before[-300:]!r}")
        child.expect(PROMPT)
        first = _ask(child, "Which papers study jailbreak attacks on language models?")
        assert "mode: llm" in first
        cited = re.findall(r"\[([^\]\s]+:\d+)\]", first.split("References")[0])
        follow = _ask(child, "What does the second one propose?")
        assert f"searched for: What does the paper [{cited[1]}] propose?" in follow
        assert any(r.get("stream") for r in srv.requests)  # answers were streamed
        assert "mode: extractive" in _slash(child, "/mode extractive")
        offline = _ask(child, "How does ShadowKV reduce KV cache memory?")
        assert "mode: extractive" in offline and "[004:17]" in offline
        child.sendline("/quit")
        child.expect("bye")
        child.expect(pexpect.EOF)
