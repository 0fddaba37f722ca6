"""Ranking recall of survey questions ("which papers ...?") for the baselines and for rag-assistant's survey
ranking: BM25 alone, dense alone, reciprocal rank fusion, the default hybrid (all over the same depth of
chunks), and the survey ranking (Retriever.survey's candidates ordered by the match model). Prints recall@5,
@20 and @50 (share of gold papers; borderline papers are not gold) per ranking.

    python benchmarks/survey_rankings.py --data-dir CONF eval/survey.jsonl [--tag dev] [--depth 300]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

CUTS = (5, 20, 50)


def recall(ranked: list[list[str]], gold: set[str], cut: int) -> float:
    found = {g for ids in ranked[:cut] for g in set(ids) & gold}
    return len(found) / len(gold)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset", type=Path)
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--tag", default=None)
    ap.add_argument("--depth", type=int, default=300)
    args = ap.parse_args()

    from rag_assistant.answer.analysis import analyse_papers, analyse_question
    from rag_assistant.answer.match import match
    from rag_assistant.config import load_settings
    from rag_assistant.retrieve import Retriever

    items = [json.loads(line) for line in args.dataset.read_text().splitlines() if line.strip()]
    items = [i for i in items if i["gold_papers"] and (not args.tag or args.tag in i.get("tags", []))]
    base = Retriever(load_settings(data_dir=args.data_dir))
    runs = {
        "BM25": dict(dense_weight=0.0, feedback_papers=0),
        "dense": dict(dense_weight=1.0, feedback_papers=0),
        "RRF": dict(fusion="rrf", feedback_papers=0),
        "hybrid (default)": {},
    }
    retrievers = {
        name: Retriever(load_settings(data_dir=args.data_dir, **kw), reader=base.reader, embedder=base.embedder)
        for name, kw in runs.items()
    }
    totals: dict[str, list[list[float]]] = {name: [] for name in [*runs, "survey ranking"]}
    n = max(CUTS)
    for item in items:
        gold = set(item["gold_papers"])
        for name, r in retrievers.items():
            ranked = [[s.paper_id, *s.duplicates] for s in r.search(item["question"], n, depth=args.depth)]
            totals[name].append([recall(ranked, gold, c) for c in CUTS])
        s = base.settings
        sources = base.survey(item["question"], s.survey_candidates, s.survey_depth)
        question = analyse_question(item["question"], base.embedder.embed_cached)
        views = analyse_papers(sources, base.sentence_vectors, base.embedder.embed_cached)
        p = match(question, views, base.idf)
        order = sorted(range(len(sources)), key=lambda i: -p[i])
        ranked = [[sources[i].paper_id, *sources[i].duplicates] for i in order]
        totals["survey ranking"].append([recall(ranked, gold, c) for c in CUTS])
    print(f"{args.dataset} ({args.tag or 'all'}): {len(items)} questions, depth {args.depth} chunks per retriever")
    print(f"{'ranking':<18}" + "".join(f"{'recall@' + str(c):>11}" for c in CUTS))
    for name, rows in totals.items():
        means = [sum(r[i] for r in rows) / len(rows) for i in range(len(CUTS))]
        print(f"{name:<18}" + "".join(f"{m:>11.3f}" for m in means))
    return 0


if __name__ == "__main__":
    sys.exit(main())
