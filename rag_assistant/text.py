"""Sentence splitting, light normalisation and the keyword terms shared by chunking, the keyword index, relevance,
extractive answers and citation checks.

One splitter everywhere, so that a sentence the answerer extracts is the same unit the verifier checks."""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any

from rag_assistant.stopwords import STOPWORDS_EN

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]+")
_WS = re.compile(r"\s+")
# Characters that let text drive a terminal or reorder what the reader sees: C0 controls but tab and newline,
# DEL, C1 controls, and the bidi embeddings/overrides/isolates ("Trojan Source"); for use inside [...].
CONTROL_CHARS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
# Characters that show nothing but can split what the reader sees as one token ("[999:\u200b1]" reads "[999:1]"):
# soft hyphen, zero-width spaces and joiners, bidi marks, embeddings and isolates, word joiner and invisible
# operators, Hangul fillers, variation selectors, the byte order mark, tag characters.
INVISIBLE = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164"
    "\ufe00-\ufe0f\ufeff\uffa0\U000e0000-\U000e007f"
)
# Private-use characters that mark, while an answer's citations are checked, where converted markup starts and
# ends: a `$...$` math span (MATH_*), other LaTeX and markdown emphasis (MARKUP_*). See clean_markup(mark=True);
# never shown, and removed from any text before it is marked.
MATH_OPEN, MATH_CLOSE, MARKUP_OPEN, MARKUP_CLOSE = "\ue000", "\ue001", "\ue002", "\ue003"
_MARKS = MATH_OPEN + MATH_CLOSE + MARKUP_OPEN + MARKUP_CLOSE
_HIDDEN = re.compile(f"[{INVISIBLE}{_MARKS}]")

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


