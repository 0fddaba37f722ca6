"""One contract, every backend: embedded Chroma and a Chroma server started on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from chroma_server import ChromaServer

from rag_assistant.corpus import Paper
from rag_assistant.index.store import RUN_KEY, ChromaStore, StoredChunk, VectorStore, paper_to_metadata


@pytest.fixture(params=["embedded", "server"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    if request.param == "embedded":
        yield ChromaStore(tmp_path / "chroma", "contract")
    else:
        with ChromaServer(tmp_path / "server") as server:
            yield ChromaStore(None, "contract", url=server.url)


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
    assert store.sources() == {"a.txt": 1, "b.txt": 1}
    assert sorted(store.iter_chunks()) == [("a:0#0", "alpha one"), ("a:0#1", "alpha two"), ("b:0#0", "beta one")]

    store.delete(["a:0#1"])
    assert store.count() == 2 and not store.paper_states(["a:0"])["a:0"].complete

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
    assert store.query([0.0, 1.0, 0.1], 5, exclude={"a:0", "b:0", "c:0"}) == []
    store.add(gamma[2:], [[0.0, 1.0, 0.0]])
    assert store.unfinished_papers(["run-2"]) == set()
