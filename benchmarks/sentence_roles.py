"""Accuracy of the sentence roles (rag_assistant/answer/roles.py) against hand labels: overall, per role
(precision/recall), the confusion matrix, and how well `refers_back` finds the dangling sentences. Without
--data-dir it scores the cue-phrase rules; with it, the fitted classifier (role_model.json, eval/fit_roles.py)
the way answers use it, on the sentence vectors of that index (the conference index holds every labelled paper).

    python benchmarks/sentence_roles.py [FILE] [--split heldout2|dev2|dev|heldout|all] [--data-dir CONF]

FILE defaults to eval/sentences/roles2-adjudicated.jsonl (the second round: two readers, disagreements
adjudicated by a third, eval/sentences/adjudicate.py), split heldout2, the one split the classifier is not fitted
on. The first round's files (roles-adjudicated.jsonl; the older one-reader eval/sentence_roles.jsonl, no dangling
labels) also work; their splits (dev, heldout) are training data now. Splits: eval/sentences/split.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from rag_assistant.answer.roles import refers_back, role_model, sentence_role

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "eval" / "sentences"))
from split import split_of  # noqa: E402

sys.path.insert(0, str(REPO / "eval"))

ROLES = ("background", "method", "result", "other")


def guesses(rows: list[dict], data_dir: Path | None) -> list[str]:
    """Each row's role: by the rules, or (data_dir) by the classifier on the index's vector of the sentence."""
    if data_dir is None:
        return [sentence_role(r["sentence"], r["position"], r["n_sentences"]) for r in rows]
    from fit_roles import classify, vectors

    if role_model() is None:
        raise SystemExit("no role_model.json: fit it with eval/fit_roles.py --write")
    return classify(rows, vectors(rows, data_dir))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", type=Path, default=REPO / "eval/sentences/roles2-adjudicated.jsonl")
    parser.add_argument("--split", choices=("heldout2", "dev2", "dev", "heldout", "all"), default="heldout2")
    parser.add_argument("--data-dir", type=Path, help="score the classifier on this index's sentence vectors")
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.path.read_text().splitlines() if line.strip()]
    for r in rows:
        r["abstract"] = r.get("id") or r["paper_id"]
    if args.split != "all":
        rows = [r for r in rows if split_of(r) == args.split]
    if args.data_dir:
        from fit_roles import indexed

        rows = indexed(rows, args.data_dir)  # the classifier reads each paper's stored sentence vectors
    if not rows:
        raise SystemExit(f"{args.path.name} has no {args.split} sentences")
    pairs = list(zip([r["role"] for r in rows], guesses(rows, args.data_dir), strict=True))
    confusion = Counter(pairs)
    correct = sum(n for (gold, guess), n in confusion.items() if gold == guess)
    labeller = "classifier" if args.data_dir else "rules"
    accuracy = correct / len(rows)
    print(f"{args.path.name} ({args.split}, {labeller}): {len(rows)} sentences, role accuracy {accuracy:.3f}")
    print(f"{'role':<11} {'precision':>9} {'recall':>7} {'n':>4}")
    for role in ROLES:
        guessed = sum(n for (_, g), n in confusion.items() if g == role)
        gold = sum(n for (t, _), n in confusion.items() if t == role)
        hit = confusion[(role, role)]
        print(f"{role:<11} {hit / guessed if guessed else 0:>9.3f} {hit / gold if gold else 0:>7.3f} {gold:>4}")
    print("confusion (rows gold, columns predicted):")
    print(" " * 11 + "".join(f"{r[:6]:>8}" for r in ROLES))
    for gold in ROLES:
        print(f"{gold:<11}" + "".join(f"{confusion[(gold, g)]:>8}" for g in ROLES))
    if rows and "dangling" in rows[0]:
        flagged = [r for r in rows if refers_back(r["sentence"])]
        hit, gold = sum(r["dangling"] for r in flagged), sum(r["dangling"] for r in rows)
        print(
            f"refers_back: precision {hit / (len(flagged) or 1):.3f}, recall {hit / (gold or 1):.3f} ({gold} dangling)"
        )


if __name__ == "__main__":
    main()
