"""Chroma storage per chunk, and what each part of it costs (prints JSON; not a test). Reads the SQLite file's
`dbstat` (bytes per table and index, free pages apart) and the HNSW files of every collection.

    python benchmarks/storage.py --data-dir /tmp/conf-copy              # an index as it is
    python benchmarks/storage.py --data-dir /tmp/conf-copy --vacuum     # its SQLite file after `VACUUM INTO`
    python benchmarks/storage.py --synthetic 100000 --dir /tmp/st-100k  # synthetic papers, written as ingest does

Synthetic papers are benchmarks/million.py's (1-2 chunks of ICML 2025 sentences, vectors around 2,000 centres),
each with the authors and track of a random ICML paper and a year, written through the store as ingest writes
them (`paper_to_metadata`, `StoreWriter.add`, then `list_papers`). `--checkout DIR` runs another checkout's
rag_assistant (e.g. `git worktree add /tmp/base 6ab1245`) on the same papers."""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "tests")]

GROUPS = {  # SQLite object -> the part of the store it is
    "embedding_fulltext_search": "documents: full-text index (FTS5 trigram)",
    "embedding_metadata_string_value": "metadata: index on string values",
    "embedding_metadata_int_value": "metadata: index on numbers",
    "embedding_metadata_float_value": "metadata: index on numbers",
    "sqlite_autoindex_embedding_metadata_1": "metadata: index on (record, key)",
    "embedding_metadata_array": "metadata: lists (rows and indexes)",
    "embedding_metadata": "metadata rows (documents included, as chroma:document)",
    "embeddings_queue": "write-ahead log of vectors",
    "embeddings": "records (ids)",
    "sqlite_autoindex_embeddings_1": "records (ids)",
}


def breakdown(chroma_dir: Path, chunks: int) -> dict[str, Any]:
    """Bytes per chunk of each part, the HNSW files per collection, free pages and the total on disk."""
    db = sqlite3.connect(f"file:{chroma_dir / 'chroma.sqlite3'}?mode=ro", uri=True)
    parts: dict[str, int] = {}
    for name, size in db.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
        group = next((g for prefix, g in GROUPS.items() if name.startswith(prefix)), "sqlite: other tables")
        parts[group] = parts.get(group, 0) + int(size)
    page = db.execute("PRAGMA page_size").fetchone()[0]
    parts["sqlite: free pages"] = db.execute("PRAGMA freelist_count").fetchone()[0] * page
    names = dict(db.execute("SELECT s.id, c.name FROM segments s JOIN collections c ON s.collection = c.id"))
    for d in sorted(p for p in chroma_dir.iterdir() if p.is_dir()):
        size = sum(f.stat().st_size for f in d.iterdir())
        parts[f"HNSW files: {names.get(d.name, d.name)}"] = size
    total = sum(f.stat().st_size for f in chroma_dir.rglob("*") if f.is_file())
    per = {k: round(v / chunks) for k, v in sorted(parts.items(), key=lambda kv: -kv[1])}
    used = total - parts["sqlite: free pages"]
    return {
        "chunks": chunks,
        "disk_mb": round(total / 1e6, 1),
        "bytes_per_chunk": round(total / chunks),
        "bytes_per_chunk_without_free_pages": round(used / chunks),
        "per_chunk": per,
    }


def measure(data_dir: Path, vacuum: bool = False) -> dict[str, Any]:
    """The breakdown of the index in `data_dir`; with `vacuum`, of a copy whose SQLite file was vacuumed
    (an upgrade in place leaves the pages it freed to later writes)."""
    import shutil
    import tempfile

    from rag_assistant.config import Settings
    from rag_assistant.index.store import open_store

    settings = Settings(data_dir=data_dir)
    count = open_store(settings, write=False).count()
    if not vacuum:
        return breakdown(settings.chroma_dir, count)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "chroma"
        shutil.copytree(settings.chroma_dir, copy, ignore=shutil.ignore_patterns("chroma.sqlite3*"))
        with sqlite3.connect(f"file:{settings.chroma_dir / 'chroma.sqlite3'}?mode=ro", uri=True) as db:
            db.execute("VACUUM INTO ?", (str(copy / "chroma.sqlite3"),))
        return {"vacuumed": True, **breakdown(copy, count)}


def write_synthetic(root: Path, chunks: int) -> dict[str, Any]:
    """The synthetic papers written as ingest writes them (skipped when `root` holds them already)."""
    import time
    import uuid

    import million as M

    from rag_assistant.config import Settings
    from rag_assistant.corpus.models import Paper
    from rag_assistant.index.ingest import EMBED_BATCH
    from rag_assistant.index.state import model_signature
    from rag_assistant.index.store import RUN_KEY, StoredChunk, open_store, paper_to_metadata

    settings = Settings(data_dir=root / "data")
    store = open_store(settings)
    if store.count() >= chunks:
        return {"built": False}
    fields = M._fields()
    started = time.perf_counter()
    run = uuid.uuid4().hex  # an ingest run's id, as ingest makes it (its length is part of every chunk's cost)
    batch: list[tuple[StoredChunk, int]] = []
    whole: list[tuple[Paper, int]] = []

    def flush() -> None:
        store.add([c for c, _ in batch], M.vectors([k for _, k in batch]))
        store.list_papers(whole)
        batch.clear()
        whole.clear()

    for pid, texts, cluster in M.papers(0, chunks):
        authors, topic = random.Random(pid).choice(fields)
        meta = {"authors": authors, "topic": topic, "year": 2015 + int(pid[1:]) % 11}
        paper = Paper(pid, " ".join(texts), "synthetic.jsonl", int(pid[1:]), None, meta)
        for j, text in enumerate(texts):
            chunk = StoredChunk(f"{pid}#{j}", pid, text, {**paper_to_metadata(paper, j, len(texts)), RUN_KEY: run})
            batch.append((chunk, cluster))
        whole.append((paper, len(texts)))
        if len(batch) >= EMBED_BATCH:  # ingest's step: what Chroma's log holds between writes depends on it
            flush()
    if batch:
        flush()
    store.set_info({"embedding_model": model_signature(settings), "revision": "storage"})
    return {"built": True, "load_s": round(time.perf_counter() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, help="measure this index")
    parser.add_argument("--synthetic", type=int, help="write this many synthetic chunks into --dir, then measure")
    parser.add_argument("--dir", type=Path)
    parser.add_argument("--vacuum", action="store_true", help="measure a vacuumed copy of the SQLite file")
    parser.add_argument("--checkout", type=Path, help="another checkout's rag_assistant")
    args = parser.parse_args()
    if args.checkout:
        env = {**os.environ, "PYTHONPATH": str(args.checkout.resolve())}
        rest = [a for a in sys.argv[1:] if a not in ("--checkout", str(args.checkout))]
        raise SystemExit(subprocess.call([sys.executable, __file__, *rest], env=env))
    out: dict[str, Any] = {}
    if args.synthetic:
        out.update(write_synthetic(args.dir, args.synthetic))
        args.data_dir = args.dir / "data"
    out.update(measure(args.data_dir, args.vacuum))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
