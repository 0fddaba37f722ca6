"""Keyword search in the Chroma server, where the deployment can do it: distributed Chroma and Chroma Cloud index
sparse vectors server-side (a `SparseVectorIndexConfig` with BM25 weighting in the collection's schema, ranked
through the `Search` API), while embedded and single-node Chroma refuse them ("Sparse vector indexing is not
enabled in local"). Whether the deployment can is probed once, when an ingest creates the collection (`probe`,
in a scratch collection deleted at once), since a schema cannot be changed later. A collection created with the
sparse index stores each chunk's BM25 vector (`add_vectors`: the client index's terms, text.tokenize, hashed as
chroma_bm25 hashes its tokens), and ingest records in the collection's metadata where keyword search runs
(`recorded`), so readers decide from the info they read anyway (`server_side`) and never probe. Where it runs in
the server, the client keeps no keyword index.

What can be tested here is the detection (every deployment on this machine refuses, so its answer is "client")
and the fallback; `search` and `idf` are written against chromadb 1.5's Search API but never ran against a
server that supports it (docs/benchmarks.md, "Beyond one server")."""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from rag_assistant.text import bm25_idf, query_terms, tokenize

INFO_KEY = "keyword_search"  # collection metadata: where keyword search runs, SERVER or CLIENT
SERVER, CLIENT = "server", "client"
SPARSE_KEY = "bm25"  # chunk metadata: its BM25 sparse vector (`vector`; collections ranked in the server only)
PROBE_PREFIX = "rag-assistant-probe-"  # scratch collections of `probe`, deleted at once
IDF_CAP = 1000  # chunks counted per term by `idf`: a term in more of them gets the IDF of one in IDF_CAP
K1, B = 1.2, 0.75  # BM25's, as the client index (tantivy) and chroma_bm25 have them
AVG_TERMS = 120  # a chunk's terms on average (130 per bundled abstract): fixed, since the server keeps no lengths

_log = logging.getLogger(__name__)


def sparse_schema() -> Any:  # noqa: ANN401 - a chromadb Schema
    """The schema of a collection whose keywords the server ranks: cosine dense vectors given by the client (a
    schema replaces the `configuration` a collection is otherwise created with: Chroma refuses both), and
    SPARSE_KEY a sparse vector index with BM25 weighting: a chunk carries the term frequency part of its terms'
    weights (`vector`), the server scales a query by the IDF it keeps (Lucene's formula: Chroma's
    rust/worker/src/execution/operators/idf.rs). No source key or embedding function: the chunks store no text
    to embed (index/records.py), and their terms are ours, not chroma_bm25's stop words, so no string query."""
    from chromadb import Schema, SparseVectorIndexConfig, VectorIndexConfig

    dense = VectorIndexConfig(space="cosine", embedding_function=None)
    sparse = SparseVectorIndexConfig(bm25=True)
    return Schema().create_index(config=dense).create_index(key=SPARSE_KEY, config=sparse)


def probe(client: Any) -> bool:  # noqa: ANN401 - a chromadb client
    """Whether this Chroma deployment indexes sparse vectors server-side: a collection with `sparse_schema` is
    created under a scratch name and deleted again. The local refusal, or any other failure (a key that may not
    create collections), means no: the collection is then made as before and keyword search stays the client's."""
    from chromadb.errors import NotFoundError

    name = PROBE_PREFIX + uuid.uuid4().hex
    try:
        client.create_collection(name, schema=sparse_schema(), embedding_function=None)
    except Exception as exc:  # noqa: BLE001 - whatever refuses it, the answer is the same
        _log.info("keyword search stays on the client: %s", (str(exc).splitlines() or [type(exc).__name__])[0])
        accepted = False
    else:
        accepted = True
    try:
        client.delete_collection(name)  # also after a refusal: a server that half-created it keeps nothing
    except NotFoundError:
        pass
    except Exception as exc:  # noqa: BLE001 - the probe must not fail an ingest; say what is left
        _log.warning("could not delete the probe's scratch collection %s: %s", name, exc)
    return accepted


def has_index(collection: Any) -> bool:  # noqa: ANN401 - a chromadb Collection
    """Whether the collection was created with the sparse index on SPARSE_KEY (read from its schema, no request)."""
    schema = getattr(collection, "schema", None)
    value = schema.keys.get(SPARSE_KEY) if schema is not None else None
    index = value.sparse_vector.sparse_vector_index if value is not None and value.sparse_vector else None
    return bool(index is not None and index.enabled)


def recorded(store: object) -> dict[str, str]:
    """What ingest records in the collection's metadata: {INFO_KEY: SERVER} when its chunks are indexed for
    keyword search in the server, else {INFO_KEY: CLIENT} (a store that is not Chroma, a deployment that refused
    the probe, a collection created before it)."""
    return {INFO_KEY: SERVER if has_index(getattr(store, "collection", None)) else CLIENT}


