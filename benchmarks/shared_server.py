"""A Chroma server a team shares (issue 21, item 2): client A adds +1,000 papers to a big server, then client B,
with its own data dir and a keyword cache from before, runs its first `search` (prints numbers; not a test).

The chunks are million.py's synthetic ones (sentences of the ICML 2025 abstracts, clustered 384-d vectors),
written as ingest runs are: recorded pending in the run log, chunks tagged with the run, then marked done.
Embedding them with the model would cost hours of CPU and measure nothing this is about.

The loaded server and B's keyword cache of it (its first `search` ever: every chunk read, once) are built once in
`--dir`/base and reused (delete it to rebuild; minutes at 100k). Each round then copies that base, starts the
server on the copy and measures, in this order:
- the floor: B's `search` with its cache current, nothing to catch up (start-up, model load, the query);
- A's ingest of `--add` papers (A: a client that was in sync before it; it ends by syncing its cache, as ingest
  does), then C (a copy of B's data dir) catching up in-process, timed without the process: the catch-up alone,
  wall, this process's CPU and the Chroma server's CPU meanwhile;
- B's first `search` after A's ingest, wall time and the CPU time (user+sys) of its process, which a loaded
  machine inflates less; its ranking against A's.
Every `search` is the shipped CLI in a new process (model load included), timed from outside. The three numbers
are printed last, medians over `--rounds`.

    python benchmarks/shared_server.py --chunks 100000 --add 1000 --dir /tmp/shared-100k [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
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


def search(data_dir: Path, url: str, profile: Path | None = None) -> dict[str, Any]:
    """A client's `search` in a new process: its wall and CPU time, what its sync read, and the ranking."""
    env = {**os.environ, "RAG_ASSISTANT_CHROMA_URL": url, "RAG_ASSISTANT_DATA_DIR": str(data_dir)}
    prof = ["-m", "cProfile", "-o", str(profile)] if profile else []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds, done = U.timed(
        lambda: subprocess.run(
            [sys.executable, *prof, "-m", "rag_assistant", "search", QUERY, "--json", "-k", "10"],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )  # fmt: skip
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    state = next((data_dir / "keyword").glob("*.runs.json"), None)
    synced = json.loads(state.read_text())["last_sync"] if state else None
    ranking = [(s["paper_id"], round(s["score"], 6)) for s in json.loads(done.stdout)]
    return {"seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2), "last_sync": synced, "ranking": ranking}


def build_base(base: Path, chunks: int) -> dict[str, Any]:
    """The loaded server and B's cache of it, in `base` (written aside, then renamed: a kill leaves none)."""
    from chroma_server import ChromaServer  # tests/chroma_server.py

    from rag_assistant.config import Settings
    from rag_assistant.index.store import open_store

    tmp = base.with_name(base.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    out: dict[str, Any] = {"chunks": chunks}
    with ChromaServer(tmp / "server") as server:
        settings = Settings(data_dir=tmp / "b", chroma_url=server.url)
        store = open_store(settings)
        out["load"] = write_run(store, settings, 0, chunks, "m")
        store.close()
        first = search(tmp / "b", server.url)  # no cache yet: every chunk read, once
        out["b_first_ever"] = {k: v for k, v in first.items() if k != "ranking"}
    (tmp / "base.json").write_text(json.dumps(out))
    tmp.rename(base)
    return out


def measure(base: Path, work: Path, add: int, profile: Path | None) -> dict[str, Any]:
    """One round on a copy of `base` (see the module docstring)."""
    from chroma_server import ChromaServer

    from rag_assistant.config import Settings
    from rag_assistant.index.keyword_cache import sync_client_cache
    from rag_assistant.index.runlog import RunLog
    from rag_assistant.index.store import open_store

    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(base, work, symlinks=True)
    for client in ("a", "c"):
        shutil.copytree(work / "b", work / client)
    out: dict[str, Any] = {}
    with ChromaServer(work / "server") as server:
        search(work / "b", server.url)  # the server's first requests (its caches warm up), not measured
        out["floor"] = search(work / "b", server.url)  # cache current: no sync at all
        a = Settings(data_dir=work / "a", chroma_url=server.url)
        store = open_store(a)
        out["a_ingest"] = write_run(store, a, NEW, _chunks_of(add), "n")  # papers not in the server
        out["a_cache_sync"] = sync_client_cache(store, a, RunLog.open(store, a, write=True)).as_dict()
        store.close()
        pid = server.proc.pid  # type: ignore[union-attr]
        served = _cpu_of(pid)
        out["c_sync_in_process"] = _sync_alone(a.model_copy(update={"data_dir": work / "c"}))
        out["c_sync_in_process"]["server_cpu_seconds"] = round(_cpu_of(pid) - served, 2)
        out["b_after_a"] = search(work / "b", server.url, profile)
        out["a_search"] = search(work / "a", server.url)
        out["same_ranking"] = out["b_after_a"]["ranking"] == out["a_search"]["ranking"]
        out["floor_after"] = search(work / "b", server.url)
    for key in ("floor", "b_after_a", "a_search", "floor_after"):
        out[key].pop("ranking")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000, help="chunks in the server before A's ingest")
    parser.add_argument("--add", type=int, default=1000, help="papers client A adds")
    parser.add_argument("--dir", type=Path, required=True, help="working folder; its base/ is reused if built")
    parser.add_argument("--rounds", type=int, default=1, help="rounds on fresh copies of the base (0: build it only)")
    parser.add_argument("--corpus", type=Path, default=U.LARGE_CORPUS, help="abstracts the sentences come from")
    parser.add_argument("--profile", type=Path, help="write cProfile stats of B's search after A's ingest here")
    args = parser.parse_args()
    U.LARGE_CORPUS = args.corpus  # read by million.papers
    U.isolate_env()
    base = args.dir / "base"
    if (base / "base.json").is_file() and json.loads((base / "base.json").read_text())["chunks"] == args.chunks:
        built = {**json.loads((base / "base.json").read_text()), "reused": True}
    else:
        shutil.rmtree(base, ignore_errors=True)
        built = build_base(base, args.chunks)
    rounds = []
    for i in range(args.rounds):
        rounds.append(measure(base, args.dir / "run", args.add, args.profile))
        print(json.dumps({"round": i + 1, "load_average": os.getloadavg(), **rounds[-1]}), flush=True)
    shutil.rmtree(args.dir / "run", ignore_errors=True)
    if not rounds:  # --rounds 0: the base only
        print(json.dumps({"base": built}, indent=2))
        return

    def med(key: str, field: str = "seconds") -> float:
        return round(statistics.median(r[key][field] for r in rounds), 2)

    def floor(field: str) -> float:  # before A's ingest and after B's catch-up: both with nothing to sync
        return round(statistics.median(r[k][field] for r in rounds for k in ("floor", "floor_after")), 2)

    summary = {
        "base": built,
        "add_papers": args.add,
        "rounds": args.rounds,
        "b_first_search_after_a_s": med("b_after_a"),
        "b_first_search_after_a_cpu_s": med("b_after_a", "cpu_seconds"),
        "catch_up_alone_s": med("c_sync_in_process"),
        "catch_up_alone_cpu_s": med("c_sync_in_process", "cpu_seconds"),
        "catch_up_alone_server_cpu_s": med("c_sync_in_process", "server_cpu_seconds"),
        "floor_s": round(statistics.median(r[k]["seconds"] for r in rounds for k in ("floor", "floor_after")), 2),
        "floor_cpu_s": round(
            statistics.median(r[k]["cpu_seconds"] for r in rounds for k in ("floor", "floor_after")), 2
        ),
        "same_ranking": all(r["same_ranking"] for r in rounds),
        "load_average": os.getloadavg(),
    }
    print(json.dumps(summary, indent=2))


def _sync_alone(settings: Any) -> dict[str, Any]:  # noqa: ANN401 - Settings
    """A client's catch-up with the server's runs alone: its keyword cache loaded (and synced) in this process."""
    from rag_assistant.index.reader import IndexReader

    reader = IndexReader(settings)
    cpu = time.process_time()  # this process's share (the server's work is not in it), which load inflates less
    seconds, _ = U.timed(lambda: reader.keyword)
    report = reader.sync_report.as_dict() if reader.sync_report else None
    return {"seconds": round(seconds, 2), "cpu_seconds": round(time.process_time() - cpu, 2), "last_sync": report}


def _cpu_of(pid: int) -> float:
    """User+sys CPU seconds of a running process so far (Linux: /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
