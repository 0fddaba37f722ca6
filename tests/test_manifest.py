"""Listings of papers stored whole (index/store.py): an unchanged re-ingest states papers from their listings,
not from every chunk's metadata, also from another client of a shared Chroma server; a listing never claims more
than the store holds, whatever an ingest was interrupted doing; an index from before listings (whose papers were
recorded in a collection of their own) gets them on its next ingest without loading the model, and loses that
collection."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from chroma_server import ChromaServer
from kill_helpers import records, true_records

import rag_assistant.index.ingest as ingest_mod
from rag_assistant.config import Settings
from rag_assistant.corpus import Paper, bundled_corpus_path, load_corpus
from rag_assistant.index.ingest import ingest_papers
from rag_assistant.index.pending import delete_by_paper
from rag_assistant.index.records import LISTED
from rag_assistant.index.store import OLD_MANIFEST, ChromaStore, open_store


def _chunks(store: ChromaStore) -> dict[str, Any]:
    """Chunk id -> (document, metadata less its listing: records() reads that)."""
    res = store.collection.get(include=["documents", "metadatas"])
    rows = zip(res["ids"], res["documents"], res["metadatas"], strict=True)
    return {cid: (doc, {k: v for k, v in meta.items() if k != LISTED}) for cid, doc, meta in rows}


def _write(path: Path, records: list[dict[str, str]]) -> list[Paper]:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return load_corpus([path]).papers


def _chunk_reads(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The paper ids whose chunks' metadata the store reads, call by call."""
    read: list[list[str]] = []
    real = ChromaStore._get_where

    def get_where(self: ChromaStore, paper_ids: list[str], include: list[str]) -> Iterator[tuple[str, dict]]:
        read.append(list(paper_ids))
        return real(self, paper_ids, include)

    monkeypatch.setattr(ChromaStore, "_get_where", get_where)
    return read


@pytest.fixture(params=["embedded", "server"])
def two_clients(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Settings, Settings]]:
    """Two clients of one index: one data dir (embedded), or two data dirs on one Chroma server."""
    if request.param == "embedded":
        yield Settings(), Settings()
    else:
        with ChromaServer(tmp_path / "server") as server:
            yield tuple(Settings(data_dir=tmp_path / name, chroma_url=server.url) for name in ("a", "b"))  # type: ignore[misc]


