"""A killed ingest (SIGKILL, SIGTERM, Ctrl-C) never lets half a paper into search, `stats`, `search` and `ask` say
an ingest is incomplete, and the next ingest resumes it, encoding only what was not stored, and ends with the
index an uninterrupted ingest builds."""

from __future__ import annotations

import json
import random
import re
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kill_helpers import kill_at, records, start_ingest, true_records

from rag_assistant.config import Settings
from rag_assistant.corpus import Paper, bundled_corpus_path, load_corpus
from rag_assistant.index.embedding import get_embedder
from rag_assistant.index.ingest import ingest_papers
from rag_assistant.index.keyword import KeywordIndex
from rag_assistant.index.pending import unfinished_papers
from rag_assistant.index.reader import IndexReader
from rag_assistant.index.sentences import SentenceStore, sidecar_path, signature
from rag_assistant.index.state import keyword_dir, recorded_chunking
from rag_assistant.index.store import RUN_KEY, ChromaStore, open_store
from rag_assistant.retrieve import Retriever

STEP = 6  # chunks per write step in the killed runs (256 in production), so a small corpus spans many steps
CHUNK_TOKENS = "64"  # short chunks: every paper has several, the large one ~40 (it spans several steps)
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
    """Everything search and ingest depend on: chunks (ids, texts, metadata but the run that wrote them), vectors,
    the keyword index (ids and scores), the store's info (but the revision) and the papers manifest."""
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
        "manifest": records(store),
    }


def _assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert got["chunks"] == want["chunks"] and got["info"] == want["info"] and got["manifest"] == want["manifest"]
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


def _kill_mid_ingest(corpus: Path, sig: signal.Signals, rng: random.Random) -> tuple[int, bool]:
    """Start the CLI ingest and send `sig`: mostly while it waits after a random one of its written steps but
    the last (kill_helpers: exactly there, whatever the machine's speed), else at a random time after start
    (any phase: start-up, planning, the keyword index, settling). Returns the exit code and whether the kill
    landed at a chosen step."""
    proc = start_ingest(corpus, STEP)
    if rng.random() < 0.75:
        target: list[int] = []

        def chosen(done: int, total: int) -> bool:
            if not target:
                target.append(rng.randint(done, max(done, total - 1)))
            return done >= target[0]

        return kill_at(proc, sig, chosen), True
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.close()  # nothing to wait for: it runs on at its own pace
    time.sleep(rng.uniform(0.3, 2.5))
    proc.send_signal(sig)
    proc.stderr.read()
    return proc.wait(60), False


def _check_search_hides(store: ChromaStore, settings: Settings, embedder: Any, all_ids: list[str]) -> set[str]:
    """Papers the store holds only in part; asserts search returns none of them and never comes up short, and
    that the manifest lists no paper the store does not hold whole, as it is."""
    states = store.paper_states(all_ids)
    incomplete = {pid for pid, state in states.items() if not state.complete}
    listed, true = records(store), true_records(store, all_ids)
    assert all(true.get(pid) == record for pid, record in listed.items()), (listed, true)
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


def _count_encoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the texts the ingest's embedder encodes, whatever for (chunk vectors, sentence vectors, backfills)."""
    s = Settings()
    embedder = get_embedder(s.embedding_model, s.embedding_backend, s.embed_batch_size, s.remote_embedding)
    counts: list[int] = []
    for name in ("embed", "embed_spans"):
        real = getattr(embedder, name)

        def counting(texts: list[str], *rest: Any, real: Any = real) -> Any:  # noqa: ANN401
            counts.append(len(texts))
            return real(texts, *rest)

        monkeypatch.setattr(embedder, name, counting)
    return counts


