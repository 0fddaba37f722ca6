"""Check a conference-scale question set against the corpus, print its composition, optionally write one split.

    python eval/check_dataset.py eval/conference.jsonl
    python eval/check_dataset.py eval/conference.jsonl --split dev --out /tmp/conference-dev.jsonl

Checks: the file loads as an eval dataset; every gold id is a paper of papers.jsonl or of the bundled corpus;
no gold list names two ids of one abstract (the scoring would count them as two papers, see eval/README.md);
every question has exactly one kind tag (single/multi/unanswerable) and one split tag (dev/heldout), and its
gold list fits its kind. Exit code 1 if any check fails.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

from rag_assistant.corpus.loader import bundled_corpus_path, load_corpus
from rag_assistant.evaluate.dataset import load_dataset

KINDS = ("single", "multi", "unanswerable")
SPLITS = ("dev", "heldout")
DEFAULT_PAPERS = Path(__file__).resolve().parents[2] / "shared/corpus/icml2025_full/papers.jsonl"


def abstract_key(text: str) -> str:
    return re.sub(r"\s+", "", text).lower()


def corpus_keys(papers: Path) -> dict[str, str]:
    """Paper id -> whitespace- and case-insensitive abstract key, for papers.jsonl and the bundled corpus."""
    keys = {p.paper_id: abstract_key(p.text) for p in load_corpus([bundled_corpus_path()]).papers}
    for line in papers.read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            keys[record["id"]] = abstract_key(record["abstract"])
    return keys


def check(path: Path, papers: Path) -> list[str]:
    items = load_dataset(path)
    keys = corpus_keys(papers)
    problems: list[str] = []
    counts: Counter[tuple[str, str, str]] = Counter()
    for item in items:
        kinds = [t for t in item.tags if t in KINDS]
        splits = [t for t in item.tags if t in SPLITS]
        if len(kinds) != 1 or len(splits) != 1:
            problems.append(f"{item.id}: needs one kind tag {KINDS} and one split tag {SPLITS}")
            continue
        kind, split = kinds[0], splits[0]
        size = len(item.gold_papers)
        if size != {"single": 1, "unanswerable": 0}.get(kind, size) or (kind == "multi" and size < 2):
            problems.append(f"{item.id}: {size} gold papers for a {kind} question")
        missing = [g for g in item.gold_papers if g not in keys]
        problems += [f"{item.id}: gold id {g} is not in the corpus" for g in missing]
        abstracts = [keys[g] for g in item.gold_papers if g in keys]
        if len(set(abstracts)) < len(abstracts):
            problems.append(f"{item.id}: two gold ids name the same abstract")
        style = next((t for t in item.tags if t not in KINDS + SPLITS + ("seed",)), "-")
        counts[(kind, style, split)] += 1
    print(f"{path}: {len(items)} questions")
    for kind in KINDS:
        rows = {k: v for k, v in counts.items() if k[0] == kind}
        total = Counter(k[2] for k in rows for _ in range(rows[k]))
        print(f"  {kind}: {sum(rows.values())} (dev {total['dev']}, heldout {total['heldout']})")
        for style in sorted({k[1] for k in rows}):
            dev, held = rows.get((kind, style, "dev"), 0), rows.get((kind, style, "heldout"), 0)
            print(f"    {style}: {dev + held} (dev {dev}, heldout {held})")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--papers", type=Path, default=DEFAULT_PAPERS, help="the full conference papers.jsonl")
    parser.add_argument("--split", choices=SPLITS, help="write only the questions of this split to --out")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    problems = check(args.dataset, args.papers)
    for problem in problems:
        print(f"PROBLEM {problem}", file=sys.stderr)
    if args.split and args.out:
        lines = [
            line
            for line in args.dataset.read_text(encoding="utf-8").splitlines()
            if line.strip() and args.split in json.loads(line).get("tags", [])
        ]
        args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"wrote {len(lines)} {args.split} questions to {args.out}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
