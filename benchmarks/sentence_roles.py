"""Accuracy of the rule-based sentence roles (rag_assistant/answer/roles.py) against the hand labels in
eval/sentence_roles.jsonl: overall, per role (precision/recall) and the confusion matrix.

    python benchmarks/sentence_roles.py [eval/sentence_roles.jsonl]
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from rag_assistant.answer.roles import sentence_role

ROLES = ("background", "method", "result", "other")


def main(path: Path) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    pairs = [(r["role"], sentence_role(r["sentence"], r["position"], r["n_sentences"])) for r in rows]
    confusion = Counter(pairs)
    correct = sum(n for (gold, guess), n in confusion.items() if gold == guess)
    print(f"{len(rows)} sentences, accuracy {correct / len(rows):.3f}")
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


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "eval/sentence_roles.jsonl"))
