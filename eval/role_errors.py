"""What limits the sentence-role classifier, on the training labels only (issue 23): its 5-fold cross-validated
predictions (whole abstracts per fold, the L2 and background cut of role_model.json), as a confusion matrix,
and its accuracy where the two readers agreed and where they did not (then the adjudicated label is the
target), with the readers' own agreement. The held-out split (heldout2) is never read.

    python eval/role_errors.py --data-dir CONF [--cache FILE] [--show N]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fit_roles import design, indexed, labelled, out_of_fold, vectors  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--cache", type=Path, help="the labelled sentences' vectors, as fit_roles.py --cache")
    ap.add_argument("--show", type=int, default=0, help="print N misclassified sentences (seed 0)")
    args = ap.parse_args()
    from rag_assistant.answer.roles import MODEL_FILE, ROLES, pick_roles

    rows = indexed(labelled("train"), args.data_dir)
    x = design(rows, vectors(rows, args.data_dir, args.cache))
    y = np.array([ROLES.index(r["role"]) for r in rows])
    chosen = json.loads(MODEL_FILE.read_text(encoding="utf-8"))
    l2, cut = chosen["l2"], chosen.get("background_at", 0.5)
    guess = pick_roles(out_of_fold(rows, x, y, l2), cut)
    print(f"train: {len(rows)} sentences, l2 {l2}, background cut {cut}; 5-fold accuracy {np.mean(guess == y):.3f}")
    print("confusion (rows: label, columns: predicted)")
    print(" " * 12 + "".join(f"{r:>12}" for r in ROLES))
    for i, role in enumerate(ROLES):
        print(f"{role:>12}" + "".join(f"{int(np.sum((y == i) & (guess == j))):>12}" for j in range(len(ROLES))))
    two = [i for i, r in enumerate(rows) if len(r.get("readers") or []) >= 2]
    agreed = [i for i in two if len({reader["role"] for reader in rows[i]["readers"]}) == 1]
    split = [i for i in two if i not in set(agreed)]
    one = [i for i in range(len(rows)) if i not in set(two)]
    for name, idx in (("readers agreed", agreed), ("readers disagreed", split), ("one reader", one)):
        acc = np.mean(guess[idx] == y[idx]) if idx else float("nan")
        print(f"{name}: {len(idx)} sentences, accuracy {acc:.3f}")
    if two:
        print(f"the readers agree with each other on {len(agreed) / len(two):.3f} of {len(two)} sentences")
    pairs = Counter((ROLES[y[i]], ROLES[guess[i]]) for i in range(len(rows)) if guess[i] != y[i])
    print("most frequent errors (label -> predicted):", ", ".join(f"{a}->{b} {n}" for (a, b), n in pairs.most_common()))
    wrong = [i for i in range(len(rows)) if guess[i] != y[i]]
    for i in random.Random(0).sample(wrong, min(args.show, len(wrong))):
        r = rows[i]
        print(f"  {r['role']} -> {ROLES[guess[i]]} [{r['position']}/{r['n_sentences']}]: {r['sentence'][:140]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
