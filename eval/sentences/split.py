"""The held-out split of the hand-labelled sentence sets, fixed before any tuning: an abstract is held out
when `int(sha1(id)[:8], 16) % 100 < 40` (the first 8 hex digits of the SHA-1 of its id), about 40% of the
abstracts. The same rule splits the boundaries (eval/sentences/boundaries.jsonl: 70 of 160 held out), the roles
(eval/sentences/roles.jsonl: 43 of 90 abstracts, 320 of 674 sentences) and the older eval/sentence_roles.jsonl
(13 of 45 abstracts). A whole abstract is on one side: sentences of one abstract share its wording and layout.

That split was looked at twice and is spent: its labels are training data now. The second round of role labels
(eval/sentences/roles2-adjudicated.jsonl, issue 23) carries its own split in each row, fixed by sample2.py before
any label existed: `heldout2` when `int(sha1("roles2:" + id)[:8], 16) % 100 < 30`, else `dev2`. The classifier
trains on every split but `heldout2` (`split_of`).

    python eval/sentences/split.py      # prints the counts
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def heldout(abstract_id: str) -> bool:
    return int(hashlib.sha1(abstract_id.encode("utf-8")).hexdigest()[:8], 16) % 100 < 40


def heldout2(abstract_id: str) -> bool:
    return int(hashlib.sha1(f"roles2:{abstract_id}".encode()).hexdigest()[:8], 16) % 100 < 30


def split_of(row: dict) -> str:
    """A labelled row's split: its own `split` (second round), else the first round's rule on its abstract id."""
    return row.get("split") or ("heldout" if heldout(row.get("id") or row["paper_id"]) else "dev")


def boundaries(sentences: list[str]) -> tuple[set[int], int]:
    """Where sentences start (but the first), counted in non-whitespace characters from the abstract's start, and
    the non-whitespace length: splitters that normalise spacing compare fairly with the labels."""
    starts, n = set(), 0
    for i, sentence in enumerate(sentences):
        if i:
            starts.add(n)
        n += len("".join(sentence.split()))
    return starts, n


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main() -> None:
    for path, key in (
        (HERE / "boundaries.jsonl", "id"),
        (HERE / "roles.jsonl", "id"),
        (HERE.parent / "sentence_roles.jsonl", "paper_id"),
        (HERE / "roles2-adjudicated.jsonl", "id"),
    ):
        data = rows(path)
        ids = {r[key] for r in data}
        held = {i for i in ids if heldout(i)}
        n_held = sum(r[key] in held for r in data)
        print(f"{path.name}: {len(held)} of {len(ids)} abstracts held out ({n_held} of {len(data)} rows)")


if __name__ == "__main__":
    sys.exit(main())
