"""The checks of a generated question that need no model: its reply parsed as JSON, its form, how much of the
abstract it copies, whether a judge's quoted evidence is really in the abstract, and its split.

Copying is measured as the share of the question's word trigrams found in the abstract. The 63 hand-written
natural-language single-paper questions of eval/conference.jsonl score median 0.05, 90th percentile 0.20 and
at most 0.36 against their gold abstracts (keyword queries up to 0.5), so MAX_OVERLAP = 0.3 keeps questions
worded the way people ask and removes the ones stitched from the abstract's phrases."""

from __future__ import annotations

import hashlib
import json
import re

from rag_assistant.plan import question_kind
from rag_assistant.text import stems

MAX_OVERLAP = 0.3
_WORD = re.compile(r"[a-z0-9]+(?:[-'][a-z0-9]+)*")
_FENCE = re.compile(r"```(?:json)?", re.IGNORECASE)
# the question points at the text it was written from, which the person asking never saw
_SOURCE_REF = re.compile(
    r"\b(this|the above|the given|the following|the provided|the described|these) "
    r"(abstract|passage|text|excerpt|context|document|paper|work|study|article|papers|abstracts)\b"
    r"|\bthe (abstract|passage|excerpt|authors?)\b|\b(we|our|us)\b|\[\d+\]",
    re.IGNORECASE,
)
_PLACEHOLDER = re.compile(r"[<>{}]|\.\.\.|…|\bX{2,}\b|\b(TODO|TBD|N/A|lorem ipsum)\b", re.IGNORECASE)
MIN_WORDS, MAX_WORDS, MAX_CHARS = 5, 45, 320


def words(text: str) -> list[str]:
    """Lower-cased words (hyphenated and apostrophe words kept whole), punctuation dropped."""
    return _WORD.findall(text.lower())


def overlap(question: str, abstract: str, n: int = 3) -> float:
    """Share of the question's word n-grams that also occur in the abstract (0: none copied)."""
    q = words(question)
    grams = [tuple(q[i : i + n]) for i in range(len(q) - n + 1)]
    if not grams:
        return 0.0
    a = words(abstract)
    present = {tuple(a[i : i + n]) for i in range(len(a) - n + 1)}
    return round(sum(g in present for g in grams) / len(grams), 4)


def parse_reply(text: str, required: tuple[str, ...]) -> dict[str, str] | None:
    """The first JSON object in a model's reply (code fences and text around it ignored) holding every
    `required` field as a non-empty string; None when there is none."""
    cleaned = _FENCE.sub(" ", text)
    decoder = json.JSONDecoder()
    for start in [m.start() for m in re.finditer(r"\{", cleaned)]:
        try:
            value, _ = decoder.raw_decode(cleaned, start)
        except ValueError:
            continue
        if isinstance(value, dict) and all(isinstance(value.get(k), str) and value[k].strip() for k in required):
            return {k: " ".join(str(v).split()) for k, v in value.items() if isinstance(v, str)}
    return None


def form_problem(question: str, kind: str) -> str | None:
    """Why `question` is not a well-formed question of its kind (None: it is). One question, ending in a
    question mark, of a readable length, not pointing at the text it came from, no placeholders; a survey
    question is one the product plans as a survey ("Which papers ...?"), a single-paper one is not."""
    n = len(words(question))
    if not question.endswith("?") or question.count("?") != 1:
        return "not one question ending in a question mark"
    if n < MIN_WORDS or n > MAX_WORDS or len(question) > MAX_CHARS:
        return f"{n} words: a question has {MIN_WORDS} to {MAX_WORDS} (at most {MAX_CHARS} characters)"
    if sum(w.isalpha() and len(w) > 2 for w in words(question)) < 3:
        return "too few words"
    if match := _SOURCE_REF.search(question):
        return f"points at its source text ({match.group(0)!r})"
    if match := _PLACEHOLDER.search(question):
        return f"holds a placeholder ({match.group(0)!r})"
    planned = question_kind(question)
    if kind == "survey" and planned != "survey":
        return f"asks for one paper, not a list of papers (planned as {planned})"
    if kind in ("known-item", "method", "result") and planned == "survey":
        return "asks for a list of papers, not one paper"
    return None


def evidence_found(evidence: str, abstract: str, question: str) -> bool:
    """Whether a judge's quoted evidence shows that the abstract answers: a quote of at least 5 words, 80% of
    its word trigrams found in the abstract, sharing a content word (stemmed) with the question. A judge that
    answers YES but quotes nothing, something the abstract does not say, or a sentence on another subject
    has not shown it. (Each of the 84 hand-written single-paper questions of eval/conference.jsonl shares at
    least two stems with a sentence of its gold abstract.)"""
    if len(words(evidence)) < 5 or overlap(evidence, abstract) < 0.8:
        return False
    return bool(set(stems(evidence)) & set(stems(question)))


def split_of(question_id: str) -> str:
    """`dev` or `heldout` (2 in 5) by a hash of the id alone: fixed before anything is tuned on the set."""
    return "heldout" if int(hashlib.sha1(question_id.encode()).hexdigest(), 16) % 5 < 2 else "dev"


ANSWERS = ("YES", "PARTIAL", "NO")  # does the abstract answer the question?
CRITERION = ("RELEVANT", "BORDERLINE", "NOT")  # does the paper meet the criterion?
_THINK = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
_LEAD = re.compile(r"^[\s*_`#>\"'(\[]*(?:verdict|answer|reply)?\s*[:=-]?[\s*_`\"']*", re.IGNORECASE)


def parse_verdict(reply: str, allowed: tuple[str, ...]) -> tuple[str | None, str]:
    """A judge's reply -> (its verdict, the evidence quoted after it). The verdict is the reply's first word
    when that is an allowed one in any case ("Yes: <quote>", "**NO**"), else the first allowed word written in
    capitals ("I think the answer is YES"); PARTIALLY reads as PARTIAL. None when there is neither."""
    text = _LEAD.sub("", _THINK.sub(" ", reply).strip(), count=1)
    names = "|".join(allowed)
    first = re.match(rf"({names})(?:LY)?\b", text, re.IGNORECASE)
    match = first or re.search(rf"\b({names})(?:LY)?\b", text)
    if match is None:
        return None, ""
    evidence = text[match.end() :].lstrip(" *_:.,;-\u2013\u2014\n\"'").strip().strip("\"'*")
    return match.group(1).upper(), evidence
