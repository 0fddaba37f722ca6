"""BM25 keyword index over chunks, persisted beside Chroma and tied to the store's revision. Written only by ingest
(`build`, `update`); the read face loads it, or builds one in memory when it is stale.

The index is a list of segments (index/keyword_segments.py) plus corpus-wide statistics (vocabulary, document
frequencies, live chunks, total length) kept in step by every update. An update tokenizes only its chunks,
writes them as a new segment, marks replaced and removed chunks dead in a new mask of their segment, and merges
small segments (size-tiered, never past SEGMENT_MAX chunks), so its cost grows with what changed, not with the
index. Scores are bm25s's ('lucene' BM25) over the live chunks, computed at query time with numpy; the terms
are text.tokenize's, which reproduces bm25s.tokenize (its English stop words, copied in stopwords.py), so nothing
here needs bm25s (numba, scipy: ~1.5 s of imports). A write adds new files, then swaps meta.json in one rename, then
deletes what no longer belongs: a kill leaves the previous state whole."""

from __future__ import annotations

import json
import math
import os
import shutil
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rag_assistant.files import private_dir, write_private
from rag_assistant.index import keyword_segments as ks
from rag_assistant.text import query_terms, tokenize

FORMAT = 2  # 1: one bm25s matrix (read as stale, so the next ingest rebuilds it)
META = "meta.json"
BATCH = 4_096  # chunks tokenized at a time (SEGMENT_MAX is a multiple): their words are Python strings


class KeywordSearch(Protocol):
    """The keyword index as the read face hands it out: searching and term statistics only."""

    revision: str | None

    def query(self, text: str, n: int, exclude: Collection[str] = ()) -> list[tuple[str, float]]: ...

    def idf(self, tokens: list[str]) -> dict[str, float]: ...


@dataclass
class _Corpus:
    """The segments and the statistics BM25 needs over their live chunks."""

    vocab: dict[str, int] = field(default_factory=dict)
    df: Any = None  # int64 [vocab]: live chunks holding each term
    chunks: int = 0
    total_len: int = 0
    segments: list[ks.Segment] = field(default_factory=list)

    def grow(self) -> None:
        import numpy as np

        if self.df is None or len(self.df) < len(self.vocab):
            df = np.zeros(len(self.vocab), dtype=np.int64)
            if self.df is not None:
                df[: len(self.df)] = self.df
            self.df = df

    def add(self, pairs: Iterable[tuple[str, str]], keep: Callable[[ks.Segment], ks.Segment] | None = None) -> None:
        """Tokenize (chunk_id, text) pairs, BATCH at a time, into new segments of at most SEGMENT_MAX chunks;
        `keep` turns each into what the corpus holds (build: the saved segment, memory-mapped)."""
        ids: list[str] = []
        parts: list[tuple[Any, Any, Any, Any]] = []
        for batch in _batches(pairs, BATCH):
            parts.append(self._rows(batch))
            ids += [cid for cid, _ in batch]
            if len(ids) >= ks.SEGMENT_MAX:
                self._segment(ids, parts, keep)
                ids, parts = [], []
        if ids:
            self._segment(ids, parts, keep)

    def _segment(
        self, ids: list[str], parts: list[tuple[Any, Any, Any, Any]], keep: Callable[[ks.Segment], ks.Segment] | None
    ) -> None:
        import numpy as np

        counts = np.concatenate([np.diff(p[1]) for p in parts])
        row_ptr = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(counts, out=row_ptr[1:])
        dl, terms, tf = (np.concatenate([p[i] for p in parts]) for i in (0, 2, 3))
        seg = ks.make_segment(ids, dl, row_ptr, terms, tf, len(self.vocab))
        self.segments.append(keep(seg) if keep else seg)

    def _rows(self, pairs: Sequence[tuple[str, str]]) -> tuple[Any, Any, Any, Any]:
        """(lengths, row_ptr, terms, tf) of a batch, counted into the statistics."""
        import numpy as np

        docs = tokenize([text for _, text in pairs])
        vocab = self.vocab
        lengths = np.fromiter(map(len, docs), dtype=np.int64, count=len(docs))
        flat = np.fromiter((vocab.setdefault(t, len(vocab)) for d in docs for t in d), np.int64, int(lengths.sum()))
        row_ptr, terms, tf = ks.rows_from_tokens(lengths, flat)
        self.grow()
        self.df += np.bincount(terms, minlength=len(self.df))
        self.chunks += len(docs)
        self.total_len += int(lengths.sum())
        return lengths, row_ptr, terms, tf

    def remove(self, gone: set[str]) -> None:
        """Mark these chunk ids dead wherever they live, taking them out of the statistics."""
        import numpy as np

        for seg in self.segments if gone else ():
            rows = [i for i, cid in enumerate(seg.ids) if cid in gone]
            rows = [i for i in rows if not seg.dead[i]]
            if not rows:
                continue
            terms, _ = seg.row_terms(rows)
            self.df -= np.bincount(terms, minlength=len(self.df))
            self.chunks -= len(rows)
            self.total_len -= int(seg.dl[rows].sum())
            seg.dead = np.array(seg.dead, dtype=bool)
            seg.dead[rows] = True
            seg.dead_file = None  # to be saved

    def live_ids(self) -> list[str]:
        return [cid for seg in self.segments for cid, dead in zip(seg.ids, seg.dead.tolist(), strict=True) if not dead]


