"""Sentence vectors of every indexed abstract, computed once at ingest and stored, so answering never embeds an
abstract's sentences again: on one machine in a sidecar SQLite file beside the keyword index (`<data
dir>/sentences/<collection>.sqlite`); with a Chroma server as records of a collection beside the chunks
(`<collection>.sentences`, index/sentence_store.py `ServerSentenceStore`), so every client reads the vectors one
ingest computed instead of computing them per process. Embedded Chroma keeps the sidecar: one data dir holds both,
and SQLite reads a paper's row without a request. The array of a paper is aligned with
`text.split_sentences(paper.text)`.

How they are made is the embedder's (`BaseEmbedder.sentence_vectors`): pooled from the chunk pass on the onnx
backends, each sentence embedded standalone otherwise. The rows (index/sentence_store.py) are keyed by a
signature, the index's model signature, its chunking and that kind, so vectors of another model, cut or kind are
never read, and by a digest of the title, the text and its sentences, so a changed paper or a changed split misses
and is recomputed (a re-ingest re-embeds only those). Vectors are float16 (n x dim).

Written only by ingest (`SentenceIngest`): rows of new, changed and resumed papers in the chunk pass
(`SentencePass`), each in the step that stores its paper and before that step's chunks, so a stored paper has
its row whatever kills the ingest; rows of unchanged papers that have none (a backfill: an index from before
this file, papers another client of a shared Chroma server ingested before the server held them, papers whose
sentences a new splitter version cut differently); deleted with their papers. Whatever a kill leaves is a row
that matches the stored paper, a row of a paper not stored yet, or a row that misses. The read side
(`SentenceReader`) opens them read-only (never creates them), computes what it lacks with the same embedder call
and keeps those in memory only."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rag_assistant.config import Settings
from rag_assistant.corpus.models import Paper
from rag_assistant.index.chunking import chunk_paper
from rag_assistant.index.embedder_base import BaseEmbedder, SentenceLayout, Span
from rag_assistant.index.sentence_store import (
    SentenceStore,
    ServerSentenceStore,
    content_digest,
    digest,
    legacy_digests,
)
from rag_assistant.text import split_sentences

__all__ = ["SentenceIngest", "SentenceReader", "SentenceStore", "digest", "layout", "sidecar_path", "signature"]
Count = Callable[[str], int]
BACKFILL_PAPERS = 128  # papers computed and written per step of a backfill: bounds memory and lost work
READ_CACHE = 4096  # papers whose vectors a reader keeps in memory


def sidecar_path(settings: Settings) -> Path:
    return settings.data_dir / "sentences" / f"{settings.collection}.sqlite"


def on_server(settings: Settings, store: object) -> bool:
    """Whether the sentence vectors live in the Chroma server beside the chunks (ServerSentenceStore), not in the
    data dir's sidecar: with a server every client reads the same ones; one machine keeps the sidecar."""
    return bool(settings.chroma_url) and getattr(store, "client", None) is not None


def pooled(settings: Settings) -> bool:
    """Whether the settings' embedder pools sentence vectors from chunk passes (the onnx backends)."""
    return settings.remote_embedding is None and settings.embedding_backend != "torch"


def kind(settings: Settings) -> str:
    """`pooled` or `standalone`: the kind of sentence vectors these settings make (and read)."""
    return "pooled" if pooled(settings) else "standalone"


def signature(settings: Settings, chunking: tuple[int, int]) -> str:
    """What made a paper's sentence vectors: model, chunking, and pooled or standalone (read from the
    settings, so checking an unchanged index loads no model; an onnx backend that fell back to torch does not
    pool, and then the sidecar is left alone: see `usable`)."""
    from rag_assistant.index.state import model_signature

    return f"{model_signature(settings)}|{chunking[0]}/{chunking[1]}|{kind(settings)}"


def usable(settings: Settings, embedder: BaseEmbedder) -> bool:
    """Whether this embedder makes the kind of vectors the signature names."""
    return embedder.pools_tokens == pooled(settings)


