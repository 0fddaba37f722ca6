"""Citation parsing and verification: invalid ids removed, uncited sentences flagged, support scored."""

from __future__ import annotations

import pytest

from rag_assistant.answer.citations import SupportScorer, normalize, parse_citations, strip_citations, verify
from rag_assistant.corpus import Paper
from rag_assistant.index.embedding import get_embedder

A = Paper(
    "004:17",
    "We present ShadowKV, a system that stores the low-rank key cache and offloads the value cache "
    "to the CPU. It improves throughput by up to 3 times.",
    "004.txt",
    17,
)
B = Paper(
    "000:3",
    "We study inference-time alignment and show that Best-of-N sampling can cause reward hacking.",
    "000.txt",
    3,
)


@pytest.fixture(scope="module")
def scorer() -> SupportScorer:
    return SupportScorer(get_embedder().embed_cached)


def test_parse_forms() -> None:
    known = {"004:17", "000:3"}
    assert parse_citations("A [004:17]. B [000:3, 004:17]. C [000:3][004:17]; D [paper 004:17].", known) == [
        "004:17",
        "000:3",
        "004:17",
        "000:3",
        "004:17",
        "004:17",
    ]
    assert parse_citations("in $[0, 1]$ and [see appendix] and [1, 2]", known) == ["1", "2"]
    assert parse_citations("hex [c1502ae5a4d514baec129f72948c266e]", set()) == ["c1502ae5a4d514baec129f72948c266e"]
    assert normalize("It works. [004:17] Next one.") == "It works [004:17]. Next one."
    assert strip_citations("It works [004:17][000:3].", known) == "It works."


def test_invalid_citation_removed_and_warned(scorer: SupportScorer) -> None:
    text = "ShadowKV stores a low-rank key cache [004:17][999:1]. Best-of-N can cause reward hacking [123:4]."
    v = verify(text, [A, B], scorer, 0.45)
    assert "999:1" not in v.text and "123:4" not in v.text
    assert v.citations == ["004:17"]
    assert any("[999:1]" in w.detail for w in v.warnings) and any("[123:4]" in w.detail for w in v.warnings)
    assert v.sentences[0].citations == ["004:17"] and "invalid_citation_removed" in v.sentences[0].flags
    assert v.sentences[1].citations == [] and {"uncited", "invalid_citation_removed"} <= set(v.sentences[1].flags)


def test_uncited_sentence_flagged_and_exempt(scorer: SupportScorer) -> None:
    v = verify("ShadowKV offloads the value cache [004:17]. This is great.", [A], scorer, 0.45)
    assert v.sentences[1].flags == ["uncited"] and len(v.warnings) == 1
    v = verify("Nothing here.", [A], scorer, 0.45, exempt=lambda s: s.startswith("Nothing"))
    assert v.sentences[0].flags == [] and v.warnings == []


def test_support_scores_copy_paraphrase_and_unrelated(scorer: SupportScorer) -> None:
    text = (
        "We present ShadowKV, a system that stores the low-rank key cache and offloads the value cache to the CPU "
        "[004:17]. The system keeps keys in low rank and moves values to host memory [004:17]. "
        "Bananas are rich in potassium [004:17]."
    )
    v = verify(text, [A], scorer, 0.45)
    copy, para, unrelated = (s.support["004:17"] for s in v.sentences)
    assert copy == pytest.approx(1.0, abs=0.01)
    assert 0.45 <= para < copy
    assert unrelated < 0.35 and "weak_support" in v.sentences[2].flags


def test_paragraphs_kept_and_duplicate_ids_collapsed(scorer: SupportScorer) -> None:
    v = verify("ShadowKV offloads values [004:17][004:17].\n\nBest-of-N can hack rewards [000:3].", [A, B], scorer, 0.3)
    assert v.text == "ShadowKV offloads values [004:17].\n\nBest-of-N can hack rewards [000:3]."
    assert v.citations == ["004:17", "000:3"]


SEG = Paper(
    "seg:1",
    "Segmented regression approximates a function by a piecewise function. Our approach produces segments with "
    "up to 1,000 times lower MSE compared to Acharya et al. (2016) in about 100 times less runtime.",
    "seg.txt",
    1,
)
QUOTE = (
    "Our approach produces segments with up to 1,000 times lower MSE compared to Acharya et al. (2016) "
    "in about 100 times less runtime [seg:1]."
)


def test_an_offline_quote_keeps_the_references_of_its_own_text(scorer: SupportScorer) -> None:
    """A quoted sentence is the paper's text: its author-year reference is not cut out, nor flagged."""
    v = verify(QUOTE, [SEG], scorer, 0.45, quotes=True)
    assert v.text == QUOTE and v.warnings == [] and v.citations == ["seg:1"]
    assert v.sentences[0].flags == [] and v.sentences[0].support == {"seg:1": 1.0}


def test_references_a_quote_does_not_have_are_checked_as_always(scorer: SupportScorer) -> None:
    # the same sentence from a model (no quotes): the reference names no retrieved paper
    v = verify(QUOTE, [SEG], scorer, 0.45)
    assert "Acharya" not in v.text and any("Acharya et al. (2016)" in w.detail for w in v.warnings)
    # an offline answer's line that is not its paper's text word for word is checked as always
    added = "Our approach produces segments with lower MSE than Smith et al. (2020) [seg:1]."
    v = verify(added, [SEG], scorer, 0.45, quotes=True)
    assert "Smith" not in v.text and any("Smith et al. (2020)" in w.detail for w in v.warnings)
    # ... and so is a quote cited with a paper it is not from
    v = verify(QUOTE.replace("[seg:1]", "[004:17]"), [SEG, A], scorer, 0.45, quotes=True)
    assert "Acharya" not in v.text and any("Acharya et al. (2016)" in w.detail for w in v.warnings)


NEST = Paper(
    "nest:1",
    "Graph forecasters struggle with multi-scale dynamics. To alleviate this, we propose NestCast, a nested graph "
    "network that couples coarse and fine meshes.",
    "nest.txt",
    1,
)


def test_a_quote_trimmed_of_its_opening_is_checked_as_a_span_of_its_abstract(scorer: SupportScorer) -> None:
    quote = "\u2026we propose NestCast, a nested graph network that couples coarse and fine meshes [nest:1]."
    v = verify(quote, [NEST], scorer, 0.45, quotes=True)
    assert v.text == quote and v.warnings == [] and v.sentences[0].support == {"nest:1": 1.0}
    # words the abstract does not have are no span, however they are marked: scored as any claim
    v = verify("\u2026we propose NestCast, which forecasts river floods [nest:1].", [NEST], scorer, 0.45, quotes=True)
    assert v.sentences[0].support["nest:1"] < 0.9
