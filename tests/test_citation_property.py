"""Property: whatever mix of valid ids, labels, fabricated references of every shape (look-alike brackets,
invisible characters inside ids, references wrapped in math), genuine math, the not-found phrase, list markers,
blank lines and citation positions a model writes, after verification every citation left is a retrieved
paper, every removal is a warning, the math is still there, and no sentence without a citation goes
unflagged."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_assistant.answer.citations import NOT_FOUND, verify
from rag_assistant.answer.refs import Resolver
from rag_assistant.corpus import Paper
from rag_assistant.text import split_sentences

PAPERS = [
    Paper("004:17", "ShadowKV stores the low-rank key cache.", "004.txt", 17),
    Paper("000:3", "Best-of-N.", "000.txt", 3),
]
VALID = {"004:17", "000:3"}
LABELS = {"1": "004:17", "2": "000:3"}
VALID_REFS = [
    "[004:17]",
    "[000:3]",
    "(004:17)",
    "[paper 000:3]",
    "[004:17, 000:3]",
    "\uff3b004:17\uff3d",
    "[000:\u200b3]",
]
LABEL_REFS = ["[1]", "[2]", "[1, 2]", "[1-2]", "^1", "[^2]", "[Source 1]", "$[1]$", "<sup>2</sup>", "\u30101\u3011"]
# (as written, what must appear in the warning)
FABRICATED = [
    ("[FAKE-1]", "FAKE-1"),
    ("[FAKE_2]", "FAKE_2"),
    ("[arXiv:2401.12345]", "arXiv:2401.12345"),
    ("[Smith et al., 2023]", "Smith et al., 2023"),
    ("[doc-7]", "doc-7"),
    ("[9]", "[9]"),
    ("[777:1]", "777:1"),
    ("[004:99]", "004:99"),
    ("(777:2)", "777:2"),
    ("(Smith et al., 2023; Lee, 2022)", "Lee, 2022"),
    ("^7", "^7"),
    ("[Source 9]", "Source 9"),
    ("\uff3b777:5\uff3d", "[777:5]"),  # look-alike brackets
    ("\u27e6FAKE-3\u27e7", "[FAKE-3]"),
    ("\uff08777:9\uff09", "(777:9)"),
    ("\u3010777:4\u2020source\u3011", "[777:4\u2020source]"),
    ("[777:\u200b6]", "[777:6]"),  # invisible characters inside the id
    ("[FA\u00adKE-4]", "[FAKE-4]"),
    ("$[777:7]$", "[777:7]"),  # references in math
    ("$\\left[777:8\\right]$", "[777:8]"),
    ("$\\text{arXiv:2402.01234}$", "arXiv:2402.01234"),
    ("\\cite{fake2023}", "\\cite{fake2023}"),
    ("<sup>77</sup>", "<sup>77</sup>"),
    ("(doc-7)", "(doc-7)"),
    ("(van der Berg et al., 2023)", "van der Berg et al., 2023"),
    ("[9](https://evil.example)", "https://evil.example"),
]
# Genuine math, shown readable and never taken for a reference
MATH = [("$[0, 1]$", "[0, 1]"), ("$O(n^2)$", "O(n^2)"), ("$\\log^2 d$", "log^2 d")]
# No bare number: "42^7" is an exponent, not a footnote.
WORDS = ["keys", "values", "cache", "memory", "offloads", "the", "model", "low-rank", "GPU", "throughput", "fast"]


class FixedScorer:
    def score_many(self, claims: list[str], papers: list[Paper]) -> list[float]:
        return [1.0] * len(claims)


@st.composite
def sentences(draw: st.DrawFn, numbered: bool) -> tuple[str, list[str]]:
    """One sentence with references before or after its stop; returns text and the fabricated ones used."""
    words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6))
    if len(words) > 1:  # inside the sentence: a mark glued to math ("$x$^2") is an exponent, not a footnote
        words.insert(draw(st.integers(1, len(words) - 1)), draw(st.sampled_from(["", *(m for m, _ in MATH)])))
    text = " ".join(w for w in [words[0].capitalize(), *words[1:]] if w)
    if draw(st.booleans()):
        return NOT_FOUND, []
    pool = VALID_REFS + (LABEL_REFS if numbered else []) + [f for f, _ in FABRICATED]
    refs = draw(st.lists(st.sampled_from(pool), max_size=3))
    fakes = [w for f, w in FABRICATED if f in refs]
    glued = "".join(r if r.startswith("^") else f" {r}" for r in refs)
    stop = draw(st.sampled_from([".", "!", "?"]))
    where = draw(st.sampled_from(["before_stop", "after_stop", "start"]))
    if where == "start" and refs and not glued.lstrip().startswith("^"):
        return f"{glued.strip()} {text}{stop}", fakes
    if where == "after_stop":
        return f"{text}{stop}{glued}", fakes
    return f"{text}{glued}{stop}", fakes


@st.composite
def answers(draw: st.DrawFn) -> tuple[str, bool, list[str]]:
    numbered = draw(st.booleans())
    parts = draw(st.lists(sentences(numbered), min_size=1, max_size=6))
    text = ""
    for sentence, _ in parts:
        text += draw(st.sampled_from(["", "", "- ", "1. "])) if text[-1:] in ("", "\n") else ""  # list items
        text += sentence + draw(st.sampled_from([" ", " ", "\n", "\n\n", "\n \n"]))
    return text, numbered, [f for _, fakes in parts for f in fakes]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answers())
def test_only_retrieved_citations_survive_and_nothing_is_hidden(case: tuple[str, bool, list[str]]) -> None:
    text, numbered, fakes = case
    v = verify(text, PAPERS, FixedScorer(), 0.45, labels=LABELS if numbered else None)
    # every reference-like thing left names a retrieved paper, and nothing fabricated is left, read as a reader
    # reads it (NFKC, invisible characters skipped); the genuine math is still there
    for written, shown in MATH:
        assert text.count(written) == v.text.count(shown), (text, v.text)
    prose = v.text
    for _, shown in MATH:
        prose = prose.replace(shown, "")
    left = [p for span in Resolver(()).find(prose) for p in span.pieces]
    assert set(left) <= VALID, (text, v.text)
    as_read = unicodedata.normalize("NFKC", re.sub("[\u00ad\u200b-\u200f]", "", prose))
    fakes_shown = ("FAKE", "arXiv", "Smith", "Lee", "doc-7", "777:", "004:99", "[9]", "^", "Source", "[1]", "[2]")
    for shown in (*fakes_shown, "$", "cite", "sup>", "Berg", "evil", "\u3010"):
        assert shown not in as_read, (text, v.text)
    assert set(v.citations) <= VALID and all(set(c.citations) <= VALID for c in v.sentences)
    # every fabricated reference used is reported
    for fake in fakes:
        assert any(fake in w.detail for w in v.warnings), (text, fake, v.warnings)
    # every shown sentence is a checked one, and a sentence without a citation is flagged
    checks = {c.text: c for c in v.sentences}
    for line in v.text.split("\n"):  # a list item is a line: its marker, then its sentences
        for sentence in split_sentences(re.sub(r"^(?:- |1\. )", "", line)):
            check = checks.get(sentence)
            assert check is not None, (text, sentence, list(checks))
            cited = re.search(r"\[(004:17|000:3)\]", sentence) is not None
            assert cited == bool(check.citations) and (cited or "uncited" in check.flags), (text, sentence)
