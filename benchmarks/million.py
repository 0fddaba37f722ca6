"""A million chunks: load, disk, search latency, memory and keyword-update cost at scale (prints numbers; not a test).

Synthetic but realistic: each paper is 1-2 chunks of 4-8 sentences drawn from the ICML 2025 abstracts (so BM25
statistics look like real abstracts), its vector a noisy copy of one of 2,000 cluster centres (384-d,
normalised: HNSW sees clusters, as with real embeddings). Everything goes through our own code paths: the
store's `add` in batches of 5,000, `KeywordIndex.build`, `IndexReader` and `Retriever.search` (with a fixed
vector per question instead of the embedder). Embedded Chroma, and a Chroma server this script starts.

    python benchmarks/million.py --chunks 100000 --dir /tmp/million-100k     # ~10 min on 2 cores
    python benchmarks/million.py --chunks 1000000 --dir /tmp/million         # build ~1-2 h, then reused
    python benchmarks/million.py --chunks 1000000 --dir /tmp/million --no-server
    python benchmarks/million.py --chunks 1000000 --dir /tmp/million-server --server-only
    python benchmarks/million.py --chunks 1000000 --dir /tmp/million-kw --keyword-only [--checkout DIR]

A built dataset directory is reused (delete it to rebuild). Each measurement runs in its own process so its
peak RSS (VmHWM) is its own. `--checkout DIR` runs the measurements with another checkout's rag_assistant (e.g.
`git worktree add /tmp/old 2bbe147`: the keyword index before tantivy), so both keyword backends are measured
by the same script on the same synthetic chunks; each paper carries the authors and track of a random ICML
paper and a year, which the tantivy index holds as fields (the older index ignores them)."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "tests")]
import _util as U  # noqa: E402

DIM, CENTRES, STEP = 384, 2000, 5000
UPDATE_PAPERS = 1000


@lru_cache(maxsize=1)
def _fields() -> list[tuple[list[str], str]]:
    """(authors, track) of every ICML 2025 paper: what the synthetic papers carry."""
    rows = [json.loads(line) for line in U.LARGE_CORPUS.read_text().splitlines() if line.strip()]
    return [(row.get("authors") or [], row.get("topic") or "") for row in rows]


def keyword_docs(items: Iterable[tuple[str, list[str], int]]) -> Iterator[Any]:
    """The chunks of these synthetic papers as the keyword index of this checkout takes them: KeywordDoc with
    the paper's authors, track and year, or (chunk_id, text) pairs for a checkout from before tantivy."""
    try:
        from rag_assistant.index.keyword import KeywordDoc
    except ImportError:
        KeywordDoc = None  # noqa: N806
    fields = _fields()
    for pid, texts, _ in items:
        i = int(re.search(r"\d+$", pid).group())  # type: ignore[union-attr]
        authors, track = fields[i % len(fields)]
        values = {"authors": authors, "topic": track, "year": 2020 + i % 6}
        for j, text in enumerate(texts):
            cid = f"{pid}#{j}"
            yield (cid, text) if KeywordDoc is None else KeywordDoc(cid, text, authors=tuple(authors), values=values)


def backend() -> str:
    import rag_assistant.index.keyword as keyword

    return "tantivy" if hasattr(keyword, "KeywordDoc") else "numpy segments"


def segments(directory: Path) -> int:
    meta = json.loads((directory / "meta.json").read_text())  # ours before tantivy, or tantivy's
    return len(meta["segments"])


@lru_cache(maxsize=1)
def _pool() -> list[str]:
    from rag_assistant.corpus import load_corpus
    from rag_assistant.text import split_sentences

    return [s for p in load_corpus([U.LARGE_CORPUS]).papers for s in split_sentences(p.text)]


def papers(start: int, chunks: int, prefix: str = "m") -> Iterator[tuple[str, list[str], int]]:
    """(paper id, its chunk texts, its cluster) from paper `start` on, until `chunks` chunks; deterministic."""
    pool, made, i = _pool(), 0, start
    while made < chunks:
        rng = random.Random(i)
        n = min(1 if rng.random() < 0.7 else 2, chunks - made)
        texts = [" ".join(rng.sample(pool, rng.randint(4, 8))) for _ in range(n)]
        yield f"{prefix}{i:07d}", texts, rng.randrange(CENTRES)
        made, i = made + n, i + 1


