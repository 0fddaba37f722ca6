"""One contract, every backend: embedded Chroma and a Chroma server started on 127.0.0.1. Both faces: the
store as ingest writes it (StoreWriter) and the index as everything else reads it (IndexReader), which never
writes, not even a stale keyword index."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from chroma_server import ChromaServer

from rag_assistant.config import Settings
from rag_assistant.corpus import Paper
from rag_assistant.errors import ConfigError
from rag_assistant.index.ingest import sync_keyword_index
from rag_assistant.index.keyword import KeywordIndex
from rag_assistant.index.pending import with_runs
from rag_assistant.index.reader import IndexReader
from rag_assistant.index.state import keyword_dir, model_signature
from rag_assistant.index.store import (
    RUN_KEY,
    ChromaStore,
    StoredChunk,
    StoreReader,
    StoreWriter,
    VectorStore,
    open_store,
    paper_to_metadata,
)


@pytest.fixture(params=["embedded", "server"])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    """Settings naming a fresh collection: embedded in the data dir, or on a Chroma server."""
    if request.param == "embedded":
        yield Settings(data_dir=tmp_path / "data", collection="contract")
    else:
        with ChromaServer(tmp_path / "server") as server:
            yield Settings(data_dir=tmp_path / "data", collection="contract", chroma_url=server.url)


@pytest.fixture
def store(settings: Settings) -> VectorStore:
    return open_store(settings)


def _chunks(paper: Paper, texts: list[str], run: str = "") -> list[StoredChunk]:
    return [
        StoredChunk(
            f"{paper.paper_id}#{i}",
            paper.paper_id,
            t,
            {**paper_to_metadata(paper, i, len(texts)), **({RUN_KEY: run} if run else {})},
        )
        for i, t in enumerate(texts)
    ]


def test_store_contract(store: VectorStore) -> None:
    a = Paper("a:0", "Alpha abstract about caches.", "a.txt", 0, None, {"urls": ["https://x.org"]})
    b = Paper("b:0", "Beta abstract about graphs.", "b.txt", 0, "Beta")
    store.add(
        _chunks(a, ["alpha one", "alpha two"]) + _chunks(b, ["beta one"]),
        [[1.0, 0.0, 0.0], [0.8, 0.6, 0.0], [0.0, 0.0, 1.0]],
    )
    assert store.count() == 3

    hits = store.query([1.0, 0.0, 0.0], 2)
    assert [h.chunk_id for h in hits] == ["a:0#0", "a:0#1"]
    assert hits[0].similarity == pytest.approx(1.0, abs=1e-4) and hits[1].similarity == pytest.approx(0.8, abs=1e-3)
    assert hits[0].paper_id == "a:0" and hits[0].text == "alpha one"

    reuse = store.embeddings_for(["alpha two", "beta one", "never stored"])
    assert set(reuse) == {"alpha two", "beta one"} and reuse["alpha two"] == pytest.approx([0.8, 0.6, 0.0], abs=1e-6)

    # Upserting the same ids again never duplicates.
    store.add(_chunks(b, ["beta one"]), [[0.0, 0.0, 1.0]])
    assert store.count() == 3

    states = store.paper_states(["a:0", "b:0", "zzz"])
    assert set(states) == {"a:0", "b:0"}
    assert states["a:0"].complete and states["a:0"].content_hash == a.content_hash
    assert sorted(states["a:0"].chunk_ids) == ["a:0#0", "a:0#1"]

    papers = store.papers(["b:0", "a:0"])
    assert papers["a:0"] == a and papers["b:0"].title == "Beta"
    by_source = store.source_states(["a.txt"])
    assert list(by_source) == ["a:0"] and sorted(by_source["a:0"].chunk_ids) == ["a:0#0", "a:0#1"]
    assert not by_source["a:0"].listed and by_source["a:0"].complete  # no record: read from the chunks
    store.list_papers([(a, 2)])
    assert store.source_states(["a.txt"]) == {"a:0": replace(by_source["a:0"], listed=True)}
    assert store.sources() == {"a.txt": 1, "b.txt": 1}
    assert sorted(store.iter_chunks()) == [("a:0#0", "alpha one"), ("a:0#1", "alpha two"), ("b:0#0", "beta one")]

    store.delete(["a:0#1"])
    assert store.count() == 2 and not store.paper_states(["a:0"])["a:0"].complete
    assert not store.source_states(["a.txt"])["a:0"].complete  # its record counts two chunks: read from them
    store.list_papers([(b, 1)])
    store.unlist_papers(["b:0"])
    assert not store.source_states(["b.txt"])["b:0"].listed

    store.set_info({"revision": "r1"})
    assert store.get_info()["revision"] == "r1"

    # A paper an ingest run wrote only in part is unfinished, and excluded papers never fill the candidates.
    c = Paper("c:0", "Gamma abstract about kernels.", "c.txt", 0)
    gamma = _chunks(c, ["gamma one", "gamma two", "gamma three"], run="run-2")
    store.add(gamma[:2], [[0.0, 1.0, 0.0], [0.0, 0.99, 0.14]])
    assert store.unfinished_papers(["run-2"]) == {"c:0"}
    assert store.unfinished_papers(["run-1", "other"]) == set()
    assert [h.paper_id for h in store.query([0.0, 1.0, 0.1], 2)] == ["c:0", "c:0"]
    assert [h.chunk_id for h in store.query([0.0, 1.0, 0.1], 2, exclude={"c:0"})] == ["b:0#0", "a:0#0"]
    # the excluded paper fills all of the wider first fetch: the store must still find the next paper
    assert [h.chunk_id for h in store.query([0.0, 1.0, 0.1], 1, exclude={"c:0"})] == ["b:0#0"]
    assert store.query([0.0, 1.0, 0.1], 5, exclude={"a:0", "b:0", "c:0"}) == []
    store.add(gamma[2:], [[0.0, 1.0, 0.0]])
    assert store.unfinished_papers(["run-2"]) == set()


def _faces(protocol: type) -> set[str]:
    return {name for name in vars(protocol) if not name.startswith("_")}


def test_the_two_faces_split_the_store() -> None:
    reading, writing = _faces(StoreReader), _faces(StoreWriter)
    assert not reading & writing and reading | writing == _faces(StoreReader) | _faces(StoreWriter)
    assert {"add", "delete", "set_info"} <= writing and {"query", "papers", "get_info"} <= reading
    assert all(callable(getattr(ChromaStore, name)) for name in reading | writing)  # one backend, both faces
    writes = writing | {"build", "update", "set_info"}
    assert not {name for name in dir(IndexReader) if not name.startswith("_")} & writes  # nothing to write with


def _write(writer: StoreWriter, settings: Settings) -> tuple[Paper, Paper]:
    """Two complete papers, a third half-written by a pending ingest run, and the info an ingest records."""
    a = Paper("a:0", "Alpha abstract about caches.", "a.txt", 0, None, {"urls": ["https://x.org"]})
    b = Paper("b:0", "Beta abstract about graphs.", "b.txt", 0, "Beta")
    c = Paper("c:0", "Gamma abstract about kernels.", "c.txt", 0)
    writer.add(
        _chunks(a, ["alpha caches one", "alpha caches two"]) + _chunks(b, ["beta graphs one"]),
        [[1.0, 0.0, 0.0], [0.8, 0.6, 0.0], [0.0, 0.0, 1.0]],
    )
    writer.add(_chunks(c, ["gamma kernels one", "gamma kernels two"], run="run-2")[:1], [[0.0, 1.0, 0.0]])
    info = {"embedding_model": model_signature(settings), "chunking": "254/1", "revision": "r1"}
    writer.set_info(with_runs(info, ["run-2"]))
    return a, b


def _on_disk(settings: Settings, store: VectorStore) -> tuple[object, ...]:
    res = store.collection.get(include=["documents", "metadatas", "embeddings"])  # type: ignore[attr-defined]
    files = sorted((p.relative_to(settings.data_dir), p.stat().st_mtime_ns) for p in settings.data_dir.rglob("*"))
    files = [f for f in files if "chroma" not in f[0].parts]  # Chroma's own files change on reads too
    return res["ids"], res["documents"], res["metadatas"], res["embeddings"].tolist(), store.get_info(), files


def test_reader_face_reads_what_the_writer_wrote_and_never_writes(settings: Settings, store: VectorStore) -> None:
    a, b = _write(store, settings)
    before = _on_disk(settings, store)
    reader = IndexReader(settings)  # opened from the settings, as search opens it
    assert reader.count() == 4 and reader.sources() == {"a.txt": 1, "b.txt": 1, "c.txt": 1}
    papers = reader.papers(["b:0", "a:0", "zzz"])
    assert papers["a:0"] == a and papers["b:0"].title == "Beta" and set(papers) == {"a:0", "b:0"}
    info = reader.checked_info()
    assert info["revision"] == "r1" and reader.hidden(info) == {"c:0"} and reader.hidden() == {"c:0"}
    assert [h.chunk_id for h in reader.query([0.0, 1.0, 0.1], 2, exclude=reader.hidden())] == ["a:0#1", "b:0#0"]
    assert reader.embeddings_for(["beta graphs one"]) == {"beta graphs one": pytest.approx([0.0, 0.0, 1.0])}

    # No keyword index on disk yet: the reader builds one in memory and leaves the disk alone.
    assert not reader.keyword_current(info) and reader.keyword.revision == "r1"
    assert [cid for cid, _ in reader.keyword.query("graphs", 5)] == ["b:0#0"]
    assert reader.keyword.idf(["cach"])["cach"] < reader.keyword.idf(["unseen"])["unseen"]
    assert _on_disk(settings, store) == before and not keyword_dir(settings).exists()

    with pytest.raises(ConfigError, match="embedding model"):
        IndexReader(settings.model_copy(update={"embedding_model": "/other/model"})).checked_info()

    # Repairing is the write side's job, called explicitly; then readers load the index ingest wrote.
    sync_keyword_index(store, settings)
    fresh = IndexReader(settings)
    assert fresh.keyword_current(info) and KeywordIndex.stored_revision(keyword_dir(settings)) == "r1"
    assert fresh.keyword.query("alpha caches", 5) == reader.keyword.query("alpha caches", 5)


def test_an_ingest_interleaved_with_another_clients_leaves_every_client_complete(
    settings: Settings, store: VectorStore
) -> None:
    """Client B (its own data dir) ingests while client A is between writing its chunks and settling (issue 21):
    afterwards every client's keyword search finds both clients' papers, and no run is left pending. Before, A
    settled the revision of its own keyword index, which held none of B's chunks, and claimed it current."""
    from rag_assistant.index.ingest import ingest_papers
    from rag_assistant.index.pending import pending_runs

    b_settings = settings.model_copy(update={"data_dir": settings.data_dir.parent / "b"})
    a_papers = [Paper(f"a:{i}", f"Alpha caches paper {i} on quokka memory.", "a.txt", i, None, {}) for i in range(3)]
    b_papers = [Paper(f"b:{i}", f"Beta graphs paper {i} on wombat routing.", "b.txt", i, None, {}) for i in range(3)]
    interleaved: list[int] = []

    def b_meanwhile(*_: object) -> None:
        if not interleaved:
            interleaved.append(ingest_papers(b_papers, b_settings, store=store).new)

    assert ingest_papers(a_papers[:1], settings, store=store).new == 1  # A's keyword index: current, on disk
    assert ingest_papers(a_papers, settings, store=store, progress=b_meanwhile).new == 2 and interleaved == [3]
    info = store.get_info()
    assert pending_runs(info) == []
    never = settings.model_copy(update={"data_dir": settings.data_dir.parent / "c"})  # a client that never ingested
    for client in (settings, b_settings, never):
        reader = IndexReader(client, store=store)
        assert reader.hidden(info) == set()
        for term, prefix in (("quokka", "a:"), ("wombat", "b:")):
            found = {cid.split("#")[0] for cid, _ in reader.keyword.query(term, 10)}
            assert found == {f"{prefix}{i}" for i in range(3)}, (client.data_dir.name, term, found)
