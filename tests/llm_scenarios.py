"""Named scripted-server scenarios: what real models and servers did to the chain (issues 12 and 22).

Each is a list of fake_llm steps: ``srv.script(*SCENARIOS["hanging"])``."""

from __future__ import annotations

from typing import Any

from fake_llm import Cut, Delay, Reply, ReplyFn, Status, Step

NOT_FOUND = "The corpus does not cover this question."
FABRICATED = ["[FAKE-1]", "[FAKE_2]", "[arXiv:2401.12345]", "[Smith et al., 2023]", "[doc-7]", "[9]", "[777:1]"]


def _top(req: dict[str, Any]) -> str:
    """The first source sentence of the prompt (labelled [1]), i.e. a claim the top paper supports."""
    text = str(req["messages"][-1]["content"])
    line = next(x for x in text.splitlines() if x.startswith("[1] "))
    return line[4:].split(". ")[0]


# Issue 22: reference shapes that got through, as written -> as named in the warning
LOOKALIKES = [
    ("\uff3b999:1\uff3d", "[999:1]"),  # full-width brackets
    ("\u27e6777:1\u27e7", "[777:1]"),
    ("\u301020:3\u2020source\u3011", "[20:3\u2020source]"),
    ("\uff08777:3\uff09", "(777:3)"),
    ("\ufe5d888:2\ufe5e", "[888:2]"),
    ("[999:\u200b4]", "[999:4]"),  # a zero-width space inside the id
    ("(doc-7)", "(doc-7)"),
    ("<sup>77</sup>", "<sup>77</sup>"),  # labels run 1..k: 77 is none
    ("^78", "^78"),
    ("\\cite{smith2023}", "\\cite{smith2023}"),
    ("DOI 10.1234/abc.5", "DOI 10.1234/abc.5"),
    ("arXiv 2402.01234", "arXiv 2402.01234"),
    ("https://openreview.net/forum?id=AbC123", "https://openreview.net/forum?id=AbC123"),
    ("(van der Berg et al., 2023)", "(van der Berg et al., 2023)"),
    ("(\u0141ukasz et al., 2021)", "(\u0141ukasz et al., 2021)"),
]


def _lookalikes(req: dict[str, Any]) -> str:
    """One claim per shape, then a markdown link on a label and a reference list on the same line."""
    claims = " ".join(f"ShadowKV keeps {n} low-rank keys {shape} in memory." for n, (shape, _) in enumerate(LOOKALIKES))
    return f"{_top(req)} [1]. {claims} It offloads values [1](https://evil.example).\nReferences: [1] Smith 2023."


def _echo(req: dict[str, Any]) -> str:
    return "\n\n".join(str(m.get("content")) for m in req["messages"])


SCENARIOS: dict[str, list[Step]] = {
    "not_found_then_fabricated": [
        Reply(
            "The corpus does not cover this question in every detail, but ShadowKV relates to quantum annealing "
            "[777:1]. It was published in Nature in 2019 [004:99]."
        )
    ],
    "echoes_prompt": [ReplyFn(_echo)],
    "not_found_only": [Reply(NOT_FOUND)],
    "not_found_twice_with_fake_id": [Reply(f"{NOT_FOUND} [FAKE-1]\n\n{NOT_FOUND}")],
    "fabricated_shapes": [
        ReplyFn(lambda req: " ".join(f"{_top(req)} {ref}." for ref in FABRICATED) + " A claim (Smith et al., 2023).")
    ],
    "valid_and_fabricated_together": [ReplyFn(lambda req: f"{_top(req)} [1][FAKE_2].")],
    "footnotes_and_reference_list": [
        ReplyFn(lambda req: f"{_top(req)}.^3 It is fast.\u00b2\n\nReferences:\n[1] Smith et al. 2023. ShadowKV.")
    ],
    "citation_after_blank_line": [ReplyFn(lambda req: f"It has many applications.\n\n[1] {_top(req)}.\n\n[1].")],
    "truncated_at_max_tokens": [ReplyFn(lambda req: f"{_top(req)} [1]. 7. [00", finish="length")],
    "huge_completion": [Reply("ShadowKV stores keys [1]. " * 5000)],
    # issue 22
    "math_wrapped_references": [
        ReplyFn(
            lambda req: (
                f"{_top(req)} [1]. Keys are low-rank $[999:1]$. Values move $\\left[777:1\\right]$ to the "
                "CPU [1]. It costs $5 [FAKE-1] and $10 [1]."
            )
        )
    ],
    "lookalike_references": [ReplyFn(_lookalikes)],
    "list_marker_citations": [ReplyFn(lambda req: f"1. [1] {_top(req)}.\n2. [2] It keeps values on the CPU.")],
    "citation_alone_between_sentences": [ReplyFn(lambda req: f"{_top(req)} [1].\n[2]\nIt has many applications.")],
    "only_citations": [Reply("[1][2][3]")],
    "non_bracket_fakes_streamed": [
        Reply(
            "ShadowKV stores keys (Smith et al., 2023) in low rank arXiv:2401.12345 and keeps (777:1) values ^7 on "
            "the CPU (van der Berg et al., 2023) [1].",
            chunks=80,
        )
    ],
    "auth_rejected": [Status(401)] * 50,
    "hanging": [Delay(30)] * 50,
    "dropped_mid_stream": [Cut()] * 50,
    "retry_after_too_long": [Status(429, headers={"retry-after": "120"})] * 50,
}
