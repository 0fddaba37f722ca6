"""Compare retrieval settings side by side on labelled questions: BM25 alone, dense alone, the hybrid.

    python benchmarks/retrieval_sweep.py --data-dir DIR eval/conference.jsonl [--tag dev] [--set NAME ...]

DIR must hold an ingested index (e.g. the bundled 38 plus the full ICML 2025 set). Each setting ranks every
question with the retrieval-only evaluation (`rag-assistant eval --retrieval-only`: the same ranking, the same
ranx metrics and paper matching as a full eval) and prints recall@5, MRR and nDCG@10 over all answerable
questions and per tag (`--tags` picks which), plus the warm search p50. One model and one index serve every
setting. A dataset may also be in the retrieval-test format (`query`, `paper_id`). Writes nothing."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from rag_assistant.config import Settings
from rag_assistant.evaluate.dataset import load_dataset
from rag_assistant.evaluate.report import summarize
from rag_assistant.evaluate.retrieval_run import run_retrieval, select_tags
from rag_assistant.retrieve import Retriever

# name -> settings overrides; "hybrid before" is the default before issue 10
SETTINGS: dict[str, dict[str, Any]] = {
    "bm25 only": {"fusion": "convex", "dense_weight": 0.0, "fuse_per": "chunk", "feedback_papers": 0},
    "dense only": {"fusion": "convex", "dense_weight": 1.0, "fuse_per": "chunk", "feedback_papers": 0},
    "rrf k=60": {"fusion": "rrf", "feedback_papers": 0},
    "hybrid before": {"fusion": "convex", "dense_weight": 0.6, "fuse_per": "chunk", "feedback_papers": 0},
    "hybrid (default)": {},
    "per paper, no feedback": {"fuse_per": "paper", "feedback_papers": 0},
    "feedback, per chunk": {"fuse_per": "chunk"},
}
METRICS = ("recall@5", "mrr", "ndcg@10")


def load_items(path: Path) -> list[Any]:
    """An eval dataset, or retrieval test queries ({query, paper_id}) converted to one."""
    first = next(line for line in path.open() if line.strip())
    if "query" not in json.loads(first):
        return load_dataset(path)
    rows = [json.loads(line) for line in path.open() if line.strip()]
    converted = [{"id": f"r{i}", "question": r["query"], "gold_papers": [r["paper_id"]]} for i, r in enumerate(rows)]
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in converted))
    return load_dataset(Path(fh.name))


def parse_overrides(spec: str) -> dict[str, Any]:
    """`fuse_per=paper,feedback_papers=3`: a setting not named in SETTINGS."""
    out: dict[str, Any] = {}
    for pair in spec.split(","):
        key, _, value = pair.partition("=")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value.strip()
    return out


def measure(base: Retriever, overrides: dict[str, Any], items: list[Any], dataset: Path) -> dict[str, Any]:
    settings = base.settings.model_copy(update=overrides)
    retriever = Retriever(settings, reader=base.reader, embedder=base.embedder)  # one loaded BM25 index for all
    run = run_retrieval(items, settings, k=5, retriever=retriever)
    return summarize(run, dataset)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("datasets", nargs="+", type=Path)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--tag", action="append", default=[], help="only questions with this tag (as eval --tag)")
    parser.add_argument("--tags", default="dev,heldout,single,multi", help="tags to break the numbers down by")
    parser.add_argument("--set", action="append", default=[], help="only these settings: a name above or KEY=VALUE,...")
    args = parser.parse_args()
    base = Retriever(Settings(data_dir=args.data_dir))
    chosen = {name: SETTINGS.get(name) or parse_overrides(name) for name in args.set} if args.set else SETTINGS
    for path in args.datasets:
        items = select_tags(load_items(path), args.tag)
        groups = ["all"] + [t for t in args.tags.split(",") if any(t in i.tags for i in items)]
        print(f"\n{path.name}: {len(items)} questions  (recall@5 / MRR / nDCG@10)")
        width = max(map(len, chosen)) + 2
        print(f"{'setting':<{width}}" + "".join(f"{g:>25}" for g in groups) + f"{'search p50':>12}")
        for name, overrides in chosen.items():
            summary = measure(base, overrides, items, path)
            cells = []
            for group in groups:
                values = summary["overall"] if group == "all" else summary["by_tag"][group]["metrics"]
                n = summary["n"].get("mrr", 0) if group == "all" else summary["by_tag"][group]["n"]
                cells.append("/".join(f"{values.get(x) or 0:.3f}" for x in METRICS) + f" ({n})")
            p50 = summary["run"]["search_p50_s"] * 1000
            print(f"{name:<{width}}" + "".join(f"{c:>25}" for c in cells) + f"{p50:>9.0f} ms", flush=True)


if __name__ == "__main__":
    main()
