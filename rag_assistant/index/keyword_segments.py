"""Segments of the keyword index: immutable blocks of chunks with their BM25 term statistics (term frequencies
and chunk lengths, no IDF), stored both by term (what a query reads) and by chunk (what removing a chunk and
merging read), plus a deletion mask. Scoring reads them with numpy only; the write side (keyword.py, called by
ingest) makes, merges and saves them. Which segments exist, and the corpus-wide statistics, live in keyword.py.

Because a segment holds term frequencies rather than final scores, nothing in it depends on the rest of the
corpus: BM25 (bm25s's 'lucene' variant, k1 = 1.5, b = 0.75) is computed at query time from the global document
frequencies and average length, so an index updated many times scores exactly like one rebuilt from scratch."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_assistant.files import open_private, private_dir, write_private

K1, B = 1.5, 0.75  # bm25s's defaults
SEGMENT_MAX = 131_072  # chunks: a build cuts segments this big, and no merge makes a bigger one (memory, time)
MERGE_RATIO = 2  # the newest segment is merged into the one before it once it is at least 1/2 its size
DEAD_SHARE = 0.25  # a segment with more removed chunks than this is rewritten without them
_ARRAYS = ("dl", "col_ptr", "rows", "col_tf", "row_ptr", "terms", "row_tf")


@dataclass
class Segment:
    """Chunks `ids` (rows) and their terms: by term (col_ptr -> rows, col_tf) and by row (row_ptr -> terms,
    row_tf); `dl` is each chunk's token count, `dead` marks rows removed since the segment was written."""

    name: str
    ids: list[str]
    dl: Any  # int32 [rows]
    col_ptr: Any  # int64 [terms known when written + 1]
    rows: Any  # int32 [nnz], row of each (term, row) pair, term order
    col_tf: Any  # uint16/uint32 [nnz]
    row_ptr: Any  # int64 [rows + 1]
    terms: Any  # int32 [nnz], row order
    row_tf: Any  # uint16/uint32 [nnz]
    dead: Any  # bool [rows]
    dead_file: str | None = None  # the saved mask, None when no row is dead
    saved: bool = field(default=False)
    _norm: tuple[float, Any] | None = field(default=None, repr=False)

    def norm(self, avgdl: float) -> Any:  # noqa: ANN401 - numpy array
        """k1 * (1 - b + b * dl / avgdl) of every row, float32, kept for the last avgdl asked."""
        import numpy as np

        if self._norm is None or self._norm[0] != avgdl:
            self._norm = (avgdl, (K1 * (1 - B + B * np.asarray(self.dl, dtype=np.float64) / avgdl)).astype(np.float32))
        return self._norm[1]

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def live(self) -> int:
        return self.n - int(self.dead.sum())

    def row_terms(self, rows: Any) -> tuple[Any, Any]:  # noqa: ANN401 - numpy arrays
        """(term ids, term frequencies) of these rows, concatenated."""
        import numpy as np

        starts, ends = self.row_ptr[rows], self.row_ptr[np.asarray(rows) + 1]
        take = np.concatenate([np.arange(a, b) for a, b in zip(starts, ends, strict=True)] or [np.zeros(0, int)])
        return self.terms[take], self.row_tf[take]


def _tf_dtype(tf: Any) -> Any:  # noqa: ANN401 - numpy dtype
    import numpy as np

    return np.uint16 if not len(tf) or int(tf.max()) < 2**16 else np.uint32


def make_segment(ids: list[str], dl: Any, row_ptr: Any, terms: Any, row_tf: Any, n_terms: int) -> Segment:
    """A segment from its by-row view (chunk lengths, each row's distinct term ids and their frequencies)."""
    import numpy as np

    terms = np.asarray(terms, dtype=np.int32)
    order = np.argsort(terms, kind="stable")  # rows stay ascending within a term
    row_of = np.repeat(np.arange(len(ids), dtype=np.int32), np.diff(row_ptr))
    col_ptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(np.bincount(terms, minlength=n_terms), out=col_ptr[1:])
    tf = np.asarray(row_tf)
    tf = tf.astype(_tf_dtype(tf))
    return Segment(
        name=f"seg-{uuid.uuid4().hex[:12]}",
        ids=ids,
        dl=np.asarray(dl, dtype=np.int32),
        col_ptr=col_ptr,
        rows=row_of[order],
        col_tf=tf[order],
        row_ptr=np.asarray(row_ptr, dtype=np.int64),
        terms=terms,
        row_tf=tf,
        dead=np.zeros(len(ids), dtype=bool),
    )


def rows_from_tokens(lengths: Any, flat: Any) -> tuple[Any, Any, Any]:  # noqa: ANN401 - numpy arrays
    """(row_ptr, distinct terms, their frequencies) of documents given as token ids `flat` cut by `lengths`."""
    import numpy as np

    n = len(lengths)
    doc = np.repeat(np.arange(n, dtype=np.int64), lengths)
    width = int(flat.max()) + 1 if len(flat) else 1
    keys, tf = np.unique(doc * width + flat, return_counts=True)  # sorted by document, then term
    row_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys // width, minlength=n), out=row_ptr[1:])
    return row_ptr, (keys % width).astype(np.int32), tf.astype(_tf_dtype(tf))


