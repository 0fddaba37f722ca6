"""Build the judged evaluation sets from the judgment files in eval/judged/ (written by the judges, see
eval/README.md#judged-sets):

  eval/survey.jsonl    "which papers ...?" questions; gold = every pooled paper judged relevant, borderline kept
                       apart (scored neither way); tags: survey, <area>, plain|reworded, dev|heldout
  eval/nearmiss.jsonl  questions the conference cannot answer (near-topic: a real topic plus one constraint no
                       paper meets; off-corpus: far from it), and the answerable twins of near-topic ones
  eval/survey2.jsonl, eval/nearmiss2.jsonl
                       a second, fresh held-out pair built the same way (eval/judged/sv2-*.jsonl, nearmiss2.jsonl,
                       twins2.jsonl), every question tagged heldout2: for measuring once after tuning
  eval/conference.jsonl, eval/dev.jsonl
                       the topic questions' gold lists made exhaustive (gold, borderline, criterion) from the
                       re-judging in eval/judged/rejudge-*.jsonl; every other line as it is

The dev/heldout split is fixed by the question id alone (sha1 of the id: 2 in 5 held out), so it was decided
before any tuning and does not depend on what the questions say.

    python eval/build_sets.py [--check]     (--check: fail if the committed sets differ from a rebuild)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import defaultdict
from pathlib import Path

EVAL = Path(__file__).resolve().parent
JUDGED = EVAL / "judged"


HELDOUT2 = "heldout2"


def split(qid: str) -> str:
    return "heldout" if int(hashlib.sha1(qid.encode()).hexdigest(), 16) % 5 < 2 else "dev"


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def survey_set(pattern: str = "sv-*-topics.jsonl", fixed_split: str | None = None) -> list[dict]:
    out = []
    for topics_file in sorted(JUDGED.glob(pattern)):
        judgments = defaultdict(dict)
        for j in rows(topics_file.with_name(topics_file.name.replace("-topics", "-judgments"))):
            judgments[j["topic"]][j["paper"]] = j["label"]
        for t in rows(topics_file):
            labels = judgments[t["id"]]
            gold = sorted(p for p, label in labels.items() if label == "relevant")
            borderline = sorted(p for p, label in labels.items() if label == "borderline")
            kind = "plain" if t.get("plain", True) else "reworded"
            tags = ["survey", t.get("area", "other"), kind, fixed_split or split(t["id"])]
            out.append(
                {
                    "id": t["id"],
                    "question": t["question"],
                    "gold_papers": gold,
                    "borderline_papers": borderline,
                    "criterion": t["criterion"],
                    "tags": tags,
                }
            )
    return out


def nearmiss_set(suffix: str = "", fixed_split: str | None = None) -> list[dict]:
    out = []
    nearmiss = JUDGED / f"nearmiss{suffix}.jsonl"
    if nearmiss.exists():
        for q in rows(nearmiss):
            tags = ["unanswerable", q["kind"], fixed_split or split(q["id"])]
            criterion = f"no paper meets: {q['constraint']}" if q.get("constraint") else "far from every paper"
            out.append(
                {"id": q["id"], "question": q["question"], "gold_papers": [], "criterion": criterion, "tags": tags}
            )
    twins = JUDGED / f"twins{suffix}.jsonl"
    if twins.exists():
        for t in rows(twins):
            # a twin shares its near-topic question's split, so the pair is never torn across dev and heldout
            gold = "complete" if t.get("complete_gold") else "partial"
            tags = ["twin", "answerable", gold, fixed_split or split(t["twin_of"])]
            out.append({"id": t["id"], "question": t["question"], "gold_papers": t["gold_papers"], "tags": tags})
    return out


REJUDGED = {"conference.jsonl": "rejudge-conference.jsonl", "dev.jsonl": "rejudge-dev.jsonl"}
EXHAUSTIVE = "Gold lists every paper judged relevant in a pool of several rankings (eval/judged/rejudge-*.jsonl)."


def rejudged(name: str) -> list[dict]:
    """An older set with its topic questions' gold lists made exhaustive: gold, borderline and criterion from
    the re-judging (the questions themselves unchanged)."""
    fixes = {r["id"]: r for r in rows(JUDGED / REJUDGED[name])}
    out = []
    for item in rows(EVAL / name):
        fix = fixes.get(item["id"])
        if fix:
            item = {**item, "gold_papers": fix["gold_papers"], "borderline_papers": fix["borderline_papers"],
                    "criterion": fix["criterion"]}  # fmt: skip
            if "gold_answer" in item and "may exist" in item["gold_answer"]:
                item["gold_answer"] = EXHAUSTIVE
        out.append(item)
    return out


def write(path: Path, items: list[dict]) -> str:
    return "".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    stale = 0
    built = [("survey.jsonl", survey_set()), ("nearmiss.jsonl", nearmiss_set())]
    # the second held-out sets, built after the first held-out split had been looked at: all of it is held out
    built += [("survey2.jsonl", survey_set("sv2-topics.jsonl", HELDOUT2))]
    built += [("nearmiss2.jsonl", nearmiss_set("2", HELDOUT2))]
    built += [(name, rejudged(name)) for name in REJUDGED]
    for name, items in built:
        text = write(EVAL / name, items)
        if args.check:
            if not (EVAL / name).exists() or (EVAL / name).read_text(encoding="utf-8") != text:
                print(f"eval/{name} is not what eval/build_sets.py builds from eval/judged/")
                stale += 1
        else:
            (EVAL / name).write_text(text, encoding="utf-8")
            counts = defaultdict(int)
            for i in items:
                counts[next((t for t in i.get("tags", []) if t in ("dev", "heldout", HELDOUT2)), "unsplit")] += 1
            print(f"eval/{name}: {len(items)} questions ({dict(counts)})")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
