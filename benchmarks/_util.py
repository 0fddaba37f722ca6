"""Helpers shared by the benchmark scripts: corpora, chunk texts, queries, timing, memory, output."""

from __future__ import annotations

import json
import os
import platform
import random
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# BENCH_LARGE_CORPUS: where the checkout has no ../shared beside it (a git worktree elsewhere)
LARGE_CORPUS = Path(
    os.environ.get("BENCH_LARGE_CORPUS") or REPO.parent / "shared" / "corpus" / "icml2025_full" / "papers.jsonl"
)
RESULTS = REPO / "benchmarks" / "results"
FALLBACK_QUERIES = [
    "fine-tuning safety of large language models",
    "attention mechanism for time series forecasting",
    "diffusion models for trajectory imputation",
    "post-training quantization of transformers",
    "graph neural networks with missing node features",
]


def isolate_env() -> None:
    """Offline, quiet, and no user config file or RAG_ASSISTANT_* variable leaking into the settings."""
    for key in [k for k in os.environ if k.startswith("RAG_ASSISTANT_")]:
        del os.environ[key]
    os.environ["RAG_ASSISTANT_CONFIG"] = str(Path(os.devnull))
    for key, value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("TOKENIZERS_PARALLELISM", "false")):
        os.environ[key] = value
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


def queries(n: int = 30) -> list[str]:
    """The questions of eval/dev.jsonl (varied, realistic), first n."""
    path = REPO / "eval" / "dev.jsonl"
    if not path.is_file():
        return (FALLBACK_QUERIES * n)[:n]
    found = [json.loads(line)["question"] for line in path.read_text().splitlines() if line.strip()]
    return found[:n]


def bundled_papers() -> list[Any]:
    from rag_assistant.corpus import bundled_corpus_path, load_corpus

    return load_corpus([bundled_corpus_path()]).papers


def synthetic_jsonl(target: Path, n: int, seed: int = 0) -> Path:
    """n abstracts made by reshuffling the sentences of the bundled ones (used when the full corpus is absent)."""
    from rag_assistant.text import split_sentences

    sentences = [s for p in bundled_papers() for s in split_sentences(p.text)]
    rng = random.Random(seed)
    with target.open("w") as out:
        for i in range(n):
            text = " ".join(rng.sample(sentences, k=min(len(sentences), rng.randint(5, 10))))
            out.write(json.dumps({"id": f"syn{i:06d}", "abstract": text}) + "\n")
    return target


def large_papers(limit: int, scratch: Path) -> tuple[list[Any], str]:
    """The first `limit` papers (0 = all) of the full ICML 2025 corpus, or a synthetic stand-in."""
    from rag_assistant.corpus import load_corpus

    if LARGE_CORPUS.is_file():
        papers, name = load_corpus([LARGE_CORPUS]).papers, f"icml2025_full ({LARGE_CORPUS.name})"
    else:
        scratch.mkdir(parents=True, exist_ok=True)
        path = synthetic_jsonl(scratch / "synthetic.jsonl", limit or 3000)
        papers, name = load_corpus([path]).papers, "synthetic (bundled sentences reshuffled)"
    return (papers[:limit] if limit else papers), name


def chunks_of(papers: list[Any], settings: Any) -> list[Any]:
    """Exactly the chunks ingest embeds for these papers."""
    from rag_assistant.index.chunking import chunk_paper, token_counter
    from rag_assistant.index.embedding import get_tokenizer

    count = token_counter(get_tokenizer(settings.embedding_model))
    return [
        c for p in papers for c in chunk_paper(p, count, settings.chunk_max_tokens, settings.chunk_overlap_sentences)
    ]


def chunk_texts(papers: list[Any], settings: Any) -> list[str]:
    return [c.text for c in chunks_of(papers, settings)]


def peak_rss_mb() -> float:
    """Peak resident set size of this process, in MiB.

    Linux keeps ru_maxrss across fork+exec, so a worker started by a big parent would report at least the
    parent's size; VmHWM (the high-water mark of this process' own memory map) does not carry over."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


@contextmanager
def timer() -> Iterator[dict[str, float]]:
    out: dict[str, float] = {}
    start = time.perf_counter()
    try:
        yield out
    finally:
        out["s"] = time.perf_counter() - start


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q
    lo, hi = int(pos), min(int(pos) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def environment() -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for name in (
        "rag-assistant",
        "torch",
        "sentence-transformers",
        "transformers",
        "onnxruntime",
        "onnx",
        "chromadb",
        "bm25s",
        "llama-index-core",
        "llama-index-embeddings-huggingface",
    ):
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = None
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_avg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "versions": versions,
    }


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    return str(value)


def print_table(title: str, rows: list[tuple[str, str, Any, str]]) -> None:
    """rows: (section, metric, value, note). rich when available, else aligned text."""
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(f"\n{title}")
        for section, metric, value, note in rows:
            print(f"{section:<10} {metric:<38} {fmt(value):>14}  {note}")
        return
    table = Table(title=title)
    for name, justify in (("section", "left"), ("metric", "left"), ("value", "right"), ("note", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for section, metric, value, note in rows:
        table.add_row(section, metric, fmt(value), note)
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    console.print(table)


def write_results(data: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(data, indent=2, default=str))
    return path
