"""Chroma storage per chunk (index/records.py): chunks store no document, their text is a span of the paper's
abstract; a paper's abstract, metadata and authors are stored once, on its first chunk, in pieces that stay
inside SQLite's index pages; an author filter finds the matching papers there and still ranks every chunk of
them. An index in the older layout is read as it is and upgraded by the next ingest, embedding nothing again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rag_assistant.config import Settings
from rag_assistant.corpus import load_corpus
from rag_assistant.corpus.models import Paper
from rag_assistant.index.filters import chroma_where, parse_filters
from rag_assistant.index.ingest import ingest_papers
from rag_assistant.index.reader import IndexReader
from rag_assistant.index.records import PIECE_BYTES, field_metadata, joined, pieces
from rag_assistant.index.store import ChromaStore, open_store

RECORDS = [
    {
        "id": "p1",
        "title": "Critic training by reinforcement learning",
        "abstract": " ".join(f"Sentence {i} trains critics for code generation with reinforcement." for i in range(60)),
        "authors": ["Zhihui Xie", "Jürgen Schmidhuber"],
        "topic": "Deep Learning->Large Language Models",
        "year": 2025,
    },
    {
        "id": "p2",
        "abstract": "Fair predictions under imperceptible feature perturbation are not guaranteed. " * 3,
        "authors": "Ada Lovelace and Alan Turing",
        "topic": "Social Aspects->Fairness",
        "year": 2024,
    },
]


def _papers(tmp_path: Path) -> list[Paper]:
    path = tmp_path / "papers.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    return load_corpus([path]).papers


def _rows(store: ChromaStore) -> list[tuple[str, str | None, dict[str, Any]]]:
    res = store.collection.get(include=["documents", "metadatas"])
    return list(zip(res["ids"], res["documents"], res["metadatas"], strict=True))


def test_pieces_never_split_a_character_and_join_back() -> None:
    text = "é" * 1000 + "x" + "漢" * 700
    parts = pieces("paper_z", text)
    assert len(parts) > 2 and all(len(p.encode()) <= PIECE_BYTES for p in parts.values())
    assert list(parts)[:2] == ["paper_z", "paper_z~1"] and joined(parts, "paper_z") == text
    assert pieces("k", "short") == {"k": "short"} and joined({}, "k") == ""


def test_chunks_store_no_document_and_each_paper_once(tmp_path: Path) -> None:
    papers = _papers(tmp_path)
    settings = Settings()
    ingest_papers(papers, settings)
    store = open_store(settings)
    rows = _rows(store)
    assert len(rows) > 3  # p1 spans several chunks
    assert not any(doc for _, doc, _ in rows)  # no document: no copy in Chroma's full-text index
    firsts = [meta for _, _, meta in rows if meta["chunk_index"] == 0]
    others = [meta for _, _, meta in rows if meta["chunk_index"] > 0]
    assert len(firsts) == 2 and all("paper_z" in m and "ak" in m for m in firsts)
    # the paper's strings are one compressed value, far smaller than the abstract they hold
    p1_first = next(m for m in firsts if m["paper_id"] == "p1")
    assert len(joined(p1_first, "paper_z")) < len(RECORDS[0]["abstract"]) / 4  # type: ignore[arg-type]
    assert all("f_topic" in m and "f_year" in m for m in others)  # short fields: filtered by Chroma directly
    paper_keys = ("ak", "paper_z", "paper_pos", "title")
    assert not any(k.startswith(paper_keys) for m in others for k in m)
    assert all(m.keys() >= {"start", "end", "paper_hash", "n_chunks", "source"} for m in others)
    longest = max(len(v.encode()) for _, _, m in rows for v in m.values() if isinstance(v, str))
    assert longest <= PIECE_BYTES  # no value spills into an overflow page of Chroma's string index

    # every chunk reads back as ingest cut it: the title, then its span of the abstract
    by_id = {p.paper_id: p for p in papers}
    texts = dict(store.iter_chunks())
    assert set(texts) == {cid for cid, _, _ in rows}
    assert texts["p1#1"].startswith("Critic training by reinforcement learning. Sentence ")
    assert all(t.split(". ", 1)[1] in by_id["p1"].text for cid, t in texts.items() if cid.startswith("p1#"))
    assert store.papers(["p1", "p2"]) == by_id
    reader = IndexReader(settings)
    hits = reader.query([1.0] + [0.0] * (reader.dimension() - 1), 50)
    assert {h.chunk_id: h.text for h in hits} == texts


def test_a_filter_ranks_every_chunk_of_the_matching_papers(tmp_path: Path) -> None:
    """Authors' keys live on first chunks only (resolved to papers first), the other fields on every chunk: a
    filtered dense search returns every chunk of the matching papers, alone or combined."""
    settings = Settings()
    ingest_papers(_papers(tmp_path), settings)
    reader = IndexReader(settings)
    query = [1.0] + [0.0] * (reader.dimension() - 1)
    p1_chunks = reader.count() - 1  # p2 has one chunk
    for filters in (parse_filters(years="2025"), parse_filters(authors=["jurgen SCHMIDHUBER"])):
        where = chroma_where(filters)
        assert where is not None and reader.any_match(where)
        hits = reader.query(query, 50, where=where)
        assert {h.paper_id for h in hits} == {"p1"} and len(hits) == p1_chunks
        assert reader.query(query, 50, exclude={"p1"}, where=where) == []
    both = chroma_where(parse_filters(authors=["Zhihui Xie"], years="2025"))
    assert both is not None and len(reader.query(query, 50, where=both)) == p1_chunks
    none = chroma_where(parse_filters(authors=["Zhihui Xie"], years="2024"))
    assert none is not None and not reader.any_match(none) and reader.query(query, 50, where=none) == []


def test_a_search_reads_each_chunk_once_and_a_repeated_one_reads_nothing(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """A chunk's text is a span of its paper's abstract on the first chunk: the search asks Chroma for ids and
    distances only and reads each chunk (a first chunk: for itself and for its paper) once per process, so a
    warm search costs the nearest-neighbour search and little more (index/read_cache.py)."""
    from chromadb.api.models.Collection import Collection

    settings = Settings()
    ingest_papers(_papers(tmp_path), settings)
    expected = dict(open_store(settings).iter_chunks())
    read: list[str] = []  # the ids of every chunk whose metadata Chroma returned
    get, query = Collection.get, Collection.query

    def recorded_get(self: Collection, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
        res = get(self, *args, **kwargs)
        read.extend(res["ids"] if self.name == settings.collection and "metadatas" in kwargs.get("include", []) else [])
        return res

    def recorded_query(self: Collection, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
        res = query(self, *args, **kwargs)
        read.extend(res["ids"][0] if "metadatas" in kwargs.get("include", []) else [])
        return res

    monkeypatch.setattr(Collection, "get", recorded_get)
    monkeypatch.setattr(Collection, "query", recorded_query)
    reader = IndexReader(settings)
    vector = [1.0] + [0.0] * (reader.dimension() - 1)  # type: ignore[operator]
    hits = reader.query(vector, 50)
    assert {h.chunk_id: h.text for h in hits} == expected and all(h.similarity > -1 for h in hits)
    assert sorted(read) == sorted(expected)  # every chunk read, none twice (the first chunks hold the papers)
    read.clear()
    assert set(reader.papers(["p1", "p2"])) == {"p1", "p2"}
    assert reader.query(vector, 50) == hits and read == []  # a repeated search reads nothing but the distances
    assert all("paper_z" not in h.metadata and "paper_id" in h.metadata for h in hits)


def _fts_bytes(settings: Settings) -> int:
    import sqlite3

    with sqlite3.connect(settings.chroma_dir / "chroma.sqlite3") as db:
        sql = "SELECT SUM(pgsize) FROM dbstat WHERE name = 'embedding_fulltext_search_data'"
        return int(db.execute(sql).fetchone()[0])


def _to_legacy(store: ChromaStore, papers: list[Paper]) -> None:
    """Rewrite the stored chunks as the previous version laid them out: a document each, the paper's fields on
    every chunk, its whole abstract and metadata on the first, and a text_hash."""
    res = store.collection.get(include=["embeddings", "metadatas"])
    texts = dict(store.iter_chunks())
    by_id = {p.paper_id: p for p in papers}
    metas = []
    for meta in res["metadatas"]:
        p = by_id[meta["paper_id"]]
        keep = ("paper_id", "chunk_index", "n_chunks", "paper_hash", "source", "chunk_hash", "ingest_run")
        old = {k: meta[k] for k in keep if k in meta}
        old.update(text_hash=p.text_hash, position=p.position, **({"title": p.title} if p.title else {}))
        old.update({**field_metadata(p), "f_authors": ["x"]} if p.metadata else {})
        if meta["chunk_index"] == 0:
            old.update(paper_text=p.text, paper_meta=json.dumps(p.metadata, ensure_ascii=False))
        metas.append(old)
    store.collection.delete(ids=res["ids"])
    store.collection.add(
        ids=res["ids"], embeddings=res["embeddings"], documents=[texts[c] for c in res["ids"]], metadatas=metas
    )


def test_reingest_upgrades_an_index_of_the_older_layout_reusing_every_vector(tmp_path: Path, cli) -> None:  # noqa: ANN001
    papers = _papers(tmp_path)
    settings = Settings()
    ingest_papers(papers, settings)
    store = open_store(settings)
    before = dict(store.iter_chunks())
    _to_legacy(store, papers)
    legacy = open_store(settings)
    assert any(doc for _, doc, _ in _rows(legacy))
    # read as it is: texts, papers and filters
    assert dict(legacy.iter_chunks()) == before and legacy.papers(["p1", "p2"]) == {p.paper_id: p for p in papers}
    vector = [1.0] + [0.0] * (legacy.dimension() - 1)  # type: ignore[operator]
    for filters in (parse_filters(years="2024"), parse_filters(authors=["Ada Lovelace"])):
        assert {h.paper_id for h in legacy.query(vector, 50, where=chroma_where(filters))} == {"p2"}

    fts = _fts_bytes(settings)
    result = cli("ingest", str(tmp_path / "papers.jsonl"))
    assert result.returncode == 0, result.stderr
    assert "2 upgraded (to the compact storage layout)" in result.stdout and "0 unchanged" in result.stdout
    assert "with a stored vector reused" in result.stdout and "Sentence vectors computed" not in result.stdout
    upgraded = open_store(settings)
    rows = _rows(upgraded)
    assert not any(doc for _, doc, _ in rows) and not any("position" in m or "f_authors" in m for _, _, m in rows)
    assert dict(upgraded.iter_chunks()) == before
    assert _fts_bytes(settings) < fts  # the old documents' terms are gone from Chroma's full-text index

    report = ingest_papers(load_corpus([tmp_path / "papers.jsonl"]).papers, settings)
    assert (report.upgraded, report.unchanged, report.chunks_added) == (0, 2, 0)


def _to_second_layout(store: ChromaStore, papers: list[Paper]) -> None:
    """Rewrite the first chunks as the second layout kept them: the paper's strings uncompressed, in pieces, its
    position as `paper_position` and its authors' keys as `f_author_keys`."""
    res = store.collection.get(where={"chunk_index": 0}, include=["embeddings", "metadatas"])
    by_id = {p.paper_id: p for p in papers}
    metas = []
    for meta in res["metadatas"]:
        p = by_id[meta["paper_id"]]
        old = {k: v for k, v in meta.items() if not k.startswith(("paper_z", "paper_pos")) and k != "ak"}
        old.update(paper_position=p.position, **({"title": p.title} if p.title else {}))
        old.update({"f_author_keys": meta["ak"]} if "ak" in meta else {})
        old.update(pieces("paper_text", p.text))
        old.update(pieces("paper_meta", json.dumps(p.metadata, ensure_ascii=False)) if p.metadata else {})
        metas.append(old)
    store.collection.delete(ids=res["ids"])
    store.collection.add(ids=res["ids"], embeddings=res["embeddings"], metadatas=metas)


