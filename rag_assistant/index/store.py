"""Vector storage behind two small interfaces, a reading one (StoreReader) and a writing one (StoreWriter);
Chroma (embedded or server) is the one backend today and implements both.

The writing face lists the papers stored whole: a paper's first chunk gets a `listed` int (records.listing: its
id, hash, chunk count and file) after its last chunk is written and loses it before they change (rewriting the
first chunk drops it too), so a listing never claims more than the store holds, for every client of a server.
An unchanged re-ingest finds listings with ids-only queries instead of reading every chunk's metadata. Earlier
versions kept them in a collection of their own (`<name>.papers`, ~0.4 KB a chunk), which the first listing
deletes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rag_assistant.corpus.models import Paper
from rag_assistant.index import records, sparse
from rag_assistant.index.chroma_open import drop_collection
from rag_assistant.index.read_cache import ReadCache, first_of
from rag_assistant.index.records import chunk_metadata, listing, metadata_to_paper, split_where, text_key, texts_of
from rag_assistant.index.records import paper_to_metadata as paper_to_metadata  # what writers of chunks call

if TYPE_CHECKING:
    from rag_assistant.index.chroma_open import ChromaEndpoint

OLD_MANIFEST = "{}.papers"  # the collection earlier versions listed papers in, named after the chunks' one
RUN_KEY = "ingest_run"  # chunk metadata: the ingest run that wrote it (see index/pending.py)


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
    listed: bool = False  # stated from its listing (else read from the chunks)
    legacy: bool = False  # stored before the layout of index/records.py: a re-ingest rewrites it


class StoreReader(Protocol):
    """The reading half: what search, answers and stats need. Never changes the store."""

    def query(
        self, embedding: Sequence[float], n: int, exclude: Collection[str] = (), where: Mapping[str, Any] | None = None
    ) -> list[ChunkHit]: ...

    def embeddings_for(self, texts: Sequence[str]) -> dict[str, list[float]]: ...

    def papers(self, paper_ids: Sequence[str]) -> dict[str, Paper]: ...

    def unfinished_papers(self, runs: Sequence[str]) -> set[str]: ...

    def iter_chunks(self) -> Iterator[tuple[str, str]]: ...

    def count(self) -> int: ...

    def any_match(self, where: Mapping[str, Any]) -> bool: ...

    def dimension(self) -> int | None: ...

    def iter_papers(self) -> Iterator[Paper]: ...

    def sources(self) -> dict[str, int]: ...

    def get_info(self) -> dict[str, Any]: ...

    def keyword_search(  # by the store itself: only where its info says so (index/sparse.py `server_side`)
        self, text: str, n: int, exclude: Collection[str] = (), where: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]: ...

    def keyword_idf(self, terms: Sequence[str]) -> dict[str, float]: ...


class StoreWriter(Protocol):
    """The writing half, owned by ingest: writes, and the per-paper state an ingest diffs a corpus against."""

    def add(self, chunks: Sequence[StoredChunk], embeddings: Sequence[Sequence[float]]) -> None: ...

    def delete(self, chunk_ids: Sequence[str]) -> None: ...

    def set_info(self, info: dict[str, Any]) -> None: ...

    def paper_states(self, paper_ids: Sequence[str]) -> dict[str, PaperState]: ...

    def source_states(
        self, sources: Sequence[str], hashes: Mapping[str, str] | None = None
    ) -> dict[str, PaperState]: ...

    def list_papers(self, papers: Sequence[tuple[Paper, int]]) -> None: ...

    def unlist_papers(self, paper_ids: Sequence[str]) -> None: ...


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


class ChromaStore(sparse.ServerKeywords):
    """Chroma collection with cosine distance. Embedded (PersistentClient) unless `url` names a server. Opened for
    reading (`write=False`) it creates nothing (index/chroma_open.py). Its keyword search in the server, where the
    deployment has one: sparse.ServerKeywords."""

    def __init__(
        self, path: Path | None, collection: str, url: str | ChromaEndpoint | None = None, write: bool = True
    ) -> None:
        from rag_assistant.index.chroma_open import ChromaEndpoint, open_collection

        self.location = (url if isinstance(url, ChromaEndpoint) else ChromaEndpoint(url)).shown if url else str(path)
        self.client, self.collection = open_collection(path, collection, url, write)
        self.batch_size = max(1, min(5000, self.client.get_max_batch_size()))
        self._old_manifest = write  # an earlier version's papers collection may be left: the first listing drops it
        self._path = None if url else path  # an embedded store's directory
        self._cache = ReadCache(self.collection)  # papers and chunk texts read since the last write

    def add(self, chunks: Sequence[StoredChunk], embeddings: Sequence[Sequence[float]]) -> None:
        """Upsert chunks laid out as index/records.py says: no document, the text a span of the paper's abstract
        (from its first chunk, in this call or stored). A chunk already stored loses the keys the new one lacks
        and, written before that layout, its document (emptied: Chroma cannot drop one)."""
        self._cache.clear()
        firsts = {c.paper_id: c.metadata for c in chunks if records.PAPER_KEY in c.metadata}
        papers = {pid: metadata_to_paper(meta) for pid, meta in firsts.items()}
        papers.update(self.papers(sorted({c.paper_id for c in chunks} - set(papers))))
        for start in range(0, len(chunks), self.batch_size):
            part = chunks[start : start + self.batch_size]
            vectors = embeddings[start : start + self.batch_size]
            metas = [chunk_metadata(c.metadata, c.text, papers.get(c.paper_id)) for c in part]
            sparse.add_vectors(self.collection, metas, [c.text for c in part])  # where the server ranks keywords
            old = self.collection.get(ids=[c.chunk_id for c in part], include=["metadatas", "documents"])
            stored = dict(
                zip(old["ids"], zip(old["metadatas"] or [], old["documents"] or [], strict=True), strict=True)
            )
            for chunk, meta in zip(part, metas, strict=True):
                meta.update(dict.fromkeys(set(stored.get(chunk.chunk_id, ({}, ""))[0]) - set(meta)))  # None drops
            legacy = {i for i, c in enumerate(part) if stored.get(c.chunk_id, ({}, ""))[1]}
            for rows in (sorted(legacy), [i for i in range(len(part)) if i not in legacy]):
                if rows:
                    self.collection.upsert(
                        ids=[part[i].chunk_id for i in rows],
                        embeddings=[vectors[i] for i in rows],  # type: ignore[misc]
                        metadatas=[metas[i] for i in rows],
                        **({"documents": [""] * len(rows)} if rows[0] in legacy else {}),  # type: ignore[arg-type]
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

    def query(
        self, embedding: Sequence[float], n: int, exclude: Collection[str] = (), where: Mapping[str, Any] | None = None
    ) -> list[ChunkHit]:
        """The `n` chunks nearest to `embedding` among the papers matching `where` (a filter on paper fields,
        index/filters.py, applied by Chroma before ranking; on authors: resolved to those papers' ids first),
        leaving out the papers in `exclude`. Chroma's `$nin` filter is slow (1.5 s instead of 70 ms at 100k
        chunks), so the excluded papers are first dropped from twice as many neighbours; only when they fill more
        than half of those (one huge excluded paper) does Chroma filter."""
        # No count() first: Chroma returns what it has when asked for more, and counting costs ~12 ms per
        # 100k chunks, more than the query itself
        if where:
            clauses = self._chunk_where(where)
            nin = [{"paper_id": {"$nin": sorted(exclude)}}] if exclude else []
            return [] if clauses is None else self.nearest(embedding, n, _all([*clauses, *nin]))
        if not exclude:
            return self.nearest(embedding, n)
        wide = self.nearest(embedding, 2 * n)
        hits = [h for h in wide if h.paper_id not in exclude]
        if len(hits) >= n or len(wide) < 2 * n:  # enough left, or that was every chunk
            return hits[:n]
        return self.nearest(embedding, n, {"paper_id": {"$nin": sorted(exclude)}})

    def _chunk_where(self, where: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        """`where` as clauses on chunk metadata: its clauses on authors (on first chunks only) resolved to those
        papers' ids; None when no paper matches them."""
        on_authors, rest = split_where(where)
        if not on_authors:
            return rest
        found = self.collection.get(where=_all([*on_authors, {"chunk_index": 0}]), include=[])["ids"]
        return [*rest, {"paper_id": {"$in": [paper_of(cid) for cid in found]}}] if found else None

    def nearest(self, embedding: Sequence[float], n: int, where: dict[str, Any] | None = None) -> list[ChunkHit]:
        """Chroma's `n` nearest chunks matching `where` (on chunk metadata): ids and distances from the search,
        texts from the read cache (index/read_cache.py says why)."""
        res = self.collection.query(
            query_embeddings=[list(map(float, embedding))], n_results=n, where=where, include=["distances"]
        )
        ids, distances = res["ids"][0], res["distances"][0]
        found = self._cache.read_chunks(ids)
        return [
            ChunkHit(cid, str(found[cid][1]["paper_id"]), found[cid][0], 1.0 - float(d), dict(found[cid][1]))
            for cid, d in zip(ids, distances, strict=True)
            if cid in found
        ]

    def delete(self, chunk_ids: Sequence[str]) -> None:
        self._cache.clear()
        for start in range(0, len(chunk_ids), self.batch_size):
            self.collection.delete(ids=list(chunk_ids[start : start + self.batch_size]))

    def _get_where(self, paper_ids: Sequence[str], include: list[str]) -> Iterator[tuple[str, dict]]:
        for start in range(0, len(paper_ids), 500):
            where = {"paper_id": {"$in": list(paper_ids[start : start + 500])}}
            res = self.collection.get(where=where, include=include)  # type: ignore[arg-type]
            yield from zip(res["ids"], res["metadatas"] or [], strict=False)

    def paper_states(self, paper_ids: Sequence[str]) -> dict[str, PaperState]:
        return _states(self._get_where(paper_ids, ["metadatas"]))

    def papers(self, paper_ids: Sequence[str]) -> dict[str, Paper]:
        """The stored papers among these ids, read from their first chunks; kept for the reads that follow (a
        search reads the papers of the chunks it found, then the answer reads them again) until a write."""
        return self._cache.read_papers(paper_ids)

    def source_states(self, sources: Sequence[str], hashes: Mapping[str, str] | None = None) -> dict[str, PaperState]:
        """The state of every stored paper that came from one of these file names. A paper whose listing is the
        one its `hashes` version (paper id -> content hash) would have, with as many chunks as its file's ids-only
        query finds, is stated from that; the others (not listed, changed, incomplete) are read in full, slow
        with the abstracts (0.5 s for 5k chunks, the ids alone 0.03 s)."""
        files: dict[str, str] = {}  # chunk id -> the file it came from
        for source in dict.fromkeys(sources):
            files.update(dict.fromkeys(self.collection.get(where={"source": source}, include=[])["ids"], source))
        by_paper = chunks_by_paper(files)
        # chunks of an older layout (index/records.py) are read in full, which finds them so (cheap: an index)
        older = [{key: {"$gte": -(2**62)}} for key in records.LEGACY_KEYS]
        old = {"$and": [{"source": {"$in": list(dict.fromkeys(sources))}}, {"$or": older}]}
        legacy = {paper_of(cid) for cid in self.collection.get(where=old, include=[])["ids"]} if sources else set()
        known = hashes or {}  # each paper's listing, were it stored whole in the version the caller holds:
        claims = [(p, listing(p, known[p], len(c), files[c[0]])) for p, c in by_paper.items() if p in known]
        claims = [(pid, claim) for pid, claim in claims if pid not in legacy]
        states: dict[str, PaperState] = {}
        for start in range(0, len(claims), 1000):
            part = dict(claims[start : start + 1000])
            where = {records.LISTED: {"$in": list(part.values())}}
            for pid in {paper_of(cid) for cid in self.collection.get(where=where, include=[])["ids"]} & set(part):
                cids = tuple(by_paper[pid])
                states[pid] = PaperState(known[pid], files[cids[0]], cids, True, listed=True)
        rest = [pid for pid in by_paper if pid not in states]
        states.update(_states((cid, meta) for cid, meta in self._get_where(rest, ["metadatas"]) if cid in files))
        return states

    def list_papers(self, papers: Sequence[tuple[Paper, int]]) -> None:
        """List these papers, each with its number of chunks, as stored whole: once all their chunks are."""
        if self._old_manifest and papers:
            self._old_manifest = False
            drop_collection(self.client, OLD_MANIFEST.format(self.collection.name), self._path)
        for start in range(0, len(papers), self.batch_size):
            part = papers[start : start + self.batch_size]
            self.collection.update(
                ids=[first_of(p.paper_id) for p, _ in part],
                metadatas=[{records.LISTED: listing(p.paper_id, p.content_hash, n, p.source)} for p, n in part],
            )
        self._cache.clear()

    def unlist_papers(self, paper_ids: Sequence[str]) -> None:
        """Drop these papers' listings: before their chunks are changed or deleted."""
        for start in range(0, len(paper_ids), self.batch_size):
            part = paper_ids[start : start + self.batch_size]
            self.collection.update(ids=[first_of(pid) for pid in part], metadatas=[{records.LISTED: None}] * len(part))
        self._cache.clear()

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
            res = self.collection.get(include=["documents", "metadatas"], limit=step, offset=offset)
            if not res["ids"]:
                return
            rows = zip(res["ids"], res["documents"] or [], res["metadatas"] or [], strict=True)
            yield from texts_of(rows, self.papers).items()
            self._cache.clear()  # a page's papers are not read again
            offset += len(res["ids"])

    def any_match(self, where: Mapping[str, Any]) -> bool:
        """Whether some chunk matches `where` (a filter on paper fields)."""
        clauses = self._chunk_where(where)
        return clauses is not None and bool(self.collection.get(where=_all(clauses), limit=1, include=[])["ids"])

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
            yield from (metadata_to_paper(meta) for meta in res["metadatas"] or [])
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
            legacy=any(records.is_legacy(m) for _, m in group),
        )
    return states


def _all(clauses: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    return None if not clauses else dict(clauses[0]) if len(clauses) == 1 else {"$and": list(clauses)}


def open_store(settings: Any, write: bool = True) -> ChromaStore:  # noqa: ANN401 - Settings
    """The store the settings describe: a Chroma server if chroma_url is set, else embedded on disk; for reading
    only with `write=False` (nothing is created, and read-only storage works)."""
    from rag_assistant.index.chroma_open import ChromaEndpoint

    return ChromaStore(settings.chroma_dir, settings.collection, ChromaEndpoint.of(settings), write)
