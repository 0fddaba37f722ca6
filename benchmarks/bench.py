"""rag-assistant benchmarks: ingest throughput (vs raw encode and plain LlamaIndex), re-ingest, warm search
latency and peak RSS at two index sizes, and cold start of the CLI. Prints a table and writes
benchmarks/results/<timestamp>.json.

    python benchmarks/bench.py                          # everything (~10 min on 2 cores)
    python benchmarks/bench.py --only cold              # one section: ingest, search or cold
    python benchmarks/bench.py --large-limit 200 --search-sizes 3000,100000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _util as U  # noqa: E402

SECTIONS = ("ingest", "search", "cold")
REAL_SEARCH_MAX = 20_000  # up to this many chunks the search index is really embedded; above, synthetic
COLD_QUERY = "How can post-training quantization account for errors accumulated in earlier layers?"
Row = tuple[str, str, Any, str]


def settings_for(data_dir: Path, backend: str) -> Any:
    from rag_assistant.config import Settings

    return Settings(data_dir=data_dir, embedding_backend=backend)


# -- ingest --------------------------------------------------------------------------------------------------


def llamaindex_ingest(
    papers: list[Any], data_dir: Path, embed_model: Any, chunks: list[Any] | None = None
) -> tuple[float, int]:
    """The plain LlamaIndex way: seconds and nodes stored. Without `chunks`, `from_documents` with its
    default transformations; with them, our chunks as nodes, so both sides embed exactly the same texts."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings
    from llama_index.core import Document, StorageContext, VectorStoreIndex
    from llama_index.core.schema import TextNode
    from llama_index.vector_stores.chroma import ChromaVectorStore

    client = chromadb.PersistentClient(path=str(data_dir), settings=ChromaSettings(anonymized_telemetry=False))
    collection = client.get_or_create_collection("llamaindex")

    def run() -> Any:
        storage = StorageContext.from_defaults(vector_store=ChromaVectorStore(chroma_collection=collection))
        if chunks is None:
            docs = [Document(text=p.text, id_=p.paper_id) for p in papers]
            return VectorStoreIndex.from_documents(docs, storage_context=storage, embed_model=embed_model)
        nodes = [TextNode(text=c.text, id_=c.chunk_id, metadata={"paper_id": c.paper_id}) for c in chunks]
        return VectorStoreIndex(nodes, storage_context=storage, embed_model=embed_model)

    seconds, _ = U.timed(run)
    return seconds, collection.count()


def warm_imports() -> float:
    """Import what an ingest imports, so one-time import costs (like the model load) are excluded from
    both our rates and LlamaIndex's."""
    import importlib

    def load() -> None:
        for name in ("chromadb", "bm25s", "Stemmer", "llama_index.core", "llama_index.vector_stores.chroma"):
            importlib.import_module(name)

    return U.timed(load)[0]