class KeywordIndex:
    """The index in `directory`, loaded on creation (arrays memory-mapped); `revision` says which store state
    it reflects (None: missing, damaged or of the older format, so stale)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.revision: str | None = None
        self._corpus: _Corpus | None = None
        self._papers: tuple[dict[str, int], Any] | None = None  # paper -> code, code of every row
        for _ in range(2):  # a reader racing a writer's clean-up reads the new meta once more
            try:
                self._corpus, self.revision = self._load(), self.stored_revision(directory)
                return
            except (OSError, ValueError, KeyError, TypeError):
                self._corpus, self.revision = None, None

    def _load(self) -> _Corpus | None:
        import numpy as np

        meta_file = self.directory / META
        if not meta_file.is_file():
            return None
        meta = json.loads(meta_file.read_text())
        if meta.get("format") != FORMAT:
            return None
        vocab = {token: i for i, token in enumerate(json.loads((self.directory / meta["vocab"]).read_text()))}
        segments = [ks.load(self.directory, entry) for entry in meta["segments"]]
        df = np.load(self.directory / meta["df"])
        return _Corpus(vocab, df, int(meta["chunks"]), int(meta["total_len"]), segments)

    @staticmethod
    def stored_revision(directory: Path) -> str | None:
        """The revision of the index in `directory` without loading it (a no-op ingest needs only this)."""
        try:
            meta = json.loads((directory / META).read_text())
            return str(meta["revision"]) if meta.get("format") == FORMAT else None
        except (OSError, ValueError, KeyError, AttributeError):
            return None

    def build(self, chunks: Iterable[tuple[str, str]], revision: str) -> int:
        """Rebuild from (chunk_id, text) pairs and persist atomically (write aside, then rename)."""
        tmp = self.directory.with_name(self.directory.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        private_dir(tmp)
        corpus = _Corpus()

        def saved(seg: ks.Segment) -> ks.Segment:  # written at once, then read back memory-mapped
            ks.save(seg, tmp)
            return ks.load(tmp, ks.entry(seg))

        corpus.add(chunks, saved)
        self._commit(corpus, revision, tmp)
        old = self.directory.with_name(self.directory.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if self.directory.exists():
            self.directory.rename(old)
        tmp.rename(self.directory)
        shutil.rmtree(old, ignore_errors=True)
        self.__init__(self.directory)  # type: ignore[misc]
        return corpus.chunks

    def build_in_memory(self, chunks: Iterable[tuple[str, str]], revision: str) -> int:
        """Rebuild from (chunk_id, text) pairs for this object only: nothing on disk changes (what the read
        face does with a stale index). Scores are those `build` would persist."""
        corpus = _Corpus()
        corpus.add(chunks)
        self._corpus, self.revision, self._papers = corpus, revision, None
        return corpus.chunks

    def can_update(self, revision: str) -> bool:
        """True when this index reflects store `revision` and is of the current format."""
        return self.revision == revision and self._corpus is not None

    def update(self, added: Sequence[tuple[str, str]], removed: Iterable[str], revision: str) -> int:
        """Drop `removed` chunk ids, add or replace `added` (chunk_id, text) pairs; only those are tokenized.
        Writes a segment for `added`, new deletion masks, merges small segments, then swaps the meta."""
        corpus = self._corpus if self._corpus is not None else _Corpus()
        corpus.grow()
        corpus.remove(set(removed) | {cid for cid, _ in added})
        corpus.add(list(added))
        corpus.segments = ks.compact(corpus.segments, len(corpus.vocab))
        self._commit(corpus, revision, self.directory)
        self._corpus, self.revision, self._papers = corpus, revision, None
        return corpus.chunks

    def _commit(self, corpus: _Corpus, revision: str, directory: Path) -> None:
        """Save what is new, swap the meta in one rename, then delete what the new meta does not name."""

        corpus.grow()
        for seg in corpus.segments:
            if not seg.saved:
                ks.save(seg, directory)
            if seg.dead_file is None and seg.dead.any():
                ks.save_dead(seg, directory)
        tag = uuid.uuid4().hex[:12]
        vocab_file, df_file = f"vocab-{tag}.json", f"df-{tag}.npy"
        write_private(directory / vocab_file, json.dumps(sorted(corpus.vocab, key=corpus.vocab.__getitem__)))
        ks.save_array(directory / df_file, corpus.df)
        meta = {
            "format": FORMAT,
            "revision": revision,
            "chunks": corpus.chunks,
            "total_len": corpus.total_len,
            "vocab": vocab_file,
            "df": df_file,
            "segments": [ks.entry(seg) for seg in corpus.segments],
        }
        write_private(directory / (META + ".tmp"), json.dumps(meta))
        os.replace(directory / (META + ".tmp"), directory / META)
        _clean(directory, meta)

    def chunk_ids(self) -> list[str]:
        """Every chunk id the index holds."""
        return self._corpus.live_ids() if self._corpus is not None else []

    def idf(self, tokens: list[str]) -> dict[str, float]:
        """BM25 (Lucene) inverse document frequency over chunks; a token the corpus never uses gets the
        highest value, since a question that hinges on it is probably not about this corpus."""
        corpus = self._corpus
        if corpus is None or not corpus.chunks:
            return {t: 1.0 for t in tokens}
        n, vocab = corpus.chunks, corpus.vocab
        out = {}
        for t in tokens:
            out[t] = _idf(n, int(corpus.df[vocab[t]]) if t in vocab else 0)
        return out

    def query(self, text: str, n: int, exclude: Collection[str] = ()) -> list[tuple[str, float]]:
        """(chunk_id, bm25 score) best first; only chunks sharing at least one term and not of a paper in
        `exclude` (masked before ranking, so excluded chunks never take a candidate's place)."""
        import numpy as np

        corpus = self._corpus
        if corpus is None or not corpus.chunks or n <= 0:
            return []
        counts = Counter(corpus.vocab[t] for t in query_terms(text) if t in corpus.vocab)
        if not counts:
            return []
        weights = {tid: _idf(corpus.chunks, int(corpus.df[tid])) * c for tid, c in counts.items()}
        scores = ks.score(corpus.segments, weights, corpus.total_len / corpus.chunks)
        if exclude:
            codes, rows = self._paper_codes()
            scores[np.isin(rows, [codes[p] for p in exclude if p in codes])] = 0.0
        best = np.flatnonzero(scores > 0)
        if len(best) > n:  # the n best; chunks tied at the cut are taken in index order, so results are stable
            cut = np.partition(scores[best], len(best) - n)[len(best) - n]
            tied = best[scores[best] == cut]
            best = np.concatenate([best[scores[best] > cut], tied[: n - int((scores[best] > cut).sum())]])
        best = best[np.lexsort((best, -scores[best]))]
        return [(self._id_of(int(row)), float(scores[row])) for row in best]

    def _id_of(self, row: int) -> str:
        assert self._corpus is not None
        for seg in self._corpus.segments:
            if row < seg.n:
                return seg.ids[row]
            row -= seg.n
        raise IndexError(row)

    def _paper_codes(self) -> tuple[dict[str, int], Any]:
        """(paper id -> code, the code of every row), made on the first query that excludes papers."""
        import numpy as np

        if self._papers is None:
            assert self._corpus is not None
            codes: dict[str, int] = {}
            ids = (cid.rsplit("#", 1)[0] for seg in self._corpus.segments for cid in seg.ids)
            rows = np.fromiter((codes.setdefault(p, len(codes)) for p in ids), dtype=np.int32)
            self._papers = codes, rows
        return self._papers


def _idf(n: int, df: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def _batches(pairs: Iterable[tuple[str, str]], size: int) -> Iterable[list[tuple[str, str]]]:
    batch: list[tuple[str, str]] = []
    for pair in pairs:
        batch.append(pair)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _clean(directory: Path, meta: dict[str, Any]) -> None:
    """Delete the files and segments of earlier states (and of a killed write) that `meta` does not name."""
    keep = {META, meta["vocab"], meta["df"]}
    segments = {e["name"]: e.get("dead") for e in meta["segments"]}
    for path in directory.iterdir():
        if path.is_dir() and path.name in segments:
            for old in path.glob("dead-*.npy"):
                if old.name != segments[path.name]:
                    old.unlink(missing_ok=True)
        elif path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        elif path.name not in keep:
            path.unlink(missing_ok=True)
