"""Vector storage behind two small interfaces, a reading one (StoreReader) and a writing one (StoreWriter);
Chroma (embedded or server) is the one backend today and implements both."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rag_assistant.corpus.models import Paper

if TYPE_CHECKING:
    from rag_assistant.index.chroma_open import ChromaEndpoint

RUN_KEY = "ingest_run"  # chunk metadata: the ingest run that wrote it (see index/pending.py)
PROOF_PAPERS = 2_000  # papers proven unchanged per ids-only query (`_proven`): bounds its size


@dataclass(frozen=True)
class StoredChunk:
    """A chunk as stored: its text and the paper fields needed to cite it without another lookup."""

    chunk_id: str
    paper_id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ChunkHit:
    chunk_id: str
    paper_id: str
    text: str
    similarity: float  # cosine similarity to the query, -1..1
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PaperState:
    """What the store holds of one paper: enough to decide whether re-ingest must touch it."""

    content_hash: str
    source: str
    chunk_ids: tuple[str, ...]
    complete: bool  # every chunk of that hash is present (a killed ingest leaves this False)


class StoreReader(Protocol):
    """The reading half: what search, answers and stats need. Never changes the store."""

    def query(self, embedding: Sequence[float], n: int, exclude: Collection[str] = ()) -> list[ChunkHit]: ...

    def embeddings_for(self, texts: Sequence[str]) -> dict[str, list[float]]: ...

    def papers(self, paper_ids: Sequence[str]) -> dict[str, Paper]: ...

    def unfinished_papers(self, runs: Sequence[str]) -> set[str]: ...

    def iter_chunks(self) -> Iterator[tuple[str, str]]: ...

    def count(self) -> int: ...

    def dimension(self) -> int | None: ...

    def iter_papers(self) -> Iterator[Paper]: ...

    def sources(self) -> dict[str, int]: ...

    def get_info(self) -> dict[str, Any]: ...


class StoreWriter(Protocol):
    """The writing half, owned by ingest: writes, and the per-paper state an ingest diffs a corpus against."""

    def add(self, chunks: Sequence[StoredChunk], embeddings: Sequence[Sequence[float]]) -> None: ...

    def delete(self, chunk_ids: Sequence[str]) -> None: ...

    def set_info(self, info: dict[str, Any]) -> None: ...

    def paper_states(self, paper_ids: Sequence[str]) -> dict[str, PaperState]: ...

    def source_states(
        self, sources: Sequence[str], hashes: Mapping[str, str] | None = None
    ) -> dict[str, PaperState]: ...


class VectorStore(StoreReader, StoreWriter, Protocol):
    """Both halves: what a backend implements (ChromaStore) and what ingest works on."""


def paper_of(chunk_id: str) -> str:
    """The paper id of a chunk id (`<paper id>#<chunk index>`)."""
    return chunk_id.rsplit("#", 1)[0]


def chunks_by_paper(chunk_ids: Iterable[str]) -> dict[str, list[str]]:
    """Chunk ids grouped by paper id, in first-seen order."""
    grouped: dict[str, list[str]] = {}
    for cid in chunk_ids:
        grouped.setdefault(paper_of(cid), []).append(cid)
    return grouped


def paper_to_metadata(paper: Paper, index: int, n_chunks: int) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "paper_id": paper.paper_id,
        "chunk_index": index,
        "n_chunks": n_chunks,
        "paper_hash": paper.content_hash,
        "text_hash": paper.text_hash,
        "source": paper.source,
        "position": paper.position,
    }
    if paper.title:
        meta["title"] = paper.title
    if index == 0:  # the whole abstract, once per paper, so answers and references need no other store
        meta["paper_text"] = paper.text
        meta["paper_meta"] = json.dumps(paper.metadata, ensure_ascii=False, default=str)
    return meta


def text_key(text: str) -> str:
    """A chunk text's fingerprint, stored with it, so equal texts can share one embedding."""
    import hashlib

    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def metadata_to_paper(meta: dict[str, Any]) -> Paper:
    return Paper(
        paper_id=str(meta["paper_id"]),
        text=str(meta.get("paper_text", "")),
        source=str(meta.get("source", "")),
        position=int(meta.get("position", 0)),
        title=meta.get("title"),
        metadata=json.loads(meta.get("paper_meta") or "{}"),
    )


