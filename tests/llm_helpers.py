"""Helpers for tests that answer through the scripted OpenAI-compatible server."""

from __future__ import annotations

import re
from typing import Any

SOURCE_LINE = re.compile(r"^\[([^\]]+)\] ", re.MULTILINE)


def user_text(req: dict[str, Any]) -> str:
    return str(req["messages"][-1]["content"])


def source_ids(req: dict[str, Any]) -> list[str]:
    """Paper ids in the order the answer prompt presented them."""
    return SOURCE_LINE.findall(user_text(req))


def source_sentence(req: dict[str, Any], paper_id: str) -> str:
    """The first sentence of that paper's abstract as shown in the prompt: a claim it certainly supports."""
    for line in user_text(req).splitlines():
        if line.startswith(f"[{paper_id}] "):
            return line[len(paper_id) + 3 :].split(". ")[0]
    raise KeyError(paper_id)


def cited_answer(req: dict[str, Any]) -> str:
    """A faithful answer: the first sentence of the top source, cited."""
    top = source_ids(req)[0]
    return f"{source_sentence(req, top)} [{top}]."
