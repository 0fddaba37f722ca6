"""The run log of a Chroma collection: one record per ingest run in a second collection, `<collection>.runs`,
from which every client learns which runs are pending (their half-written papers hidden from search:
index/pending.py) and, on a shared server, what changed since its last look without reading every chunk
(docs/benchmarks.md, "A Chroma server a team shares").

Each run writes only its own record, so two writers never overwrite each other's state. An ingest records its run
as pending before it writes a chunk, raises the record's `step` before each step of chunks it writes (a counter,
never a clock), records the ids it is about to delete before deleting them, and marks its run done once settled.
A run killed midway stays pending until another ingest settles it: that ingest reads the run's step, then finds
nothing the run wrote unfinished, and records in its own record that it settled the run at that step. A run is
pending while its record says so and its step is past every step it was settled at: a run that was only between
two steps when another ingest looked is pending again as soon as it writes its next step, and one that was killed
stays settled. Every chunk a run writes is tagged with it (`ingest_run`), so the chunks a run changed are those
tagged with it now plus the ids it deleted. Records of the first version (a state, the deleted ids as a list) read
as step 0 that settled nothing."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rag_assistant.index.store import RUN_KEY

SUFFIX = ".runs"
PENDING, DONE = "pending", "done"
PAGE = 5000  # records per read: Chroma's own batch bound


class RunLog:
    """The run log of the collection a ChromaStore serves (`chunks`, `log`: chromadb Collections)."""

    def __init__(self, chunks: Any, log: Any) -> None:  # noqa: ANN401 - chromadb Collections
        self.chunks, self.log = chunks, log
        self._deleted: dict[str, list[str]] = {}  # ids this process's runs recorded as deleted, by run

    @classmethod
    def of(cls, store: object, write: bool) -> RunLog | None:
        """The log of any Chroma store (embedded or server); None for a store that is not Chroma or, for reading,
        a collection without a log yet (no ingest of this version wrote to it)."""
        from rag_assistant.index.chroma_open import sibling_collection

        log = sibling_collection(store, SUFFIX, write)
        return None if log is None else cls(store.collection, log)  # type: ignore[attr-defined]

    @classmethod
    def open(cls, store: object, settings: Any, write: bool) -> RunLog | None:  # noqa: ANN401 - Settings
        """The log of `store` on a Chroma server, which clients' keyword caches follow; None for embedded Chroma
        (one machine, one keyword index beside it: pending runs still come from its log, `of`)."""
        return cls.of(store, write) if settings.chroma_url else None

    @property
    def key(self) -> str:
        """What a client cache built from this log is tied to: a recreated collection (or log) starts afresh."""
        return f"{self.chunks.id}/{self.log.id}"

    def _put(self, run: str, state: str, step: int, settles: Mapping[str, int] | None = None) -> None:
        # Chroma stores a vector with every record: a constant one, never queried
        meta = {"state": state, "step": step, "settles": json.dumps(dict(settles or {})), "at": time.time()}
        deleted = json.dumps(self._deleted.get(run, []))
        self.log.upsert(ids=[run], embeddings=[[1.0]], documents=[deleted], metadatas=[meta])

    def start(self, run: str) -> None:
        """Record `run` as pending: before it writes anything."""
        self._put(run, PENDING, 0)

    def step(self, run: str, step: int) -> None:
        """Record that `run` is about to write its step `step` (1, 2, ...): before the step's first chunk."""
        self._put(run, PENDING, step)

    def deleting(self, run: str, chunk_ids: Sequence[str], step: int) -> None:
        """Record the chunk ids `run` deletes: before it deletes them, so a kill in between loses none."""
        self._deleted[run] = list(chunk_ids)
        self._put(run, PENDING, step)

    def finish(self, run: str, step: int, settles: Mapping[str, int]) -> None:
        """Mark `run` done (its deleted ids kept), with the other runs it settled, each at the step it read."""
        self._put(run, DONE, step, settles)

    def records(self) -> dict[str, dict[str, Any]]:
        """Run id -> its record's metadata, every run recorded (a few hundred small records: one cheap read)."""
        out: dict[str, dict[str, Any]] = {}
        offset = 0
        while True:
            res = self.log.get(include=["metadatas"], limit=PAGE, offset=offset)
            if not res["ids"]:
                return out
            out.update((run, dict(meta or {})) for run, meta in zip(res["ids"], res["metadatas"] or [], strict=False))
            if len(res["ids"]) < PAGE:  # the last page: no request for an empty one (a search lists the log)
                return out
            offset += len(res["ids"])

    def states(self) -> dict[str, str]:
        """Run id -> pending or done, every run recorded: done when its own record says so, or when another run
        settled it at its current step (it was killed there)."""
        return states_of(self.records())

    def pending(self) -> list[str]:
        """The runs whose half-written papers search hides."""
        return [run for run, state in self.states().items() if state != DONE]

    def deleted(self, runs: Sequence[str]) -> list[str]:
        """The chunk ids these runs deleted (some may have been written again since)."""
        if not runs:
            return []
        found = self.log.get(ids=list(dict.fromkeys(runs)), include=["documents"])
        return list(dict.fromkeys(cid for doc in found["documents"] or [] for cid in json.loads(doc or "[]")))

    def tagged(self, runs: Sequence[str]) -> list[str]:
        """The ids of the chunks whose stored version these runs wrote, in one request (ids only: cheap; paging a
        filtered read by offset could skip a chunk while another client deletes)."""
        if not runs:
            return []
        return list(self.chunks.get(where={RUN_KEY: {"$in": list(runs)}}, include=[])["ids"])

    def rows(self, chunk_ids: Sequence[str]) -> list[tuple[str, str | None, dict[str, Any]]]:
        """(id, document, metadata) of those of these chunks that exist now, read by id, PAGE at a time (laid out
        as index/records.py says: a first chunk's metadata holds its paper)."""
        out: list[tuple[str, str | None, dict[str, Any]]] = []
        for start in range(0, len(chunk_ids), PAGE):
            res = self.chunks.get(ids=list(chunk_ids[start : start + PAGE]), include=["documents", "metadatas"])
            out += zip(res["ids"], res["documents"] or [], map(dict, res["metadatas"] or []), strict=True)
        return out


def states_of(records: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Each run's state from every run's record (see the module docstring)."""
    settled: dict[str, int] = {}
    for meta in records.values():
        for run, step in json.loads(str(meta.get("settles") or "{}")).items():
            settled[run] = max(settled.get(run, -1), int(step))
    out = {}
    for run, meta in records.items():
        own = str(meta.get("state", PENDING))
        out[run] = DONE if own == DONE or int(meta.get("step", 0)) <= settled.get(run, -1) else PENDING
    return out
