"""The chat session in process (the terminal is tests/test_chat*.py): a topic shift is retrieved for once, and
/mode gives the session a new chain instead of rewriting the one it has."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rag_assistant.answer.chain import AnswerChain
from rag_assistant.chat import ChatSession
from rag_assistant.config import load_settings
from rag_assistant.retrieve import Retriever

SHIFT = "How do they improve sample efficiency in reinforcement learning?"  # "they": not the jailbreak papers


def test_a_topic_shift_is_retrieved_for_once(own_ready: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = ChatSession(AnswerChain(load_settings(mode="extractive"), log=False))
    first = session.ask("Which papers study jailbreak attacks on language models?")
    searched: list[str] = []
    real = Retriever.search

    def search(self: Retriever, query: str, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
        searched.append(query)
        return real(self, query, *args, **kwargs)

    monkeypatch.setattr(Retriever, "search", search)
    shifted = session.ask(SHIFT)
    assert shifted.condensed_question is None and not set(shifted.citations) & set(first.citations), shifted
    assert searched == [SHIFT]  # the check's retrieval is the answer's
    fresh = AnswerChain(load_settings(mode="extractive"), log=False).ask(SHIFT)
    assert (shifted.answer, shifted.sources) == (fresh.answer, fresh.sources)


def test_mode_switch_builds_a_new_chain(own_ready: Path) -> None:
    from fake_llm import FakeLLMServer
    from llm_helpers import cited_answer

    from rag_assistant.errors import ConfigError

    chain = AnswerChain(load_settings(mode="extractive"), log=False)
    session = ChatSession(chain)
    session.ask("What is Safe Delta?")
    with pytest.raises(ConfigError):
        session.use_settings(load_settings(mode="llm"))  # no LLM configured
    assert session.chain is chain and session.follow_ups.llm is None  # nothing changed
    with FakeLLMServer(default=cited_answer) as srv:
        session.use_settings(load_settings(mode="llm", llm_base_url=srv.base_url, llm_api_key="test"))
        assert session.chain is not chain and session.chain.retriever is chain.retriever
        assert (chain.mode, chain.settings.mode) == ("extractive", "extractive")  # the old chain is as it was
        assert session.ask("How does ShadowKV reduce KV cache memory?").mode == "llm"
        assert session.follow_ups.llm is not None and len(session.memory.turns) == 2
