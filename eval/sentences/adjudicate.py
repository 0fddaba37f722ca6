"""The adjudicated role and dangling labels (eval/sentences/roles-adjudicated.jsonl) from the two readers' blind
labels of the same 674 sentences: reader 1 (roles.jsonl) and reader 2 (roles-reader2.jsonl). Where they agree
the label stands; where they disagree (9 roles, 15 dangling flags) a third reading decides, recorded in DECISIONS
with its reason. Each row keeps both readers' labels (`readers`).

Roles: background (context, prior work, the gap), method (what the paper does or proposes), result (what it finds,
proves or measures), other (availability, calls to action, slogans). Dangling: the sentence's subject or opening
refers back ("this", "these steps", "such methods", "For instance") to something only an earlier sentence names.

The second round (issue 23: 1,464 sentences of 200 more abstracts, eval/sentences/sample2.py, guideline
eval/sentences/ROLES.md) works the same way from files: roles2-reader1.jsonl and roles2-reader2.jsonl are the blind
readings, roles2-third.jsonl the third reading of every sentence they disagree on (role or dangling), with its
reason; it writes roles2-adjudicated.jsonl.

    python eval/sentences/adjudicate.py      # rewrites both adjudicated files, prints agreement
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
# (abstract id prefix, position) -> (role, dangling, reason)
DECISIONS: dict[tuple[str, int], tuple[str, bool, str]] = {
    ("605ff7", 2): ("background", True, "'Conversely' and 'these modalities' need the sentence before"),
    ("198dd5", 1): ("result", False, "establishes upper and lower bounds: a finding"),
    ("198dd5", 2): ("result", False, "provides a phase diagram of the complexity ratio: a finding"),
    ("34ad9b", 2): ("method", False, "says what is quantified, not what is found"),
    ("34ad9b", 4): ("result", False, "'we prove a trade-off' reads alone; 'Next' is a connective"),
    ("e2065c", 2): ("result", True, "'the essential cause' of what the sentence before describes"),
    ("f38fef", 8): ("result", True, "'aligned with above analysis'"),
    ("4424ce", 6): ("result", True, "'the theoretical findings' are named only before"),
    ("1b4219", 6): ("method", False, "says what is derived, not what it shows"),
    ("048e2f", 6): ("other", False, "a closing slogan, no finding of its own"),
    ("7b8523", 4): ("method", True, "'the retrieved enzymes' are introduced before"),
    ("0f9447", 4): ("result", True, "'these topological point features'"),
    ("428fca", 3): ("method", False, "what the position paper does (highlights, through a lens)"),
    ("23ef5c", 1): ("background", True, "'The joint-modeling strategy' is named only before"),
    ("23ef5c", 4): ("result", True, "'the policy value estimator' is the one introduced before"),
    ("f27088", 7): ("result", True, "'For instance' of the improvement claimed before"),
    ("66ef61", 3): ("result", False, "'Consequently' is a connective; the sentence reads alone"),
    ("47267c", 2): ("background", True, "'This interpolation paradigm'"),
    ("b0eec2", 1): ("background", True, "'such token-level reward'"),
    ("7c2506", 6): ("method", False, "describes a component and what it enables, no measured finding"),
    ("17a312", 1): ("background", True, "the model of earlier work, 'In this model'"),
    ("f01287", 4): ("background", True, "'For example' of the progress named before"),
    ("e32cc8", 5): ("result", True, "'the theoretical findings' are named only before"),
    ("9f810e", 3): ("other", True, "'This has a number of consequences': implications, no finding"),
}


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main() -> None:
    first_round()
    second_round()


def second_round() -> None:
    first, second = rows(HERE / "roles2-reader1.jsonl"), rows(HERE / "roles2-reader2.jsonl")
    third = {(r["id"], r["position"]): r for r in rows(HERE / "roles2-third.jsonl")}
    out, roles_differ, dangling_differ = [], 0, 0
    for r1, r2 in zip(first, second, strict=True):
        assert (r1["id"], r1["position"], r1["sentence"]) == (r2["id"], r2["position"], r2["sentence"]), r1["id"]
        row = {k: r1[k] for k in ("id", "position", "n_sentences", "sentence", "split", "role", "dangling")}
        if (r1["role"], r1["dangling"]) != (r2["role"], r2["dangling"]):
            decided = third.pop((r1["id"], r1["position"]))
            roles_differ += r1["role"] != r2["role"]
            dangling_differ += r1["dangling"] != r2["dangling"]
            row |= {"role": decided["role"], "dangling": decided["dangling"], "adjudicated": decided["reason"]}
        row["readers"] = [{"role": r["role"], "dangling": r["dangling"]} for r in (r1, r2)]
        out.append(row)
    assert not third, f"third readings of sentences the readers agree on: {sorted(third)[:3]}"
    (HERE / "roles2-adjudicated.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out))
    _agreement("roles2", len(out), roles_differ, dangling_differ)


def _agreement(name: str, n: int, roles_differ: int, dangling_differ: int) -> None:
    print(
        f"{name}: {n} sentences; readers agree on the role of {n - roles_differ} ({1 - roles_differ / n:.3f}), "
        f"on dangling for {n - dangling_differ} ({1 - dangling_differ / n:.3f}); "
        f"{roles_differ + dangling_differ} disagreements adjudicated"
    )


def first_round() -> None:
    first, second = rows(HERE / "roles.jsonl"), rows(HERE / "roles-reader2.jsonl")
    by_key = {(r["id"], r["position"]): r for r in second}
    out, roles_differ, dangling_differ, used = [], 0, 0, set()
    for r1 in first:
        r2 = by_key[(r1["id"], r1["position"])]
        assert r2["sentence"] == r1["sentence"], r1["id"]
        row = {k: r1[k] for k in ("id", "position", "n_sentences", "sentence")}
        row |= {"role": r1["role"], "dangling": r1["dangling"]}
        if (r1["role"], r1["dangling"]) != (r2["role"], r2["dangling"]):
            key = (r1["id"][:6], r1["position"])
            role, dangling, reason = DECISIONS[key]
            used.add(key)
            roles_differ += r1["role"] != r2["role"]
            dangling_differ += r1["dangling"] != r2["dangling"]
            row |= {"role": role, "dangling": dangling, "adjudicated": reason}
        row["readers"] = [{"role": r["role"], "dangling": r["dangling"]} for r in (r1, r2)]
        out.append(row)
    assert used == set(DECISIONS), set(DECISIONS) - used
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out)
    (HERE / "roles-adjudicated.jsonl").write_text(text)
    _agreement("roles", len(out), roles_differ, dangling_differ)


if __name__ == "__main__":
    main()
