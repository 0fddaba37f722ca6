"""Which papers seed the generated questions, in which order: a stratified sample of the corpus.

Papers are grouped by their topic or track when the corpus has one (a `topic`, `track`, `area` or `category`
field), else by the file they came from. Each kind of question walks its own seeded ordering of all papers in
which every prefix holds each group in proportion to its size (systematic stratified sampling: a group of N
papers takes the places (j + u) / N, j = 0..N-1, for one random offset u), so the first 50 seeds span the
corpus as the whole does and a longer run only adds to them."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from rag_assistant.corpus.models import Paper

KINDS = ("known-item", "method", "result", "survey", "unanswerable")
SINGLE = ("known-item", "method", "result")  # one gold paper
STRATUM_FIELDS = ("topic", "track", "area", "category", "primary_area", "venue_track")


@dataclass(frozen=True)
class Slot:
    """One candidate question to write: its kind, its place in that kind's order and the paper it starts from."""

    kind: str
    index: int
    seed_paper: str

    @property
    def id(self) -> str:
        return f"{self.kind}-{self.index:04d}"


def stratum(paper: Paper) -> str:
    """The group a paper is sampled in: its topic or track, else its file."""
    for name in STRATUM_FIELDS:
        value = paper.metadata.get(name)
        if isinstance(value, str) and value.strip():
            return f"{name}:{value.strip()}"
    return f"file:{paper.source}"


def stratified_order(papers: Sequence[Paper], seed: int, salt: str) -> list[str]:
    """Every paper id once, in an order whose every prefix samples each stratum in proportion to its size."""
    rng = random.Random(f"{seed}:{salt}")
    groups: dict[str, list[str]] = {}
    for paper in sorted(papers, key=lambda p: p.paper_id):
        groups.setdefault(stratum(paper), []).append(paper.paper_id)
    placed: list[tuple[float, float, str]] = []
    for name in sorted(groups):
        ids = groups[name]
        rng.shuffle(ids)
        offset = rng.random()
        placed += [((j + offset) / len(ids), rng.random(), pid) for j, pid in enumerate(ids)]
    return [pid for _, _, pid in sorted(placed)]


def quotas(n: int, kinds: Sequence[str]) -> dict[str, int]:
    """n questions shared among the kinds as evenly as possible, the first kinds taking the remainder."""
    base, extra = divmod(n, len(kinds))
    return {kind: base + (i < extra) for i, kind in enumerate(kinds)}


def slots(papers: Sequence[Paper], kind: str, seed: int, limit: int) -> list[Slot]:
    """The first `limit` candidate slots of a kind, one seed paper each, never the same paper twice."""
    return [Slot(kind, i, pid) for i, pid in enumerate(stratified_order(papers, seed, kind)[:limit])]