def merge(segments: list[Segment], n_terms: int) -> Segment:
    """One segment holding the live rows of `segments`, in order."""
    import numpy as np

    ids: list[str] = []
    dls, counts, terms, tfs = [], [], [], []
    for seg in segments:
        live = ~np.asarray(seg.dead)
        per_row = np.diff(seg.row_ptr)
        keep = np.repeat(live, per_row)
        ids += [cid for cid, alive in zip(seg.ids, live.tolist(), strict=True) if alive]
        dls.append(seg.dl[live])
        counts.append(per_row[live])
        terms.append(seg.terms[keep])
        tfs.append(seg.row_tf[keep].astype(np.uint32))
    row_ptr = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(np.concatenate(counts), out=row_ptr[1:])
    return make_segment(ids, np.concatenate(dls), row_ptr, np.concatenate(terms), np.concatenate(tfs), n_terms)


def compact(segments: list[Segment], n_terms: int) -> list[Segment]:
    """The segments after this update's merges: empty ones dropped, ones more than DEAD_SHARE removed rewritten,
    and the newest merged into the one before it while it is at least 1/MERGE_RATIO its size and the result
    stays within SEGMENT_MAX. Segment sizes grow geometrically, so there are O(log) small segments, an update
    rewrites what it touched plus amortised O(log n) merges, and no merge ever rewrites more than SEGMENT_MAX
    chunks: the cost of an update does not grow with the index."""
    out = []
    for seg in segments:
        live = seg.live
        if live == 0:
            continue
        out.append(merge([seg], n_terms) if seg.n - live > DEAD_SHARE * seg.n else seg)
    while len(out) >= 2:
        older, newer = out[-2], out[-1]
        if newer.live * MERGE_RATIO < older.live or older.live + newer.live > SEGMENT_MAX:
            break
        out[-2:] = [merge([older, newer], n_terms)]
    return out


def save(seg: Segment, directory: Path) -> None:
    """Write a new segment's files into directory/<name>/ (never rewritten afterwards; its mask is `save_dead`)."""

    path = private_dir(directory / seg.name)
    for name in _ARRAYS:
        save_array(path / f"{name}.npy", getattr(seg, name))
    write_private(path / "ids.json", json.dumps(seg.ids))
    seg.saved = True


def save_dead(seg: Segment, directory: Path) -> None:
    """Write the segment's deletion mask under a new name (a reader of the previous state keeps its own)."""

    seg.dead_file = f"dead-{uuid.uuid4().hex[:12]}.npy"
    save_array(directory / seg.name / seg.dead_file, seg.dead)


def save_array(path: Path, array: Any) -> None:  # noqa: ANN401 - a numpy array
    """np.save into a new private (0600) file."""
    import numpy as np

    with open_private(path, "wb") as f:
        np.save(f, array)


def load(directory: Path, entry: dict[str, Any]) -> Segment:
    """The segment `entry` (from the index's meta) names, its arrays memory-mapped."""
    import numpy as np

    path = directory / entry["name"]
    arrays = {name: np.load(path / f"{name}.npy", mmap_mode="r") for name in _ARRAYS}
    ids = json.loads((path / "ids.json").read_text())
    dead_file = entry.get("dead")
    dead = np.load(path / dead_file) if dead_file else np.zeros(len(ids), dtype=bool)
    return Segment(name=entry["name"], ids=ids, dead=dead, dead_file=dead_file, saved=True, **arrays)


def entry(seg: Segment) -> dict[str, Any]:
    """What the index's meta records of a segment."""
    return {"name": seg.name, "chunks": seg.n, "dead": seg.dead_file}


def score(segments: list[Segment], weights: dict[int, float], avgdl: float) -> Any:  # noqa: ANN401 - numpy
    """BM25 of every row of `segments` (concatenated, removed rows 0) for query term ids with their weights
    (IDF times the term's count in the query): sum of w * tf / (tf + k1 * (1 - b + b * dl / avgdl)), in
    float32 like bm25s. Each segment's length norm is computed once per average length."""
    import numpy as np

    total = sum(seg.n for seg in segments)
    scores = np.zeros(total, dtype=np.float32)
    offset = 0
    for seg in segments:
        view = scores[offset : offset + seg.n]
        width = len(seg.col_ptr) - 1
        norm = seg.norm(avgdl)
        for term, weight in weights.items():
            if term >= width:
                continue
            start, end = int(seg.col_ptr[term]), int(seg.col_ptr[term + 1])
            if start == end:
                continue
            rows = seg.rows[start:end]
            tf = seg.col_tf[start:end].astype(np.float32)
            view[rows] += np.float32(weight) * tf / (tf + norm[rows])
        view[seg.dead] = 0.0
        offset += seg.n
    return scores
