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

from rag_assistant.answer.roles import refers_back
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


# A leading clause that only points back to the sentence before ("To address this,", "To this end,", "Building on
# these insights,"): what the sentence says is its main clause. Causal and purpose connectives only: a contrast
# ("Unlike these methods,") or an addition ("Furthermore,") carries meaning of its own.
_BACK = r"(?:this|these|those|such|that|the (?:above|aforementioned))"
_FEW = r"(?: [\w-]+){0,3}"  # "this issue", "these two key limitations"
_LEAD = re.compile(
    r"^(?:"
    r"to (?:address|alleviate|tackle|overcome|mitigate|solve|remedy|fill|bridge|close|meet|achieve|resolve|handle"
    rf"|fix|answer|circumvent|counter|combat|avoid) {_BACK}{_FEW}"
    r"|to (?:this|that) end|to do so"
    rf"|(?:building|based|drawing|relying|motivated|inspired|guided|grounded|driven) (?:on|upon|by|from) {_BACK}{_FEW}"
    rf"|in (?:light|view) of {_BACK}{_FEW}|in response(?: to {_BACK}{_FEW})?|given {_BACK}{_FEW}"
    r"|for (?:this|these) reasons?|with (?:this|these)(?: [\w-]+){0,2} in mind"
    r"|therefore|consequently|thus|hence|accordingly|as a result"
    r"),\s+",
    re.I,
)
# ... and a main clause that says what the paper does, in its own words
_OWN_CLAUSE = re.compile(r"^(?:in this (?:paper|work|study),? |here,? )?(?:we|our [\w-]+|this (?:paper|work|study))\b")
_MIN_CLAUSE_WORDS = 5


def trimmed(sentence: str) -> str | None:
    """The sentence quoted from its main clause on, marked with TRIM ("To address this, we propose X." ->
    "…we propose X."), when it opens with a clause that only points back and the rest reads alone; else None."""
    lead = _LEAD.match(sentence)
    rest = sentence[lead.end() :] if lead else ""
    if not _OWN_CLAUSE.match(rest) or len(rest.split()) < _MIN_CLAUSE_WORDS or refers_back(rest):
        return None
    return TRIM + rest


def reads_alone(sentence: str) -> tuple[str, bool]:
    """The sentence as an answer quotes it, and whether that quote still refers back to the sentence before (it
    needs it quoted first): one that refers back only through a leading clause is trimmed of it."""
    if not refers_back(sentence):
        return sentence, False
    short = trimmed(sentence)
    return (sentence, True) if short is None else (short, False)
