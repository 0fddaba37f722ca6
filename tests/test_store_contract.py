"""One contract, every backend: embedded Chroma and a Chroma server started on 127.0.0.1. Both faces: the
store as ingest writes it (StoreWriter) and the index as everything else reads it (IndexReader), which never
writes, not even a stale keyword index."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from chroma_server import BACKENDS, ChromaServer, backend_settings

from rag_assistant.config import Settings
from rag_assistant.corpus import Paper
from rag_assistant.errors import ConfigError
from rag_assistant.index import keyword_cache
from rag_assistant.index.ingest import sync_keyword_index
from rag_assistant.index.keyword import KeywordIndex
from rag_assistant.index.reader import IndexReader
from rag_assistant.index.runlog import RunLog
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


@pytest.fixture(params=BACKENDS)
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    """Settings naming a fresh collection: embedded in the data dir, or on a Chroma server."""
    with backend_settings(request.param, tmp_path, "contract") as settings:
        yield settings


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
    assert not by_source["a:0"].listed and by_source["a:0"].complete  # no listing: read from the chunks
    store.list_papers([(a, 2)])
    assert store.source_states(["a.txt"]) == {"a:0": by_source["a:0"]}  # listed: found only for its version
    assert store.source_states(["a.txt"], {"a:0": a.content_hash}) == {"a:0": replace(by_source["a:0"], listed=True)}
    assert not store.source_states(["a.txt"], {"a:0": "another version"})["a:0"].listed
    assert store.sources() == {"a.txt": 1, "b.txt": 1}
    assert sorted(store.iter_chunks()) == [("a:0#0", "alpha one"), ("a:0#1", "alpha two"), ("b:0#0", "beta one")]

    store.delete(["a:0#1"])
    assert store.count() == 2 and not store.paper_states(["a:0"])["a:0"].complete
    assert not store.source_states(["a.txt"], {"a:0": a.content_hash})["a:0"].complete  # listed with two chunks
    store.list_papers([(b, 1)])
    store.unlist_papers(["b:0", "never-stored"])
    assert not store.source_states(["b.txt"], {"b:0": b.content_hash})["b:0"].listed

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
    RunLog.of(writer, write=True).start("run-2")  # type: ignore[union-attr]
    writer.set_info({"embedding_model": model_signature(settings), "chunking": "254/1", "revision": "r1"})
    return a, b


def _on_disk(settings: Settings, store: VectorStore) -> tuple[object, ...]:
    res = store.collection.get(include=["documents", "metadatas", "embeddings"])  # type: ignore[attr-defined]
    files = sorted((p.relative_to(settings.data_dir), p.stat().st_mtime_ns) for p in settings.data_dir.rglob("*"))
    files = [f for f in files if "chroma" not in f[0].parts]  # Chroma's own files change on reads too
    return res["ids"], res["documents"], res["metadatas"], res["embeddings"].tolist(), store.get_info(), files


def test_reader_face_reads_what_the_writer_wrote_and_never_writes(settings: Settings, store: VectorStore) -> None:
    a, b = _write(store, settings)
    # On a server the reader keeps its keyword cache up to date from the run log (its one write, as a client:
    # test_chroma_runlog.py); with the cache's lock held elsewhere it builds in memory like any stale reader.
    held = keyword_cache.locked(keyword_dir(settings), wait=True)
    held.__enter__()
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
    held.__exit__(None, None, None)

    with pytest.raises(ConfigError, match="embedding model"):
        IndexReader(settings.model_copy(update={"embedding_model": "/other/model"})).checked_info()

    # Repairing is the write side's job, called explicitly; then readers load the index ingest wrote.
    sync_keyword_index(store, settings)
    fresh = IndexReader(settings)
    assert KeywordIndex.stored_revision(keyword_dir(settings)) == "r1"
    assert not fresh.keyword_current(info)  # c:0's run is pending: what it writes next no revision announces
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
    assert pending_runs(store, info) == []
    never = settings.model_copy(update={"data_dir": settings.data_dir.parent / "c"})  # a client that never ingested
    for client in (settings, b_settings, never):
        reader = IndexReader(client, store=store)
        assert reader.hidden(info) == set()
        for term, prefix in (("quokka", "a:"), ("wombat", "b:")):
            found = {cid.split("#")[0] for cid, _ in reader.keyword.query(term, 10)}
            assert found == {f"{prefix}{i}" for i in range(3)}, (client.data_dir.name, term, found)


def _reader_views(store: VectorStore, clients: list[Settings], terms: list[str]) -> list[object]:
    """What each client's search sees: the hidden papers and the chunks keyword search finds for each term (not
    their scores: an index updated in place counts the replaced chunks it has not merged away yet, as BM25 in
    Lucene does, so its scores differ a little from a rebuilt one's: index/keyword.py)."""
    views: list[object] = []
    for client in clients:
        reader = IndexReader(client, store=store)
        found = [sorted(cid for cid, _ in reader.keyword.query(term, 50)) for term in terms]
        views.append((sorted(reader.hidden()), found))
    return views


