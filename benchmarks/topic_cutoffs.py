"""Topic-answer cut-offs of the extractive answerer: cited-paper precision and recall on topic (multi-paper)
questions for a grid of (paper score ratio, sentence floor). Duplicates of a cited paper count as it.

    python benchmarks/topic_cutoffs.py --data-dir DIR eval/conference.jsonl --tag dev
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import rag_assistant.answer.extractive as extractive
from rag_assistant.answer.chain import AnswerChain
from rag_assistant.config import load_settings
from rag_assistant.evaluate.dataset import load_dataset


def score(chain: AnswerChain, items: list) -> tuple[float, float]:
    precision = recall = 0.0
    for item in items:
        answer = chain.ask(item.question)
        same = {s.paper_id: {s.paper_id, *s.duplicates} for s in answer.sources}
        gold = set(item.gold_papers)
        hits = [c for c in answer.citations if same.get(c, {c}) & gold]
        precision += len(hits) / len(answer.citations) if answer.citations else 0.0
        recall += len({g for g in gold if any(g in same.get(c, {c}) for c in answer.citations)}) / len(gold)
    return precision / len(items), recall / len(items)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--tag", help="only questions with this tag (e.g. dev)")
    parser.add_argument("--ratios", default="0.8,0.7,0.6,0.5")
    parser.add_argument("--floors", default="0.75,0.6,0.5,0.4")
    args = parser.parse_args()
    chain = AnswerChain(load_settings(None, data_dir=args.data_dir), log=False)
    items = [i for i in load_dataset(args.dataset) if len(i.gold_papers) > 1 and (not args.tag or args.tag in i.tags)]
    print(f"{len(items)} topic questions; ratio floor -> precision recall F1")
    for ratio, floor in itertools.product(map(float, args.ratios.split(",")), map(float, args.floors.split(","))):
        extractive._TOPIC_SCORE_RATIO, extractive._TOPIC_SENTENCE_FLOOR = ratio, floor
        p, r = score(chain, items)
        print(f"{ratio:.2f} {floor:.2f} -> {p:.3f} {r:.3f} {2 * p * r / (p + r) if p + r else 0:.3f}")


if __name__ == "__main__":
    main()
