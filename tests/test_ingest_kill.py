"""A killed ingest (SIGKILL, SIGTERM, Ctrl-C) never lets half a paper into search, `stats` says an ingest is
incomplete, and the next ingest resumes it and ends with the index an uninterrupted ingest builds."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rag_assistant.config import Settings
from rag_assistant.corpus import bundled_corpus_path, load_corpus
from rag_assistant.index.embedding import get_embedder
from rag_assistant.index.ingest import ingest_papers
from rag_assistant.index.keyword import KeywordIndex
from rag_assistant.index.pending import unfinished_papers
from rag_assistant.index.reader import IndexReader
from rag_assistant.index.state import keyword_dir
from rag_assistant.index.store import RUN_KEY, ChromaStore, open_store
from rag_assistant.retrieve import Retriever

STEP = 6  # chunks per write step in the killed runs (256 in production), so a small corpus spans many steps
CHUNK_TOKENS = "64"  # short chunks: every paper has several, the large one ~40, so most kills split papers
# The real CLI, with only the write step made smaller.
CLI = f"import rag_assistant.index.ingest as m; m.EMBED_BATCH = {STEP}; from rag_assistant.cli import main; main()"
QUERIES = ("ShadowKV KV cache", "graph neural networks for proteins", "segment of the long survey", "diffusion")


def _sentences() -> list[str]:
    papers = load_corpus([bundled_corpus_path()]).papers
    return [s for p in papers[10:] for s in re.split(r"(?<=\.) ", p.text) if len(s) > 40]


def _corpus(variant: str) -> list[dict[str, str]]:
    """6 (A) or 4 plus 2 others (B) bundled abstracts and one ~10 kB paper (edited in B): kills then land in
    new, changed and removed papers."""
    papers = load_corpus([bundled_corpus_path()]).papers
    small = [{"id": f"p{i}", "abstract": p.text} for i, p in enumerate(papers[:8])]
    small = small[:6] if variant == "A" else small[:4] + small[6:]
    picked = _sentences()[:50] if variant == "A" else _sentences()[5:40]
    big = " ".join(f"Segment {i} of the long survey: {s}" for i, s in enumerate(picked))
    assert 6_000 < len(big) < 15_000
    return [*small, {"id": "big", "abstract": big}]


def _write(path: Path, records: list[dict[str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _fresh_store(settings: Settings) -> ChromaStore:
    """Open the store anew: chromadb caches one client per path, which would not see another process's writes."""
    from chromadb.api.shared_system_client import SharedSystemClient

    SharedSystemClient.clear_system_cache()
    return open_store(settings)


def _snapshot(store: ChromaStore, settings: Settings) -> dict[str, Any]:
    """Everything search depends on: chunks (ids, texts, metadata but the run that wrote them), vectors,
    the keyword index (ids and scores) and the store's info (but the revision)."""
    res = store.collection.get(include=["documents", "metadatas", "embeddings"])
    chunks = {
        cid: (doc, {k: v for k, v in meta.items() if k != RUN_KEY})
        for cid, doc, meta in zip(res["ids"], res["documents"], res["metadatas"], strict=True)
    }
    vectors = dict(zip(res["ids"], np.asarray(res["embeddings"]), strict=True))
    keyword = KeywordIndex(keyword_dir(settings))
    info = store.get_info()
    assert keyword.revision == info.pop("revision")
    ids = keyword.chunk_ids()
    return {
        "chunks": chunks,
        "vectors": vectors,
        "keyword_ids": sorted(ids),
        "keyword": {q: dict(keyword.query(q, 100)) for q in QUERIES},
        "info": info,
    }


def _assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert got["chunks"] == want["chunks"] and got["info"] == want["info"]
    assert got["keyword_ids"] == want["keyword_ids"]
    for q, scores in want["keyword"].items():
        assert got["keyword"][q].keys() == scores.keys()
        assert [got["keyword"][q][c] for c in scores] == pytest.approx(list(scores.values()), rel=1e-5)
    for cid, vector in want["vectors"].items():  # reused vectors were embedded in another batch
        assert np.allclose(got["vectors"][cid], vector, atol=1e-5)


def _reference(tmp_path: Path, variant: str) -> dict[str, Any]:
    settings = Settings(data_dir=tmp_path / f"ref-{variant}")
    path = _write(tmp_path / f"ref-{variant}" / "papers.jsonl", _corpus(variant))
    store = _fresh_store(settings)
    ingest_papers(load_corpus([path]).papers, settings, store=store)
    return _snapshot(store, settings)