class ChromaStore:
    """Chroma collection with cosine distance. Embedded (PersistentClient) unless `url` names a server. Opened for
    reading (`write=False`) it creates nothing (index/chroma_open.py)."""

    def __init__(
        self, path: Path | None, collection: str, url: str | ChromaEndpoint | None = None, write: bool = True
    ) -> None:
        from rag_assistant.index.chroma_open import ChromaEndpoint, open_collection

        self.location = (url if isinstance(url, ChromaEndpoint) else ChromaEndpoint(url)).shown if url else str(path)
        self.client, self.collection = open_collection(path, collection, url, write)
        self.batch_size = max(1, min(5000, self.client.get_max_batch_size()))

    def add(self, chunks: Sequence[StoredChunk], embeddings: Sequence[Sequence[float]]) -> None:
        for start in range(0, len(chunks), self.batch_size):
            part = chunks[start : start + self.batch_size]
            self.collection.upsert(
                ids=[c.chunk_id for c in part],
                embeddings=embeddings[start : start + self.batch_size],  # type: ignore[arg-type]
                documents=[c.text for c in part],
                metadatas=[{**c.metadata, "chunk_hash": text_key(c.text)} for c in part],
            )

    def embeddings_for(self, texts: Sequence[str]) -> dict[str, list[float]]:
        """Vectors already stored for exactly these texts (any paper's chunk), by text: what an ingest
        need not embed again (overlapping corpora, an abstract edited in one sentence)."""
        keys = {text_key(t): t for t in texts}
        out: dict[str, list[float]] = {}
        wanted = list(keys)
        for start in range(0, len(wanted), 500):
            res = self.collection.get(
                where={"chunk_hash": {"$in": wanted[start : start + 500]}}, include=["embeddings", "metadatas"]
            )
            for meta, vector in zip(
                res["metadatas"] or [], res["embeddings"] if res["embeddings"] is not None else [], strict=False
            ):
                text = keys.get(str(meta.get("chunk_hash")))
                if text is not None:
                    out.setdefault(text, [float(x) for x in vector])
        return out

    def query(self, embedding: Sequence[float], n: int, exclude: Collection[str] = ()) -> list[ChunkHit]:
        """The `n` chunks nearest to `embedding`, leaving out the papers in `exclude`. Chroma's `$nin` filter is
        slow (1.5 s instead of 70 ms at 100k chunks), so the excluded papers are first dropped from twice as many
        neighbours; only when they fill more than half of those (one huge excluded paper) does Chroma filter."""
        # No count() first: Chroma returns what it has when asked for more, and counting costs ~12 ms per
        # 100k chunks, more than the query itself
        if not exclude:
            return self._nearest(embedding, n)
        wide = self._nearest(embedding, 2 * n)
        hits = [h for h in wide if h.paper_id not in exclude]
        if len(hits) >= n or len(wide) < 2 * n:  # enough left, or that was every chunk
            return hits[:n]
        return self._nearest(embedding, n, {"paper_id": {"$nin": sorted(exclude)}})

    def _nearest(self, embedding: Sequence[float], n: int, where: dict[str, Any] | None = None) -> list[ChunkHit]:
        res = self.collection.query(
            query_embeddings=[list(map(float, embedding))],
            n_results=n,
            where=where,
            include=["documents", "metadatas", "distances"],
        )
        return [
            ChunkHit(cid, str(meta["paper_id"]), doc or "", 1.0 - float(dist), dict(meta))
            for cid, doc, meta, dist in zip(
                res["ids"][0], res["documents"][0], res["metadatas"][0], res["distances"][0], strict=True
            )
        ]

    def delete(self, chunk_ids: Sequence[str]) -> None:
        for start in range(0, len(chunk_ids), self.batch_size):
            self.collection.delete(ids=list(chunk_ids[start : start + self.batch_size]))

    def _get_where(self, paper_ids: Sequence[str], include: list[str]) -> Iterator[tuple[str, dict]]:
        step = 500
        for start in range(0, len(paper_ids), step):
            res = self.collection.get(
                where={"paper_id": {"$in": list(paper_ids[start : start + step])}},
                include=include,  # type: ignore[arg-type]
            )
            yield from zip(res["ids"], res["metadatas"] or [], strict=False)

    def paper_states(self, paper_ids: Sequence[str]) -> dict[str, PaperState]:
        return _states(self._get_where(paper_ids, ["metadatas"]))

    def papers(self, paper_ids: Sequence[str]) -> dict[str, Paper]:
        ids = [f"{pid}#0" for pid in dict.fromkeys(paper_ids)]
        if not ids:
            return {}
        res = self.collection.get(ids=ids, include=["metadatas"])
        out = {}
        for meta in res["metadatas"] or []:
            paper = metadata_to_paper(dict(meta))
            out[paper.paper_id] = paper
        return out

    def source_states(self, sources: Sequence[str], hashes: Mapping[str, str] | None = None) -> dict[str, PaperState]:
        """The state of every stored paper that came from one of these file names (one query per file).
        `hashes` (paper id -> content hash to be ingested) spares reading the metadata, slow with the whole
        abstracts (0.5 s for 5k chunks, ids 0.03 s): papers that ids-only queries prove complete and unchanged
        (`_proven`) are stated from their ids, the others read in full."""
        files: dict[str, str] = {}  # chunk id -> the file it came from
        for source in dict.fromkeys(sources):
            files.update(dict.fromkeys(self.collection.get(where={"source": source}, include=[])["ids"], source))
        by_paper = chunks_by_paper(files)
        known = hashes or {}
        proven = self._proven(by_paper, known)
        rest = [pid for pid in by_paper if pid not in proven]
        states = _states((cid, meta) for cid, meta in self._get_where(rest, ["metadatas"]) if cid in files)
        for pid in proven:
            cids = by_paper[pid]
            states[pid] = PaperState(known[pid], files[cids[0]], tuple(cids), complete=True)
        return states

    def _proven(self, by_paper: dict[str, list[str]], hashes: Mapping[str, str]) -> set[str]:
        """The papers whose every chunk holds the paper's hash and n_chunks = its number of chunks (complete and
        unchanged, as `_states` finds them). Chroma cannot filter (paper id, hash) pairs in bulk, so a chunk must
        hold a hash of its paper's row and one of its column (`_grid`): only the paper itself is in both, once
        papers sharing a hash (one record under two ids) are left to the full read."""
        shared = {h for h, n in Counter(hashes.values()).items() if n > 1}
        todo = [pid for pid in by_paper if pid in hashes and hashes[pid] not in shared]
        proven: set[str] = set()
        for start in range(0, len(todo), PROOF_PAPERS):
            batch = todo[start : start + PROOF_PAPERS]
            by_count: dict[int, list[str]] = {}
            for pid in batch:
                by_count.setdefault(len(by_paper[pid]), []).append(pid)
            counts = _any([{"$and": [{"paper_id": {"$in": ids}}, {"n_chunks": n}]} for n, ids in by_count.items()])
            rows, columns = _grid(batch, hashes)
            found = set(self.collection.get(where={"$and": [rows, columns, counts]}, include=[])["ids"])
            proven.update(pid for pid in batch if found.issuperset(by_paper[pid]))
        return proven

    def unfinished_papers(self, runs: Sequence[str]) -> set[str]:
        """Papers holding a chunk written by one of these ingest runs that are not complete. Costs a read of
        the metadata of every chunk those papers have (~1 s per 10k): paid only while an ingest is pending."""
        res = self.collection.get(where={RUN_KEY: {"$in": list(runs)}}, include=[])  # ids only: 10x cheaper
        touched = sorted({paper_of(cid) for cid in res["ids"]})
        return {pid for pid, state in self.paper_states(touched).items() if not state.complete}

    def iter_chunks(self) -> Iterator[tuple[str, str]]:
        """Every (chunk_id, text), paged, in a stable order: what the keyword index is built from."""
        step = 5000
        offset = 0
        while True:
            res = self.collection.get(include=["documents"], limit=step, offset=offset)
            if not res["ids"]:
                return
            yield from zip(res["ids"], res["documents"] or [], strict=True)
            offset += len(res["ids"])

    def count(self) -> int:
        return int(self.collection.count())

    def dimension(self) -> int | None:
        """The length of the stored vectors (None: nothing stored): what question and chunk vectors must have."""
        res = self.collection.get(limit=1, include=["embeddings"])
        vectors = res["embeddings"] if res["embeddings"] is not None else []
        return len(vectors[0]) if len(vectors) else None

    def iter_papers(self) -> Iterator[Paper]:
        """Every paper whose first chunk is stored, read from that chunk, paged."""
        step, offset = 5000, 0
        while True:
            res = self.collection.get(where={"chunk_index": 0}, include=["metadatas"], limit=step, offset=offset)
            if not res["ids"]:
                return
            yield from (metadata_to_paper(dict(meta)) for meta in res["metadatas"] or [])
            offset += len(res["ids"])

    def sources(self) -> dict[str, int]:
        """File name -> number of papers from it (read from each paper's first chunk)."""
        return dict(Counter(paper.source for paper in self.iter_papers()))

    def get_info(self) -> dict[str, Any]:
        # Read afresh: a long-lived client (chat) must see another process's ingest start and finish.
        return dict(self.client.get_collection(self.collection.name, embedding_function=None).metadata or {})

    def set_info(self, info: dict[str, Any]) -> None:
        self.collection.modify(metadata=info)

    def close(self) -> None:
        """Let go of the client. An embedded client keeps the vectors it loaded, once per process and data dir,
        and never sees another process's writes; a new one opened after this does (IndexReader.catch_up)."""
        self.client.close()