def server_side(info: dict[str, Any]) -> bool:
    """Whether the store's info says its keyword search runs in the server (no record: it does not)."""
    return info.get(INFO_KEY) == SERVER


def vector(terms: Sequence[str], query: bool = False) -> Any:  # noqa: ANN401 - a chromadb SparseVector
    """Terms as a sparse vector: each hashed as chroma_bm25 hashes a token (murmur3, seed 0, absolute value),
    weighted by BM25's term frequency part (a chunk's), or 1 (a query's: the server multiplies by the IDF)."""
    import mmh3
    from chromadb import SparseVector

    counts = Counter(abs(mmh3.hash(term, seed=0)) for term in terms)
    keys = sorted(counts)
    if query:
        return SparseVector(indices=keys, values=[1.0] * len(keys))
    norm = K1 * (1 - B + B * len(terms) / AVG_TERMS)
    return SparseVector(indices=keys, values=[counts[k] * (K1 + 1) / (counts[k] + norm) for k in keys])


def add_vectors(collection: Any, metadatas: Sequence[dict[str, Any]], texts: Sequence[str]) -> None:  # noqa: ANN401
    """Put each chunk's BM25 sparse vector in its metadata, when the collection indexes them (else nothing)."""
    if has_index(collection):
        for meta, terms in zip(metadatas, tokenize(list(texts)), strict=True):
            meta[SPARSE_KEY] = vector(terms)


def search(collection: Any, text: str, n: int, where: dict[str, Any] | None) -> list[tuple[str, float]]:  # noqa: ANN401
    """(chunk id, BM25 score) best first, at most n, among the chunks matching `where`: one `Search` ranked by
    `Knn` over SPARSE_KEY with the question's terms (text.query_terms, as the client index). Chroma's sparse
    score is `1 - query . document` (lower is better: rust/worker/src/execution/operators/sparse_log_knn.rs),
    so the BM25 score is 1 minus it, and chunks sharing no term (score 1) are dropped, as the client index
    never returns them. Not run here: no deployment on this machine supports it."""
    from chromadb import K, Knn, Search

    terms = query_terms(text)
    if n <= 0 or not terms:
        return []
    rank = Knn(query=vector(terms, query=True), key=SPARSE_KEY, limit=n)
    found = collection.search(Search(where=where, rank=rank, limit=n).select(K.SCORE))
    rows = zip(found["ids"][0], found["scores"][0] or [], strict=False)
    return [(cid, 1.0 - float(score)) for cid, score in rows if score is not None and float(score) < 1.0]


def idf(collection: Any, terms: Sequence[str], n_chunks: int) -> dict[str, float]:  # noqa: ANN401
    """BM25 IDF of these terms over the chunks (what answer relevance weighs question terms by). Chroma reports no
    document frequencies, so each term's chunks are counted, up to IDF_CAP, by one Search per term, all in one
    request; a term in more chunks gets the IDF of one in IDF_CAP (common terms weigh a little more than in the
    client index). Not run here, as `search`."""
    from chromadb import K, Knn, Search

    wanted = list(dict.fromkeys(terms))
    plans = [
        Search(rank=Knn(query=vector([t], query=True), key=SPARSE_KEY, limit=IDF_CAP), limit=IDF_CAP).select(K.SCORE)
        for t in wanted
    ]
    found = collection.search(plans)["scores"] if plans else []
    df = {t: sum(1 for s in scores or [] if s is not None and s < 1.0) for t, scores in zip(wanted, found, strict=True)}
    return {t: bm25_idf(max(n_chunks, 1), df[t]) for t in terms}


class ServerKeywords:
    """The keyword face of ChromaStore (index/store.py StoreReader): the server ranks, filtered as its dense
    `query` is (paper fields, authors resolved to papers, excluded papers left out before ranking)."""

    collection: Any  # ChromaStore's chromadb Collection
    _chunk_where: Callable[[Mapping[str, Any]], list[dict[str, Any]] | None]  # paper fields -> chunk clauses
    count: Callable[[], int]

    def keyword_search(
        self, text: str, n: int, exclude: Collection[str] = (), where: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """(chunk id, BM25 score) best first, at most n (`search`); only where `server_side`."""
        clauses = self._chunk_where(where) if where else []
        if clauses is None:  # no paper matches the filters
            return []
        if exclude:
            clauses = [*clauses, {"paper_id": {"$nin": sorted(exclude)}}]
        joined = None if not clauses else clauses[0] if len(clauses) == 1 else {"$and": clauses}
        return search(self.collection, text, n, joined)

    def keyword_idf(self, terms: Sequence[str]) -> dict[str, float]:
        """BM25 IDF of these terms over the chunks (`idf`); only where `server_side`."""
        return idf(self.collection, terms, self.count())
