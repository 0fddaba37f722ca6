"""Quoted lines: an offline answer's sentences are the abstracts' own words, each cited with the paper it quotes.

A reference inside such a quote ("... 1,000 times lower MSE compared to Acharya et al. (2016) ...") is that
paper's text, not a citation the answer makes: the citation check keeps it as written and flags nothing, once it
has checked that the line is an exact span of the abstract it cites. A span may begin inside its sentence: a
quote trimmed of a leading clause that only points back ("To address this, we propose X" quoted from "we
propose X") starts with TRIM, as shortened quotes are marked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING

from rag_assistant.text import clean_markup, unmark

if TYPE_CHECKING:
    from rag_assistant.corpus.models import Paper

TRIM = "\u2026"  # the mark before a quote that starts inside its sentence
_MIN_WORDS = 3  # a span shorter than this says too little to count as a quote
# the citation the answerer writes at a quote's end, before its final stop (extractive.cite): "... text [id]."
_END_CITE = re.compile(r"\s\[([^\[\]]+)\](?=[.!?]+[\"'\u201d\u2019)\]}*]*$)")


@lru_cache(maxsize=512)
def _shown(text: str) -> str:
    """An abstract as answers show it (markup made readable, spaces single)."""
    return " ".join(unmark(clean_markup(text, mark=True)).split())


def is_span(sentence: str, text: str) -> bool:
    """Whether the sentence (a leading TRIM aside; its final stop optional: one is added to a quote without)
    is word for word a piece of `text`, both as shown (markup made readable)."""
    span = " ".join(unmark(sentence).removeprefix(TRIM).split()).rstrip(".")
    return len(span.split()) >= _MIN_WORDS and span in _shown(text)


def is_trimmed_quote(claim: str, text: str) -> bool:
    """Whether the claim is a quote trimmed of its opening (it starts with TRIM) and a span of `text`."""
    return claim.startswith(TRIM) and is_span(claim, text)


def quoted_paper(sentence: str, papers: Mapping[str, Paper]) -> str | None:
    """The id of the paper the sentence quotes: it cites one of `papers` once, at its end ("... text [id]."),
    and the rest is a span of that paper's abstract; None for any other sentence."""
    end = _END_CITE.search(sentence)
    if end is None or end.group(1) not in papers:
        return None
    body = sentence[: end.start()] + sentence[end.end() :]
    return end.group(1) if is_span(body, papers[end.group(1)].text) else None


def quote_text(sentence: str, paper_id: str, papers: Mapping[str, Paper]) -> str | None:
    """The quote without the citation the answerer added to it, when the sentence quotes paper_id; else None."""
    if quoted_paper(sentence, papers) != paper_id:
        return None
    head, _, tail = sentence.rpartition(f" [{paper_id}]")
    return head + tail
