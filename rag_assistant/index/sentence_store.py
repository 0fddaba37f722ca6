"""The sidecar file of sentence vectors (index/sentences.py says who writes and reads it): one row per (digest,
signature), float16 vectors (n x dim) aligned with `text.split_sentences(paper.text)`.

A row's digest covers the title (it prefixes every chunk), the text and the sentences the text is split into, so
a row is read only for exactly the sentences it is aligned with, whatever changed. Each row also records its
paper's `content` (title and text) and the splitter version that cut it (`text.SPLITTER_VERSION`): ingest finds a
paper's row by its content without splitting it, so an unchanged re-ingest splits nothing; after a new splitter
version it splits each paper once, restamps the rows whose sentences did not change and re-embeds only the papers
whose sentences did (`SentenceIngest.missing`).

Rows written before the splitter was versioned (before issue 23) are keyed by the title, the text and a
fingerprint of that time's splitter code (LEGACY_FINGERPRINTS) and have neither column: `legacy_split` is that
splitter, kept only to tell which of those rows still line up with today's sentences. Ingest re-keys them; the
read side reads them meanwhile."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rag_assistant.corpus.models import Paper
from rag_assistant.files import private_dir, private_file
from rag_assistant.text import SPLITTER_VERSION, split_sentences

_SCHEMA = """CREATE TABLE IF NOT EXISTS sentences (
    digest TEXT NOT NULL, signature TEXT NOT NULL, paper_id TEXT NOT NULL,
    n INTEGER NOT NULL, dim INTEGER NOT NULL, vectors BLOB NOT NULL,
    content TEXT, splitter TEXT,
    PRIMARY KEY (digest, signature))"""
_BATCH = 500  # SQL variables per query
# Splitter fingerprints of rows written before issue 23: at commit a6b5c7c, and before its marks were added.
LEGACY_FINGERPRINTS = ("e0da89fd", "d2a3c27f")
_LEGACY_ABBREV = re.compile(
    r"\b(?:e\.g|i\.e|et al|etc|vs|cf|Fig|Figs|Eq|Eqs|Sec|No|resp|approx|Dr|Mr|Ms|Prof|al)\.", re.IGNORECASE
)
_LEGACY_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[\"'(\[]?[A-Z0-9$\\*])")
_MARKS = re.compile("[\ue000-\ue003]")


def _sha(payload: object) -> str:
    return hashlib.sha1(json.dumps(payload, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


def content_digest(paper: Paper) -> str:
    """The title and text: cheap, no split."""
    return _sha([paper.title, paper.text])


def digest(paper: Paper) -> str:
    """The title, the text and its sentences (the split is cached in text.py)."""
    return _sha([paper.title, paper.text, split_sentences(paper.text)])


def legacy_split(text: str) -> list[str]:
    """The regex splitter of the legacy rows, for texts without private-use marks (it changed only for those)."""
    guarded = _LEGACY_ABBREV.sub(lambda m: m.group(0)[:-1] + "\u2063", " ".join(text.split()))
    return [s for s in (p.replace("\u2063", ".").strip() for p in _LEGACY_BOUNDARY.split(guarded)) if s]


def legacy_digests(paper: Paper) -> list[str]:
    """The digests this paper's legacy rows would have, if their sentences are today's; none otherwise."""
    if _MARKS.search(paper.text) or legacy_split(paper.text) != split_sentences(paper.text):
        return []
    return [_sha([paper.title, paper.text, fp]) for fp in LEGACY_FINGERPRINTS]


def _chunks(items: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), _BATCH):
        yield items[start : start + _BATCH]


class SentenceStore:
    """The sidecar file. Papers with the same title and sentences (the same abstract under two ids) share a row;
    `paper_id` names the paper that wrote it, for deletion. `readonly` opens the file through a `mode=ro` URI:
    nothing is created or written (a file of the legacy schema is read as it is)."""

    def __init__(self, path: Path, readonly: bool = True) -> None:
        self.path = path
        self._lock = threading.Lock()
        if readonly:
            uri = f"{path.resolve().as_uri()}?mode=ro"
            self._db = sqlite3.connect(uri, uri=True, timeout=10, check_same_thread=False)
        else:
            private_dir(path.parent)
            self._db = sqlite3.connect(private_file(path), timeout=30, check_same_thread=False)
            with self._db:
                self._db.execute(_SCHEMA)
                columns = {row[1] for row in self._db.execute("PRAGMA table_info(sentences)")}
                for column in ("content", "splitter"):  # a legacy file gains them; its rows keep NULL
                    if column not in columns:
                        self._db.execute(f"ALTER TABLE sentences ADD COLUMN {column} TEXT")

    def close(self) -> None:
        self._db.close()

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def digests(self, sig: str) -> set[str]:
        """The digests that have vectors of this signature."""
        return {d for (d,) in self._query("SELECT digest FROM sentences WHERE signature = ?", (sig,))}

    def current(self, sig: str) -> dict[str, str]:
        """Content digest -> row digest of the rows this splitter version cut (no paper needs splitting)."""
        sql = "SELECT content, digest FROM sentences WHERE signature = ? AND splitter = ?"
        return dict(self._query(sql, (sig, SPLITTER_VERSION)))

    def get(self, papers: Sequence[Paper], sig: str) -> dict[str, Any]:
        """Paper id -> vectors (float32) of the papers that have a row (a legacy row if its sentences are
        today's)."""
        out = self._rows([(digest(p), p) for p in papers], sig)
        rest = [p for p in papers if p.paper_id not in out]
        if rest:
            out.update(self._rows([(d, p) for p in rest for d in legacy_digests(p)], sig))
        return out

    def _rows(self, keys: Sequence[tuple[str, Paper]], sig: str) -> dict[str, Any]:
        import numpy as np

        by_digest: dict[str, list[Paper]] = {}
        for key, paper in keys:
            by_digest.setdefault(key, []).append(paper)
        out: dict[str, Any] = {}
        sql = "SELECT digest, n, dim, vectors FROM sentences WHERE signature = ? AND digest IN "
        for part in _chunks(list(by_digest)):
            for dig, n, dim, blob in self._query(sql + f"({','.join('?' * len(part))})", (sig, *part)):
                vectors = np.frombuffer(blob, dtype=np.float16).reshape(n, dim).astype(np.float32)
                out.update((p.paper_id, vectors) for p in by_digest[dig] if len(split_sentences(p.text)) == n)
        return out

    def put(self, rows: Iterable[tuple[Paper, Any]], sig: str) -> None:
        import numpy as np

        values = [
            (digest(p), sig, p.paper_id, int(v.shape[0]), int(v.shape[1]), np.asarray(v, dtype=np.float16).tobytes())
            + (content_digest(p), SPLITTER_VERSION)
            for p, v in rows
        ]
        with self._lock, self._db:
            self._db.executemany("INSERT OR REPLACE INTO sentences VALUES (?, ?, ?, ?, ?, ?, ?, ?)", values)

    def restamp(self, papers: Sequence[Paper], sig: str) -> int:
        """Stamp these papers' rows (by their digest: their sentences) with this splitter version, re-keying the
        legacy rows whose sentences are today's; returns how many papers now have a current row."""
        done = 0
        with self._lock, self._db:
            for paper in papers:
                new, values = digest(paper), (content_digest(paper), SPLITTER_VERSION)
                for key in (new, *legacy_digests(paper)):
                    cursor = self._db.execute(
                        "UPDATE OR REPLACE sentences SET digest = ?, content = ?, splitter = ? "
                        "WHERE digest = ? AND signature = ?",
                        (new, *values, key, sig),
                    )
                    if cursor.rowcount:
                        done += 1
                        break
        return done

    def delete(self, paper_ids: Sequence[str], keep: Sequence[Paper]) -> None:
        """Drop the rows these papers wrote, except those a paper of `keep` (still indexed) reads: same content,
        cut by this splitter version. Legacy rows still in line were re-keyed before (`restamp`): the rest go."""
        contents = {content_digest(p) for p in keep}
        with self._lock, self._db:
            for part in _chunks(list(paper_ids)):
                rows = self._db.execute(
                    f"SELECT digest, content, splitter FROM sentences WHERE paper_id IN ({','.join('?' * len(part))})",
                    part,
                ).fetchall()
                gone = [(d,) for d, content, cut in rows if not (content in contents and cut == SPLITTER_VERSION)]
                self._db.executemany("DELETE FROM sentences WHERE digest = ?", gone)


class ServerSentenceStore:
    """The same rows as records of a collection of the Chroma server beside the chunks, `<collection>.sentences`,
    so every client reads the vectors one ingest computed. A record's id is its signature's hash and its digest
    (what the sidecar's primary key is), its metadata the rest of the row's columns, its document the float16
    vectors in base64. The read side opens it without creating it (`open` returns None while it does not exist)."""

    SUFFIX = ".sentences"

    def __init__(self, collection: Any) -> None:  # noqa: ANN401 - a chromadb Collection
        self.records = collection

    @classmethod
    def open(cls, store: object, write: bool) -> ServerSentenceStore | None:
        from rag_assistant.index.chroma_open import sibling_collection

        records = sibling_collection(store, cls.SUFFIX, write)
        return None if records is None else cls(records)

    def close(self) -> None:
        """Nothing to release: the chunks' client owns the connection."""

    @staticmethod
    def _id(sig: str, key: str) -> str:
        return f"{_sha(sig)}:{key}"

    def _all(self, sig: str) -> list[dict[str, Any]]:
        """The metadata of every record of this signature, paged."""
        out: list[dict[str, Any]] = []
        while True:
            res = self.records.get(where={"sig": _sha(sig)}, include=["metadatas"], limit=5000, offset=len(out))
            if not res["ids"]:
                return out
            out += [dict(meta or {}) for meta in res["metadatas"] or []]

    def digests(self, sig: str) -> set[str]:
        """The digests that have vectors of this signature."""
        return {str(meta["digest"]) for meta in self._all(sig)}

    def current(self, sig: str) -> dict[str, str]:
        """Content digest -> row digest of the records this splitter version cut."""
        return {str(m["content"]): str(m["digest"]) for m in self._all(sig) if m.get("splitter") == SPLITTER_VERSION}

    def get(self, papers: Sequence[Paper], sig: str) -> dict[str, Any]:
        """Paper id -> vectors (float32) of the papers that have a record."""
        import base64

        import numpy as np

        by_id: dict[str, list[Paper]] = {}
        for paper in papers:
            by_id.setdefault(self._id(sig, digest(paper)), []).append(paper)
        out: dict[str, Any] = {}
        for part in _chunks(list(by_id)):
            res = self.records.get(ids=list(part), include=["documents", "metadatas"])
            for rid, doc, meta in zip(res["ids"], res["documents"] or [], res["metadatas"] or [], strict=True):
                n, dim = int(meta["n"]), int(meta["dim"])
                raw = np.frombuffer(base64.b64decode(doc or ""), dtype=np.float16)
                vectors = raw.reshape(n, dim).astype(np.float32)
                out.update((p.paper_id, vectors) for p in by_id[rid] if len(split_sentences(p.text)) == n)
        return out

    def put(self, rows: Iterable[tuple[Paper, Any]], sig: str) -> None:
        import base64

        import numpy as np

        rows = list(rows)
        for part in _chunks(rows):
            metas = [
                {"sig": _sha(sig), "digest": digest(p), "paper_id": p.paper_id, "n": int(v.shape[0])}
                | {"dim": int(v.shape[1]), "content": content_digest(p), "splitter": SPLITTER_VERSION}
                for p, v in part
            ]
            self.records.upsert(
                ids=[self._id(sig, m["digest"]) for m in metas],
                embeddings=[[1.0]] * len(part),  # Chroma keeps no record without one; never queried
                documents=[base64.b64encode(np.asarray(v, dtype=np.float16).tobytes()).decode() for _, v in part],
                metadatas=metas,  # type: ignore[arg-type]
            )

    def restamp(self, papers: Sequence[Paper], sig: str) -> int:
        """Stamp the records of these papers' sentences with this splitter version (an older one cut them)."""
        ids = {self._id(sig, digest(p)): p for p in papers}
        found = self.records.get(ids=list(ids), include=["metadatas"]) if ids else {"ids": [], "metadatas": []}
        metas = [
            {**dict(meta or {}), "content": content_digest(ids[rid]), "splitter": SPLITTER_VERSION}
            for rid, meta in zip(found["ids"], found["metadatas"] or [], strict=True)
        ]
        if metas:
            self.records.update(ids=found["ids"], metadatas=metas)
        return len(metas)

    def delete(self, paper_ids: Sequence[str], keep: Sequence[Paper]) -> None:
        """Drop the records these papers wrote, except those a paper of `keep` reads (as the sidecar does)."""
        contents = {content_digest(p) for p in keep}
        for part in _chunks(list(paper_ids)):
            res = self.records.get(where={"paper_id": {"$in": list(part)}}, include=["metadatas"])
            gone = [
                rid
                for rid, meta in zip(res["ids"], res["metadatas"] or [], strict=True)
                if not (meta.get("content") in contents and meta.get("splitter") == SPLITTER_VERSION)
            ]
            if gone:
                self.records.delete(ids=gone)