def test_reingest_compresses_the_papers_of_the_second_layout(tmp_path: Path, cli) -> None:  # noqa: ANN001
    papers = _papers(tmp_path)
    settings = Settings()
    ingest_papers(papers, settings)
    before = dict(open_store(settings).iter_chunks())
    _to_second_layout(open_store(settings), papers)
    second = open_store(settings)
    assert any("paper_text" in m for _, _, m in _rows(second))
    assert dict(second.iter_chunks()) == before and second.papers(["p1", "p2"]) == {p.paper_id: p for p in papers}
    vector = [1.0] + [0.0] * (second.dimension() - 1)  # type: ignore[operator]
    by_author = chroma_where(parse_filters(authors=["Jurgen Schmidhuber"]))
    assert {h.paper_id for h in second.query(vector, 50, where=by_author)} == {"p1"}  # filtered as it is

    result = cli("ingest", str(tmp_path / "papers.jsonl"))
    assert result.returncode == 0, result.stderr
    assert "2 upgraded (to the compact storage layout)" in result.stdout and "0 unchanged" in result.stdout
    assert "with a stored vector reused" in result.stdout and "Sentence vectors computed" not in result.stdout
    rows = _rows(open_store(settings))
    gone = ("paper_text", "paper_meta", "paper_position", "title", "f_author_keys")
    assert not any(k.startswith(gone) for _, _, m in rows for k in m)
    assert {h.paper_id for h in open_store(settings).query(vector, 50, where=by_author)} == {"p1"}
    assert dict(open_store(settings).iter_chunks()) == before
    assert open_store(settings).papers(["p1", "p2"]) == {p.paper_id: p for p in papers}


