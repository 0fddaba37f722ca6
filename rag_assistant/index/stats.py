"""What `rag-assistant stats` reports, as data: what the index holds (the papers search sees, and those an
interrupted ingest left pending), where it lives, how it was made, and the state of its keyword index and of the
sentence vectors. Read through the read-only face."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rag_assistant.config import Settings
from rag_assistant.corpus.fields import normalise
from rag_assistant.corpus.models import Paper
from rag_assistant.index.reader import IndexReader
from rag_assistant.index.sparse import server_side
from rag_assistant.index.state import model_signature, recorded_chunking
from rag_assistant.text import plural

KEYWORD_CURRENT = "current"
KEYWORD_STALE = "stale (searches rebuild it in memory until the next ingest)"  # index/reader.py says why
KEYWORD_SERVER = "in the Chroma server (a sparse BM25 index: no client index)"  # index/sparse.py


def index_stats(settings: Settings, reader: IndexReader | None = None) -> dict[str, Any]:
    """data_dir, store, collection, papers (searchable), chunks, sources (file -> searchable papers),
    embedding_model, chunking, keyword_index, unfinished_papers (pending: stored in part by an interrupted or
    running ingest, hidden from search until an ingest completes them), papers_without_sentence_vectors
    (searchable papers whose sentence vectors are not stored: the next ingest stores them; None when these
    settings do not read the index's), fields (each paper field the index holds -> papers carrying it, most
    common first: corpus/fields.py), in this order."""
    reader = reader if reader is not None else IndexReader(settings)
    info = reader.info()
    hidden = reader.hidden(info)
    papers = [p for p in reader.stored_papers() if p.paper_id not in hidden]
    chunks = reader.count()
    chunking = recorded_chunking(info, lambda: chunks)
    return {
        "data_dir": str(settings.data_dir),
        "store": _store_shown(settings),
        "collection": settings.collection,
        "papers": len(papers),
        "chunks": chunks,
        "sources": dict(Counter(p.source for p in papers)),
        "embedding_model": info.get("embedding_model"),
        "chunking": f"<= {chunking[0]} tokens, {plural(chunking[1], 'sentence')} of overlap" if chunking else None,
        "keyword_index": _keyword_state(reader, info),
        "unfinished_papers": len(hidden),
        "papers_without_sentence_vectors": _without_sentence_vectors(settings, info, chunking, papers, reader),
        "fields": dict(Counter(f for p in papers for f in normalise(p.metadata)).most_common()),
    }


def _keyword_state(reader: IndexReader, info: dict[str, Any]) -> str:
    if server_side(info):
        return KEYWORD_SERVER
    return KEYWORD_CURRENT if reader.keyword_current(info) else KEYWORD_STALE


def _without_sentence_vectors(
    settings: Settings, info: dict[str, Any], chunking: tuple[int, int] | None, papers: list[Paper], reader: IndexReader
) -> int | None:
    """How many of `papers` have no stored sentence vectors (answers compute theirs on every run)."""
    if not papers or chunking is None:
        return 0
    if info.get("embedding_model") != model_signature(settings):  # another model: it would read other rows
        return None
    return reader.papers_without_sentence_vectors(chunking, papers)


def _store_shown(settings: Settings) -> str:
    """Where the index is, without a credential a server URL may carry."""
    from rag_assistant.index.chroma_open import ChromaEndpoint

    server = ChromaEndpoint.of(settings)
    return server.shown if server else str(settings.chroma_dir)