def test_a_run_another_settles_between_two_of_its_steps_still_hides_what_it_writes_after(
    settings: Settings, store: VectorStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two writers (issue 21): client B's ingest settles while client A's is between two steps; A then writes part
    of a large paper and is interrupted. The large paper stays hidden from every client until A's rerun completes
    it. Before, B settled A's run (rewriting the pending list in the collection metadata) as soon as nothing A had
    written so far was unfinished, and A's half-written paper became searchable."""
    import rag_assistant.index.ingest as ingest_mod
    from rag_assistant.index.ingest import ingest_papers
    from rag_assistant.index.pending import pending_runs

    monkeypatch.setattr(ingest_mod, "EMBED_BATCH", 1)  # a step per chunk: A's large paper spans several
    a = settings.model_copy(update={"chunk_max_tokens": 32})
    b, never = (a.model_copy(update={"data_dir": settings.data_dir.parent / name}) for name in ("b", "never"))
    body = " ".join(f"Sentence {i} of the long quokka survey covers memory hierarchies in depth." for i in range(8))
    a_papers = [Paper("a:0", "Quokka caches.", "a.txt", 0), Paper("a:1", "Quokka tiers.", "a.txt", 1)]
    a_papers.append(Paper("big:0", body, "a.txt", 2))
    b_papers = [Paper("b:0", "Wombat routing.", "b.txt", 0)]
    settled: list[int] = []

    def a_progress(done: int, total: int) -> None:
        if done == 1:  # A wrote one whole paper: B ingests and settles meanwhile
            settled.append(ingest_papers(b_papers, b, store=store).new)
        elif "big:0" in store.paper_states(["big:0"]):  # part of the large paper written: A stops here
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ingest_papers(a_papers, a, store=store, progress=a_progress)
    assert settled == [1] and not store.paper_states(["big:0"])["big:0"].complete
    for client in (a, b, never):  # search leaves hidden papers out (retrieve.py)
        assert IndexReader(client, store=store).hidden() == {"big:0"}, client.data_dir.name

    assert ingest_papers(a_papers, a, store=store).resumed == 1  # the rerun completes it and settles A's run
    assert pending_runs(store, store.get_info()) == []
    views = _reader_views(store, [a, b, never], ["quokka", "wombat"])

    assert views[0][0] == [] and views[0] == views[1] == views[2]  # type: ignore[index]
    assert {cid.split("#")[0] for cid in views[0][1][0]} == {"a:0", "a:1", "big:0"}  # type: ignore[index]


def test_pending_runs_an_earlier_version_named_in_the_info_move_into_the_run_log(
    settings: Settings, store: VectorStore
) -> None:
    """An index whose killed ingest (of the version before the run log held pending runs) named its run in the
    collection metadata: readers hide its half paper, and the next ingest moves the run into the log, where no
    other writer's metadata write can drop it, and settles it once completed."""
    from rag_assistant.index.ingest import ingest_papers
    from rag_assistant.index.pending import PENDING_KEY, pending_runs

    c = Paper("c:0", "Gamma abstract about kernels.", "c.txt", 0)
    store.add(_chunks(c, ["gamma kernels one", "gamma kernels two"], run="old-run")[:1], [[1.0] + [0.0] * 383])
    store.set_info({"chunking": "254/1", "revision": "r0", PENDING_KEY: "old-run"})
    assert IndexReader(settings, store=store).hidden() == {"c:0"}

    d = Paper("d:0", "Delta abstract about wombats.", "d.txt", 0)
    report = ingest_papers([d], settings, store=store)
    assert report.new == 1 and "still incomplete" in " ".join(report.warnings)
    info = store.get_info()
    assert PENDING_KEY not in info and pending_runs(store, info) == ["old-run"]
    assert IndexReader(settings, store=store).hidden() == {"c:0"}
    ingest_papers([Paper("c:0", "Gamma abstract about kernels.", "c.txt", 0)], settings, store=store)
    assert pending_runs(store, store.get_info()) == [] and IndexReader(settings, store=store).hidden() == set()


def _corpus(n: int, tag: str, source: str) -> list[Paper]:
    """`n` one-chunk papers and one of several chunks (at the 32-token cut), from one file."""
    papers = [Paper(f"{tag}:{i}", f"{tag.title()} note {i} on quokka caches.", source, i) for i in range(n)]
    body = " ".join(f"Part {i} of the {tag} survey covers quokka memory hierarchies in depth." for i in range(6))
    return [*papers, Paper(f"{tag}:big", body, source, n)]


def _final_state(store: VectorStore, clients: list[Settings], papers: list[Paper]) -> dict[str, object]:
    """What every client of `store` sees once the ingests are over: the chunks (run tags aside), the papers
    manifest, the pending runs, each client's hidden papers and keyword hits, and each client's sentence vectors."""
    import numpy as np
    from kill_helpers import records

    from rag_assistant.index.embedding import get_embedder
    from rag_assistant.index.pending import pending_runs

    res = store.collection.get(include=["documents", "metadatas", "embeddings"])  # type: ignore[attr-defined]
    rows = sorted(zip(res["ids"], res["documents"], res["metadatas"], res["embeddings"].tolist(), strict=True))
    chunks = [(cid, doc, {k: v for k, v in meta.items() if k != RUN_KEY}) for cid, doc, meta, _ in rows]
    s = clients[0]
    embedder = get_embedder(s.embedding_model, s.embedding_backend, s.embed_batch_size, s.remote_embedding)
    sentences = []
    for client in clients:
        vectors = IndexReader(client, store=store).sentence_vectors(papers, embedder)
        sentences.append({pid: np.round(v, 2).tolist() for pid, v in sorted(vectors.items())})
    return {
        "chunks": chunks,
        "vectors": [np.round(v, 4).tolist() for *_, v in rows],
        "manifest": records(store),  # type: ignore[arg-type]
        "pending": pending_runs(store, store.get_info()),
        "views": _reader_views(store, clients, ["quokka", "wombat"]),
        "sentences": sentences,
    }


@pytest.mark.slow
@pytest.mark.parametrize("kill", [False, True], ids=["both-complete", "one-killed-then-rerun"])
def test_two_ingests_of_overlapping_files_at_once_end_as_one_after_the_other(
    settings: Settings, store: VectorStore, monkeypatch: pytest.MonkeyPatch, kill: bool
) -> None:
    """Writers together (issue 21): clients A and B (their own data dirs) ingest overlapping files into one store at
    the same time, B's whole ingest between two of A's steps; with `kill`, A is interrupted mid-paper afterwards
    and rerun. The end state equals A's then B's ingest into a fresh collection, for A, B and a client that never
    ingested: no lost, duplicated or half-visible paper, same manifest, keyword hits and sentence vectors."""
    import rag_assistant.index.ingest as ingest_mod
    from rag_assistant.index.ingest import ingest_papers

    monkeypatch.setattr(ingest_mod, "EMBED_BATCH", 1)  # a step per chunk: the large papers span several
    f1, f2, f3 = _corpus(3, "one", "f1.txt"), _corpus(2, "two", "f2.txt"), _corpus(2, "three", "f3.txt")
    a_papers, b_papers = f1 + f2, f2 + f3
    base = settings.model_copy(update={"chunk_max_tokens": 32})

    def clients(collection: str) -> list[Settings]:
        root = settings.data_dir.parent / collection
        return [base.model_copy(update={"data_dir": root / n, "collection": collection}) for n in ("a", "b", "c")]

    ref = clients("reference")
    reference = open_store(ref[0])
    ingest_papers(a_papers, ref[0], store=reference)
    ingest_papers(b_papers, ref[1], store=reference)
    want = _final_state(reference, ref, a_papers + f3)

    a, b, never = clients("contract")
    b_done: list[int] = []

    def a_progress(done: int, total: int) -> None:
        if done == 2:
            b_done.append(ingest_papers(b_papers, b, store=store).papers)
        elif kill and done > 2 and not all(s.complete for s in store.paper_states(["one:big"]).values()):
            raise KeyboardInterrupt  # A stops with its large paper written in part

    if kill:
        with pytest.raises(KeyboardInterrupt):
            ingest_papers(a_papers, a, store=store, progress=a_progress)
        half = {pid for pid, s in store.paper_states([p.paper_id for p in a_papers]).items() if not s.complete}
        assert half == {"one:big"}
        for client in (a, b, never):  # half-visible to none
            assert IndexReader(client, store=store).hidden() == half
        ingest_papers(a_papers, a, store=store)
    else:
        ingest_papers(a_papers, a, store=store, progress=a_progress)
    assert b_done == [len(b_papers)]
    assert _final_state(store, [a, b, never], a_papers + f3) == want


@pytest.mark.slow
def test_an_ingest_sigkilled_mid_paper_while_another_ingests_overlapping_files_then_rerun(tmp_path: Path) -> None:
    """The kill scenario with real processes on a real server (an embedded Chroma is one process's): client A's CLI
    ingest pauses after each one-chunk step; after its second, client B's CLI ingest of overlapping files runs to
    the end; A then writes part of its large paper and is SIGKILLed. No client sees that paper until A's rerun;
    then the server holds what A's then B's ingest leave in a fresh collection, for A, B and a client that never
    ingested."""
    import os
    import signal

    from conftest import run_cli
    from kill_helpers import kill_at, start_ingest

    from rag_assistant.corpus import load_corpus

    def write(folder: Path, *parts: list[Paper]) -> Path:
        folder.mkdir(parents=True)
        for part in parts:
            rows = [{"id": p.paper_id, "abstract": p.text} for p in part]
            (folder / part[0].source).write_text("".join(json.dumps(r) + "\n" for r in rows))
        return folder

    f1, f2, f3 = _corpus(3, "one", "f1.jsonl"), _corpus(2, "two", "f2.jsonl"), _corpus(2, "three", "f3.jsonl")
    a_dir, b_dir = write(tmp_path / "in-a", f1, f2), write(tmp_path / "in-b", f2, f3)
    papers = load_corpus([a_dir, b_dir / "f3.jsonl"]).papers
    with ChromaServer(tmp_path / "server") as server:

        def env(name: str, collection: str) -> dict[str, str]:
            return {
                "RAG_ASSISTANT_CHROMA_URL": server.url,
                "RAG_ASSISTANT_DATA_DIR": str(tmp_path / collection / name),
                "RAG_ASSISTANT_COLLECTION": collection,
                "RAG_ASSISTANT_CHUNK_MAX_TOKENS": "32",
            }

        def settings(name: str, collection: str) -> Settings:
            return Settings(data_dir=tmp_path / collection / name, collection=collection, chroma_url=server.url)

        for folder, name in ((a_dir, "a"), (b_dir, "b")):  # the reference: one after the other
            assert run_cli("ingest", str(folder), env=env(name, "reference")).returncode == 0
        ref = [settings(n, "reference") for n in ("a", "b", "c")]
        want = _final_state(open_store(ref[0]), ref, papers)

        clients = [settings(n, "together") for n in ("a", "b", "c")]
        store = open_store(clients[0])
        b_runs: list[int] = []

        def when(done: int, total: int) -> bool:
            if done == 2:  # B's whole ingest between two of A's steps
                b_runs.append(run_cli("ingest", str(b_dir), env=env("b", "together")).returncode)
                return False
            big = store.paper_states(["one:big"]).get("one:big")
            return big is not None and not big.complete  # A dies with its large paper written in part

        proc = start_ingest(a_dir, 1, {**os.environ, **env("a", "together")})
        assert kill_at(proc, signal.SIGKILL, when) == -signal.SIGKILL and b_runs == [0]
        for client in clients:
            assert IndexReader(client, store=store).hidden() == {"one:big"}
        assert run_cli("ingest", str(a_dir), env=env("a", "together")).returncode == 0
        assert _final_state(store, clients, papers) == want
