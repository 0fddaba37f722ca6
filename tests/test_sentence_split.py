"""The one sentence splitter (text.split_sentences: syntok plus documented repairs) on the hard cases of real
abstracts: sentences joined without a space, abbreviations, decimals, URLs, LaTeX, enumerations; against the
hand-split abstracts of eval/sentences/boundaries.jsonl; stable under re-splitting (what the answerer quotes is
what the citation check splits); and versioned (a changed split must change text.SPLITTER_VERSION)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from rag_assistant.answer.extractive import cite
from rag_assistant.corpus import bundled_corpus_path, load_corpus
from rag_assistant.text import SPLITTER_VERSION, clean_markup, split_sentences, unmark

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "eval" / "sentences"))
from split import boundaries  # noqa: E402  (how eval/sentences counts a boundary)

_SHARED = "shared/corpus/icml2025_full/papers.jsonl"
# ../shared beside the checkout (or beside a directory of worktrees)
CONFERENCE = next((d / _SHARED for d in REPO.parents[:2] if (d / _SHARED).is_file()), REPO.parent / _SHARED)


HARD_CASES = [
    (  # joined without a space, after a lower-case word, a capitalised one, a bracket, emphasis
        "The field has grown substantially.LLM unlearning has emerged. It runs on an edge GPU.Our findings "
        "hold. We call it Short-Term Enhanced Transformer (STET).Compared with the best, it wins.",
        [
            "The field has grown substantially.",
            "LLM unlearning has emerged.",
            "It runs on an edge GPU.",
            "Our findings hold.",
            "We call it Short-Term Enhanced Transformer (STET).",
            "Compared with the best, it wins.",
        ],
    ),
    (
        "We prove it theoretically.**Method.** We train a model. Gains reach 38.83\\%--96.24\\%).The code is out.",
        [
            "We prove it theoretically.",
            "**Method.** We train a model.",
            "Gains reach 38.83\\%--96.24\\%).",
            "The code is out.",
        ],
    ),
    (  # abbreviations, decimals, references and URLs stay inside their sentence
        "We use e.g. GPT-4 and i.e. the best, as Smith et al. (2024) did. See Fig. 3 and Eq. 2 for 3.5 points "
        "at https://github.com/a/b.c. Next, $\\mathrm{E}(3)$ holds!",
        [
            "We use e.g. GPT-4 and i.e. the best, as Smith et al. (2024) did.",
            "See Fig. 3 and Eq. 2 for 3.5 points at https://github.com/a/b.c.",
            "Next, $\\mathrm{E}(3)$ holds!",
        ],
    ),
    (  # syntok misses these after a number or a bracket
        "Agents reach an F1 score of 0.35. We expect more. It is known as (GMM). Based on this, we go. As in "
        "Thrush et al. (2024). To leverage this, we act.",
        [
            "Agents reach an F1 score of 0.35.",
            "We expect more.",
            "It is known as (GMM).",
            "Based on this, we go.",
            "As in Thrush et al. (2024).",
            "To leverage this, we act.",
        ],
    ),
    (  # an enumeration inside a sentence is no boundary; code is no join
        "We study: 1) robustness to noise; 2) Adaptability, across sets; **Scalability**: speed. Types like "
        "typing.Optional and typing.Union are hard.",
        [
            "We study: 1) robustness to noise; 2) Adaptability, across sets; **Scalability**: speed.",
            "Types like typing.Optional and typing.Union are hard.",
        ],
    ),
]


@pytest.mark.parametrize(("text", "expected"), HARD_CASES)
def test_hard_cases_of_abstracts(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


@pytest.mark.skipif(not CONFERENCE.is_file(), reason="the shared conference file is not beside the checkout")
def test_hand_split_abstracts_are_split_as_labelled() -> None:
    texts = {}
    for line in CONFERENCE.read_text().splitlines():
        record = json.loads(line)
        texts[record["id"]] = record["abstract"]
    labelled = [json.loads(line) for line in (REPO / "eval/sentences/boundaries.jsonl").read_text().splitlines()]
    assert len(labelled) >= 150
    tp = fp = fn = 0
    for row in labelled:
        gold, n = boundaries(row["sentences"])
        got, m = boundaries(split_sentences(texts[row["id"]]))
        assert n == m  # no character lost or changed
        tp, fp, fn = tp + len(gold & got), fp + len(got - gold), fn + len(gold - got)
    f1 = 2 * tp / (2 * tp + fp + fn)
    assert f1 >= 0.98, (f1, fp, fn)


def _abstracts() -> list[str]:
    texts = [p.text for p in load_corpus([bundled_corpus_path()]).papers]
    if CONFERENCE.is_file():
        texts += [json.loads(line)["abstract"] for line in CONFERENCE.read_text().splitlines()[:600]]
    return texts


def test_quoted_sentences_split_the_same_in_an_answer() -> None:
    """An extractive answer quotes abstract sentences with a citation before the stop, and the citation check
    splits the answer again (with its markup marked): it must find the same sentences."""
    for text in _abstracts():
        sentences = split_sentences(text)
        assert split_sentences(" ".join(sentences)) == sentences
        cited = [cite(s, "004:17") for s in sentences]
        assert split_sentences(" ".join(cited)) == cited, text[:80]
        marked = split_sentences(clean_markup(" ".join(cited), mark=True))  # as the citation check splits it
        assert len(marked) == len(cited) and all(unmark(s).count("[004:17]") == 1 for s in marked), text[:80]


# The split of the bundled abstracts, the hard cases above and the hand-split abstracts (their sentences joined by
# spaces), by splitter version: stored sentence vectors are aligned with the sentences, so a change to the split
# must come with a new SPLITTER_VERSION.
PINNED = {"syntok-1.4.4+repairs-1": "1b2e00b2c949"}


def test_a_changed_split_comes_with_a_new_splitter_version() -> None:
    texts = [p.text for p in load_corpus([bundled_corpus_path()]).papers]
    texts += [text for text, _ in HARD_CASES]
    for line in (REPO / "eval/sentences/boundaries.jsonl").read_text().splitlines():
        texts.append(" ".join(json.loads(line)["sentences"]))
    split = hashlib.sha1(json.dumps([split_sentences(t) for t in texts]).encode()).hexdigest()[:12]
    assert PINNED.get(SPLITTER_VERSION) == split, (
        f"split_sentences changed ({split}): give text.SPLITTER_VERSION a new value and pin it here"
    )