def layout(paper: Paper, count: Count, chunking: tuple[int, int]) -> SentenceLayout:
    """The paper's sentences, its chunks (as index/chunking.py cuts them) and where each sentence lies in them.

    A chunk is the title prefix plus a run of consecutive sentences or pieces of one (a sentence longer than
    the window is cut at word boundaries), joined by single spaces: so its body is a substring of the
    sentences joined by spaces, and each sentence's share of it is a character span."""
    sentences = split_sentences(paper.text)
    chunks = [c.text for c in chunk_paper(paper, count, *chunking)]
    joined = " ".join(sentences)
    starts, pos = [], 0
    for sentence in sentences:
        starts.append(pos)
        pos += len(sentence) + 1
    prefix = len(f"{paper.title}. ") if paper.title else 0
    spans: list[list[Span]] = []
    cursor = 0
    for text in chunks:
        body = text[prefix:]
        at = joined.find(body, cursor)
        if at < 0:  # cannot happen with chunk_paper's cut; no spans: its sentences are embedded standalone
            spans.append([])
            continue
        cursor, end = at, at + len(body)
        own = [
            (max(at, s), min(end, s + len(sentence)), i)
            for i, (s, sentence) in enumerate(zip(starts, sentences, strict=True))
            if s < end and s + len(sentence) > at
        ]
        spans.append([(a - at + prefix, b - at + prefix, i) for a, b, i in own])
    return SentenceLayout(sentences, chunks, spans)


def compute(layouts: list[SentenceLayout], embedder: BaseEmbedder) -> list[Any]:
    """The sentence vectors of these papers' layouts (float32, n x dim each): the one computation behind
    ingest's backfill and the read side's fallback (ingest's main pass pools the same way, from its chunk pass)."""
    return embedder.sentence_vectors(layouts)


def without_vectors(
    settings: Settings, chunking: tuple[int, int], papers: Sequence[Paper], store: object = None
) -> int | None:
    """How many of `papers` have no row the read side would use, from the sidecar opened read-only (or the
    server's records: `store`, see `on_server`); all of them without one, None when it cannot be read. Splits only
    the papers whose row this splitter version did not cut."""
    sig = signature(settings, chunking)
    if on_server(settings, store):
        server = ServerSentenceStore.open(store, write=False)
        if server is None:
            return len(papers)
        current = server.current(sig)
        have = server.digests(sig)
        return sum(digest(p) not in have for p in papers if content_digest(p) not in current)
    path = sidecar_path(settings)
    if not path.is_file():
        return len(papers)
    try:
        sidecar = SentenceStore(path, readonly=True)
        try:
            with contextlib.suppress(sqlite3.OperationalError):  # a legacy file: no splitter column
                current = sidecar.current(sig)
                papers = [p for p in papers if content_digest(p) not in current]
            have = sidecar.digests(sig)
            return sum(digest(p) not in have and not have.intersection(legacy_digests(p)) for p in papers)
        finally:
            sidecar.close()
    except sqlite3.Error:  # damaged, or locked past the timeout by an ingest's write
        return None