def vectors(clusters: list[int]) -> Any:  # noqa: ANN401 - numpy array
    import numpy as np

    centres = np.random.default_rng(0).standard_normal((CENTRES, DIM), dtype=np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    noise = np.random.default_rng(len(clusters) + clusters[0]).standard_normal((len(clusters), DIM), dtype=np.float32)
    out = centres[clusters] + 0.06 * noise  # cosine ~0.75 to its centre, like chunks of one topic
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def settings(root: Path, url: str | None = None) -> Any:  # noqa: ANN401 - Settings
    from rag_assistant.config import Settings

    return Settings(
        data_dir=root / "data", chroma_url=url
    )  # the server's files: root/server; both share the keyword index


def load_store(root: Path, chunks: int, url: str | None) -> dict[str, Any]:
    """The synthetic chunks into Chroma through StoreWriter.add, STEP at a time."""
    from rag_assistant.corpus.models import Paper
    from rag_assistant.index.state import model_signature
    from rag_assistant.index.store import StoredChunk, open_store, paper_to_metadata

    s = settings(root, url)
    store = open_store(s)
    batch: list[tuple[StoredChunk, int]] = []
    start = time.perf_counter()
    for pid, texts, cluster in papers(0, chunks):
        paper = Paper(pid, " ".join(texts), "synthetic.jsonl", int(pid[1:]))
        for j, text in enumerate(texts):
            batch.append((StoredChunk(f"{pid}#{j}", pid, text, paper_to_metadata(paper, j, len(texts))), cluster))
        if len(batch) >= STEP:
            store.add([c for c, _ in batch], vectors([k for _, k in batch]))
            batch = []
    if batch:
        store.add([c for c, _ in batch], vectors([k for _, k in batch]))
    store.set_info({"embedding_model": model_signature(s), "revision": "million"})
    return {"load_s": time.perf_counter() - start, "count": store.count(), "peak_rss_mb": U.peak_rss_mb()}


def build_keyword(root: Path, chunks: int) -> dict[str, Any]:
    from rag_assistant.index.keyword import KeywordIndex
    from rag_assistant.index.state import keyword_dir

    start = time.perf_counter()
    count = KeywordIndex(keyword_dir(settings(root))).build(keyword_docs(papers(0, chunks)), "million")
    seconds = time.perf_counter() - start
    return {"backend": backend(), "build_s": seconds, "count": count, "peak_rss_mb": U.peak_rss_mb()}


def _stats(times: list[float]) -> dict[str, float]:
    ms = [t * 1000 for t in times]
    return {"p50_ms": U.percentile(ms, 0.5), "p95_ms": U.percentile(ms, 0.95)}


def _timed_all(calls: list[Any]) -> dict[str, float]:
    for call in calls[:3]:  # warm-up
        call()
    return _stats([U.timed(call)[0] for call in calls[3:]])


class FixedEmbedder:
    """A question's vector without the model: a noisy copy of a cluster centre chosen by the question."""

    def embed(self, texts: list[str]) -> Any:  # noqa: ANN401 - numpy array
        return vectors([sum(map(ord, t)) % CENTRES for t in texts])

    embed_cached = embed

    def check_dimension(self, dim: int, index_dim: int | None) -> None:  # what Retriever.search asks of embedders
        assert index_dim in (None, dim), (dim, index_dim)


def search(root: Path, chunks: int, url: str | None) -> dict[str, Any]:
    from rag_assistant.index.reader import IndexReader
    from rag_assistant.retrieve import Retriever

    s = settings(root, url)
    reader = IndexReader(s)
    qs = U.queries(33)
    qv = vectors([random.Random(i).randrange(CENTRES) for i in range(len(qs))]).tolist()
    hidden = {f"m{i:07d}" for i in random.Random(1).sample(range(chunks // 2), 20)}
    out: dict[str, Any] = {"count": reader.count()}
    out["keyword_load_s"], _ = U.timed(lambda: reader.keyword)
    out["dense"] = _timed_all([lambda v=v: reader.query(v, 50) for v in qv])
    out["dense_exclude20"] = _timed_all([lambda v=v: reader.query(v, 50, hidden) for v in qv])
    out["keyword"] = _timed_all([lambda q=q: reader.keyword.query(q, 50) for q in qs])
    out["keyword_exclude20"] = _timed_all([lambda q=q: reader.keyword.query(q, 50, hidden) for q in qs])
    retriever = Retriever(s, reader=reader, embedder=FixedEmbedder())  # type: ignore[arg-type]
    out["hybrid_k5"] = _timed_all([lambda q=q: retriever.search(q, 5) for q in qs])
    out["peak_rss_mb"] = U.peak_rss_mb()
    return out


def keyword_search(root: Path, chunks: int) -> dict[str, Any]:
    """The keyword index alone (no store): cold open (this new process's open and first query), query latency,
    peak RSS, disk."""
    from rag_assistant.index.keyword import KeywordIndex
    from rag_assistant.index.state import keyword_dir

    qs = U.queries(33)
    hidden = {f"m{i:07d}" for i in random.Random(1).sample(range(chunks // 2), 20)}
    out: dict[str, Any] = {"backend": backend(), "disk_mb": du_mb(keyword_dir(settings(root)))}
    out["load_s"], index = U.timed(lambda: KeywordIndex(keyword_dir(settings(root))))
    out["first_query_s"], _ = U.timed(lambda: index.query(qs[0], 50))
    out["keyword"] = _timed_all([lambda q=q: index.query(q, 50) for q in qs])
    out["keyword_exclude20"] = _timed_all([lambda q=q: index.query(q, 50, hidden) for q in qs])
    if backend() == "tantivy":  # filters before ranking: one track; years 2023-2024
        from rag_assistant.index.keyword import FieldFilter

        track = [FieldFilter("topic", (_fields()[0][1],))]
        years = [FieldFilter("year", low=2023, high=2024)]
        out["keyword_track"] = _timed_all([lambda q=q: index.query(q, 50, where=track) for q in qs])
        out["keyword_years"] = _timed_all([lambda q=q: index.query(q, 50, where=years) for q in qs])
    out["peak_rss_mb"] = U.peak_rss_mb()
    return out


def keyword_update(root: Path, chunks: int) -> dict[str, Any]:
    """+1,000 papers (~1,300 chunks) on a copy of the keyword index, then the same with 200 chunks removed."""
    from rag_assistant.index.keyword import KeywordIndex
    from rag_assistant.index.state import keyword_dir

    copy = root / "keyword-copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(keyword_dir(settings(root)), copy)
    out: dict[str, Any] = {"backend": backend()}
    out["open_s"], index = U.timed(lambda: KeywordIndex(copy))
    for step, removed in enumerate((0, 200)):
        new = itertools.islice(papers(10**6 + step * UPDATE_PAPERS, 10**9, f"u{step}-"), UPDATE_PAPERS)
        added = list(keyword_docs(new))
        gone = [f"m{i:07d}#0" for i in random.Random(step).sample(range(chunks // 2), removed)]
        seconds, done = U.timed(lambda a=added, g=gone, r=f"u{step}": index.update(a, g, r))
        out[f"update_{len(added)}_added_{removed}_removed_s"] = seconds
        assert done is not False, "the update was refused"
    out["segments"] = segments(copy)
    out["peak_rss_mb"] = U.peak_rss_mb()
    shutil.rmtree(copy, ignore_errors=True)
    return out


def du_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20 if path.exists() else 0.0


def worker(args: argparse.Namespace) -> None:
    U.isolate_env()
    root, url = Path(args.dir), args.url
    jobs = {
        "load": load_store,
        "keyword": build_keyword,
        "search": search,
        "update": keyword_update,
        "kwsearch": keyword_search,
    }
    job = jobs[args.worker]
    result = job(root, args.chunks, url) if args.worker in ("load", "search") else job(root, args.chunks)
    print(json.dumps(result))


def run(args: argparse.Namespace, kind: str, url: str | None = None) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--worker", kind, "--dir", args.dir, "--chunks", str(args.chunks)]
    env = {**os.environ, "PYTHONPATH": args.checkout} if args.checkout else None  # its rag_assistant first
    done = subprocess.run([*cmd, *(["--url", url] if url else [])], capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"{kind} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{kind}{' (server)' if url else ''}: {json.dumps(result)}", flush=True)
    return result


def built(root: Path, name: str, args: argparse.Namespace, kind: str, url: str | None = None) -> dict[str, Any]:
    """Run a build step once per dataset directory; later runs reuse it (and its recorded numbers)."""
    marker = root / f"{name}.json"
    if marker.is_file() and json.loads(marker.read_text()).get("chunks") == args.chunks:
        return json.loads(marker.read_text())
    result = {**run(args, kind, url), "chunks": args.chunks}
    marker.write_text(json.dumps(result))
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chunks", type=int, default=100_000)
    p.add_argument("--dir", default="/tmp/million-100k", help="dataset directory, reused between runs")
    p.add_argument("--no-server", action="store_true", help="embedded Chroma only")
    p.add_argument("--keyword-only", action="store_true", help="the keyword index alone: no Chroma at all")
    p.add_argument("--server-only", action="store_true", help="a Chroma server only (no embedded Chroma)")
    p.add_argument("--checkout", help="another checkout to measure (e.g. the keyword index before tantivy)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    from chroma_server import ChromaServer  # tests/chroma_server.py

    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"chunks": args.chunks, "load_avg_start": U.environment()["load_avg_1m"]}
    report["keyword_build"] = built(root, "keyword-build", args, "keyword")
    if args.keyword_only:
        report["keyword_search"] = run(args, "kwsearch")
        report["keyword_update"] = run(args, "update")
        return print(json.dumps(report, indent=2))
    if not args.server_only:
        report["load_embedded"] = built(root, "load-embedded", args, "load")
        report["search_embedded"] = run(args, "search")
        report["keyword_update"] = run(args, "update")
    if not args.no_server:
        with ChromaServer(root / "server") as server:
            report["load_server"] = built(root, "load-server", args, "load", server.url)
            report["search_server"] = run(args, "search", server.url)
    parts = {"embedded chroma": "data/chroma", "keyword index": "data/keyword", "chroma server": "server"}
    report["disk_mb"] = {name: du_mb(root / path) for name, path in parts.items()}
    report["load_avg_end"] = U.environment()["load_avg_1m"]
    print(json.dumps(report, indent=2))
    (root / f"report-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
