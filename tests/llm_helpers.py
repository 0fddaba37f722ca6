"""Helpers for tests that answer through the scripted OpenAI-compatible server.

The answer prompt labels its sources [1]..[k] (see rag_assistant/answer/llm.py); these helpers read the
labels back from the request, so scripted answers cite the way a model would."""

from __future__ import annotations

import re
from typing import Any

import pytest

SOURCE_LINE = re.compile(r"^\[([^\]]+)\] ", re.MULTILINE)


def user_text(req: dict[str, Any]) -> str:
    return str(req["messages"][-1]["content"])


def source_ids(req: dict[str, Any]) -> list[str]:
    """Source labels in the order the answer prompt presented them."""
    return SOURCE_LINE.findall(user_text(req))


def source_sentence(req: dict[str, Any], label: str) -> str:
    """The first sentence of that source's abstract as shown in the prompt: a claim it certainly supports."""
    for line in user_text(req).splitlines():
        if line.startswith(f"[{label}] "):
            return line[len(label) + 3 :].split(". ")[0]
    raise KeyError(label)


def cited_answer(req: dict[str, Any]) -> str:
    """A faithful answer: the first sentence of the top source, cited."""
    top = source_ids(req)[0]
    return f"{source_sentence(req, top)} [{top}]."


def use_llm_server(monkeypatch: pytest.MonkeyPatch, base_url: str, key: str, retries: int, timeout: float) -> None:
    """Configure LLM mode through the environment, as a user would, for the scripted server at `base_url`."""
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("RAG_ASSISTANT_LLM_MODEL", "fake-model")
    monkeypatch.setenv("RAG_ASSISTANT_LLM_MAX_RETRIES", str(retries))
    monkeypatch.setenv("RAG_ASSISTANT_LLM_TIMEOUT", str(timeout))
