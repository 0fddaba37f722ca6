"""Hybrid retrieval: dense (Chroma) + keyword (BM25), fused by reciprocal rank, grouped by paper."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rag_assistant.config import Settings
from rag_assistant.corpus.models import Paper
from rag_assistant.errors import EmptyIndexError
from rag_assistant.index.embedding import Embedder, get_embedder
from rag_assistant.index.ingest import check_model, sync_keyword_index
from rag_assistant.index.keyword import KeywordIndex
from rag_assistant.index.pending import unfinished_papers
from rag_assistant.index.store import ChunkHit, VectorStore, open_store


@dataclass
class Source:
    """A retrieved paper with the evidence for it. `score` is the fused score used for ranking;
    `dense_score` (cosine) is an absolute measure, comparable across questions."""

    paper: Paper
    score: float
    dense_score: float | None = None
    keyword_score: float | None = None
    rank: int = 0
    chunks: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)

    @property
    def paper_id(self) -> str:
        return self.paper.paper_id

    def as_dict(self) -> dict[str, Any]:
        p = self.paper
        return {
            "rank": self.rank,
            "paper_id": p.paper_id,
            "score": round(self.score, 6),
            "dense_score": None if self.dense_score is None else round(self.dense_score, 4),
            "keyword_score": None if self.keyword_score is None else round(self.keyword_score, 4),
            "source": p.source,
            "position": p.position,
            "title": p.title,
            "text": p.text,
            "metadata": p.metadata,
            "matched_chunks": self.chunks,
            "duplicates": self.duplicates,
        }


@dataclass
class _Agg:
    fused: float = 0.0
    dense: float | None = None
    keyword: float | None = None
    chunks: dict[str, float] = field(default_factory=dict)


def fuse(dense: list[ChunkHit], lexical: list[tuple[str, float]], settings: Settings) -> dict[str, float]:
    """Chunk id -> fused score.

    convex (default): w * cosine + (1 - w) * bm25 / max bm25 of this query. Cosine is already on a fixed
    scale, so only BM25 needs normalising; a chunk missing from one list gets that list's floor.
    rrf: sum of 1 / (rrf_k + rank) over the two lists; ignores score gaps, so a weak keyword-only match
    at rank 1 can outrank a strong dense match."""
    scores: dict[str, float] = {}
    if settings.fusion == "rrf":
        for rank, hit in enumerate(dense, start=1):
            scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + 1.0 / (settings.rrf_k + rank)
        for rank, (chunk_id, _) in enumerate(lexical, start=1):
            scores[chunk_id] = scores.get(chunk_id, 0.0) + 1.0 / (settings.rrf_k + rank)
        return scores
    cosine = {hit.chunk_id: hit.similarity for hit in dense}
    keyword = dict(lexical)
    floor = min(cosine.values(), default=0.0)
    top = max(keyword.values(), default=1.0) or 1.0
    w = settings.dense_weight
    for chunk_id in cosine.keys() | keyword.keys():
        scores[chunk_id] = w * cosine.get(chunk_id, floor) + (1 - w) * keyword.get(chunk_id, 0.0) / top
    return scores


class Retriever:
    def __init__(self, settings: Settings, store: VectorStore | None = None, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.store = store or open_store(settings)
        self._embedder = embedder
        self._keyword: KeywordIndex | None = None

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            s = self.settings
            self._embedder = get_embedder(s.embedding_model, s.embedding_backend, s.embed_batch_size)
        return self._embedder

    @property
    def keyword(self) -> KeywordIndex:
        if self._keyword is None:
            self._keyword = sync_keyword_index(self.store, self.settings)
        return self._keyword

    def search(self, query: str, k: int | None = None) -> list[Source]:
        k = k or self.settings.top_k
        if self.store.count() == 0:
            raise EmptyIndexError("the index is empty", "run `rag-assistant ingest` first")
        info = check_model(self.store, self.settings)
        hidden = unfinished_papers(self.store, info)  # half-written by an ingest that was killed or still runs
        n = max(self.settings.candidates, 4 * k)
        vector = self.embedder.embed([query])[0]
        dense = self.store.query(vector.tolist(), n, exclude=hidden)
        lexical = self.keyword.query(query, n, exclude=hidden)

        aggs: dict[str, _Agg] = {}
        texts = {hit.chunk_id: hit.text for hit in dense}
        for hit in dense:
            agg = aggs.setdefault(hit.paper_id, _Agg())
            agg.dense = max(agg.dense if agg.dense is not None else -1.0, hit.similarity)
        for chunk_id, score in lexical:
            agg = aggs.setdefault(chunk_id.rsplit("#", 1)[0], _Agg())
            agg.keyword = max(agg.keyword or 0.0, score)
        for chunk_id, score in fuse(dense, lexical, self.settings).items():
            agg = aggs[chunk_id.rsplit("#", 1)[0]]
            agg.chunks[chunk_id] = score
            agg.fused = max(agg.fused, score)  # a paper ranks by its best chunk

        order = sorted(aggs, key=lambda pid: (-aggs[pid].fused, pid))
        papers = self.store.papers(order[: 3 * k])
        sources: list[Source] = []
        seen_text: dict[str, Source] = {}
        for pid in order[: 3 * k]:
            if pid not in papers:
                continue  # deleted since the keyword index was built
            agg = aggs[pid]
            text_hash = papers[pid].text_hash
            if text_hash in seen_text:  # the same abstract under another id (overlapping corpora)
                seen_text[text_hash].duplicates.append(pid)
                continue
            best = sorted(agg.chunks, key=lambda c: -agg.chunks[c])[:2]
            source = Source(
                papers[pid],
                agg.fused,
                agg.dense,
                agg.keyword,
                len(sources) + 1,
                [texts[c] for c in best if c in texts],
            )
            seen_text[text_hash] = source
            sources.append(source)
            if len(sources) == k:
                break
        return sources
