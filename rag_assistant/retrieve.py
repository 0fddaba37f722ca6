"""Hybrid retrieval: dense (Chroma) + keyword (BM25), convex fusion per paper, dense pseudo-relevance feedback.
Reads the index only through its read-only face (index/reader.py), and hands the layers above what they read
of it (papers by id, keyword statistics), so nothing above reaches the store."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from rag_assistant.config import Settings
from rag_assistant.corpus.models import DUPLICATE_IDS, Paper
from rag_assistant.errors import EmptyIndexError, FilterError
from rag_assistant.index.embedding import Embedder, get_embedder
from rag_assistant.index.filters import chroma_where, resolve
from rag_assistant.index.keyword import FieldFilter, KeywordSearch
from rag_assistant.index.reader import IndexReader
from rag_assistant.index.store import ChunkHit, paper_of
from rag_assistant.text import plural


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


def _scale(cosine: dict[str, float], keyword: dict[str, float], settings: Settings) -> dict[str, float]:
    """Key -> w * cosine + (1 - w) * bm25 / max bm25 of this query; a key missing from one list gets that
    list's floor (the lowest cosine retrieved, or 0 for BM25)."""
    floor = min(cosine.values(), default=0.0)
    top = max(keyword.values(), default=1.0) or 1.0
    w = settings.dense_weight
    return {
        key: w * cosine.get(key, floor) + (1 - w) * keyword.get(key, 0.0) / top
        for key in cosine.keys() | keyword.keys()
    }


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
    return _scale({hit.chunk_id: hit.similarity for hit in dense}, dict(lexical), settings)


def fuse_papers(aggs: dict[str, _Agg], settings: Settings) -> dict[str, float]:
    """Paper id -> convex fusion of the paper's best cosine and its best BM25 score, which may come from
    different chunks (per chunk, a paper whose best dense chunk is not its best keyword chunk gets a floor
    on one side of each)."""
    cosine = {pid: a.dense for pid, a in aggs.items() if a.dense is not None}
    keyword = {pid: a.keyword for pid, a in aggs.items() if a.keyword is not None}
    return _scale(cosine, keyword, settings)


SURVEY_FEEDBACK = 5  # papers whose vectors and words expand a survey question
SURVEY_TERMS = 10  # words added to a survey question's second keyword pass


def expansion_terms(texts: Sequence[str], idf: Callable[[list[str]], dict[str, float]], n: int) -> list[str]:
    """The n keyword terms that best characterise these texts: frequency in each (as a share of its length)
    times IDF, summed over the texts (RM3's term weights with uniform document weights)."""
    from rag_assistant.text import tokenize

    docs = tokenize(list(texts))
    weights = idf(sorted({t for doc in docs for t in doc}))
    score: dict[str, float] = {}
    for doc in docs:
        for term in set(doc):
            score[term] = score.get(term, 0.0) + doc.count(term) / len(doc) * weights.get(term, 0.0)
    return sorted(score, key=lambda t: (-score[t], t))[:n]


def _best_hits(hits: list[ChunkHit]) -> list[ChunkHit]:
    """One hit per chunk, the most similar, best first."""
    best: dict[str, ChunkHit] = {}
    for hit in hits:
        if hit.chunk_id not in best or hit.similarity > best[hit.chunk_id].similarity:
            best[hit.chunk_id] = hit
    return sorted(best.values(), key=lambda h: -h.similarity)