# The splitter's version: stored sentence vectors are aligned with its sentences (index/sentences.py), so any
# change to what split_sentences returns for some text must change this string (a re-ingest then re-embeds the
# papers whose split changed). The library's version is part of it.
SPLITTER_VERSION = "syntok-1.4.4+repairs-1"
# Repairs to syntok's boundaries, measured on eval/sentences/boundaries.jsonl (benchmarks/sentence_boundaries.py):
# - a join: a full stop glued to the next sentence ("grown substantially.LLM unlearning has emerged"), after a
#   word that is no abbreviation, before a capitalised word (or its opening emphasis or mark); syntok keeps such a
#   pair as one sentence after a capitalised word or a bracket ("an edge GPU.Our", "(STET).Compared"). Not after
#   a Python module's name: "typing.Optional", "nn.Module" are code.
# What may follow a sentence's final stop: quotes, brackets, the end of math (`$`, or its mark). A closing "*",
# "}" or markup mark is not taken for one ("**Method.** We train" is one sentence), but may end one syntok found.
_CLOSE = "\"')\\]$\u201d\u2019\ue001"
_JOIN = re.compile(
    r"(?<![\s.])(?<!\be\.g)(?<!\bi\.e)(?<!\bcf)(?<!\bvs)"  # no abbreviation
    r"(?<!\btyping)(?<!\btorch)(?<!\bnn)(?<!\bnp)(?<!\btf)(?<!\bjax)"  # no module
    rf"[.!?][{_CLOSE}*}}\ue003]*?(?=(?:\*\*?|[\ue000\ue002])?[A-Z](?:[A-Za-z]|\s[a-z]))"  # closers, a capitalised word
)
# - a full stop after a word, a number or a bracket, then a space and a capitalised word: syntok misses some after
#   numbers and brackets ("an F1 score of 0.35. We expect", "Thrush et al. (2024). To leverage", "(GMM). Based").
#   Not after an abbreviation, an initial ("A. Defazio") or an enumeration ("(1.) The ability").
_MISSED = re.compile(
    r"(?<=[a-z0-9%)\]}$*\ue001\ue003][.!?])(?<!\b[A-Z]\.)(?<!\(\d\.)"
    r"(?<!\bal\.)(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bvs\.)(?<!\bcf\.)(?<!\bresp\.)(?<!\bapprox\.)"
    rf"[{_CLOSE}]*\s+(?=(?:[\[(\u201c\"']|\*\*?)?[A-Z](?:[A-Za-z]|\s))"
)
# - a boundary only after a sentence's final punctuation (and closing brackets, quotes, emphasis or marks):
#   syntok also starts a sentence at an enumeration ("...; 2) Adaptability", "; **Scalability**:").
_ENDS = re.compile(rf"[.!?][{_CLOSE}*}}\ue003]*$")
# - never after a reference abbreviation before its number ("Eq. 2", "Fig. 3"), nor between "et al." and the
#   year or reference that follows it ("Whitehouse et al. (2022)", "Bhattacharya et al. [NeurIPS'23]").
_REFERENCE = re.compile(r"\b(?:Eqs?|Figs?|Sec|Secs|Tab|Thm|Def|Alg|Lem|App|Ch|No)\.$")
_ET_AL = re.compile(r"\bet al\.$")
# Bracketed references just before a sentence's stop are left out while the boundaries are found: an answer
# that quotes an abstract sentence with its citation ("... the image space [004:17]?") splits as the abstract did.
_CITATION = re.compile(r"(?:\s?\[[^\[\]]{1,80}\])+(?=[.!?])")


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences (syntok, plus the repairs above), keeping abbreviations, decimals, URLs and
    inline LaTeX intact. The marks of clean_markup(mark=True) split as the markup they stand for did."""
    text = normalize_space(text)
    return list(_split(text)) if text else []


@lru_cache(maxsize=8192)
def _split(text: str) -> tuple[str, ...]:
    """Sentences of whitespace-normalised text; cached: every retrieved abstract is split by the answer analysis,
    the answerer and the citation check alike, and syntok takes a few milliseconds per abstract."""
    plain, where = _without_citations(text)
    cuts = [where[start] for start in _boundaries(plain)]
    pieces = (text[a:b].strip() for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True))
    return tuple(p for p in pieces if p)


def _without_citations(text: str) -> tuple[str, list[int]]:
    """The text without its bracketed references before a stop, and each of its characters' offset in `text`."""
    kept, where, at = [], [], 0
    for m in _CITATION.finditer(text):
        kept.append(text[at : m.start()])
        where += range(at, m.start())
        at = m.end()
    kept.append(text[at:])
    where += range(at, len(text) + 1)
    return "".join(kept), where


def _boundaries(text: str) -> list[int]:
    """Where sentences start (but the first): syntok's boundaries and the repairs above."""
    from syntok.segmenter import analyze

    starts = {sentence[0].offset for paragraph in analyze(text) for sentence in paragraph if sentence}
    joins = {m.end() for m in _JOIN.finditer(text)}
    starts |= joins | {m.end() for m in _MISSED.finditer(text)}
    kept = [0]
    for start in sorted(starts - {0}):
        before = text[kept[-1] : start].rstrip()
        if not before or not _ENDS.search(before[-12:]) or _REFERENCE.search(before[-12:]):
            continue
        if not text[start - 1].isspace() and start not in joins:  # inside a word ("typing.Optional")
            continue
        if not (_ET_AL.search(before[-12:]) and text[start] in "(["):
            kept.append(start)
    return kept[1:]


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


_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # bm25s.tokenize's default token_pattern


def tokenize(texts: list[str]) -> list[list[str]]:
    """The keyword index's terms, which relevance scoring shares: what bm25s.tokenize(texts, stopwords="en",
    stemmer=english_stemmer(), return_ids=False) returns (tests/test_keyword.py checks it on the corpus): lower
    case, words of 2+ characters, stop words out, stems."""
    stop, split = STOPWORDS_EN, _TOKEN.findall
    docs = [[w for w in split(text.lower()) if w not in stop] for text in texts]
    stemmer = english_stemmer()
    if stemmer is None:
        return docs
    words = list(dict.fromkeys(w for doc in docs for w in doc))
    stem_of = dict(zip(words, stemmer.stemWords(words), strict=True))
    return [[stem_of[w] for w in doc] for doc in docs]


