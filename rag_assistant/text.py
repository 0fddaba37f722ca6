"""Sentence splitting and light normalisation shared by chunking, extractive answers and citation checks.

One splitter everywhere, so that a sentence the answerer extracts is the same unit the verifier checks."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

# Abbreviations after which a period does not end a sentence.
_ABBREV = r"(?:e\.g|i\.e|et al|etc|vs|cf|Fig|Figs|Eq|Eqs|Sec|No|resp|approx|Dr|Mr|Ms|Prof|al)"
_PROTECT = re.compile(rf"\b{_ABBREV}\.", re.IGNORECASE)
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[\"'(\[]?[A-Z0-9$\\*])")
_PLACEHOLDER = "\u2063"  # invisible separator, never in abstracts
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]+")
_WS = re.compile(r"\s+")
# Characters that let text drive a terminal or reorder what the reader sees: C0 controls but tab and newline,
# DEL, C1 controls, and the bidi embeddings/overrides/isolates ("Trojan Source"); for use inside [...].
CONTROL_CHARS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"

STOPWORDS = frozenset(
    """a an and are as at be been being but by can could do does did for from had has have how i in into is
    it its of on or our over such than that the their them then there these they this those through to under
    up us was we were what when where which while who whom why will with within without would you your also
    about across after against all any based both each few more most other same so some very via may might
    paper papers work works propose proposed proposes approach approaches method methods show shows shown
    new novel using use used study studies results result existing however many one two three""".split()
)


def normalize_space(text: str) -> str:
    return _WS.sub(" ", text).strip()


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences, keeping abbreviations, decimals and inline LaTeX intact."""
    text = normalize_space(text)
    if not text:
        return []
    guarded = _PROTECT.sub(lambda m: m.group(0)[:-1] + _PLACEHOLDER, text)
    parts = _BOUNDARY.split(guarded)
    sentences = [p.replace(_PLACEHOLDER, ".").strip() for p in parts]
    return [s for s in sentences if s]


def content_words(text: str) -> list[str]:
    """Lower-cased words minus stop words (hyphenated words count as their parts)."""
    return [w for w in (m.group(0).lower() for m in _WORD.finditer(text)) if w not in STOPWORDS]


@lru_cache(maxsize=1)
def english_stemmer() -> Any:
    """PyStemmer's English Snowball stemmer (shared with the keyword index), or None without PyStemmer."""
    try:
        import Stemmer

        return Stemmer.Stemmer("english")
    except ImportError:  # pragma: no cover - PyStemmer is a dependency
        return None


def stems(text: str) -> list[str]:
    """Snowball-stemmed content words: 'values'/'value' and 'offloads'/'offloading' meet."""
    stemmer = english_stemmer()
    words = content_words(text)
    return stemmer.stemWords(words) if stemmer else [w[:6] for w in words]  # prefixes: a crude fallback


_MATH = re.compile(r"(?<!\\)\$\$?[^$]{1,300}?(?<!\\)\$\$?|\\[A-Za-z]+\*?(?:\{[^{}$]*\})*")
_EMPHASIS = re.compile(r"(?<![\w*])(\*\*|\*)(?=\S)([^*\n]{1,100}?)(?<=\S)\1(?![\w*])")


@lru_cache(maxsize=1)
def _latex() -> Any:
    import logging

    from pylatexenc.latex2text import LatexNodes2Text

    logging.getLogger("pylatexenc").setLevel(logging.ERROR)  # it warns on every macro it cannot render
    return LatexNodes2Text(math_mode="text", strict_latex_spaces=True)


def _latex_segment(match: re.Match[str]) -> str:
    segment = match.group(0)
    try:
        text = _latex().latex_to_text(segment)
    except Exception:  # pylatexenc rejects some malformed input; the raw text is still readable
        return segment
    return " ".join(text.split()) or segment


def clean_markup(text: str) -> str:
    """Abstract markup made readable for answers: inline LaTeX as unicode (`6$\\times$` -> `6×`,
    `$\\mathrm{E}(3)$` -> `E(3)`, `\\emph{1)}` -> `1)`) and markdown emphasis unwrapped (`*token*` -> `token`).
    Only `$...$` spans and backslash commands are converted: plain text such as `50%` is LaTeX's comment sign
    and must not be read as LaTeX."""
    if "$" not in text and "\\" not in text and "*" not in text:
        return text
    text = _MATH.sub(_latex_segment, text)
    return _EMPHASIS.sub(r"\2", text)


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """`1 paper`, `2 papers`, `0 papers` (`nouns` for an irregular plural)."""
    return f"{n} {noun if n == 1 else nouns or noun + 's'}"
