"""Clients with their own data dirs sharing one Chroma server (issue 21, item 2): whoever ingested what, every
client ranks alike, a client that never ingested included. A guard of today's behaviour (a client whose keyword
index is not at the store's revision rebuilds it in memory from the server), which a client cache updated
incrementally must keep (docs/benchmarks.md, "A Chroma server a team shares")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_assistant.corpus import bundled_corpus_path

QUERIES = ["KV cache offloading for long-context inference", "fine-tuning safety", "graph neural networks"]


@pytest.mark.slow
def test_clients_with_separate_data_dirs_rank_alike(cli, tmp_path: Path) -> None:
    from chroma_server import ChromaServer

    first, second = sorted(Path(bundled_corpus_path()).glob("*.txt"))[:2]
    with ChromaServer(tmp_path / "server") as server:
        env = {name: {"RAG_ASSISTANT_CHROMA_URL": server.url, "RAG_ASSISTANT_DATA_DIR": str(tmp_path / name)}
               for name in ("a", "b", "never")}  # fmt: skip
        for name, path in (("a", first), ("b", second)):  # one file each, one after the other
            ingest = cli("ingest", str(path), env=env[name])
            assert ingest.returncode == 0, ingest.stderr
        rankings = {}
        for name in env:
            found = [cli("search", q, "--json", "-k", "8", env=env[name]) for q in QUERIES]
            assert all(res.returncode == 0 for res in found), [res.stderr for res in found]
            rankings[name] = [[(s["paper_id"], round(s["score"], 6)) for s in json.loads(res.stdout)] for res in found]
    sources = {pid.split(":")[0] for ranking in rankings["never"] for pid, _ in ranking}
    assert len(sources) == 2, sources  # both clients' papers are found
    assert rankings["a"] == rankings["b"] == rankings["never"]
