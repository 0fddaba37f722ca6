"""What a store keeps of its reads between searches: the papers read from their first chunks and the texts of the
chunks search found, until the store writes (ChromaStore clears it) or it holds too many.

Why: in the layout of index/records.py a chunk's text is a span of its paper's abstract, stored on the paper's
first chunk, and Chroma's cost of a read is its metadata's size (50 first chunks, each holding an abstract:
~8 ms; 50 other chunks: ~2 ms; the nearest-neighbour search alone: ~2 ms). So a search asks Chroma for ids and
distances only, and reads, in one `get`, just the chunks and the first chunks it has not read before: each
first chunk once, whether it was a hit or the paper of one (reading it once with the query's metadata and again
for its paper tripled a warm query's time)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rag_assistant.corpus.models import Paper
from rag_assistant.index.records import PAPER_KEY, chunk_text, metadata_to_paper

LIMIT = 20_000  # papers (and chunk texts) kept at most: a long chat reads many, memory stays bounded
# a first chunk's own keys for its paper (this layout's and the previous one's): not kept with its text
PAPER_KEYS = (PAPER_KEY, "paper_text", "paper_meta")


def first_of(paper_id: str) -> str:
    """The id of a paper's first chunk (the one holding the paper, index/records.py)."""
    return f"{paper_id}#0"


class ReadCache:
    """Papers by id and chunk texts by chunk id read from a chunks `collection` (a chromadb Collection)."""

    def __init__(self, collection: Any) -> None:  # noqa: ANN401 - a chromadb Collection
        self.collection = collection
        self.papers: dict[str, Paper] = {}
        self.chunks: dict[str, tuple[str, dict[str, Any]]] = {}  # chunk id -> (text, metadata less PAPER_KEYS)

    def clear(self) -> None:
        self.papers.clear()
        self.chunks.clear()

    def read_papers(self, paper_ids: Sequence[str]) -> dict[str, Paper]:
        """The stored papers among these ids, by id, read from their first chunks unless kept."""
        self._bound()
        wanted = [first_of(pid) for pid in dict.fromkeys(paper_ids) if pid not in self.papers]
        for start in range(0, len(wanted), 500):
            self._read(wanted[start : start + 500])
        return {pid: self.papers[pid] for pid in dict.fromkeys(paper_ids) if pid in self.papers}

    def read_chunks(self, chunk_ids: Sequence[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        """Chunk id -> (text, metadata without the paper's abstract) of the stored ones among these ids; a chunk
        whose paper's first chunk is missing (being rewritten this instant) is left out."""
        self._bound()
        missing = [cid for cid in dict.fromkeys(chunk_ids) if cid not in self.chunks]
        firsts = {first_of(cid.rsplit("#", 1)[0]) for cid in missing}
        wanted = missing + sorted(f for f in firsts if f not in missing and f.rsplit("#", 1)[0] not in self.papers)
        for start in range(0, len(wanted), 500):
            self._read(wanted[start : start + 500])
        return {cid: self.chunks[cid] for cid in dict.fromkeys(chunk_ids) if cid in self.chunks}

    def _read(self, chunk_ids: list[str]) -> None:
        """Read these chunks: each first chunk's paper kept, then each chunk's text (needing its paper's)."""
        res = self.collection.get(ids=chunk_ids, include=["metadatas", "documents"])
        rows = list(zip(res["ids"], res["documents"] or [None] * len(res["ids"]), res["metadatas"] or [], strict=True))
        for _, _, meta in rows:
            if meta.get("chunk_index") == 0:
                paper = metadata_to_paper(meta)
                self.papers[paper.paper_id] = paper
        for cid, doc, meta in rows:
            text = chunk_text(meta, doc, self.papers.get(str(meta["paper_id"])))
            if text is not None:
                self.chunks[cid] = text, {k: v for k, v in meta.items() if not k.startswith(PAPER_KEYS)}

    def _bound(self) -> None:
        if len(self.papers) > LIMIT or len(self.chunks) > LIMIT:
            self.clear()