def _start(corpus: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CLI, "ingest", str(corpus)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
        # Ctrl-C must raise KeyboardInterrupt even if the runner started the tests with SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _kill_mid_ingest(corpus: Path, sig: signal.Signals, rng: random.Random) -> int:
    """Start the CLI ingest and send `sig` at a random point: after a random one of its written steps but
    the last, plus a random delay (mostly mid-paper), or at a random time after start (any phase). Returns
    the exit code."""
    proc = _start(corpus)
    assert proc.stderr is not None
    if rng.random() < 0.75:
        target = None
        for line in proc.stderr:
            if line.startswith("embedded "):
                done, total = map(int, line.split()[1].split("/"))
                target = target or rng.randint(done, max(done, total - 1))
                if done >= target:
                    break
        time.sleep(rng.uniform(0, 0.1))
    else:
        time.sleep(rng.uniform(0.3, 2.5))
    proc.send_signal(sig)
    proc.stderr.read()
    return proc.wait(60)


def _check_search_hides(store: ChromaStore, settings: Settings, embedder: Any, all_ids: list[str]) -> set[str]:
    """Papers the store holds only in part; asserts search returns none of them and never comes up short."""
    states = store.paper_states(all_ids)
    incomplete = {pid for pid, state in states.items() if not state.complete}
    assert unfinished_papers(store, store.get_info()) == incomplete  # what stats reports
    retriever = Retriever(settings, reader=IndexReader(settings, store), embedder=embedder)
    complete = len(states) - len(incomplete)
    for query in QUERIES:
        if not states:
            break
        found = retriever.search(query, 30)
        assert not {s.paper_id for s in found} & incomplete, f"{query!r} returned a partial paper"
        assert len(retriever.search(query, 3)) == min(3, complete)
    return incomplete


@pytest.fixture(autouse=True)
def short_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_ASSISTANT_CHUNK_MAX_TOKENS", CHUNK_TOKENS)  # for the spawned CLI as for Settings()


@pytest.mark.slow
def test_twenty_kills_never_show_a_partial_paper_and_rerun_matches_uninterrupted(tmp_path: Path) -> None:
    embedder = get_embedder(None, Settings().embedding_backend)
    want = {v: _reference(tmp_path, v) for v in "AB"}
    all_ids = sorted({r["id"] for v in "AB" for r in _corpus(v)})
    corpus = tmp_path / "live" / "papers.jsonl"
    settings = Settings()
    rng = random.Random(11)
    signals = [signal.SIGKILL, signal.SIGTERM, signal.SIGINT]
    outcomes = {"mid-paper": 0, "nothing partial": 0, "finished first": 0}
    variant = "B"
    for run in range(20):
        started = time.monotonic()
        if run % 5 == 0:  # now and then from an empty index, otherwise switching A <-> B over a full one
            shutil.rmtree(settings.data_dir, ignore_errors=True)
        variant = "A" if variant == "B" else "B"
        _write(corpus, _corpus(variant))
        sig = signals[run % 3]
        code = _kill_mid_ingest(corpus, sig, rng)
        # SIGTERM ends an ingest like Ctrl-C (130) once the CLI runs; before that (startup) both kill outright
        assert code in {signal.SIGKILL: (0, -9), signal.SIGTERM: (0, 130, -15), signal.SIGINT: (0, 130, -2)}[sig], code

        store = _fresh_store(settings)
        incomplete = _check_search_hides(store, settings, embedder, all_ids)
        outcomes["finished first" if code == 0 else "mid-paper" if incomplete else "nothing partial"] += 1

        report = ingest_papers(load_corpus([corpus]).papers, settings, store=store)
        if incomplete:  # resumed: what the killed run stored is not embedded again
            assert report.chunks_embedded < report.chunks_added
        _assert_same(_snapshot(_fresh_store(settings), settings), want[variant])
        print(
            f"run {run}: {sig.name} exit {code}, {len(incomplete)} partial, rerun {report.chunks_embedded}/"
            f"{report.chunks_added} embedded, {time.monotonic() - started:.1f}s"
        )
    print(outcomes)
    assert outcomes["mid-paper"] >= 5, outcomes  # the kills did land in the middle of papers


@pytest.mark.slow
def test_interrupted_mid_paper_is_hidden_reported_and_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Any
) -> None:
    """Deterministic: Ctrl-C arrives once the large paper is half written and three others are complete."""
    import rag_assistant.index.ingest as ingest_mod

    want = _reference(tmp_path, "A")
    settings = Settings()
    papers = load_corpus([_write(tmp_path / "live" / "papers.jsonl", _corpus("A"))]).papers
    store = _fresh_store(settings)

    def interrupt_once_big_is_partial(done: int, total: int) -> None:
        states = store.paper_states([p.paper_id for p in papers])
        if "big" in states and not states["big"].complete and sum(s.complete for s in states.values()) >= 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(ingest_mod, "EMBED_BATCH", STEP)
    with pytest.raises(KeyboardInterrupt):
        ingest_papers(papers, settings, store=store, progress=interrupt_once_big_is_partial)
    states = store.paper_states([p.paper_id for p in papers])
    partial = {pid: len(s.chunk_ids) for pid, s in states.items() if not s.complete}
    assert "big" in partial

    found = cli("search", "Segment 12 of the long survey", "-k", "3", "--json")
    assert found.returncode == 0, found.stderr
    ids = [s["paper_id"] for s in json.loads(found.stdout)]
    assert len(ids) == 3 and not set(ids) & set(partial)  # the partial paper's chunks fill no candidates
    assert f"incomplete ingest: {len(partial)} papers pending" in cli("stats").stdout

    report = ingest_papers(papers, settings, store=_fresh_store(settings))
    assert report.chunks_embedded == report.chunks_added - sum(partial.values())  # resumed, not redone
    _assert_same(_snapshot(store := _fresh_store(settings), settings), want)
    assert not unfinished_papers(store, store.get_info())