def _states(rows: Iterable[tuple[str, Any]]) -> dict[str, PaperState]:
    """Group (chunk id, metadata) rows by paper; complete = one hash and all n_chunks chunks present."""
    found: dict[str, list[tuple[str, Any]]] = {}
    for cid, meta in rows:
        found.setdefault(str(meta["paper_id"]), []).append((cid, meta))
    states = {}
    for pid, group in found.items():
        hashes = {m["paper_hash"] for _, m in group}
        first = group[0][1]
        states[pid] = PaperState(
            content_hash=str(first["paper_hash"]) if len(hashes) == 1 else "",
            source=str(first.get("source", "")),
            chunk_ids=tuple(cid for cid, _ in group),
            complete=len(hashes) == 1 and len(group) == int(first["n_chunks"]),
        )
    return states


def _grid(papers: list[str], hashes: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Where clauses over the papers laid out on a square grid: a chunk's paper id and hash are both among those
    of one row; of one column. A row and a column share one paper."""
    side = math.isqrt(len(papers) - 1) + 1  # side * side >= len(papers)
    rows = [papers[start : start + side] for start in range(0, len(papers), side)]
    columns = [papers[start::side] for start in range(side)]
    return _any([_line(ids, hashes) for ids in rows]), _any([_line(ids, hashes) for ids in columns])


def _line(ids: list[str], hashes: Mapping[str, str]) -> dict[str, Any]:
    return {"$and": [{"paper_id": {"$in": ids}}, {"paper_hash": {"$in": [hashes[p] for p in ids]}}]}


def _any(clauses: list[dict[str, Any]]) -> dict[str, Any]:
    return clauses[0] if len(clauses) == 1 else {"$or": clauses}


def open_store(settings: Any, write: bool = True) -> ChromaStore:  # noqa: ANN401 - Settings
    """The store the settings describe: a Chroma server if chroma_url is set, else embedded on disk; for reading
    only with `write=False` (nothing is created, and read-only storage works)."""
    from rag_assistant.index.chroma_open import ChromaEndpoint

    return ChromaStore(settings.chroma_dir, settings.collection, ChromaEndpoint.of(settings), write)