class SentenceReader:
    """The read side: sentence vectors from the sidecar (opened read-only, once it exists), the rest computed
    and kept in an in-process LRU, never written."""

    def __init__(
        self, settings: Settings, embedder: BaseEmbedder, count: Count, chunking: tuple[int, int], store: object = None
    ) -> None:
        self.path, self.sig = sidecar_path(settings), signature(settings, chunking)
        self.server = store if on_server(settings, store) else None  # the chunks' store, whose server has the rows
        self.embedder, self.count, self.chunking = embedder, count, chunking
        self._usable = usable(settings, embedder)
        self._store: SentenceStore | ServerSentenceStore | None = None
        self._cache: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._lock = threading.Lock()
        self.computed = 0  # papers computed here because the sidecar lacked them (tests, benchmarks)

    def _sidecar(self) -> SentenceStore | ServerSentenceStore | None:
        if self._store is None and self._usable and self.server is not None:
            self._store = ServerSentenceStore.open(self.server, write=False)  # None until an ingest made it
        elif self._store is None and self._usable and self.path.is_file():
            try:
                self._store = SentenceStore(self.path, readonly=True)
            except sqlite3.Error:
                return None
        return self._store

    def vectors(self, papers: Sequence[Paper]) -> dict[str, Any]:
        """Paper id -> its sentence vectors (n x dim, aligned with split_sentences(paper.text))."""
        keys = {p.paper_id: (p.paper_id, digest(p)) for p in papers}
        with self._lock:
            out = {pid: self._cache[key] for pid, key in keys.items() if key in self._cache}
        missing = [p for p in dict((p.paper_id, p) for p in papers).values() if p.paper_id not in out]
        store = self._sidecar() if missing else None
        if store is not None:
            with contextlib.suppress(sqlite3.Error):  # locked by a long ingest write, or damaged: compute
                out.update(store.get(missing, self.sig))
        todo = [p for p in missing if p.paper_id not in out]
        if todo:
            layouts = [layout(p, self.count, self.chunking) for p in todo]
            out.update(zip((p.paper_id for p in todo), compute(layouts, self.embedder), strict=True))
            self.computed += len(todo)
        with self._lock:
            for pid in keys.keys() & out.keys():
                self._cache[keys[pid]] = out[pid]
                self._cache.move_to_end(keys[pid])
            while len(self._cache) > READ_CACHE:
                self._cache.popitem(last=False)
        return out


class SentenceIngest:
    """Ingest's side of the sidecar: the chunk pass that also pools sentence vectors (`chunk_pass`), the
    backfill of papers without them, and deletion with removed papers."""

    def __init__(
        self,
        settings: Settings,
        chunking: tuple[int, int],
        embedder: Callable[[], BaseEmbedder],
        count: Count,
        store: object = None,
    ) -> None:
        server = ServerSentenceStore.open(store, write=True) if on_server(settings, store) else None
        self.store = server or SentenceStore(sidecar_path(settings), readonly=False)
        self.sig, self.settings = signature(settings, chunking), settings
        self._make_embedder = embedder
        self._embedder: BaseEmbedder | None = None
        self.count, self.chunking = count, chunking
        self.written = 0  # papers whose vectors this ingest wrote
        self.carried = 0  # papers whose row an older splitter cut, stamped with this version (their sentences stayed)

    @property
    def embedder(self) -> BaseEmbedder:
        """Made on first use: an ingest with nothing to compute loads no model."""
        if self._embedder is None:
            self._embedder = self._make_embedder()
        return self._embedder

    def write(self, rows: list[tuple[Paper, Any]]) -> None:
        self.store.put(rows, self.sig)
        self.written += len(rows)

    def chunk_pass(self, papers: Sequence[Paper]) -> SentencePass:
        """The chunk pass of an ingest, which also computes the sentence vectors of `papers` (see SentencePass)."""
        return SentencePass(self, papers)

    def missing(self, papers: Sequence[Paper]) -> list[Paper]:
        """The papers without a row that matches their sentences. Papers whose row this splitter version cut
        are not split; the others are, once, and a row that still lines up with their sentences (cut by an older
        version, or a legacy row) is stamped with this version instead of being computed again (`carried`)."""
        current = self.store.current(self.sig)
        unknown = [p for p in papers if content_digest(p) not in current]
        if not unknown:
            return []
        have = self.store.digests(self.sig)
        found = [p for p in unknown if digest(p) in have or have.intersection(legacy_digests(p))]
        self.carried += self.store.restamp(found, self.sig)
        carried = {p.paper_id for p in found}
        return [p for p in unknown if p.paper_id not in carried]

    def backfill(self, papers: Sequence[Paper], progress: Callable[[int, int], None] | None = None) -> None:
        """Compute and write the vectors of these papers, a bounded group at a time (progress in chunks).
        Nothing when the embedder does not make the kind the signature names (onnx fell back to torch)."""
        if not papers or not usable(self.settings, self.embedder):
            return
        layouts = [layout(p, self.count, self.chunking) for p in papers]
        total, done = sum(len(lay.chunks) for lay in layouts), 0
        for start in range(0, len(papers), BACKFILL_PAPERS):
            group = layouts[start : start + BACKFILL_PAPERS]
            self.write(list(zip(papers[start : start + BACKFILL_PAPERS], compute(group, self.embedder), strict=True)))
            done += sum(len(lay.chunks) for lay in group)
            if progress:
                progress(done, total)

    def delete(self, paper_ids: Sequence[str], kept: Sequence[Paper]) -> None:
        """Drop the rows of removed or changed papers, unless one of the `kept` papers reads it."""
        if paper_ids:
            self.store.delete(paper_ids, kept)

    def close(self) -> None:
        self.store.close()


