"""What `rag-assistant stats` reports, as data: what the index holds, where it lives, how it was made, and the
state of its keyword index and of interrupted ingests. Read through the read-only face."""

from __future__ import annotations

from typing import Any

from rag_assistant.config import Settings
from rag_assistant.index.reader import IndexReader
from rag_assistant.index.state import recorded_chunking

KEYWORD_CURRENT = "current"
KEYWORD_STALE = "stale (searches rebuild it in memory until the next ingest)"  # index/reader.py says why


def index_stats(settings: Settings, reader: IndexReader | None = None) -> dict[str, Any]:
    """data_dir, store, collection, papers, chunks, sources (file -> papers), embedding_model, chunking,
    keyword_index, unfinished_papers (hidden from search until ingested again), in this order."""
    reader = reader if reader is not None else IndexReader(settings)
    info = reader.info()
    sources = reader.sources()
    chunks = reader.count()
    chunking = recorded_chunking(info, lambda: chunks)
    return {
        "data_dir": str(settings.data_dir),
        "store": settings.chroma_url or str(settings.chroma_dir),
        "collection": settings.collection,
        "papers": sum(sources.values()),
        "chunks": chunks,
        "sources": sources,
        "embedding_model": info.get("embedding_model"),
        "chunking": f"<= {chunking[0]} tokens, {chunking[1]} sentence(s) of overlap" if chunking else None,
        "keyword_index": KEYWORD_CURRENT if reader.keyword_current(info) else KEYWORD_STALE,
        "unfinished_papers": len(reader.hidden(info)),
    }
