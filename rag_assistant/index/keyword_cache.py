"""A client's keyword index over a shared Chroma server: a cache in its data dir, brought up to date from the run
log (index/runlog.py) with only the chunks of the runs it has not applied, never every chunk again.

Beside the keyword index, `<collection>.runs.json` names the runs it reflects (each with the step it had then),
the revision of the keyword index it pairs with (written after the index, so a kill between the two leaves a pair
that does not match: rebuilt), and the log it came from. A sync lists the log, and for the runs not applied (done
ones, and pending ones each time again, since they may still write) applies the chunks tagged with them and the
current state of the ids they deleted; so too for a run applied as done whose step has moved on since (another
ingest settled it between two of its steps: it is pending again). Only done runs are recorded as applied: a
killed ingest's run stays pending until an ingest settles it, so whatever it half-wrote is read again then, never
taken as final. Its papers stay hidden from search as before (index/pending.py). The cache is labelled with the
store's revision (read before the log) when no run is pending, so readers find it current without listing the
log; else with a label of its own, and readers sync whenever a run is pending. Writers of one data dir take a
lock; a reader that finds it held builds in memory instead."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_assistant.config import Settings
from rag_assistant.corpus.models import Paper
from rag_assistant.files import write_private
from rag_assistant.index.keyword import KeywordDoc, KeywordIndex
from rag_assistant.index.keyword_fields import paper_fields, store_docs
from rag_assistant.index.records import metadata_to_paper, texts_of
from rag_assistant.index.runlog import DONE, RunLog, states_of
from rag_assistant.index.sparse import server_side
from rag_assistant.index.state import keyword_dir, store_revision
from rag_assistant.index.store import StoreReader, paper_of


@dataclass
class SyncReport:
    """What a sync read from the server: counted for tests and benchmarks, never timed."""

    chunks_read: int = 0
    runs_applied: int = 0
    rebuilt: bool = False

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def state_file(directory: Path) -> Path:
    return directory.with_name(directory.name + ".runs.json")


def read_state(directory: Path) -> dict[str, Any]:
    try:
        state = json.loads(state_file(directory).read_text())
        return state if isinstance(state, dict) else {}
    except (OSError, ValueError):
        return {}


@contextlib.contextmanager
def locked(directory: Path, wait: bool) -> Iterator[bool]:
    """Hold the data dir's keyword lock (True), or yield False when `wait` is off and another process holds it."""
    import fcntl

    directory.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(directory.with_name(directory.name + ".lock"), "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def sync(directory: Path, store: StoreReader, log: RunLog, revision: str) -> tuple[KeywordIndex, SyncReport]:
    """Bring the keyword index in `directory` up to date with the store; `revision` is the store's, read before
    this call. The caller holds the lock."""
    records = log.records()
    states, steps = states_of(records), {run: int(meta.get("step", 0)) for run, meta in records.items()}
    index, state, report = KeywordIndex(directory), read_state(directory), SyncReport()
    pending = [run for run, st in states.items() if st != DONE]
    label = uuid.uuid4().hex if pending else revision
    usable = index.revision is not None and state.get("revision") == index.revision and state.get("log") == log.key
    # run -> the step it was applied at; a list (a cache of the first version) cannot say: rebuilt
    applied: dict[str, int] = state.get("applied", {}) if usable and isinstance(state.get("applied"), dict) else {}
    usable = usable and isinstance(state.get("applied"), dict)
    # a run settled by another ingest while it was still between two steps writes on: applied again
    new = [run for run in states if run not in applied or steps[run] > applied[run]]
    if usable and not new and index.revision == label:
        return index, report
    if usable and _apply(index, store, log, new, label, report):
        applied.update((run, steps[run]) for run in new if states[run] == DONE)
    else:  # no usable cache (or too much of it would be removed chunks): every chunk, once
        report.chunks_read = 0
        index.build(_counted(store_docs(store), report), label)
        report.rebuilt, report.runs_applied = True, 0
        applied = {run: steps[run] for run, st in states.items() if st == DONE}
    state = {"revision": label, "log": log.key, "applied": applied, "last_sync": report.as_dict()}
    write_private(state_file(directory), json.dumps(state))
    return index, report


def sync_client_cache(store: StoreReader, settings: Settings, log: RunLog) -> SyncReport:
    """What an ingest into a shared server does last: `sync`, waiting for a reader of this data dir that is
    doing the same. Nothing where the server ranks keywords itself (index/sparse.py): no client keeps a cache."""
    if server_side(store.get_info()):
        return SyncReport()
    directory = keyword_dir(settings)
    with locked(directory, wait=True):
        return sync(directory, store, log, store_revision(store.get_info()))[1]


def _apply(
    index: KeywordIndex, store: StoreReader, log: RunLog, runs: list[str], label: str, report: SyncReport
) -> bool:
    """Apply what `runs` changed: the chunks tagged with them now, and the current state of the ids they deleted
    (a chunk deleted, then written again by another run, stays). False when the index asks for a rebuild."""
    deleted = log.deleted(runs)
    rows = log.rows(list(dict.fromkeys([*log.tagged(runs), *deleted])))  # each changed chunk read once
    papers = _papers_of(rows, store)
    fresh = texts_of(rows, lambda ids: papers)
    fields = {pid: paper_fields(paper) for pid, paper in papers.items()}  # once per paper, not per chunk
    docs = [KeywordDoc(cid, text, *fields.get(paper_of(cid), ("", (), {}))) for cid, text in sorted(fresh.items())]
    report.chunks_read, report.runs_applied = len(fresh), len(runs)
    return index.update(docs, [cid for cid in deleted if cid not in fresh], label)


def _papers_of(rows: list[tuple[str, str | None, dict[str, Any]]], store: StoreReader) -> dict[str, Paper]:
    """The papers of these chunk rows: from their first chunks among the rows (a new paper's are: no second
    read of them), the others' from the store."""
    papers = {paper_of(cid): metadata_to_paper(meta) for cid, _, meta in rows if cid == f"{paper_of(cid)}#0"}
    missing = [pid for pid in dict.fromkeys(paper_of(cid) for cid, _, _ in rows) if pid not in papers]
    return {**papers, **store.papers(missing)} if missing else papers


def _counted(docs: Iterator[KeywordDoc], report: SyncReport) -> Iterator[KeywordDoc]:
    for doc in docs:
        report.chunks_read += 1
        yield doc