class SentencePass:
    """Ingest's chunk pass, a step at a time: embeds a step's chunk texts like the embedder (`embed`) and gives
    the sentence vectors of the papers the step completes (`complete`), which ingest writes before it stores the
    step's chunks. Pooled from the token states of the chunk texts when the embedder has them (so every chunk of
    a paper that needs vectors goes through `embed`, one with a stored vector too: `needs`), else each sentence
    embedded standalone. Nothing is computed when the embedder does not make the kind the signature names (onnx
    fell back to torch): the read side computes those."""

    def __init__(self, owner: SentenceIngest, papers: Sequence[Paper]) -> None:
        self.owner = owner
        active = bool(papers) and usable(owner.settings, owner.embedder)  # nothing to compute: no model loaded
        self.pooled = active and owner.embedder.pools_tokens
        lay = {p.paper_id: (p, layout(p, owner.count, owner.chunking)) for p in papers} if active else {}
        self.layouts: dict[str, tuple[Paper, SentenceLayout]] = lay
        self.where: dict[str, list[tuple[str, int]]] = {}  # chunk text -> (paper id, chunk index) to pool from it
        self.sums: dict[str, list[Any]] = {}
        for pid, (_, paper_layout) in self.layouts.items() if self.pooled else ():
            for i, text in enumerate(paper_layout.chunks):
                self.where.setdefault(text, []).append((pid, i))
            self.sums[pid] = [None] * len(paper_layout.chunks)

    @property
    def embedder(self) -> BaseEmbedder:
        return self.owner.embedder

    def write(self, rows: list[tuple[Paper, Any]]) -> None:
        if rows:
            self.owner.write(rows)

    def needs(self, text: str) -> bool:
        """Whether this chunk text must be encoded even if its vector is stored: a paper pools from it."""
        return text in self.where

    def embed(self, texts: list[str]) -> Any:
        """The vectors of these chunk texts, as the embedder's `embed` gives them."""
        if not self.pooled:
            return self.owner.embedder.embed(texts)
        lay = self.layouts
        places = [[(pid, i) for pid, i in self.where.pop(t, []) if pid in lay] for t in texts]
        wanted = [sorted({s[:2] for pid, i in here for s in lay[pid][1].spans[i]}) for here in places]
        vectors, sums = self.owner.embedder.embed_spans(texts, wanted)
        for here, own, rows in zip(places, wanted, sums, strict=True):
            for pid, i in here:
                self.sums[pid][i] = rows[[own.index(s[:2]) for s in lay[pid][1].spans[i]]]
        return vectors

    def complete(self, papers: Sequence[Paper]) -> list[tuple[Paper, Any]]:
        """The sentence vectors of those of `papers` that need them, once all their chunks went through `embed`
        (a paper some chunk of which did not is left to the backfill)."""
        done = [self.layouts.pop(p.paper_id) for p in papers if p.paper_id in self.layouts]
        if not done:
            return []
        if self.pooled:
            done = [(p, lay) for p, lay in done if all(x is not None for x in self.sums[p.paper_id])]
            vectors = [self.owner.embedder.pool_sentences(lay, self.sums.pop(p.paper_id)) for p, lay in done]
        else:
            vectors = compute([lay for _, lay in done], self.owner.embedder)
        return list(zip((p for p, _ in done), vectors, strict=True))