def _sentence_rows(settings: Settings, papers: list[Paper]) -> dict[str, Any]:
    store = open_store(settings)
    chunking = recorded_chunking(store.get_info(), store.count)
    assert chunking is not None
    return SentenceStore(sidecar_path(settings)).get(papers, signature(settings, chunking))


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
    outcomes = {"mid-paper": 0, "whole papers only": 0}  # of the kills at a chosen step: the same on any machine
    variant = "B"
    for run in range(20):
        started = time.monotonic()
        if run % 5 == 0:  # now and then from an empty index, otherwise switching A <-> B over a full one
            shutil.rmtree(settings.data_dir, ignore_errors=True)
        variant = "A" if variant == "B" else "B"
        _write(corpus, _corpus(variant))
        sig = signals[run % 3]
        code, chosen = _kill_mid_ingest(corpus, sig, rng)
        # SIGTERM ends an ingest like Ctrl-C (130) once the CLI runs; before that (startup) both kill outright
        assert code in {signal.SIGKILL: (0, -9), signal.SIGTERM: (0, 130, -15), signal.SIGINT: (0, 130, -2)}[sig], code

        store = _fresh_store(settings)
        incomplete = _check_search_hides(store, settings, embedder, all_ids)
        if chosen:  # each run starts from a reference index (or none), so where it stops is fixed by the seed
            assert code != 0
            outcomes["mid-paper" if incomplete else "whole papers only"] += 1

        report = ingest_papers(load_corpus([corpus]).papers, settings, store=store)
        if incomplete:  # resumed: what the killed run stored is not embedded again
            assert report.chunks_embedded < report.chunks_added
        _assert_same(_snapshot(_fresh_store(settings), settings), want[variant])
        print(
            f"run {run}: {sig.name} exit {code}, {len(incomplete)} partial, rerun {report.chunks_embedded}/"
            f"{report.chunks_added} embedded, {time.monotonic() - started:.1f}s"
        )
    print(outcomes)
    assert outcomes["mid-paper"] >= 3 and outcomes["whole papers only"] >= 3, outcomes  # both kinds of state


@pytest.mark.slow
def test_interrupted_mid_paper_is_hidden_reported_and_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Any
) -> None:
    """Deterministic: Ctrl-C arrives once the large paper is half written and another one is complete."""
    import rag_assistant.index.ingest as ingest_mod

    want = _reference(tmp_path, "A")
    settings = Settings()
    papers = load_corpus([_write(tmp_path / "live" / "papers.jsonl", _corpus("A"))]).papers
    store = _fresh_store(settings)

    def interrupt_once_big_is_partial(done: int, total: int) -> None:
        states = store.paper_states([p.paper_id for p in papers])
        if "big" in states and not states["big"].complete and sum(s.complete for s in states.values()) >= 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(ingest_mod, "EMBED_BATCH", STEP)
    with pytest.raises(KeyboardInterrupt):
        ingest_papers(papers, settings, store=store, progress=interrupt_once_big_is_partial)
    states = store.paper_states([p.paper_id for p in papers])
    partial = {pid: len(s.chunk_ids) for pid, s in states.items() if not s.complete}
    assert list(partial) == ["big"]

    found = cli("search", "Segment 12 of the long survey", "-k", "3", "--json")
    assert found.returncode == 0, found.stderr
    ids = [s["paper_id"] for s in json.loads(found.stdout)]
    complete = sum(s.complete for s in states.values())
    assert len(ids) == min(3, complete) and not set(ids) & set(partial)  # its chunks fill no candidates
    assert "warning: an ingest is incomplete: 1 paper it stored in part is hidden from search" in found.stderr
    shown = cli("stats").stdout
    assert f"papers: {complete} searchable, 1 pending (incomplete ingest)" in shown
    assert "incomplete ingest: 1 paper pending" in shown
    assert "keyword_index: stale" in shown  # searches do not trust it while the killed run is pending

    encoded = _count_encoded(monkeypatch)
    report = ingest_papers(papers, settings, store=_fresh_store(settings))
    assert report.chunks_embedded == report.chunks_added - sum(partial.values())  # stored vectors reused
    # each chunk of the papers to complete encoded once (a partial paper's stored ones for its sentence vectors)
    assert sum(encoded) == report.chunks_added
    assert (report.resumed, report.changed, report.unchanged) == (len(partial), 0, complete)
    _assert_same(_snapshot(store := _fresh_store(settings), settings), want)
    assert not unfinished_papers(store, store.get_info())


