"""A Chroma server a team shares (issue 21, item 2): client A adds +1,000 papers to a big server, then client B,
with its own data dir and a keyword cache from before, runs its first `search` (prints numbers; not a test).

The chunks are million.py's synthetic ones (sentences of the ICML 2025 abstracts, clustered 384-d vectors),
written as ingest runs are: recorded pending in the run log, chunks tagged with the run, then marked done.
Embedding them with the model would cost hours of CPU and measure nothing this is about. B's searches are the
shipped CLI in a new process each (model load included), timed from outside; the chunks its sync read come from
the record beside its cache (index/keyword_cache.py). The breakdown: B's `search` with its cache current is the
process floor (start-up, model load, the query); client C, a copy of B's data dir taken then, catches up
in-process after A's ingest, timed without the process (the sync alone).

    python benchmarks/shared_server.py --chunks 100000 --add 1000 --dir /tmp/shared-100k
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "tests")]
import _util as U  # noqa: E402
from million import STEP, papers, vectors  # noqa: E402

NEW = 5_000_000  # where A's new papers start: texts unlike those of the first papers
QUERY = "KV cache offloading for long-context inference"


def write_run(store: Any, settings: Any, start: int, chunks: int, prefix: str) -> dict[str, Any]:  # noqa: ANN401
    """One ingest run of synthetic papers, as index/ingest.py writes one: pending, tagged chunks, settled."""
    from rag_assistant.corpus.models import Paper
    from rag_assistant.index.runlog import RunLog
    from rag_assistant.index.state import model_signature
    from rag_assistant.index.store import RUN_KEY, StoredChunk, paper_to_metadata

    run, began = uuid.uuid4().hex, time.perf_counter()
    info = {**store.get_info(), "embedding_model": model_signature(settings), "chunking": "200/1", "revision": run}
    log = RunLog.open(store, settings, write=True)
    log.start(run)
    store.set_info(info)
    batch: list[tuple[Any, int]] = []
    n_papers = 0
    for pid, texts, cluster in papers(start, chunks, prefix):
        paper, n_papers = Paper(pid, " ".join(texts), f"{prefix}.jsonl", int(pid[1:])), n_papers + 1
        for j, text in enumerate(texts):
            meta = {**paper_to_metadata(paper, j, len(texts)), RUN_KEY: run}
            batch.append((StoredChunk(f"{pid}#{j}", pid, text, meta), cluster))
        if len(batch) >= STEP:
            store.add([c for c, _ in batch], vectors([k for _, k in batch]))
            batch = []
    if batch:
        store.add([c for c, _ in batch], vectors([k for _, k in batch]))
    log.finish(run, 1, {})
    return {"papers": n_papers, "chunks": chunks, "seconds": round(time.perf_counter() - began, 1)}


def search(data_dir: Path, url: str) -> dict[str, Any]:
    """B's `search` in a new process: its wall time, what its sync read, and the ranking."""
    env = {**os.environ, "RAG_ASSISTANT_CHROMA_URL": url, "RAG_ASSISTANT_DATA_DIR": str(data_dir)}
    seconds, done = U.timed(
        lambda: subprocess.run(
            [sys.executable, "-m", "rag_assistant", "search", QUERY, "--json", "-k", "10"],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )  # fmt: skip
    )
    state = next((data_dir / "keyword").glob("*.runs.json"), None)
    synced = json.loads(state.read_text())["last_sync"] if state else None
    ranking = [(s["paper_id"], round(s["score"], 6)) for s in json.loads(done.stdout)]
    return {"seconds": round(seconds, 2), "last_sync": synced, "ranking": ranking}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000, help="chunks in the server before A's ingest")
    parser.add_argument("--add", type=int, default=1000, help="papers client A adds")
    parser.add_argument("--dir", type=Path, required=True, help="working folder (deleted first)")
    parser.add_argument("--corpus", type=Path, default=U.LARGE_CORPUS, help="abstracts the sentences come from")
    args = parser.parse_args()
    U.LARGE_CORPUS = args.corpus  # read by million.papers
    U.isolate_env()
    import shutil

    from chroma_server import ChromaServer  # tests/chroma_server.py

    from rag_assistant.config import Settings
    from rag_assistant.index.keyword_cache import sync_client_cache
    from rag_assistant.index.runlog import RunLog
    from rag_assistant.index.store import open_store

    shutil.rmtree(args.dir, ignore_errors=True)
    out: dict[str, Any] = {"chunks": args.chunks, "add_papers": args.add}
    with ChromaServer(args.dir / "server") as server:
        a = Settings(data_dir=args.dir / "a", chroma_url=server.url)
        store = open_store(a)
        out["load"] = write_run(store, a, 0, args.chunks, "m")
        out["b_first_ever"] = search(args.dir / "b", server.url)  # no cache yet: every chunk read, once
        out["b_current"] = search(args.dir / "b", server.url)  # cache current: no sync at all
        shutil.copytree(args.dir / "b", args.dir / "c")  # C: B's state now, to time the catch-up in-process
        out["a_ingest"] = write_run(store, a, NEW, _chunks_of(args.add), "n")  # papers not in the server
        a_sync = sync_client_cache(store, a, RunLog.open(store, a, write=True))  # what A's ingest does last
        out["a_cache_sync"] = a_sync.as_dict()
        out["c_sync_in_process"] = _sync_alone(a.model_copy(update={"data_dir": args.dir / "c"}))
        out["b_after_a"] = search(args.dir / "b", server.url)
        out["a_search"] = search(args.dir / "a", server.url)
        out["same_ranking"] = out["b_after_a"]["ranking"] == out["a_search"]["ranking"]
    for key in ("b_first_ever", "b_current", "b_after_a", "a_search"):
        out[key].pop("ranking")
    print(json.dumps(out, indent=2))


def _sync_alone(settings: Any) -> dict[str, Any]:  # noqa: ANN401 - Settings
    """A client's catch-up with the server's runs alone: its keyword cache loaded (and synced) in this process."""
    from rag_assistant.index.reader import IndexReader

    reader = IndexReader(settings)
    seconds, _ = U.timed(lambda: reader.keyword)
    return {"seconds": round(seconds, 2), "last_sync": reader.sync_report.as_dict() if reader.sync_report else None}


def _chunks_of(n_papers: int) -> int:
    """The chunks of the first `n_papers` synthetic papers of a prefix (1-2 each)."""
    total = 0
    for i, (_, texts, _) in enumerate(papers(NEW, 10 * n_papers, "n")):
        if i == n_papers:
            break
        total += len(texts)
    return total


if __name__ == "__main__":
    main()
