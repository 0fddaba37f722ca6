"""Issue 22: the citation check reads the answer as it is shown (LaTeX made readable, Unicode normalised,
invisible characters skipped), knows every reference shape a model fakes, and leaves prose, enumerations and
math alone; the live stream holds back every shape it knows."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_assistant.answer.citations import normalize, verify
from rag_assistant.answer.models import AnswerWarning, WarningKind
from rag_assistant.answer.refs import CitationStream, Resolver
from rag_assistant.corpus import Paper

PAPERS = [
    Paper("004:17", "ShadowKV stores the low-rank key cache.", "004.txt", 17),
    Paper("000:3", "Best-of-N sampling can cause reward hacking.", "000.txt", 3),
]
LABELS = {"1": "004:17", "2": "000:3"}


class FixedScorer:
    def score_many(self, claims: list[str], papers: list[Paper]) -> list[float]:
        return [1.0] * len(claims)


def check(text: str, labels: dict[str, str] | None = LABELS):
    return verify(text, PAPERS, FixedScorer(), 0.45, labels=labels)


@pytest.mark.parametrize(
    ("written", "shown", "removed"),
    [
        ("Keys are low-rank $[999:1]$ [1].", "Keys are low-rank [004:17].", ["[999:1]"]),
        ("Keys $\\left[777:1\\right]$ are low-rank [1].", "Keys are low-rank [004:17].", ["[777:1]"]),
        ("It costs $5 [FAKE-1] and $10 [1].", "It costs $5 and $10 [004:17].", ["[FAKE-1]"]),
        ("Keys \uff3b999:1\uff3d are low-rank [1].", "Keys are low-rank [004:17].", ["[999:1]"]),
        ("Keys [999:\u200b1] are low-rank [1].", "Keys are low-rank [004:17].", ["[999:1]"]),
        ("Keys are low-rank [004:\u200b17].", "Keys are low-rank [004:17].", []),
        ("Keys are low-rank \uff3b1\uff3d.", "Keys are low-rank [004:17].", []),
        ("Keys \u27e6777:1\u27e7 \u301020:3\u2020source\u3011 are low-rank [1].", "Keys are low-rank [004:17].", None),
        ("Keys (doc-7) are low-rank [1].", "Keys are low-rank [004:17].", ["(doc-7)"]),
        ("Keys<sup>77</sup> are low-rank [1].", "Keys are low-rank [004:17].", ["<sup>77</sup>"]),
        ("Keys are low-rank<sup>1</sup>.", "Keys are low-rank [004:17].", []),
        ("Keys^7 are low-rank [1].", "Keys are low-rank [004:17].", ["^7"]),
        ("Keys \\cite{smith2023} are low-rank [1].", "Keys are low-rank [004:17].", ["\\cite{smith2023}"]),
        ("See DOI 10.1234/abc and arXiv 2402.01234 [1].", "See and [004:17].", None),
        ("See https://openreview.net/forum?id=x1 [1].", "See [004:17].", None),
        ("Keys (van der Berg et al., 2023) are low [1].", "Keys are low [004:17].", None),
        ("Keys (\u0141ukasz et al., 2021) are low [1].", "Keys are low [004:17].", None),
        ("Keys are low-rank [1](https://evil.example).", "Keys are low-rank [004:17].", None),
    ],
)
def test_every_shape_is_resolved_or_removed_and_named(written: str, shown: str, removed: list[str] | None) -> None:
    v = check(written)
    assert v.text == shown, v.warnings
    named = [w for w in v.warnings if w.kind is WarningKind.REMOVED]
    if removed is not None:
        assert [w.detail for w in named] == [f"removed citation {r}: not among the retrieved papers" for r in removed]
    else:
        assert named, v.warnings


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        (
            "In $[0, 1]$ the cost is $O(n^2)$ and $\\log^2 d$ [004:17].",
            "In [0, 1] the cost is O(n^2) and log^2 d [004:17].",
        ),
        ("We propose $\\mathbf{D}$^2 (a sampler) [004:17].", "We propose 𝐃^2 (a sampler) [004:17]."),
        ("It uses 6$\\times$ less memory [004:17].", "It uses 6× less memory [004:17]."),
        ("Steps (1) and (2) run on a GPU (A100) [004:17].", "Steps (1) and (2) run on a GPU (A100) [004:17]."),
        ("It was released in (2023) [004:17].", "It was released in (2023) [004:17]."),
        ("It needs cm<sup>2</sup> and x<sup>2</sup> and 10^3 tokens [004:17].", None),
        ("It scores R\u00b2 of 0.9 on \u27e8x_1, x_2\u27e9 [004:17].", None),
        ("The code [see appendix] is at https://github.com/x/y [004:17].", None),
        ("It costs $5 or $10 a month [004:17].", None),
    ],
)
def test_prose_enumerations_and_math_pass_as_written(written: str, shown: str | None) -> None:
    """Over-reach guard: nothing here is a reference, in extractive (no labels) or LLM mode."""
    for labels in (None, LABELS):
        v = check(written, labels)
        assert v.text == (shown or written) and v.warnings == [], (v.text, v.warnings)


def test_a_label_alone_in_math_is_the_source_it_names() -> None:
    assert check("Keys are low-rank $[1]$.").text == "Keys are low-rank [004:17]."
    assert check("Keys are low-rank $[1]$ [000:3].", labels=None).text == "Keys are low-rank [1] [000:3]."


def test_an_abstracts_own_brackets_are_not_moved_with_its_citation() -> None:
    """Issue 22, 13: an extractive answer quotes "[bold] We propose ..." and cites it after; "[bold]" stays."""
    v = check("[bold] We propose gating that opens at calibrated thresholds [004:17].", labels=None)
    assert v.text == "[bold] We propose gating that opens at calibrated thresholds [004:17]." and v.warnings == []
    v = check("[004:17] We propose gating.", labels=None)
    assert v.text == "We propose gating [004:17]."


def test_a_citation_after_a_list_marker_stays_in_its_item() -> None:
    assert normalize("1. [1] Claim one.", Resolver(["004:17"], LABELS)) == "1. [1] Claim one."
    v = check("Two claims:\n1. [1] Keys are low-rank.\n- [2] Best-of-N hacks rewards.\n(3) [1] Values move.")
    assert v.text == (
        "Two claims:\n1. Keys are low-rank [004:17].\n- Best-of-N hacks rewards [000:3].\n(3) Values move [004:17]."
    )
    assert [s.flags for s in v.sentences] == [["uncited"], [], [], []]


def test_references_that_removal_exposes_are_removed_too() -> None:
    v = check("Keys $\\text{arXiv:2402.01234}$^7.")
    caret = AnswerWarning(WarningKind.REMOVED, "removed citation ^7: not among the retrieved papers")
    assert v.text == "Keys." and caret in v.warnings


def test_a_reference_list_on_the_line_of_its_heading_is_cut() -> None:
    v = check("Keys are low-rank [1]. References: [1] Smith et al. 2023. ShadowKV.")
    assert v.text == "Keys are low-rank [004:17]." and any("reference list" in w.detail for w in v.warnings)
    v = check("Keys are low-rank [1].\nSources: the abstracts [2] agree.")
    assert v.text == "Keys are low-rank [004:17]. Sources: the abstracts [000:3] agree."


def stream(text: str, cuts: list[int], secrets: tuple[str, ...] = ()) -> tuple[list[str], str]:
    shown: list[str] = []
    s = CitationStream(shown.append, Resolver(["004:17", "000:3"], LABELS), secrets)
    for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True):
        s(text[start:end])
    before = "".join(shown)
    s.flush()
    return shown, before


FAKED = (
    "ShadowKV stores keys (Smith et al., 2023) in low rank arXiv:2401.12345 and keeps (777:1) values ^7 on the "
    "CPU (van der Berg et al., 2023) \uff3b999:1\uff3d \\cite{x} <sup>77</sup> [FAKE-1] [1](https://evil.example)"
    " [2]. The key is sk-streamed-SECRET-1."
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, len(FAKED) - 1), unique=True, max_size=60).map(sorted))
def test_the_stream_never_shows_a_shape_it_will_remove(cuts: list[int]) -> None:
    """Item 3: however the completion is cut into tokens, the stream shows no fake and no secret."""
    shown, _ = stream(FAKED, cuts, ("sk-streamed-SECRET-1",))
    streamed = "".join(shown)
    for fake in ("Smith", "arXiv", "777:1", "^7", "Berg", "999:1", "cite", "sup>", "FAKE", "evil", "SECRET"):
        assert fake not in streamed, (cuts, streamed)
    assert streamed.endswith("[004:17] [000:3]. The key is ***."), streamed


def test_the_stream_holds_back_only_a_bounded_tail_of_prose() -> None:
    prose = "ShadowKV stores the low-rank key cache and offloads the value cache to the CPU memory. " * 5
    shown, before_flush = stream(prose, list(range(1, len(prose))))
    assert len(prose) - len(before_flush) <= CitationStream.TAIL + len("memory. ")
    assert "".join(shown) == prose
    long_group = "Keys (" + "unclosed prose " * 20
    _, before_flush = stream(long_group, list(range(1, len(long_group))))
    assert len(long_group) - len(before_flush) <= CitationStream.HOLD + CitationStream.TAIL
