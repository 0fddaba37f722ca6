"""How a paper and its chunks are laid out as Chroma metadata (index/store.py writes and reads them), sized for
Chroma's storage costs. Chroma keeps every document three more times (a string row, a SQLite index entry and an
FTS5 trigram index ~5x its size) and indexes every string metadata value, spilling each value over ~1,000 bytes
into a 4 KB overflow page of that index; none of this can be switched off in chromadb 1.5 (a collection schema
that disables them is recorded, yet the SQLite tables are still written). So:

- a chunk stores no document: its text is its paper's title prefix and a span (`start`, `end`) of the abstract,
  checked when written; a text that is not such a span (a caller's own chunking) is kept as `chunk_text`;
- what belongs to the paper (abstract, raw metadata, title, position, its authors' keys) is stored once, on its
  first chunk; a filter on authors finds the matching papers there, then ranks their chunks; the other `f_`
  fields (short: a track, a year) stay on every chunk, so Chroma filters on them directly;
- the abstract, title and raw metadata are one Brotli-compressed, base85-encoded string (`PAPER_KEY`): Chroma
  stores and indexes a string twice, and nothing queries these by value, so compressing them halves the largest
  part of the store (conference papers: 1,390 bytes as JSON, 701 encoded; zlib's 926: Brotli's built-in
  dictionary of common English words is what short texts lack);
- long strings are cut into pieces of at most PIECE_BYTES (`key`, `key~1`, `key~2`, ...), which stay inside
  the SQLite index page instead of costing an overflow page each.

Chunks written before this layout are still read: a document, the paper's fields and `position` on every chunk
(the first layout), or the paper's strings uncompressed and its position as `paper_position` on its first chunk
(the second); the store finds them by `LEGACY_KEYS` (ints: Chroma can test an int key's presence, not a
string's) and ingest rewrites them, reusing their vectors."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rag_assistant.corpus.fields import name_key, normalise
from rag_assistant.corpus.models import Paper

FIELD_PREFIX = "f_"  # a paper's normalised fields (corpus/fields.py) on its chunks, for `where` filters
# a paper's authors as filters compare them (fields.name_key), on its first chunk; a short key: Chroma keeps a
# list's key with every element, three times (its row and two indexes), ~0.13 KB a chunk for "f_author_keys"
AUTHOR_KEYS = "ak"
OLD_AUTHOR_KEYS = FIELD_PREFIX + "author_keys"  # the second layout's key, filtered on until a re-ingest rewrites it
PIECE_BYTES = 900  # a string piece's UTF-8 size: with its key and row id it stays under SQLite's 1,002 in-page bytes
POSITION = "paper_pos"  # the paper's position in its file, on its first chunk
LEGACY_KEYS = ("position", "paper_position")  # the position's key in the first and second layouts (see above)
PAPER_KEY = "paper_z"  # the paper's text, title and raw metadata, compressed (pack_paper)
LISTED = "listed"  # on a paper's first chunk once all its chunks are stored: `listing` of what they are
SPAN = ("start", "end")  # a chunk's text as a span of its paper's abstract (after the title prefix)
CHUNK_TEXT = "chunk_text"  # a chunk's own text, when it is not a span of the abstract


def paper_to_metadata(paper: Paper, index: int, n_chunks: int) -> dict[str, Any]:
    """A chunk's metadata before `chunk_metadata` places its text: what every chunk carries (its paper, hash,
    count and file: what ingest's crash checks read; the paper's fields but its authors, for filters), and on the
    first chunk the paper itself and its authors' keys."""
    meta: dict[str, Any] = {
        "paper_id": paper.paper_id,
        "chunk_index": index,
        "n_chunks": n_chunks,
        "paper_hash": paper.content_hash,
        "source": paper.source,
    }
    fields = field_metadata(paper)
    authors = fields.pop(AUTHOR_KEYS, None)
    meta.update(fields)
    if index == 0:  # the paper, once, so answers and references need no other store
        meta[POSITION] = paper.position
        meta.update(pieces(PAPER_KEY, pack_paper(paper)))
        if authors:
            meta[AUTHOR_KEYS] = authors
    return meta


def field_metadata(paper: Paper) -> dict[str, Any]:
    """The paper's fields as Chroma metadata (filterable with `where`; lists with `$contains`); its authors only
    as `AUTHOR_KEYS` (the names are in its packed raw metadata). Nothing for a paper without metadata."""
    fields = normalise(paper.metadata)
    authors = fields.pop("authors", None) or []
    out: dict[str, Any] = {FIELD_PREFIX + key: value for key, value in fields.items()}
    keys = list(dict.fromkeys(filter(None, map(name_key, authors))))  # type: ignore[arg-type]
    if keys:
        out[AUTHOR_KEYS] = keys
    return out