def _best_scores(*lists: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Keyword lists merged: each scaled to its best score (queries of different lengths score on different
    scales), a chunk keeping its best."""
    best: dict[str, float] = {}
    for items in lists:
        top = max((score for _, score in items), default=1.0) or 1.0
        for chunk_id, score in items:
            best[chunk_id] = max(best.get(chunk_id, 0.0), score / top)
    return sorted(best.items(), key=lambda item: -item[1])


class Retriever:
    """Searches the index the settings describe; `reader` and `embedder` let callers share loaded ones."""

    def __init__(self, settings: Settings, reader: IndexReader | None = None, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.reader = reader if reader is not None else IndexReader(settings)
        self._embedder = embedder
        self.hidden = 0  # papers the last search left out: stored in part by an unfinished ingest
        self.where: list[FieldFilter] = []  # filters on paper fields (index/filters.py), before ranking

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            s = self.settings
            self._embedder = get_embedder(
                s.embedding_model, s.embedding_backend, s.embed_batch_size, s.remote_embedding
            )
        return self._embedder

    @property
    def keyword(self) -> KeywordSearch:
        """The keyword index, loaded on first use (touch it to load it before timing searches)."""
        return self.reader.keyword

    def restrict(self, filters: Sequence[FieldFilter]) -> list[FieldFilter]:
        """Search only papers passing every filter from now on (none: all papers), checked against the fields
        the index holds (FilterError otherwise); the filters as resolved (topic parts become topics)."""
        if self.reader.empty():
            raise EmptyIndexError("the index is empty", "run `rag-assistant ingest` first")
        self.where = resolve(filters, self.reader.stored_fields().catalogue) if filters else []
        for f in self.where:  # papers carry the field, yet no chunk: stored before fields were (a dense miss)
            if not self.reader.any_match(chroma_where([f]) or {}):
                raise FilterError(
                    f"this index was written before paper fields: its chunks cannot be filtered by {f.field}",
                    "re-ingest its files to upgrade it (`rag-assistant ingest FILE`; stored vectors are reused)",
                )
        return self.where

    def idf(self, terms: list[str]) -> dict[str, float]:
        """BM25 inverse document frequency of these terms over the indexed chunks (answer relevance)."""
        return self.reader.keyword.idf(terms)

    def papers(self, paper_ids: Sequence[str]) -> dict[str, Paper]:
        """The indexed papers among these ids, by id."""
        return self.reader.papers(paper_ids)

    def sentence_vectors(self, papers: Sequence[Paper]) -> dict[str, Any]:
        """Paper id -> the vectors of its abstract's sentences (n x dim, in text.split_sentences order), stored
        at ingest or computed once per process (IndexReader.sentence_vectors)."""
        return self.reader.sentence_vectors(papers, self.embedder)

    def count(self) -> int:
        """Number of indexed chunks (0: nothing ingested yet)."""
        return self.reader.count()

    def search(self, query: str, k: int | None = None, depth: int | None = None) -> list[Source]:
        """The k best papers; `depth` chunks are fetched from each retriever (default: `candidates`, or 4k)."""
        k = k or self.settings.top_k
        if self.reader.empty():
            raise EmptyIndexError("the index is empty", "run `rag-assistant ingest` first")
        info = self.reader.checked_info()
        self.reader.catch_up(info)  # another process ingested since the last search: see what it wrote
        hidden = self.reader.hidden(info)  # half-written by an ingest that was killed or still runs
        self.hidden = len(hidden)
        n = depth or max(self.settings.candidates, 4 * k)
        vector = self.embedder.embed_cached([query])[0]  # answering embeds the question again: cached
        self.embedder.check_dimension(len(vector), self.reader.dimension())  # a swapped server model
        dense = self._dense(vector.tolist(), n, hidden)
        lexical = self._lexical(query, n, hidden)
        aggs = self._rank(dense, lexical)
        if self.settings.feedback_papers:
            first = {pid: agg.dense for pid, agg in aggs.items()}
            dense = self._feedback(
                vector, dense, aggs, n, hidden, self.settings.feedback_papers, self.settings.feedback_weight
            )
            aggs = self._rank(dense, lexical)
            for pid, agg in aggs.items():  # dense_score stays the question's own cosine (abstention reads it)
                agg.dense = first.get(pid)
        return self._sources(aggs, dense, k)

    def search_warnings(self) -> list[str]:
        """What the last search's results lack: papers of an ingest that was interrupted (or still runs)."""
        if not self.hidden:
            return []
        return [
            f"an ingest is incomplete: {plural(self.hidden, 'paper')} it stored in part "
            f"{'is' if self.hidden == 1 else 'are'} hidden from search until `rag-assistant ingest` completes "
            f"{'it' if self.hidden == 1 else 'them'} (unless an ingest is still running)"
        ]

    def _rank(self, dense: list[ChunkHit], lexical: list[tuple[str, float]]) -> dict[str, _Agg]:
        """Paper id -> its evidence and fused score."""
        aggs: dict[str, _Agg] = {}
        for hit in dense:
            agg = aggs.setdefault(hit.paper_id, _Agg())
            agg.dense = max(agg.dense if agg.dense is not None else -1.0, hit.similarity)
        for chunk_id, score in lexical:
            agg = aggs.setdefault(paper_of(chunk_id), _Agg())
            agg.keyword = max(agg.keyword or 0.0, score)
        for chunk_id, score in fuse(dense, lexical, self.settings).items():
            agg = aggs[paper_of(chunk_id)]
            agg.chunks[chunk_id] = score
            agg.fused = max(agg.fused, score)  # a paper ranks by its best chunk
        if self.settings.fusion == "convex" and self.settings.fuse_per == "paper":
            for pid, score in fuse_papers(aggs, self.settings).items():
                aggs[pid].fused = score
        return aggs

    def survey(self, query: str, n: int, depth: int) -> list[Source]:
        """The n best papers for a question after every paper on a topic ("which papers ...?"): the hybrid pass
        to `depth` chunks, then a second dense pass with the question moved halfway to the best chunks of the
        top SURVEY_FEEDBACK papers (Rocchio) and a second keyword pass with the question plus the words that
        most distinguish those papers (RM3-like), each list merged into its kind before fusion. Papers written in
        other words than the question's are found through the words and vectors of the ones that were not."""
        if self.reader.empty():
            raise EmptyIndexError("the index is empty", "run `rag-assistant ingest` first")
        hidden = self.reader.hidden(self.reader.checked_info())
        self.hidden = len(hidden)
        vector = self.embedder.embed_cached([query])[0]
        self.embedder.check_dimension(len(vector), self.reader.dimension())
        dense = self._dense(vector.tolist(), depth, hidden)
        lexical = self._lexical(query, depth, hidden)
        aggs = self._rank(dense, lexical)
        first = {pid: agg.dense for pid, agg in aggs.items()}
        top = sorted(aggs, key=lambda pid: (-aggs[pid].fused, pid))[:SURVEY_FEEDBACK]
        dense2 = self._feedback(vector, dense, aggs, depth, hidden, SURVEY_FEEDBACK, 0.5)
        words = expansion_terms([p.text for p in self.reader.papers(top).values()], self.idf, SURVEY_TERMS)
        lexical2 = self._lexical(f"{query} {' '.join(words)}", depth, hidden)
        aggs = self._rank(_best_hits(dense + dense2), _best_scores(lexical, lexical2))
        for pid, agg in aggs.items():  # the question's own cosine where the first pass saw the paper
            agg.dense = first.get(pid, agg.dense)
        return self._sources(aggs, dense + dense2, n)

    def _feedback(
        self,
        vector: Any,  # noqa: ANN401 - numpy vector
        dense: list[ChunkHit],
        aggs: dict[str, _Agg],
        n: int,
        hidden: Collection[str],
        papers: int,
        beta: float,
    ) -> list[ChunkHit]:
        """Dense pseudo-relevance feedback (Rocchio): search again with the question's vector moved towards
        the best chunks of the first ranking's top papers, which finds more papers on the same topic."""
        import numpy as np

        top = sorted(aggs, key=lambda pid: (-aggs[pid].fused, pid))[:papers]
        best: dict[str, ChunkHit] = {}
        for hit in dense:  # best first
            if hit.paper_id in top and hit.paper_id not in best:
                best[hit.paper_id] = hit
        vectors = self.reader.embeddings_for([hit.text for hit in best.values()])
        if not vectors:
            return dense
        centroid = np.mean([np.asarray(v) for v in vectors.values()], axis=0)
        moved = (1 - beta) * vector / np.linalg.norm(vector) + beta * centroid / np.linalg.norm(centroid)
        return self._dense((moved / np.linalg.norm(moved)).tolist(), n, hidden)

    def _dense(self, vector: list[float], n: int, hidden: Collection[str]) -> list[ChunkHit]:
        """The dense search, within the filters when there are any (the call is as before without)."""
        where = chroma_where(self.where)
        return self.reader.query(vector, n, exclude=hidden, **({"where": where} if where else {}))

    def _lexical(self, query: str, n: int, hidden: Collection[str]) -> list[tuple[str, float]]:
        """The keyword search, within the filters when there are any."""
        return self.keyword.query(query, n, exclude=hidden, **({"where": self.where} if self.where else {}))

    def _sources(self, aggs: dict[str, _Agg], dense: list[ChunkHit], k: int) -> list[Source]:
        texts = {hit.chunk_id: hit.text for hit in dense}
        order = sorted(aggs, key=lambda pid: (-aggs[pid].fused, pid))
        papers = self.reader.papers(order[: 3 * k])
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
                list(papers[pid].metadata.get(DUPLICATE_IDS, ())),  # copies the load skipped
            )
            seen_text[text_hash] = source
            sources.append(source)
            if len(sources) == k:
                break
        return sources
