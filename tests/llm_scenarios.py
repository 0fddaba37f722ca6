"""Named scripted-server scenarios: what real models and servers did to the chain (issue 12).

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
    "auth_rejected": [Status(401)] * 50,
    "hanging": [Delay(30)] * 50,
    "dropped_mid_stream": [Cut()] * 50,
    "retry_after_too_long": [Status(429, headers={"retry-after": "120"})] * 50,
}
