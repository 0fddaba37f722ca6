"""Unfinished papers of an interrupted ingest: hidden from search until an ingest completes them.

Before writing anything an ingest records its run as pending in the store's run log (index/runlog.py: one record
per run, written by its own ingest only) and tags every chunk it writes with it (`ingest_run`). A paper holding a
chunk of a pending run is unfinished unless it is complete (all chunks of one version present). A kill, even
SIGKILL, leaves the run pending, so whatever it half-wrote stays hidden; the next ingest redoes those papers
(reusing the stored vectors) and then settles the runs that no longer leave anything unfinished, each at the
step it read before looking, so a run still writing is never taken as finished. Kept in the store, not beside
it, so every client of a Chroma server sees the same thing, and no writer reads, changes and writes back a list
another writer changes too. Indexes of an earlier version name their pending runs in the store's info
(`pending_runs`): read as pending too, and moved into the log by the next ingest."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rag_assistant.index.runlog import DONE, RunLog, states_of
from rag_assistant.index.store import StoreReader, StoreWriter, chunks_by_paper

PENDING_KEY = "pending_runs"  # store info of an earlier version: comma-separated ids of runs not yet settled
DELETE_PACK = 1000  # chunk ids per delete request; one paper's chunks are never split between two


def legacy_runs(info: dict[str, Any]) -> list[str]:
    """The pending runs an earlier version named in the store's info."""
    return [run for run in str(info.get(PENDING_KEY, "")).split(",") if run]


def pending_runs(store: StoreReader, info: dict[str, Any]) -> list[str]:
    """The runs whose half-written papers search hides: pending in the run log, or named in the info."""
    log = RunLog.of(store, write=False)
    return list(dict.fromkeys([*legacy_runs(info), *(log.pending() if log else [])]))


def unfinished_papers(store: StoreReader, info: dict[str, Any], runs: Sequence[str] | None = None) -> set[str]:
    """Ids of the papers search must not return: written only in part by an unsettled ingest (`runs`: the
    pending runs, when the caller has read them)."""
    runs = pending_runs(store, info) if runs is None else runs
    return store.unfinished_papers(runs) if runs else set()


def settle(store: StoreReader, log: RunLog, finished: str) -> tuple[dict[str, int], int]:
    """The other pending runs whose papers have all been completed since, each with the step it had when read
    (before looking: a step written after that is still pending); and how many papers the runs left pending
    still leave unfinished (papers of files this ingest was not given)."""
    records = log.records()
    settles: dict[str, int] = {}
    left: set[str] = set()
    for run, state in states_of(records).items():
        if run == finished or state == DONE:
            continue
        if unfinished := store.unfinished_papers([run]):
            left |= unfinished
        else:
            settles[run] = int(records[run].get("step", 0))
    return settles, len(left)


def open_log(store: StoreWriter, info: dict[str, Any]) -> tuple[RunLog, dict[str, Any]]:
    """The store's run log, for an ingest, with the pending runs an earlier version named in `info` moved into
    it; and `info` without them (written back here when there were some)."""
    log = RunLog.of(store, write=True)
    if log is None:
        raise TypeError(f"{type(store).__name__} keeps no run log: ingest writes to a Chroma store")
    if legacy := legacy_runs(info):
        known = log.records()
        for run in legacy:
            if run not in known:  # its own ingest (an earlier version) never writes a record
                log.start(run)
        info = {key: value for key, value in info.items() if key != PENDING_KEY}
        store.set_info(info)
    return log, info


def delete_by_paper(store: StoreWriter, chunk_ids: Sequence[str]) -> None:
    """Delete in requests that each hold whole papers: a Chroma request is applied entirely or not at all,
    so a kill never leaves part of a paper that is being removed (its chunks carry no pending run)."""
    pack: list[str] = []
    for ids in chunks_by_paper(chunk_ids).values():
        if pack and len(pack) + len(ids) > DELETE_PACK:
            store.delete(pack)
            pack = []
        pack += ids
    if pack:
        store.delete(pack)
