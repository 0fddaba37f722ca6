"""The answer-level reading of issue 23: do single-paper offline answers state the paper's method and, where
its abstract has one, a result? Samples answers of an eval run to read, and scores the reading.

    python eval/read_answers.py sample RUN [--n 40] [--seed 23]   # print the sampled answers with their abstracts
    python eval/read_answers.py score [eval/answers-reading.jsonl]  # the rates of a finished reading

The sample: the questions of eval/conference.jsonl tagged `single` (one gold paper) that the run answered
(neither abstained nor a near miss), sorted by id, `random.Random(seed).sample`: chosen by the seed, not by
reading. Each reading row: id, paper, `method` (the answer says what the paper does: its approach, not only
the problem), `result` (the answer states a finding, or null when the abstract states none), `reason`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

EVAL = Path(__file__).resolve().parent
_SHARED = "shared/corpus/icml2025_full/papers.jsonl"
# ../shared beside the checkout, or beside the directory of worktrees (as benchmarks/answer_lines.py)
CONFERENCE = next((d / _SHARED for d in EVAL.parents[1:3] if (d / _SHARED).is_file()), EVAL.parents[1] / _SHARED)
READING = EVAL / "answers-reading.jsonl"


def sample(run: Path, n: int, seed: int) -> list[dict]:
    tags = {}
    for line in (EVAL / "conference.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            tags[item["id"]] = item["tags"]
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines() if line.strip()]
    answered = [
        r
        for r in records
        if "single" in tags.get(r["id"], []) and r.get("answer") and not r.get("abstained") and not r.get("near_miss")
    ]
    answered.sort(key=lambda r: r["id"])
    return random.Random(seed).sample(answered, min(n, len(answered)))


def show(records: list[dict]) -> None:
    """Each sampled answer as its gold paper's abstract, the sentences the answer quotes marked `>` (the answer
    quotes abstracts word for word: extractive mode), and any line quoted from another paper."""
    from rag_assistant.corpus import bundled_corpus_path, load_corpus
    from rag_assistant.text import clean_markup, split_sentences

    # loaded apart: one load would drop the bundled copies of conference papers (same text), which some gold
    papers = {p.paper_id: p for path in (CONFERENCE, bundled_corpus_path()) for p in load_corpus([path]).papers}
    for r in records:
        gold = r["gold_papers"][0]
        answer = " ".join(r["answer"].split())
        print(f"=== {r['id']}: {r['question']}")
        sentences = split_sentences(papers[gold].text) if gold in papers else []
        quoted = set()
        for i, s in enumerate(sentences):
            words, shown = " ".join(clean_markup(s).split()), " ".join(clean_markup(answer).split())
            hit = words[:50] in shown or words[-50:] in shown  # the end too: a quote trimmed of its opening
            quoted.add(i) if hit else None
            print(f"  {'>' if hit else ' '} [{i}] {s}")
        others = [c for c in r.get("citations", []) if c != gold]
        print(f"  quoted {sorted(quoted)} of {len(sentences)}; other papers cited: {len(others)}\n")


def score(path: Path) -> None:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    method = sum(r["method"] for r in rows)
    with_result = [r for r in rows if r["result"] is not None]
    result = sum(r["result"] for r in with_result)
    print(f"{path.name}: {len(rows)} answers read; method stated {method}/{len(rows)} ({method / len(rows):.2f}); "
          f"result stated {result}/{len(with_result)} ({result / max(1, len(with_result)):.2f}) of the answers "
          f"whose abstract has one")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample")
    s.add_argument("run", type=Path)
    s.add_argument("--n", type=int, default=40)
    s.add_argument("--seed", type=int, default=23)
    c = sub.add_parser("score")
    c.add_argument("path", type=Path, nargs="?", default=READING)
    args = ap.parse_args()
    if args.command == "sample":
        show(sample(args.run, args.n, args.seed))
    else:
        score(args.path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
