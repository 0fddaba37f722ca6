"""Filters on the conference index (issue 20; prints numbers, not a test). The known-item questions of
eval/conference.jsonl (one gold paper with a track) asked filtered to the gold paper's track: recall@5 filtered
and unfiltered, and how many results fall outside the subset; then eval/authors.jsonl asked with an explicit
--author filter: precision and recall@10.

    python benchmarks/filtered_check.py DATA_DIR     # an index of the conference file ingested with fields
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rag_assistant.config import Settings
from rag_assistant.corpus.fields import name_key, normalise
from rag_assistant.index.filters import matches, parse_filters
from rag_assistant.retrieve import Retriever

EVAL = Path(__file__).resolve().parents[1] / "eval"


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main() -> None:
    r = Retriever(Settings(data_dir=Path(sys.argv[1])))
    papers = {p.paper_id: p for p in r.reader.stored_papers()}
    topic = {pid: normalise(p.metadata).get("topic") for pid, p in papers.items()}
    known = [q for q in _rows(EVAL / "conference.jsonl") if len(q.get("gold_papers") or []) == 1]
    known = [q for q in known if topic.get(q["gold_papers"][0])]
    hit_f = hit_u = inside = total = 0
    for q in known:
        gold = q["gold_papers"][0]
        r.restrict([])
        hit_u += gold in [s.paper_id for s in r.search(q["question"], 5)]
        resolved = r.restrict(parse_filters(where=[f"topic={topic[gold]}"]))
        found = r.search(q["question"], 5)
        hit_f += gold in [s.paper_id for s in found]
        inside += sum(matches(s.paper, resolved) for s in found)
        total += len(found)
    n = len(known)
    print(f"track-filtered known items: {n} questions; recall@5 filtered {hit_f / n:.3f}, unfiltered {hit_u / n:.3f}")
    print(f"  results inside the subset: {inside}/{total}")
    authors = _rows(EVAL / "authors.jsonl")
    right = shown = 0
    recall = 0.0
    for q in authors:
        gold = set(q["gold_papers"])
        names = normalise(papers[next(iter(gold))].metadata)["authors"]
        name = next(a for a in names if name_key(str(a)) in name_key(q["question"]))  # type: ignore[union-attr]
        r.restrict(parse_filters(authors=[str(name)]))
        got = [s.paper_id for s in r.search(q["question"], 10)]
        right, shown = right + sum(g in gold for g in got), shown + len(got)
        recall += len(gold & set(got)) / len(gold)
    print(f"--author on eval/authors.jsonl: precision {right}/{shown}, recall@10 {recall / len(authors):.3f}")


if __name__ == "__main__":
    main()
