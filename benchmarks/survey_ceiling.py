"""How far can survey answers and near-miss refusals go on the scores the offline stack has? Bounds, not tuning:

- survey pool: the recall of Retriever.survey's candidates at depth 20, 50 and all (survey_candidates);
- oracle cut-off: for each survey question, the largest cited recall of any prefix of a ranking whose precision is
  at least --min-precision (borderline papers counted neither way), the prefix chosen with the gold labels in
  hand. No cut-off rule, calibrated or not, can beat it on that ranking. Shown for the committed match model's
  order (what the answer lists by) and for the fused retrieval order;
- near misses: the share of near-topic questions refused (abstained or no top-k paper reaching the cut) against
  the share of answerable ones refused, for each near_miss_threshold.

Reads the candidates and features as eval/fit_match.py computes them (one pass; --cache keeps them).

    python benchmarks/survey_ceiling.py --data-dir CONF [--split dev,heldout] [--cache FILE] [--min-precision 0.8]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))
import fit_match  # noqa: E402 - the judged sets and their features, as the models were fitted on them
from survey_rankings import recall  # noqa: E402


def best_recall(ids: list[list[str]], order: list[int], gold: set[str], border: set[str], floor: float) -> float:
    """The largest recall of a prefix of `order` whose precision is at least `floor`."""
    best, right, scored, found = 0.0, 0, 0, set()
    for i in order:
        names = set(ids[i])
        if names & border:
            continue
        scored += 1
        if names & gold:
            right += 1
            found |= names & gold
        if right / scored >= floor:
            best = max(best, len(found) / len(gold))
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--split", default="dev,heldout")
    ap.add_argument("--cache", type=Path)
    ap.add_argument("--min-precision", type=float, default=0.8)
    ap.add_argument("-k", type=int, default=5)
    args = ap.parse_args()

    from rag_assistant.answer.match import load_model
    from rag_assistant.answer.thresholds import calibrated
    from rag_assistant.config import load_settings

    items = fit_match.load(args.split)
    found = fit_match.candidates(args.data_dir, items, args.k, args.cache)
    survey, near = load_model("survey"), load_model("near_miss")
    surveys = [i for i in items if "survey" in i["tags"]]
    pool: dict[int | None, list[float]] = {20: [], 50: [], None: []}
    oracle: dict[str, list[float]] = {"match model order": [], "fused order": []}
    for item in surveys:
        f = found[item["id"]]["survey"]
        gold, border = set(item["gold_papers"]), set(item.get("borderline_papers", []))
        for cut in pool:
            pool[cut].append(recall(f["ids"], gold, cut or len(f["ids"])))
        by_model = list(np.argsort(-survey.probability(f["x"]), kind="stable"))
        for name, order in (("match model order", by_model), ("fused order", list(range(len(f["ids"]))))):
            oracle[name].append(best_recall(f["ids"], order, gold, border, args.min_precision))
    print(f"{args.split}: {len(surveys)} survey questions")
    print("  pool recall: " + ", ".join(f"@{c or 'all'} {np.mean(v):.3f}" for c, v in pool.items()))
    for name, values in oracle.items():
        print(f"  oracle cut-off, precision >= {args.min_precision}, {name}: cited recall {np.mean(values):.3f}")

    abstain = calibrated(load_settings(data_dir=args.data_dir)).abstain_threshold
    groups: dict[str, list[tuple[float, float]]] = {}
    for item in items:
        kind = fit_match.kind(item)
        if kind == "off-corpus":
            continue
        f = found[item["id"]]
        best = float(near.probability(f["top"]["x"]).max()) if len(f["top"]["x"]) else 0.0
        groups.setdefault("near-topic" if kind == "near-topic" else "answerable", []).append((f["relevance"], best))
    for cut in (0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7):
        shares = {g: np.mean([rel < abstain or best < cut for rel, best in v]) for g, v in groups.items()}
        shown = ", ".join(f"{g} refused {s:.3f} (n={len(groups[g])})" for g, s in shares.items())
        print(f"  near miss < {cut}: {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
