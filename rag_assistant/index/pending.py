"""Unfinished papers of an interrupted ingest: hidden from search until an ingest completes them.

Before writing anything an ingest registers its run id in the store's info (`pending_runs`) and tags every
chunk it writes with it (`ingest_run`). A paper holding a chunk of a pending run is unfinished unless it is
complete (all chunks of one version present). A kill, even SIGKILL, leaves the run registered, so whatever it
half-wrote stays hidden; the next ingest redoes those papers (reusing the stored vectors) and then settles the
runs that no longer leave anything unfinished. Kept in the store, not beside it, so every client of a Chroma
server sees the same thing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rag_assistant.index.store import StoreReader, StoreWriter, chunks_by_paper

PENDING_KEY = "pending_runs"  # store info: comma-separated ids of ingest runs not yet settled
DELETE_PACK = 1000  # chunk ids per delete request; one paper's chunks are never split between two


def pending_runs(info: dict[str, Any]) -> list[str]:
    return [run for run in str(info.get(PENDING_KEY, "")).split(",") if run]


def with_runs(info: dict[str, Any], runs: Sequence[str]) -> dict[str, Any]:
    return {**info, PENDING_KEY: ",".join(dict.fromkeys(runs))}


def unfinished_papers(store: StoreReader, info: dict[str, Any]) -> set[str]:
    """Ids of the papers search must not return: written only in part by an unsettled ingest."""
    runs = pending_runs(info)
    return store.unfinished_papers(runs) if runs else set()


def settle(store: StoreReader, info: dict[str, Any], finished: str) -> tuple[dict[str, Any], int]:
    """`info` without run `finished` (it completed every paper it wrote) and without earlier runs whose
    papers have all been completed since; and how many papers earlier runs still leave unfinished (papers
    of files this ingest was not given)."""
    keep: list[str] = []
    left: set[str] = set()
    for run in pending_runs(info):
        if run != finished and (unfinished := store.unfinished_papers([run])):
            keep.append(run)
            left |= unfinished
    return with_runs(info, keep), len(left)


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