def bench_ingest(args: argparse.Namespace, work: Path) -> tuple[list[Row], dict[str, Any]]:
    from rag_assistant.index.embedding import bundled_model_path, get_embedder
    from rag_assistant.index.ingest import ingest_papers

    rows: list[Row] = []
    data: dict[str, Any] = {}
    probe = settings_for(work / "probe", args.backend)
    embedder = get_embedder(None, args.backend, probe.embed_batch_size)
    load_s, _ = U.timed(lambda: embedder.model)
    rows.append(("ingest", f"model load ({args.backend})", load_s, "s, excluded from the rates below"))
    rows.append(("ingest", "imports (chromadb, bm25s, llama_index)", warm_imports(), "s, excluded likewise"))
    embed_li = None
    if not args.skip_llamaindex:
        from llama_index.embeddings.huggingface import HuggingFaceEmbedding

        li_load, embed_li = U.timed(lambda: HuggingFaceEmbedding(model_name=str(bundled_model_path()), device="cpu"))
        rows.append(
            ("ingest", "LlamaIndex model load", li_load, f"s; its embed_batch_size={embed_li.embed_batch_size}")
        )

    large, large_name = U.large_papers(args.large_limit, work / "synthetic")
    for name, papers, label in (("bundled", U.bundled_papers(), "bundled"), ("large", large, large_name)):
        settings = settings_for(work / f"ingest-{name}", args.backend)
        seconds, report = U.timed(lambda p=papers, s=settings: ingest_papers(p, s))
        n_chunks = report.chunks_added
        texts = U.chunk_texts(papers, settings)
        raw_s, _ = U.timed(
            lambda t=texts, s=settings: embedder.model.encode(
                t, batch_size=s.embed_batch_size, normalize_embeddings=True, convert_to_numpy=True
            )
        )
        again_s, again = U.timed(lambda p=papers, s=settings: ingest_papers(p, s))
        entry = {
            "corpus": label,
            "papers": len(papers),
            "chunks": n_chunks,
            "ingest_s": seconds,
            "papers_per_s": len(papers) / seconds,
            "chunks_per_s": n_chunks / seconds,
            "raw_encode_s": raw_s,
            "raw_chunks_per_s": len(texts) / raw_s,
            "ours_over_raw": raw_s / seconds,
            "reingest_s": again_s,
            "reingest_unchanged": again.unchanged,
        }
        rows += [
            ("ingest", f"{name}: papers/s", entry["papers_per_s"], f"{len(papers)} papers, {label}"),
            ("ingest", f"{name}: chunks/s", entry["chunks_per_s"], f"{n_chunks} chunks in {seconds:.1f}s"),
            (
                "ingest",
                f"{name}: raw encode chunks/s",
                entry["raw_chunks_per_s"],
                "the shipped backend's encode alone, same texts",
            ),
            ("ingest", f"{name}: ours / raw", entry["ours_over_raw"], "throughput ratio (1 = no overhead)"),
            ("ingest", f"{name}: re-ingest unchanged", again_s, f"s; {again.unchanged} unchanged, {again.new} new"),
        ]
        if embed_li is not None:
            li_s, li_nodes = llamaindex_ingest(papers, work / f"llamaindex-{name}", embed_li)
            same_s, same_nodes = llamaindex_ingest(
                papers, work / f"llamaindex-same-{name}", embed_li, U.chunks_of(papers, settings)
            )
            entry |= {
                "llamaindex_s": li_s,
                "llamaindex_nodes": li_nodes,
                "ours_over_llamaindex": li_s / seconds,
                "llamaindex_same_chunks_s": same_s,
                "ours_over_llamaindex_same_chunks": same_s / seconds,
            }
            rows += [
                (
                    "ingest",
                    f"{name}: LlamaIndex papers/s",
                    len(papers) / li_s,
                    f"{li_nodes} nodes in {li_s:.1f}s; default splitter, model cuts at 256 tokens",
                ),
                ("ingest", f"{name}: ours / LlamaIndex", li_s / seconds, "papers/s ratio (>1 = ours faster)"),
                (
                    "ingest",
                    f"{name}: ours / LlamaIndex, same chunks",
                    same_s / seconds,
                    f"our {same_nodes} chunks as LlamaIndex nodes: same texts embedded ({same_s:.1f}s)",
                ),
            ]
        data[name] = entry
    return rows, data


# -- search (each size built and searched in its own subprocess, so peak RSS is separate) ----------------------


