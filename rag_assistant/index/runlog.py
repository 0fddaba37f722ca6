"""The run log of a shared Chroma server: one record per ingest run in a second collection, `<collection>.runs`,
so a client learns what changed since its last look without reading every chunk (docs/benchmarks.md, "A Chroma
server a team shares").

An ingest records its run as pending before it writes a chunk, records the ids it is about to delete before
deleting them, and marks the run done once it has settled (as well as earlier runs its settling found complete).
Every chunk a run writes is tagged with it (`ingest_run`), so the chunks a run changed are those tagged with it
now plus the ids it deleted. Each run writes only its own record: two clients never overwrite each other's.
Embedded Chroma (one machine, one keyword index beside it) has no log: `RunLog.open` returns None there."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from rag_assistant.index.records import chunk_texts
from rag_assistant.index.store import RUN_KEY

SUFFIX = ".runs"
PENDING, DONE = "pending", "done"
PAGE = 5000  # records per read: Chroma's own batch bound


class RunLog:
    """The run log of the collection a ChromaStore serves (`client`, `collection`: chromadb objects)."""

    def __init__(self, chunks: Any, log: Any) -> None:  # noqa: ANN401 - chromadb Collections
        self.chunks, self.log = chunks, log

    @classmethod
    def open(cls, store: object, settings: Any, write: bool) -> RunLog | None:  # noqa: ANN401 - Settings
        """The log of `store` on a Chroma server; None for embedded Chroma, a store that is not Chroma, or (for
        reading) a server whose collection has no log yet (written by a version before it)."""
        client, chunks = getattr(store, "client", None), getattr(store, "collection", None)
        if not settings.chroma_url or client is None or chunks is None:
            return None
        name = chunks.name + SUFFIX
        if write:
            return cls(chunks, client.get_or_create_collection(name, embedding_function=None))
        from chromadb.errors import NotFoundError

        try:
            return cls(chunks, client.get_collection(name, embedding_function=None))
        except NotFoundError:
            return None

    @property
    def key(self) -> str:
        """What a client cache built from this log is tied to: a recreated collection (or log) starts afresh."""
        return f"{self.chunks.id}/{self.log.id}"

    def _put(self, run: str, state: str, deleted: Sequence[str] = ()) -> None:
        # Chroma stores a vector with every record: a constant one, never queried
        meta = {"state": state, "at": time.time()}
        self.log.upsert(ids=[run], embeddings=[[1.0]], documents=[json.dumps(list(deleted))], metadatas=[meta])

    def start(self, run: str) -> None:
        """Record `run` as pending: before it writes anything."""
        self._put(run, PENDING)

    def deleting(self, run: str, chunk_ids: Sequence[str]) -> None:
        """Record the chunk ids `run` deletes: before it deletes them, so a kill in between loses none."""
        self._put(run, PENDING, chunk_ids)

    def finish(self, runs: Sequence[str]) -> None:
        """Mark runs done (their deleted ids kept): everything they wrote is final."""
        if not runs:
            return
        found = self.log.get(ids=list(dict.fromkeys(runs)), include=["documents"])
        for run, doc in zip(found["ids"], found["documents"] or [], strict=False):
            self._put(run, DONE, json.loads(doc or "[]"))

    def states(self) -> dict[str, str]:
        """Run id -> pending or done, every run recorded (a few hundred ids: one cheap read)."""
        out: dict[str, str] = {}
        offset = 0
        while True:
            res = self.log.get(include=["metadatas"], limit=PAGE, offset=offset)
            if not res["ids"]:
                return out
            for run, meta in zip(res["ids"], res["metadatas"] or [], strict=False):
                out[run] = str((meta or {}).get("state", PENDING))
            offset += len(res["ids"])

    def deleted(self, runs: Sequence[str]) -> list[str]:
        """The chunk ids these runs deleted (some may have been written again since)."""
        if not runs:
            return []
        found = self.log.get(ids=list(dict.fromkeys(runs)), include=["documents"])
        return list(dict.fromkeys(cid for doc in found["documents"] or [] for cid in json.loads(doc or "[]")))

    def chunks_of(self, runs: Sequence[str]) -> dict[str, str]:
        """Chunk id -> text of the chunks whose stored version these runs wrote. Their ids are read in one
        request (ids only: cheap), then the texts by id: paging a filtered read by offset could skip a chunk
        while another client deletes."""
        if not runs:
            return {}
        ids = self.chunks.get(where={RUN_KEY: {"$in": list(runs)}}, include=[])["ids"]
        return self.texts(ids)

    def texts(self, chunk_ids: Sequence[str]) -> dict[str, str]:
        """The stored text of those of these chunks that exist now (laid out as index/records.py says)."""
        out: dict[str, str] = {}
        for start in range(0, len(chunk_ids), PAGE):
            out.update(chunk_texts(self.chunks, chunk_ids[start : start + PAGE]))
        return out
