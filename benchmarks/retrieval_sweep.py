"""Compare fusion settings (dense only, BM25 only, RRF, convex weights) on labelled questions.

    python benchmarks/retrieval_sweep.py --data-dir DIR eval/dev.jsonl tests/data/retrieval_queries.jsonl

DIR must hold an ingested index (e.g. the bundled corpus, or bundled + full ICML 2025 for distractors).
A gold id also counts when retrieval returns the same abstract under another id (overlapping corpora).
Prints recall@1/3/5 per setting and dataset; writes nothing."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rag_assistant.config import Settings
from rag_assistant.retrieve import Retriever

SETTINGS = [("dense only", "convex", 1.0), ("bm25 only", "convex", 0.0), ("rrf k=60", "rrf", 0.0)] + [
    (f"convex w={w}", "convex", w) for w in (0.4, 0.5, 0.6, 0.7, 0.8)
]


def load(path: Path) -> list[tuple[str, list[str]]]:
    rows = [json.loads(line) for line in path.open() if line.strip()]
    out = []
    for row in rows:
        gold = row.get("gold_papers") or ([row["paper_id"]] if "paper_id" in row else [])
        if gold:
            out.append((row.get("question") or row["query"], gold))
    return out


def recall(retriever: Retriever, data: list[tuple[str, list[str]]], cutoffs: tuple[int, ...]) -> list[float]:
    totals = [0.0] * len(cutoffs)
    for question, gold in data:
        groups = [{s.paper_id, *s.duplicates} for s in retriever.search(question, max(cutoffs))]
        for i, n in enumerate(cutoffs):
            found = set().union(*groups[:n]) if groups else set()
            totals[i] += len(found & set(gold)) / min(n, len(gold))
    return [round(t / len(data), 3) for t in totals]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("datasets", nargs="+", type=Path)
    parser.add_argument("--data-dir", type=Path, required=True)
    args = parser.parse_args()
    data = {p.name: load(p) for p in args.datasets}
    cutoffs = (1, 3, 5)
    print(f"{'setting':<14}" + "".join(f"{name + ' R@' + '/'.join(map(str, cutoffs)):>34}" for name in data))
    for label, fusion, weight in SETTINGS:
        retriever = Retriever(Settings(data_dir=args.data_dir, fusion=fusion, dense_weight=weight))
        cells = ["/".join(f"{v:.3f}" for v in recall(retriever, rows, cutoffs)) for rows in data.values()]
        print(f"{label:<14}" + "".join(f"{c:>34}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