def query_terms(text: str) -> list[str]:
    """The terms of a question without question words ('what', 'which', 'paper', ...) that bm25s's English
    stop-word list keeps: they match every abstract and only add noise."""
    return [t for t in tokenize([text])[0] if t not in question_stopwords()]


def bm25_idf(n: int, df: int) -> float:
    """BM25's (Lucene's) IDF of a term found in `df` of `n` chunks: the keyword index's (index/keyword.py), and
    the weight of a term where a Chroma server ranks keywords (index/sparse.py)."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


@lru_cache(maxsize=1)
def question_stopwords() -> frozenset[str]:
    """The terms of the question words (STOPWORDS) as tokenize gives them; the keyword index's analyzer gives
    the same (tests/test_keyword.py), so its query terms drop this set too."""
    return frozenset(tokenize([" ".join(sorted(STOPWORDS))])[0])


# `$...$` (or `$$...$$`) math, and LaTeX commands outside it. A `$` followed by a digit opens math only if its
# closing `$` follows a non-space: "costs $5 [FAKE-1] and $10" holds two prices, not the math "5 [FAKE-1] and ".
# \cite commands are left as written: a citation is for the citation check to resolve or remove, not "<cit.>".
_MATH = re.compile(
    r"(?<!\\)(\$\$?)(?!\d[^$]{0,300}?\s\$)[^$]{1,300}?(?<!\\)\1"
    r"|\\(?!(?:no)?cite)[A-Za-z]+\*?(?:\{[^{}$]*\})*"
)
_EMPHASIS = re.compile(r"(?<![\w*])(\*\*|\*)(?=\S)([^*\n]{1,100}?)(?<=\S)\1(?![\w*])")


@lru_cache(maxsize=1)
def _latex() -> Any:
    import logging

    from pylatexenc.latex2text import LatexNodes2Text

    logging.getLogger("pylatexenc").setLevel(logging.ERROR)  # it warns on every macro it cannot render
    return LatexNodes2Text(math_mode="text", strict_latex_spaces=True)


def _latex_segment(match: re.Match[str], mark: bool = False) -> str:
    segment = match.group(0)
    try:
        text = _latex().latex_to_text(segment)
    except Exception:  # pylatexenc rejects some malformed input; the raw text is still readable
        return segment
    text = " ".join(text.split()) or segment
    if not mark:
        return text
    return f"{MATH_OPEN}{text}{MATH_CLOSE}" if match.group(1) else f"{MARKUP_OPEN}{text}{MARKUP_CLOSE}"


def clean_markup(text: str, mark: bool = False) -> str:
    """Abstract markup made readable for answers: inline LaTeX as unicode (`6$\\times$` -> `6×`,
    `$\\mathrm{E}(3)$` -> `E(3)`, `\\emph{1)}` -> `1)`), markdown emphasis unwrapped (`*token*` -> `token`)
    and invisible characters removed. Only `$...$` spans and backslash commands are converted: plain text such
    as `50%` is LaTeX's comment sign and must not be read as LaTeX.

    With `mark`, each converted piece is wrapped in marks (MATH_* for `$...$`, MARKUP_* for the rest) that
    unmark() removes: the citation check reads `$[0, 1]$`, shown as "[0, 1]", as an interval, and splits
    sentences where the markup split them (an extractive answer cites whole abstract sentences)."""
    text = _HIDDEN.sub("", text)
    if "$" not in text and "\\" not in text and "*" not in text:
        return text
    text = _MATH.sub(lambda m: _latex_segment(m, mark), text)
    return _EMPHASIS.sub(rf"{MARKUP_OPEN}\2{MARKUP_CLOSE}" if mark else r"\2", text)


def unmark(text: str) -> str:
    """The text without the marks of clean_markup(mark=True)."""
    return _UNMARK.sub("", text)


_UNMARK = re.compile(f"[{_MARKS}]")


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """`1 paper`, `2 papers`, `0 papers` (`nouns` for an irregular plural)."""
    return f"{n} {noun if n == 1 else nouns or noun + 's'}"
