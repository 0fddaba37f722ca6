"""Text from the corpus, the user or an LLM made safe to print through rich.

Two dangers: rich reads `[abc]` as a markup tag (a bracketed paper id that starts with a letter vanished, and
`[link=...]` in an abstract could restyle or hide text), and control characters (ANSI escapes, NUL, carriage
returns, right-to-left overrides) let a corpus file drive the user's terminal. Stored text and `--json` keep
them as they are; only what reaches the terminal is cleaned, so every print of outside text goes through here.
"""

from __future__ import annotations

import re

from rich.markup import escape

from rag_assistant.text import CONTROL_CHARS

_UNSAFE = re.compile(f"[{CONTROL_CHARS}]")  # LRM/RLM marks stay: harmless, and legitimate in RTL names
REPLACEMENT = "\ufffd"  # visible, so that tampering shows instead of silently vanishing


def clean(text: object) -> str:
    """No terminal control characters; markup left alone (for rich's Markdown, which does not read tags)."""
    return _UNSAFE.sub(REPLACEMENT, str(text))


def safe(text: object) -> str:
    """Clean and markup-escaped: safe inside a rich markup string."""
    return escape(clean(text))


def tag(paper_id: object) -> str:
    """A paper id in square brackets, as the answer cites it, escaped as a whole (`[w1]`, `[a[b]]`)."""
    return safe(f"[{paper_id}]")
