"""Nearest chunks among a subset of papers (a filter's matches, index/store.py), ranked as if the index held only
them, by the cheapest exact route. Chroma's own filtered query costs seconds at 100k chunks whatever the subset's
size (docs/benchmarks.md), so:

- a few papers (at most FEW_PAPERS): their vectors are read and ranked here, exactly;
- many papers: the WIDE x n nearest chunks of the whole index are read and those of the subset kept; when at least
  n remain they are the subset's n nearest (every other chunk of it is farther than all of them);
- otherwise, Chroma's filtered query on the papers' ids."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

FEW_PAPERS = 1000  # at most ~1,500 vectors to read: ~10 ms, against Chroma's filtered query's seconds
WIDE = 8  # how many times n unfiltered neighbours to try for a large subset (30% of the chunks: 2.4 n expected)


class Searched(Protocol):
    """What this needs of the store (index/store.py's ChromaStore)."""

    collection: Any

    def nearest(self, embedding: Sequence[float], n: int, where: dict[str, Any] | None = None) -> list[Any]: ...

    def hits(self, chunk_ids: Sequence[str], similarities: Sequence[float]) -> list[Any]: ...


def subset_nearest(store: Searched, embedding: Sequence[float], n: int, paper_ids: Sequence[str]) -> list[Any]:
    """The `n` chunks of these papers nearest to `embedding`, as ChunkHits, nearest first."""
    if not paper_ids:
        return []
    where = {"paper_id": {"$in": list(paper_ids)}}
    if len(paper_ids) <= FEW_PAPERS:
        return _ranked_here(store, embedding, n, where)
    wanted = set(paper_ids)
    wide = store.nearest(embedding, WIDE * n)
    kept = [hit for hit in wide if hit.paper_id in wanted]
    if len(kept) >= n or len(wide) < WIDE * n:  # enough, or that was every chunk
        return kept[:n]
    return store.nearest(embedding, n, where)


def _ranked_here(store: Searched, embedding: Sequence[float], n: int, where: dict[str, Any]) -> list[Any]:
    """Rank the subset's vectors by cosine similarity here (what Chroma's cosine distance is 1 minus), then read
    the n best."""
    import numpy as np

    res = store.collection.get(where=where, include=["embeddings"])
    if not res["ids"]:
        return []
    vectors = np.asarray(res["embeddings"], dtype=np.float32)
    query = np.asarray(embedding, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1) * (np.linalg.norm(query) or 1.0)
    scores = vectors @ query / np.where(norms == 0, 1.0, norms)
    order = np.argsort(-scores, kind="stable")[:n]
    return store.hits([res["ids"][i] for i in order], [float(scores[i]) for i in order])
