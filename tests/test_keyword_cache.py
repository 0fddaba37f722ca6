"""A client's keyword cache catching up with another client's ingest (index/keyword_cache.py, issue 21): what it
reads from the store. Embedded Chroma with the run log read directly, as a server's client reads it (the same
collection calls; tests/test_chroma_runlog.py drives the CLI against a real server)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rag_assistant.config import Settings
from rag_assistant.corpus import Paper
from rag_assistant.index import keyword, keyword_cache
from rag_assistant.index.ingest import ingest_papers
from rag_assistant.index.keyword import KeywordIndex
from rag_assistant.index.keyword_fields import store_docs
from rag_assistant.index.runlog import RunLog
from rag_assistant.index.state import store_revision
from rag_assistant.index.store import ChromaStore, open_store

BODY = " ".join(f"Sentence {i} of this quokka study covers memory tiers and wombat routing." for i in range(6))


class CountingCollection:
    """A chromadb Collection that counts every record a `get` returns with its content (ids-only reads aside)."""

    def __init__(self, inner: Any) -> None:  # noqa: ANN401 - a chromadb Collection
        self.inner, self.read = inner, Counter[str]()

    def get(self, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401 - chromadb's GetResult
        res = self.inner.get(*args, **kwargs)
        if kwargs.get("include") != []:
            self.read.update(res["ids"])
        return res

    def __getattr__(self, name: str) -> Any:  # noqa: ANN401
        return getattr(self.inner, name)


def _paper(pid: str, title: str, position: int) -> Paper:
    meta = {"authors": [f"Ada {title.split()[0]}", "Yi Wang"], "topic": "Memory", "year": 2025}
    return Paper(pid, f"{title}: {BODY}", "papers.jsonl", position, title, meta)


def _sync(directory: Path, store: ChromaStore) -> tuple[KeywordIndex, keyword_cache.SyncReport]:
    revision = store_revision(store.get_info())
    log = RunLog.of(store, write=False)
    assert log is not None
    return keyword_cache.sync(directory, store, log, revision)


@pytest.mark.slow
def test_a_catch_up_reads_each_changed_chunk_once_and_no_other(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After A adds papers and rewrites one (fewer chunks: some deleted), B's sync reads the changed chunks'
    records once each (a new paper's fields come from its first chunk, read with the others) and no other chunk,
    and its index holds what a rebuild from every chunk holds. Before, each changed paper's first chunk was read
    three times (for the chunks' texts, again for their paper, again for the keyword fields)."""
    monkeypatch.setattr(keyword, "REBUILD_SHARE", 1.0)  # a small index: the replaced chunks would ask a rebuild
    a = Settings(data_dir=tmp_path / "a", chunk_max_tokens=40)
    store = open_store(a)
    first = [_paper(f"p{i}", f"Quokka caches {i}", i) for i in range(4)]
    assert ingest_papers(first, a, store=store).new == 4
    b_dir = tmp_path / "b" / "keyword" / a.collection
    assert _sync(b_dir, store)[1].rebuilt
    before = {cid for cid, _ in store.iter_chunks()}
    assert len(before) > 2 * len(first)  # several chunks per paper

    rewritten = Paper("p1", "Quokka caches 1, shortened: wombat routing only.", "papers.jsonl", 1, "Quokka caches 1")
    added = [_paper(f"n{i}", f"Wombat routes {i}", 4 + i) for i in range(3)]
    assert ingest_papers([first[0], rewritten, *first[2:], *added], a, store=store).new == 3
    after = {cid: text for cid, text in store.iter_chunks()}
    changed = {cid for cid in after if cid.startswith(("n", "p1#"))}
    assert before - set(after)  # p1's later chunks were deleted

    store.collection = CountingCollection(store.collection)
    index, report = _sync(b_dir, store)
    assert (report.rebuilt, report.runs_applied, report.chunks_read) == (False, 1, len(changed))
    assert set(store.collection.read) == changed and max(store.collection.read.values()) == 1

    rebuilt = KeywordIndex(tmp_path / "rebuilt")
    rebuilt.build_in_memory(store_docs(store), "x")
    assert sorted(index.chunk_ids()) == sorted(after)
    for query in ("quokka caches", "wombat routing", "yi wang memory", "shortened"):
        assert [cid for cid, _ in index.query(query, 20)] == [cid for cid, _ in rebuilt.query(query, 20)]


class CountingGets:
    """A chromadb Collection that counts its `get` requests."""

    def __init__(self, inner: Any) -> None:  # noqa: ANN401 - a chromadb Collection
        self.inner, self.gets = inner, 0

    def get(self, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401 - chromadb's GetResult
        self.gets += 1
        return self.inner.get(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # noqa: ANN401
        return getattr(self.inner, name)


@pytest.mark.parametrize(("page", "gets"), [(5000, 1), (2, 3), (1, 6)])
def test_the_run_log_is_listed_without_a_request_for_an_empty_last_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, page: int, gets: int
) -> None:
    """Every search lists the run log (pending runs; a sync): a short page is the last one. Before, each listing
    asked once more for the empty page after it."""
    from rag_assistant.index import runlog

    log = RunLog.of(open_store(Settings(data_dir=tmp_path / "data")), write=True)
    assert log is not None
    runs = [f"run-{i}" for i in range(5)]
    for run in runs:
        log.start(run)
    log.finish(runs[0], 1, {})
    monkeypatch.setattr(runlog, "PAGE", page)
    log.log = CountingGets(log.log)
    assert log.states() == {run: "done" if run == runs[0] else "pending" for run in runs}
    assert log.log.gets == gets