def test_unchanged_reingest_reads_records_also_from_another_client(
    two_clients: tuple[Settings, Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = two_clients
    papers = load_corpus([bundled_corpus_path()]).papers[:12]
    assert ingest_papers(papers, first).new == 12
    store = open_store(first)
    assert records(store) == true_records(store, [p.paper_id for p in papers])  # every paper listed, truly

    read = _chunk_reads(monkeypatch)
    # On a server: a client with its own data dir, that never ingested (it computes the sentence vectors it lacks)
    again = ingest_papers(papers, second)
    assert (again.unchanged, again.new, again.changed, again.chunks_added) == (12, 0, 0, 0)
    assert not any(read), read  # stated from the records alone


def test_an_index_from_before_listings_gets_them_on_its_next_ingest(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings()
    papers = load_corpus([bundled_corpus_path()]).papers
    ingest_papers(papers, settings)
    store = open_store(settings)
    store.unlist_papers([p.paper_id for p in papers])  # what an older version left: no listings, and its manifest
    old = store.client.create_collection(OLD_MANIFEST.format(settings.collection), embedding_function=None)
    old.add(ids=[papers[0].paper_id], embeddings=[[1.0]], metadatas=[{"n_chunks": 1}])
    with sqlite3.connect(settings.chroma_dir / "chroma.sqlite3") as db:
        sql = "SELECT id FROM segments WHERE collection = ?"
        old_files = [settings.chroma_dir / row[0] for row in db.execute(sql, (str(old.id),))]
    for directory in old_files:  # its vector index's files, as Chroma writes them once it persists
        directory.mkdir(exist_ok=True)
        (directory / "header.bin").write_bytes(b"\0" * 100)
    assert records(store) == {}
    chunks = _chunks(store)

    read = _chunk_reads(monkeypatch)
    monkeypatch.setattr(ingest_mod, "get_embedder", lambda *a: pytest.fail("an unchanged re-ingest loads no model"))
    upgrade = ingest_papers(papers, settings, store=store)
    assert (upgrade.unchanged, upgrade.chunks_added, upgrade.chunks_deleted) == (38, 0, 0)
    assert read and _chunks(store) == chunks  # read in full once, nothing rewritten
    assert records(store) == true_records(store, [p.paper_id for p in papers])
    assert OLD_MANIFEST.format(settings.collection) not in {c.name for c in store.client.list_collections()}
    assert old_files and not any(d.exists() for d in old_files)  # chromadb leaves them (chroma-core/chroma#5259)
    read.clear()
    assert ingest_papers(papers, settings, store=store).unchanged == 38
    assert not any(read), read


@pytest.mark.slow
def test_a_change_interrupted_then_undone_is_redone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A paper larger than a step is being rewritten (same number of chunks, one word changed) when the ingest
    is interrupted; the file goes back to the stored version. Its chunks are of two versions, so the rerun
    must redo it: its old record, had it stayed, would have claimed it unchanged."""
    monkeypatch.setenv("RAG_ASSISTANT_CHUNK_MAX_TOKENS", "64")
    monkeypatch.setattr(ingest_mod, "EMBED_BATCH", 6)
    sentences = [s for p in load_corpus([bundled_corpus_path()]).papers[10:] for s in re.split(r"(?<=\.) ", p.text)]
    big = " ".join(f"Segment {i} of the long survey: {s}" for i, s in enumerate(sentences[:40]))
    small = [{"id": f"p{i}", "abstract": p.text} for i, p in enumerate(load_corpus([bundled_corpus_path()]).papers[:3])]
    corpus = tmp_path / "papers.jsonl"
    settings = Settings()
    store = open_store(settings)
    original = _write(corpus, [*small, {"id": "big", "abstract": big}])
    ingest_papers(original, settings, store=store)
    want = _chunks(store)
    ids = [p.paper_id for p in original]

    def interrupt_halfway(done: int, total: int) -> None:
        if 2 * done >= total:
            raise KeyboardInterrupt

    edited = _write(corpus, [*small, {"id": "big", "abstract": big.replace("Segment 20 of", "Segment 21 of")}])
    with pytest.raises(KeyboardInterrupt):
        ingest_papers(edited, settings, store=store, progress=interrupt_halfway)
    assert not store.paper_states(["big"])["big"].complete  # two versions, as many chunks as either has
    listed, true = records(store), true_records(store, ids)
    assert "big" not in listed and all(true.get(pid) == record for pid, record in listed.items()), (listed, true)

    report = ingest_papers(_write(corpus, [*small, {"id": "big", "abstract": big}]), settings, store=store)
    assert (report.changed, report.unchanged) == (1, 3)
    assert _chunks(store).keys() == want.keys()
    assert all(_chunks(store)[cid][0] == doc for cid, (doc, _) in want.items())
    assert records(store) == true_records(store, ids)


def test_ingest_notices_two_records_swapping_their_abstracts(tmp_path: Path) -> None:
    """The swap leaves every stored hash one of the file's hashes: only the pairing tells it changed."""
    settings = Settings()
    texts = [
        "Graph neural networks for molecules.",
        "Bandits with delayed feedback.",
        "Diffusion models for audio.",
        "Sparse attention at scale.",
    ]
    path = tmp_path / "swap.jsonl"
    rows = [{"id": f"s{i}", "abstract": t} for i, t in enumerate(texts)]
    assert ingest_papers(_write(path, rows), settings).new == 4

    rows[1]["abstract"], rows[2]["abstract"] = rows[2]["abstract"], rows[1]["abstract"]
    report = ingest_papers(_write(path, rows), settings)
    assert (report.changed, report.unchanged) == (2, 2)
    again = ingest_papers(load_corpus([path]).papers, settings)
    assert (again.changed, again.unchanged, again.chunks_added) == (0, 4, 0)
    stored = open_store(settings).papers(["s1", "s2"])
    assert stored["s1"].text == texts[2] and stored["s2"].text == texts[1]


def test_a_paper_that_sheds_chunks_is_listed_only_once_they_are_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A changed paper with fewer chunks than before: its new chunks are written first, the surplus deleted
    after. Interrupted in between, its record must not count the new chunks as the whole paper."""
    monkeypatch.setenv("RAG_ASSISTANT_CHUNK_MAX_TOKENS", "64")
    settings = Settings()
    papers = load_corpus([bundled_corpus_path()]).papers[:3]
    ingest_papers(papers, settings)
    store = open_store(settings)
    shorter = replace(papers[0], text=papers[0].text[: len(papers[0].text) // 3])
    assert len(store.paper_states([shorter.paper_id])[shorter.paper_id].chunk_ids) > 1

    def interrupted(*args: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ingest_mod, "delete_by_paper", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ingest_papers([shorter, *papers[1:]], settings, store=store)
    ids = [p.paper_id for p in papers]
    listed, true = records(store), true_records(store, ids)
    assert shorter.paper_id not in listed and all(true.get(pid) == r for pid, r in listed.items()), (listed, true)

    monkeypatch.setattr(ingest_mod, "delete_by_paper", delete_by_paper)
    assert ingest_papers([shorter, *papers[1:]], settings, store=store).changed == 1
    assert records(store) == true_records(store, ids) and shorter.paper_id in records(store)