def split_where(where: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A filter's clauses (index/filters.py) as (those on authors, the others): the authors' keys are on first
    chunks only (an author has few papers: resolved to their ids), the other fields on every chunk."""
    clauses = list(where["$and"]) if set(where) == {"$and"} else [dict(where)]
    on_authors = [c for c in clauses if _keys(c) & {AUTHOR_KEYS, OLD_AUTHOR_KEYS}]
    return on_authors, [c for c in clauses if c not in on_authors]


def _keys(clause: Any) -> set[str]:  # noqa: ANN401 - a where clause, or a value within one
    """Every key a where clause names, at any depth."""
    if isinstance(clause, Mapping):
        return set(clause) | {k for v in clause.values() for k in _keys(v)}
    return {k for v in clause for k in _keys(v)} if isinstance(clause, list) else set()


def chunk_metadata(meta: Mapping[str, Any], text: str, paper: Paper | None) -> dict[str, Any]:
    """`meta` (paper_to_metadata's) with the chunk's text placed: a span of its `paper`'s abstract (None: not
    known) when the title prefix and that span spell it exactly, else the text itself; and its fingerprint."""
    out = dict(meta)
    out["chunk_hash"] = text_key(text)
    prefix = f"{paper.title}. " if paper is not None and paper.title else ""
    body = text[len(prefix) :]
    start = paper.text.find(body) if paper is not None and body and text.startswith(prefix) else -1
    if start >= 0:
        out[SPAN[0]], out[SPAN[1]] = start, start + len(body)
    else:
        out.update(pieces(CHUNK_TEXT, text))
    return out


def chunk_text(meta: Mapping[str, Any], document: str | None, paper: Paper | None) -> str | None:
    """A stored chunk's text: its document (a legacy chunk), its own text, or its span of `paper`'s abstract
    (None when that paper is not stored: a chunk of a paper being rewritten)."""
    if document:
        return document
    if CHUNK_TEXT in meta:
        return joined(meta, CHUNK_TEXT)
    if paper is None:
        return None
    prefix = f"{paper.title}. " if paper.title else ""
    return prefix + paper.text[int(meta[SPAN[0]]) : int(meta[SPAN[1]])]


def chunk_texts(collection: Any, chunk_ids: Sequence[str]) -> dict[str, str]:  # noqa: ANN401 - a Collection
    """Chunk id -> text of those of these chunks of a chunks `collection` that are stored (the run log reads
    them so)."""
    res = collection.get(ids=list(chunk_ids), include=["documents", "metadatas"])

    def firsts(paper_ids: list[str]) -> dict[str, Paper]:
        found = collection.get(ids=[f"{pid}#0" for pid in paper_ids], include=["metadatas"]) if paper_ids else {}
        return {str(meta["paper_id"]): metadata_to_paper(meta) for meta in found.get("metadatas") or []}

    return texts_of(zip(res["ids"], res["documents"] or [], res["metadatas"] or [], strict=True), firsts)


def texts_of(
    rows: Iterable[tuple[str, str | None, Mapping[str, Any]]], papers: Callable[[list[str]], Mapping[str, Paper]]
) -> dict[str, str]:
    """Chunk id -> text of (id, document, metadata) rows, the papers of those without a document read with
    `papers`; a chunk whose paper's first chunk is missing (being rewritten this instant) is left out."""
    rows = list(rows)
    found = papers(list(dict.fromkeys(str(meta["paper_id"]) for _, doc, meta in rows if not doc)))
    texts = ((cid, chunk_text(meta, doc, found.get(str(meta["paper_id"])))) for cid, doc, meta in rows)
    return {cid: text for cid, text in texts if text is not None}


def metadata_to_paper(meta: Mapping[str, Any]) -> Paper:
    """The paper its first chunk's metadata holds (in this layout or an older one)."""
    if PAPER_KEY in meta:
        import brotli

        text, title, metadata = json.loads(brotli.decompress(base64.b85decode(joined(meta, PAPER_KEY))))
    else:
        text, title = joined(meta, "paper_text"), meta.get("title")
        metadata = json.loads(joined(meta, "paper_meta") or "{}")
    position = next((meta[k] for k in (POSITION, *LEGACY_KEYS) if k in meta), 0)
    return Paper(str(meta["paper_id"]), text, str(meta.get("source", "")), int(position), title, metadata)


def pack_paper(paper: Paper) -> str:
    """The paper's text, title and raw metadata as one compressed ASCII string (metadata_to_paper reads it)."""
    import brotli

    packed = json.dumps([paper.text, paper.title, paper.metadata], ensure_ascii=False, default=str)
    # quality 10: the first level that uses the dictionary (0.60 -> 0.50 of the JSON, ~1.1 ms a paper; 11 gains
    # 0.007 for twice the time)
    return base64.b85encode(brotli.compress(packed.encode("utf-8"), quality=10)).decode("ascii")


def listing(paper_id: str, content_hash: str, n_chunks: int, source: str) -> int:
    """What a paper stored whole is listed with (an int: Chroma finds an int by value with an ids-only query, and
    keeps it far smaller than a string): it matches only the same paper, version, chunk count and file."""
    key = "\0".join((paper_id, content_hash, str(n_chunks), source)).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big", signed=True)


def is_legacy(meta: Mapping[str, Any]) -> bool:
    """Whether a chunk was written in an older layout (a re-ingest rewrites its paper)."""
    return any(key in meta for key in LEGACY_KEYS)


def pieces(key: str, text: str) -> dict[str, str]:
    """`text` under `key`, `key~1`, ... in pieces of at most PIECE_BYTES UTF-8 bytes (never splitting a
    character); one piece under `key` when it fits."""
    out: dict[str, str] = {}
    data = text.encode("utf-8")
    start = 0
    while start < len(data) or not out:
        end = min(len(data), start + PIECE_BYTES)
        while end < len(data) and data[end] & 0xC0 == 0x80:  # a continuation byte: back to the character's start
            end -= 1
        out[key if not out else f"{key}~{len(out)}"] = data[start:end].decode("utf-8")
        start = end
    return out


def joined(meta: Mapping[str, Any], key: str) -> str:
    """The string `pieces` stored under `key` (also a whole one from before pieces); "" when absent."""
    parts = [str(meta.get(key, ""))]
    while (part := meta.get(f"{key}~{len(parts)}")) is not None:
        parts.append(str(part))
    return "".join(parts)


def text_key(text: str) -> str:
    """A chunk text's fingerprint, stored with it, so equal texts can share one embedding."""
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
