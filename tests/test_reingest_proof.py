"""An unchanged re-ingest states papers from ids-only queries (ChromaStore.source_states with hashes): it must
find exactly what reading every chunk's metadata finds, whatever the store holds (swapped contents, killed
runs, duplicates, removed papers, several files)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from chroma_server import ChromaServer

import rag_assistant.index.store as store_mod
from rag_assistant.config import Settings
from rag_assistant.corpus import Paper, load_corpus
from rag_assistant.index.ingest import ingest_papers
from rag_assistant.index.store import ChromaStore, PaperState, StoredChunk, open_store, paper_to_metadata


def _paper(pid: str, text: str, source: str = "x.jsonl", title: str | None = None) -> Paper:
    return Paper(pid, text, source, int(pid.split(":")[1]), title, {"k": text[:5]})


def _write(store: ChromaStore, stored: Paper, n_chunks: int, indexes: list[int] | None = None) -> None:
    """`stored`'s chunks (`indexes` of them, default all), each claiming the paper has `n_chunks`."""
    chunks = [
        StoredChunk(
            f"{stored.paper_id}#{i}", stored.paper_id, f"{stored.text} part {i}", paper_to_metadata(stored, i, n_chunks)
        )
        for i in (range(n_chunks) if indexes is None else indexes)
    ]
    store.add(chunks, [[1.0, float(i), 0.5] for i in range(len(chunks))])


def _norm(states: dict[str, PaperState]) -> dict[str, tuple]:
    return {pid: (s.content_hash, s.source, sorted(s.chunk_ids), s.complete) for pid, s in states.items()}


@pytest.fixture(params=["embedded", "server"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ChromaStore]:
    if request.param == "embedded":
        yield open_store(Settings(collection="proof"))
    else:
        with ChromaServer(tmp_path / "server") as server:
            yield open_store(Settings(collection="proof", chroma_url=server.url))


@pytest.mark.parametrize("batch", [2_000, 7, 1])
def test_ids_only_states_equal_the_metadata_read(
    store: ChromaStore, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    monkeypatch.setattr(store_mod, "PROOF_PAPERS", batch)  # 7: several grids, one of a short row; 1: one paper each
    current = {f"p:{i}": _paper(f"p:{i}", f"Abstract number {i} about topic {i % 4}.") for i in range(40)}
    for i, paper in enumerate(current.values()):
        _write(store, paper, 1 + i % 3)  # unchanged and complete, one to three chunks
    swap_a, swap_b = current["p:3"], current["p:4"]  # each stored with the other's content: both changed
    _write(store, Paper("p:3", swap_b.text, "x.jsonl", 3, None, swap_b.metadata), 2)
    _write(store, Paper("p:4", swap_a.text, "x.jsonl", 4, None, swap_a.metadata), 2)
    store.delete(["p:5#1"])  # p:5 (3 chunks) lost one: incomplete
    _write(store, _paper("p:8", "An older text of paper 8."), 3, [2])  # a killed run: chunk 2 of another version
    _write(store, current["p:9"], 4, [0, 1, 2])  # its hash throughout, but 3 of the 4 chunks it claims
    twin = Paper("p:41", current["p:10"].text, "x.jsonl", 41, None, current["p:10"].metadata)  # same hash as p:10
    current["p:41"] = twin
    _write(store, twin, 2)
    _write(store, _paper("p:50", "A paper its file no longer holds."), 2)  # removed: not in the hashes
    for i in (60, 61):
        current[f"p:{i}"] = _paper(f"p:{i}", f"From another file {i}.", source="y.txt")
        _write(store, current[f"p:{i}"], 2)
    _write(store, _paper("p:70", "Some other file entirely.", source="z.txt"), 1)  # not asked for

    hashes = {pid: p.content_hash for pid, p in current.items()}
    fast = store.source_states(["x.jsonl", "y.txt"], hashes)
    full = store.source_states(["x.jsonl", "y.txt"])  # no hashes: every chunk's metadata is read
    assert _norm(fast) == _norm(full)
    assert "p:70" not in fast and fast["p:50"].complete  # a removed paper: its chunks are to be deleted
    unchanged = {pid for pid, s in fast.items() if s.complete and s.content_hash == hashes.get(pid)}
    assert {"p:3", "p:4", "p:5", "p:8", "p:9", "p:50"}.isdisjoint(unchanged)
    assert {"p:0", "p:1", "p:2", "p:10", "p:41", "p:60", "p:61"} <= unchanged


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
    records = [{"id": f"s{i}", "abstract": t} for i, t in enumerate(texts)]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert ingest_papers(load_corpus([path]).papers, settings).new == 4

    records[1]["abstract"], records[2]["abstract"] = records[2]["abstract"], records[1]["abstract"]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    report = ingest_papers(load_corpus([path]).papers, settings)
    assert (report.changed, report.unchanged) == (2, 2)
    again = ingest_papers(load_corpus([path]).papers, settings)
    assert (again.changed, again.unchanged, again.chunks_added) == (0, 4, 0)
    stored = open_store(settings).papers(["s1", "s2"])
    assert stored["s1"].text == texts[2] and stored["s2"].text == texts[1]