def _unpersisted(settings: Settings) -> dict[str, int]:
    """Collection name -> records in Chroma's log that its vector index has not written to disk: what every
    process that opens the collection replays before its first query."""
    import sqlite3

    with sqlite3.connect(settings.chroma_dir / "chroma.sqlite3") as db:
        rows = db.execute(
            "SELECT c.name, (SELECT COUNT(*) FROM embeddings_queue q WHERE q.topic LIKE '%' || c.id"
            "  AND q.seq_id > COALESCE((SELECT m.seq_id FROM max_seq_id m WHERE m.segment_id = s.id), -1))"
            " FROM collections c JOIN segments s ON s.collection = c.id AND s.scope = 'VECTOR'"
        ).fetchall()
    return dict(rows)


def test_an_ingest_leaves_no_vector_for_readers_to_replay(tmp_path: Path) -> None:
    settings = Settings()
    papers = _papers(tmp_path)
    ingest_papers(papers[:1], settings)
    ingest_papers(papers, settings)  # a second, small ingest: far below Chroma's own 1,000-record threshold
    pending = _unpersisted(settings)
    assert pending["abstracts"] == 0 and "abstracts.papers" not in pending, pending  # the run log: small either way
    store = open_store(settings)  # ingests keep writing the vector index in large steps
    assert store.collection.configuration["hnsw"]["sync_threshold"] == 1000
    vector = store.collection.get(limit=1, include=["embeddings"])["embeddings"][0]
    assert len(IndexReader(settings).query(vector, 50)) == store.collection.count()  # every chunk is found