def worker_build(args: argparse.Namespace) -> dict[str, Any]:
    """Build an index of ~size chunks in args.data_dir: real ingest when small, synthetic vectors when large."""
    import numpy as np

    from rag_assistant.corpus.models import Paper
    from rag_assistant.index.ingest import ingest_papers, sync_keyword_index
    from rag_assistant.index.state import model_signature
    from rag_assistant.index.store import StoredChunk, open_store, paper_to_metadata
    from rag_assistant.text import split_sentences

    settings = settings_for(Path(args.data_dir), args.backend)
    papers, label = U.large_papers(0, Path(args.data_dir).parent / "synthetic")
    if args.size <= REAL_SEARCH_MAX:
        texts_per_paper = [len(U.chunk_texts([p], settings)) for p in papers]
        take, total = 0, 0
        while take < len(papers) and total < args.size:
            total += texts_per_paper[take]
            take += 1
        seconds, report = U.timed(lambda: ingest_papers(papers[:take], settings))
        return {
            "build_s": seconds,
            "chunks": report.chunks_added,
            "papers": take,
            "synthetic": False,
            "corpus": label,
            "build_peak_rss_mb": U.peak_rss_mb(),
        }

    def build() -> int:
        store = open_store(settings)
        rng, gen = random.Random(0), np.random.default_rng(0)
        pool = [s for p in papers for s in split_sentences(p.text)]
        step = 5000
        for start in range(0, args.size, step):
            batch = []
            for i in range(start, min(start + step, args.size)):
                text = " ".join(rng.sample(pool, rng.randint(4, 8)))
                paper = Paper(f"syn:{i}", text, "synthetic.jsonl", i)
                batch.append(StoredChunk(f"syn:{i}#0", paper.paper_id, text, paper_to_metadata(paper, 0, 1)))
            vectors = gen.standard_normal((len(batch), 384), dtype=np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            store.add(batch, vectors.tolist())
        store.set_info({"embedding_model": model_signature(settings), "revision": uuid.uuid4().hex})
        return store.count()

    seconds, count = U.timed(build)
    keyword_s, _ = U.timed(lambda: sync_keyword_index(open_store(settings), settings, force=True))
    return {
        "build_s": seconds + keyword_s,
        "chunks": count,
        "synthetic": True,
        "corpus": f"random unit vectors, texts from {label}",
        "build_peak_rss_mb": U.peak_rss_mb(),
        "keyword_rebuild_s": keyword_s,
        "keyword_update_s": keyword_update_seconds(settings, papers),
    }


def keyword_update_seconds(settings: Any, papers: list[Any]) -> float:
    """What a small ingest costs the keyword index: 200 chunks added and 50 removed, on a copy."""
    from rag_assistant.index.keyword import KeywordDoc, KeywordIndex
    from rag_assistant.index.state import keyword_dir

    copy = keyword_dir(settings).with_name("bench-copy")
    shutil.copytree(keyword_dir(settings), copy)
    index = KeywordIndex(copy)
    added = [KeywordDoc(f"new:{i}#0", papers[i % len(papers)].text) for i in range(200)]
    seconds, _ = U.timed(lambda: index.update(added, [f"syn:{i}#0" for i in range(50)], "bench"))
    shutil.rmtree(copy, ignore_errors=True)
    return seconds


def worker_search(args: argparse.Namespace) -> dict[str, Any]:
    from rag_assistant.retrieve import Retriever

    qs = U.queries(args.queries + 3)
    retriever = Retriever(settings_for(Path(args.data_dir), args.backend))
    first_s, _ = U.timed(lambda: retriever.search(qs[0], 5))  # loads the model and the keyword index
    for q in qs[1:3]:
        retriever.search(q, 5)
    times = [U.timed(lambda q=q: retriever.search(q, 5))[0] * 1000 for q in qs[3:]]
    return {
        "first_search_s": first_s,
        "queries": len(times),
        "p50_ms": U.percentile(times, 0.5),
        "p95_ms": U.percentile(times, 0.95),
        "peak_rss_mb": U.peak_rss_mb(),
    }


def run_worker(kind: str, args: argparse.Namespace, data_dir: Path, **extra: Any) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        kind,
        "--data-dir",
        str(data_dir),
        "--backend",
        args.backend,
        "--queries",
        str(args.queries),
    ] + [f"--{k.replace('_', '-')}={v}" for k, v in extra.items()]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
    if proc.returncode != 0:
        raise RuntimeError(f"worker {kind} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_search(args: argparse.Namespace, work: Path) -> tuple[list[Row], dict[str, Any]]:
    rows: list[Row] = []
    data: dict[str, Any] = {}
    for size in [int(s) for s in args.search_sizes.split(",") if s]:
        data_dir = work / f"search-{size}"
        built = run_worker("build", args, data_dir, size=size)
        searched = run_worker("search", args, data_dir)
        data[str(size)] = {**built, **searched}
        how = "SYNTHETIC chunks (random unit vectors via ChromaStore.add)" if built["synthetic"] else "real ingest"
        label = f"{built['chunks']:,} chunks"
        rows += [
            ("search", f"{label}: build", built["build_s"], f"s; {how}"),
        ]
        if "keyword_update_s" in built:
            rows += [
                ("search", f"{label}: keyword index full build", built["keyword_rebuild_s"], "s, reads texts back"),
                ("search", f"{label}: keyword index update", built["keyword_update_s"], "s, +200/-50 chunks"),
            ]
        rows += [
            ("search", f"{label}: first search in process", searched["first_search_s"], "s, loads model + BM25"),
            ("search", f"{label}: warm p50 ms", searched["p50_ms"], f"{searched['queries']} queries, k=5"),
            ("search", f"{label}: warm p95 ms", searched["p95_ms"], ""),
            (
                "search",
                f"{label}: peak RSS MB (search)",
                searched["peak_rss_mb"],
                "VmHWM of the search process (own subprocess)",
            ),
            ("search", f"{label}: peak RSS MB (build)", built["build_peak_rss_mb"], ""),
        ]
        shutil.rmtree(data_dir, ignore_errors=True)
    return rows, data


# -- cold start -----------------------------------------------------------------------------------------------


def cli() -> list[str]:
    exe = Path(sys.executable).parent / "rag-assistant"
    return [str(exe)] if exe.exists() else [shutil.which("rag-assistant") or "rag-assistant"]


def bench_cold(args: argparse.Namespace, work: Path) -> tuple[list[Row], dict[str, Any]]:
    def wall(cmd: list[str]) -> float:
        seconds, proc = U.timed(lambda: subprocess.run(cmd, capture_output=True, text=True, env=env))
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr[-2000:]}")
        return seconds

    env = {**os.environ, "RAG_ASSISTANT_EMBEDDING_BACKEND": args.backend}
    data_dir = work / "cold"
    helps = [wall([*cli(), "--help"]) for _ in range(5)]
    ingest_s = wall([*cli(), "--data-dir", str(data_dir), "ingest"])
    searches = [wall([*cli(), "--data-dir", str(data_dir), "search", COLD_QUERY]) for _ in range(3)]
    data = {"help_s": helps, "bundled_ingest_cli_s": ingest_s, "search_s": searches}
    rows: list[Row] = [
        ("cold", "rag-assistant --help (median of 5)", U.median(helps), f"s; min {min(helps):.2f}"),
        ("cold", "rag-assistant ingest (bundled, new dir)", ingest_s, "s, whole process"),
        ("cold", "first rag-assistant search", searches[0], "s, new process, bundled index"),
        ("cold", "rag-assistant search (median of 3)", U.median(searches), "s, new processes, OS cache warm"),
    ]
    return rows, data


