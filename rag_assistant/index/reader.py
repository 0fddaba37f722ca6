"""The read-only face of the index: everything search, answers, chat, evaluation and stats read (nearest chunks,
papers, stored vectors, the abstracts' sentence vectors, counts, the index state, the keyword index). It never
writes, neither the store nor the keyword index nor the sentence vectors on disk: ingest (index/ingest.py) owns
writing.

A stale keyword index (the store changed since it was built: an ingest was killed or is still running, or
another client of a shared Chroma server ingested) is rebuilt in memory from the store, for this reader only,
and left as it is on disk until the next ingest brings it up to date. The one exception: on a Chroma server
with a run log, the keyword index is this client's cache and the reader brings it up to date on disk with only
the chunks of the runs it has not applied (index/keyword_cache.py). Search stays complete and scores what an
up-to-date index scores, at the cost of tokenizing every chunk once per process until then; `stats` reports the
index as stale. Refusing to search instead would break search after every interrupted ingest, and repairing
the files from a reader would race a running ingest writing them. Where the store's info says its server ranks
keywords itself (index/sparse.py, recorded by ingest), none of this applies: keyword search is a request to the
store (StoreKeywords), and the client keeps no keyword index at all.

A long-lived reader (chat) follows the store: an ingest changes the store's state marker (its revision when it
starts writing, its pending runs when it settles), and `catch_up`, given the info each search reads anyway,
reopens the store and drops the keyword index when the marker moved, so the next search loads what a new
process would. The reopen is needed: an embedded Chroma client keeps the vectors it loaded and never sees
another process's writes."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from rag_assistant.config import Settings
from rag_assistant.corpus.models import Paper
from rag_assistant.index.embedder_base import BaseEmbedder
from rag_assistant.index.filters import Catalogue, catalogue, chroma_where
from rag_assistant.index.keyword import FieldFilter, KeywordIndex, KeywordSearch
from rag_assistant.index.keyword_fields import store_docs
from rag_assistant.index.pending import pending_runs, unfinished_papers
from rag_assistant.index.sentences import SentenceReader
from rag_assistant.index.sparse import server_side
from rag_assistant.index.state import check_model, keyword_dir, keyword_revision, recorded_chunking, store_revision
from rag_assistant.index.store import ChromaStore, ChunkHit, StoreReader, open_store


def state_marker(info: dict[str, Any], pending: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """What changes whenever an ingest changes what search sees: the revision and the pending runs."""
    return store_revision(info), tuple(pending)


@dataclass(frozen=True)
class StoredFields:
    """Every stored paper, and each field they carry with its values and how many papers carry each."""

    papers: list[Paper]
    catalogue: Catalogue


class StoreKeywords:
    """Keyword search run by the store itself (a server that indexes BM25 sparse vectors: index/sparse.py), with
    the face retrieve reads of a keyword index: (chunk id, BM25 score) candidates best first, the filters applied
    by the store before ranking as its dense search applies them. The client keeps only the IDFs it was asked
    for. Scores are the server's BM25 over the chunk text, not the client index's (no title boost or author
    field), so the same question may rank a little differently from a client index."""

    def __init__(self, store: StoreReader, revision: str | None) -> None:
        self.store, self.revision = store, revision
        self._idf: dict[str, float] = {}

    def query(
        self, text: str, n: int, exclude: Collection[str] = (), where: Sequence[FieldFilter] = ()
    ) -> list[tuple[str, float]]:
        return self.store.keyword_search(text, n, exclude, chroma_where(where) if where else None)

    def idf(self, tokens: list[str]) -> dict[str, float]:
        missing = [t for t in dict.fromkeys(tokens) if t not in self._idf]
        if missing:  # one request for a question's terms; a term asked again is not
            self._idf.update(self.store.keyword_idf(missing))
        return {t: self._idf[t] for t in tokens}


class IndexReader:
    """The index the settings describe, opened for reading; `store` lets tests and benchmarks share one (a
    shared store is not reopened by `catch_up`: its owner does that)."""

    def __init__(self, settings: Settings, store: StoreReader | None = None) -> None:
        self.settings = settings
        self._owned: ChromaStore | None = None if store is not None else open_store(settings, write=False)
        self._store: StoreReader = store if store is not None else self._owned
        self._pending: tuple[dict[str, Any], list[str]] | None = None  # the pending runs last read, with the info
        info = self._store.get_info()
        self._marker = state_marker(info, self.pending(info))  # what the store held when opened
        self._keyword: KeywordSearch | None = None
        self._sentences: SentenceReader | None = None
        self._seen_chunks = False
        self._dimension: int | None = None
        self._fields: tuple[Any, StoredFields] | None = None  # (index state, what stored_fields read)
        self.reloads = 0  # how often catch_up reloaded (chat says so)
        self.synced = False  # the keyword index was brought up to date from a shared server's run log
        self.sync_report: Any = None  # what that read (index/keyword_cache.py SyncReport)

    def catch_up(self, info: dict[str, Any]) -> bool:
        """Reload when the store's state marker in `info` moved since this reader loaded: another process
        ingested (see the module docstring). Costs nothing when it did not; True when it reloaded."""
        marker = state_marker(info, self.pending(info))
        if marker == self._marker:
            return False
        if self._owned is not None:
            self._owned.close()
            self._owned = open_store(self.settings, write=False)
            self._store = self._owned
        self._marker, self._keyword, self._seen_chunks, self.synced = marker, None, False, False
        self.reloads += 1
        return True

    def query(
        self, embedding: Sequence[float], n: int, exclude: Collection[str] = (), where: dict[str, Any] | None = None
    ) -> list[ChunkHit]:
        """The `n` chunks nearest to `embedding`, papers in `exclude` or not matching `where` left out before
        ranking."""
        return self._store.query(embedding, n, exclude, where)

    def papers(self, paper_ids: Sequence[str]) -> dict[str, Paper]:
        """The indexed papers among these ids, by id (unknown ids are left out)."""
        return self._store.papers(paper_ids)

    def embeddings_for(self, texts: Sequence[str]) -> dict[str, list[float]]:
        """Stored vectors of exactly these chunk texts, by text."""
        return self._store.embeddings_for(texts)

    def sentence_vectors(self, papers: Sequence[Paper], embedder: BaseEmbedder) -> dict[str, Any]:
        """Paper id -> the vectors of its sentences (n x dim, aligned with text.split_sentences(paper.text)):
        stored by ingest in the sidecar or the Chroma server (index/sentences.py, read only), else computed with
        `embedder` the way ingest computes them and kept in memory."""
        if self._sentences is None:
            from rag_assistant.index.chunking import token_counter
            from rag_assistant.index.embedding import get_tokenizer

            s = self.settings
            chunking = recorded_chunking(self.info(), self._store.count)
            chunking = chunking or (s.chunk_max_tokens, s.chunk_overlap_sentences)
            count = token_counter(get_tokenizer(s.embedding_model))
            self._sentences = SentenceReader(s, embedder, count, chunking, self._store)
        return self._sentences.vectors(papers)

    def papers_without_sentence_vectors(self, chunking: tuple[int, int], papers: Sequence[Paper]) -> int | None:
        """How many of `papers` have no stored sentence vectors (index/sentences.py `without_vectors`)."""
        from rag_assistant.index.sentences import without_vectors

        return without_vectors(self.settings, chunking, papers, self._store)

    def any_match(self, where: dict[str, Any]) -> bool:
        """Whether some stored chunk's metadata matches `where` (a filter on paper fields)."""
        return self._store.any_match(where)

    def count(self) -> int:
        """Number of chunks."""
        return self._store.count()

    def empty(self) -> bool:
        """Whether nothing is indexed (search refuses then). Counting costs Chroma ~12 ms per 100k chunks, so an
        index once seen holding chunks is not counted again by this reader; an empty one is, every time, so
        an ingest run meanwhile in another terminal is seen."""
        if not self._seen_chunks:
            self._seen_chunks = self._store.count() > 0
        return not self._seen_chunks

    def sources(self) -> dict[str, int]:
        """File name -> number of papers from it."""
        return self._store.sources()

    def stored_papers(self) -> list[Paper]:
        """Every paper whose first chunk is stored (hidden ones too: see `hidden`), read once per index state."""
        return self.stored_fields().papers

    def stored_fields(self) -> StoredFields:
        """The stored papers and the catalogue of their fields, read once per index state and reader: filters
        (retrieve), questions naming an author (answer/authors.py), `papers` and `stats` share one read (reading
        every paper costs ~1.2 s on 3,339 papers). Read again when an ingest moved the state marker (catch_up)
        or the number of chunks changed (a write through another store of this process)."""
        key = (self._marker, self._store.count())
        if self._fields is None or self._fields[0] != key:
            papers = list(self._store.iter_papers())
            self._fields = key, StoredFields(papers, catalogue(papers))
        return self._fields[1]

    def dimension(self) -> int | None:
        """The length of the index's vectors (None: empty), read once non-empty: what question vectors must have."""
        if self._dimension is None:
            self._dimension = self._store.dimension()
        return self._dimension

    def info(self) -> dict[str, Any]:
        """The store's info (model, chunking, revision, pending ingests), read afresh."""
        return self._store.get_info()

    def checked_info(self) -> dict[str, Any]:
        """The store's info, after checking the settings embed questions the way the index was embedded."""
        return check_model(self._store, self.settings)

    def pending(self, info: dict[str, Any]) -> list[str]:
        """The ingest runs not settled (index/pending.py), read from the run log once per `info` (a search reads
        the info once and asks twice: `catch_up`, then `hidden`)."""
        if self._pending is None or self._pending[0] is not info:
            self._pending = info, pending_runs(self._store, info)
        return self._pending[1]

    def hidden(self, info: dict[str, Any] | None = None) -> set[str]:
        """Papers search must not return: half-written by an ingest that was killed or still runs."""
        info = self.info() if info is None else info
        return unfinished_papers(self._store, info, self.pending(info))

    def keyword_current(self, info: dict[str, Any]) -> bool:
        """Whether the keyword index on disk reflects the store state `info` describes, as searches read it: while
        a run is pending it may write chunks that no revision announces, so searches do not trust it then."""
        return keyword_revision(self.settings) == info.get("revision") and not self.pending(info)

    @property
    def keyword(self) -> KeywordSearch:
        """The keyword index, loaded once: the store's own keyword search where its info says the server ranks
        keywords (index/sparse.py; nothing kept on the client), else the index on disk if it matches the store,
        else one built in memory."""
        if self._keyword is None:
            info = self._store.get_info()
            revision = store_revision(info)
            if server_side(info):
                self._keyword = StoreKeywords(self._store, revision)
                return self._keyword
            index = KeywordIndex(keyword_dir(self.settings))
            # while a run is pending, chunks may be written that no revision change announces: never current
            if index.revision != revision or self.pending(info):
                index = self._synced(revision) or index
                if not self.synced:
                    index.build_in_memory(store_docs(self._store), revision)
            self._keyword = index
        return self._keyword

    def _synced(self, revision: str) -> KeywordIndex | None:
        """The client cache of a shared Chroma server brought up to date from its run log (index/keyword_cache.py);
        None without a log, when another process of this data dir is writing the cache, or it cannot be written
        (read-only storage): then the index is built in memory, as for a stale one."""
        from rag_assistant.index import keyword_cache
        from rag_assistant.index.runlog import RunLog

        log = RunLog.open(self._store, self.settings, write=False)
        if log is None:
            return None
        directory = keyword_dir(self.settings)
        try:
            with keyword_cache.locked(directory, wait=False) as held:
                if not held:
                    return None
                index, self.sync_report = keyword_cache.sync(directory, self._store, log, revision)
        except OSError:
            return None
        self.synced = True
        return index