@pytest.mark.slow
def test_rerun_after_a_kill_encodes_only_what_was_not_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Any
) -> None:
    """The saving a kill leaves, counted in texts the encoder runs on, not in seconds. SIGKILLed halfway, the
    killed run's papers are stored whole with their sentence vectors (at most the large paper in part), and the
    rerun encodes the chunks that were not stored plus the stored chunks of a paper stored in part (its sentence
    vectors pool over all its chunks): with the clean build's count, the killed run's whole papers are exactly
    the work saved. (Chunks used to be stored sorted by length across papers, so most papers were stored in
    part, and the rerun encoded every chunk of each of them again for its sentence vectors.)"""
    records = [{"id": f"s{i}", "abstract": p.text} for i, p in enumerate(load_corpus([bundled_corpus_path()]).papers)]
    corpus = _write(tmp_path / "live" / "papers.jsonl", [*records[:24], _corpus("A")[-1]])
    papers = load_corpus([corpus]).papers
    ids = [p.paper_id for p in papers]
    encoded = _count_encoded(monkeypatch)
    clean = Settings(data_dir=tmp_path / "clean")
    total = ingest_papers(papers, clean, store=_fresh_store(clean)).chunks_added
    assert sum(encoded) == total  # a clean build encodes each chunk once
    encoded.clear()

    settings = Settings()
    code = kill_at(start_ingest(corpus, STEP), signal.SIGKILL, lambda done, total: 2 * done >= total)
    assert code == -signal.SIGKILL
    states = _fresh_store(settings).paper_states(ids)
    stored = sum(len(s.chunk_ids) for s in states.values())
    whole = [p for p in papers if p.paper_id in states and states[p.paper_id].complete]
    in_part = {pid: len(s.chunk_ids) for pid, s in states.items() if not s.complete}
    assert 0 < stored < total and len(whole) > 1
    assert set(_sentence_rows(settings, whole)) == {p.paper_id for p in whole}  # stored with the papers
    shown = cli("stats").stdout
    assert f"papers: {len(whole)} searchable{f', {len(in_part)} pending' if in_part else ''}" in shown, shown

    report = ingest_papers(papers, settings, store=_fresh_store(settings))
    saved = total - sum(encoded)
    print(
        f"clean build: {total} chunks encoded; killed after storing {stored} ({sum(in_part.values())} of papers "
        f"stored in part); rerun: {sum(encoded)} encoded, {saved} saved"
    )
    assert sum(encoded) == total - stored + sum(in_part.values())  # what was not stored, once
    assert saved == sum(len(s.chunk_ids) for s in states.values() if s.complete)  # the whole papers' work
    assert (report.unchanged, report.resumed, report.changed) == (len(whole), len(in_part), 0)
    want, got = _sentence_rows(clean, papers), _sentence_rows(settings, papers)
    assert set(got) == set(ids) and all(np.allclose(got[pid], want[pid], atol=2e-3) for pid in ids)


@pytest.mark.slow
def test_when_everything_is_hidden_search_ask_and_stats_say_an_ingest_is_incomplete(tmp_path: Path, cli: Any) -> None:
    """Only the large paper, killed once part of it is stored: nothing is searchable, and search, ask and stats
    say why instead of finding nothing in silence; the rerun reports the paper as resumed, not changed."""
    corpus = _write(tmp_path / "big.jsonl", [_corpus("A")[-1]])
    assert kill_at(start_ingest(corpus, STEP), signal.SIGKILL, lambda done, total: 2 * done >= total) == -9
    warning = "warning: an ingest is incomplete: 1 paper it stored in part is hidden from search"

    found = cli("search", "Segment 12 of the long survey")
    assert found.returncode == 0 and "No matching papers." in found.stdout, found.stderr
    assert warning in found.stderr
    asked = cli("ask", "What does segment 12 of the long survey say?")
    assert asked.returncode == 0, asked.stderr
    assert warning in asked.stdout + asked.stderr
    shown = cli("stats").stdout
    assert "papers: 0 searchable, 1 pending (incomplete ingest)" in shown
    assert "incomplete ingest: 1 paper pending" in shown and "  big.jsonl:" not in shown

    rerun = cli("ingest", str(corpus))
    assert rerun.returncode == 0, rerun.stderr
    assert "Ingested 1 paper from 1 file: 0 new, 1 resumed (completed from an interrupted ingest), 0 changed" in (
        rerun.stdout
    )
    found = cli("search", "Segment 12 of the long survey")
    assert "big" in found.stdout and "warning" not in found.stderr
    shown = cli("stats").stdout
    assert "papers: 1 searchable\n" in shown and "  big.jsonl: 1 paper\n" in shown and "pending" not in shown