# -- main -----------------------------------------------------------------------------------------------------


def parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma list of {', '.join(SECTIONS)}")
    ap.add_argument("--large-limit", type=int, default=1000, help="papers of the large corpus to ingest (0 = all)")
    ap.add_argument("--search-sizes", default="3000,100000", help="index sizes (chunks) for the search latency")
    ap.add_argument("--queries", type=int, default=30, help="timed search queries (after 3 warm-ups)")
    ap.add_argument(
        "--backend", default="onnx", choices=["torch", "onnx", "onnx-int8"], help="embedding backend (default: shipped)"
    )
    ap.add_argument("--skip-llamaindex", action="store_true", help="leave out the LlamaIndex comparison")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--worker", choices=["build", "search"], help=argparse.SUPPRESS)
    ap.add_argument("--data-dir", help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, default=0, help=argparse.SUPPRESS)
    return ap.parse_args()


def main() -> None:
    args = parse()
    U.isolate_env()
    if args.worker:
        result = (worker_build if args.worker == "build" else worker_search)(args)
        print(json.dumps(result))
        return
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(only) - set(SECTIONS)
    if unknown:
        sys.exit(f"unknown section(s): {', '.join(sorted(unknown))}; use {', '.join(SECTIONS)}")
    work = Path(tempfile.mkdtemp(prefix="rag-bench-"))
    env = U.environment()
    rows: list[Row] = []
    results: dict[str, Any] = {"env": env, "args": vars(args), "scratch": str(work), "sections": {}}
    try:
        for name, fn in (("ingest", bench_ingest), ("search", bench_search), ("cold", bench_cold)):
            if name in only:
                print(f"running {name} ...", file=sys.stderr, flush=True)
                section_s, (section_rows, data) = U.timed(lambda f=fn: f(args, work))
                rows += section_rows
                results["sections"][name] = {**data, "section_s": section_s}
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    results["rows"] = [list(r) for r in rows]
    title = f"rag-assistant benchmarks ({env['cpus']} CPUs, load {env['load_avg_1m']:.1f}, backend {args.backend})"
    U.print_table(title, rows)
    print(f"results: {U.write_results(results)}")


if __name__ == "__main__":
    main()
