"""From the candidates to the set: which passed candidates are kept (the first of each kind's quota, in slot
order, after near-duplicates are removed), and the dataset records written for them.

Selection depends only on the journal's records, walked in one fixed order (slot index, then kind), so the
set is the same however many threads wrote the candidates and however often the run was resumed; a candidate
processed beyond a kind's quota (in flight when the quota filled) is surplus, never kept."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rag_assistant import __version__
from rag_assistant.evaluate.generate.checks import split_of

DUPLICATE = 0.9  # cosine of two questions' embeddings from which the later one is a near-duplicate
Embed = Callable[[list[str]], Any]  # texts -> L2-normalised vectors (n x dim)


@dataclass
class Selection:
    kept: list[dict[str, Any]] = field(default_factory=list)
    duplicates: dict[str, str] = field(default_factory=dict)  # slot -> the kept slot it repeats
    surplus: list[str] = field(default_factory=list)

    def count(self, kind: str) -> int:
        return sum(r["kind"] == kind for r in self.kept)


def select(
    records: Sequence[dict[str, Any]], kinds: Sequence[str], quotas: Mapping[str, int], embed: Embed
) -> Selection:
    """Walk the passed candidates in (index, kind) order: a near-duplicate of a question kept before is
    removed, the rest kept until their kind's quota is full."""
    passed = [r for r in records if r["status"] == "ok" and r["removed_by"] is None]
    passed.sort(key=lambda r: (r["index"], kinds.index(r["kind"])))
    out = Selection()
    if not passed:
        return out
    vectors = embed([r["question"] for r in passed])
    kept_at: list[int] = []
    for i, record in enumerate(passed):
        twin = next((j for j in kept_at if float(vectors[i] @ vectors[j]) >= DUPLICATE), None)
        if twin is not None:
            out.duplicates[record["slot"]] = passed[twin]["slot"]
        elif out.count(record["kind"]) < quotas[record["kind"]]:
            out.kept.append(record)
            kept_at.append(i)
        else:
            out.surplus.append(record["slot"])
    return out


def dataset_record(record: dict[str, Any], made_by: Mapping[str, Any]) -> dict[str, Any]:
    """The dataset line (eval/README.md's format) of a kept candidate: tags `generated`, its kind and split;
    provenance says what made it (generator, models, prompt versions, seed) and from which paper."""
    qid = f"gen-{record['slot']}"
    row: dict[str, Any] = {"id": qid, "question": record["question"], "gold_papers": record["gold_papers"]}
    for key in ("borderline_papers", "criterion", "gold_answer"):
        if record.get(key):
            row[key] = record[key]
    row["tags"] = ["generated", record["kind"], split_of(qid)]
    row["provenance"] = {
        "generator": f"rag-assistant {__version__} eval-generate",
        **made_by,
        "slot": record["slot"],
        "seed_paper": record["seed_paper"],
        "overlap": record.get("overlap"),
        "seed_rank": record.get("seed_rank"),
    }
    return row
