"""Abstention thresholds swept over eval runs made with both turned off, so one run per set gives every value.

    RAG_ASSISTANT_ABSTAIN_THRESHOLD=0 RAG_ASSISTANT_SURVEY_ABSTAIN_THRESHOLD=0 \\
        rag-assistant --data-dir D eval SET --tag dev --out RUN
    python benchmarks/abstain_sweep.py RUN [RUN ...] [--plain 0.14:0.20:0.01] [--survey 0.08:0.14:0.01]

Exact, not a model of the chain: relevance is computed before the chain decides (and recorded in
results.jsonl), and a question above the threshold is answered the same whatever the threshold, so at a threshold
t a question is abstained on when its relevance is below t (`survey_abstain_threshold` for survey questions),
and it declines when it is or when it declined in the run (a near miss, or the answerer's own abstention).
Printed per threshold, over the runs together: unanswerable and answerable questions abstained on (declined),
citation F1 of the answerable ones answered (near-miss answers included, as eval counts them), survey recall
(0 when declined); then the margins: the lowest answerable and highest unanswerable relevance.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def load(runs: list[Path]) -> list[dict]:
    rows = []
    for run in runs:
        for line in (run / "results.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                rows.append(json.loads(line))
    return rows


def declined(row: dict, plain: float, survey: float) -> bool:
    return _below(row, plain, survey) or bool(row["abstained"]) or row["near_miss"] is not None


def summary(rows: list[dict], plain: float, survey: float) -> str:
    """One line: unanswerable declined, answerable declined, citation F1 and survey recall at these thresholds."""
    no = [r for r in rows if not r["answerable"]]
    yes = [r for r in rows if r["answerable"]]
    right = sum(declined(r, plain, survey) for r in no)
    wrong = [r["id"] for r in yes if declined(r, plain, survey)]
    below = sum(_below(r, plain, survey) for r in no)
    below_yes = sum(_below(r, plain, survey) for r in yes)
    answered = [r for r in yes if not (_below(r, plain, survey) or r["abstained"])]
    f1 = [r["metrics"]["citation_f1"] for r in answered if r["metrics"].get("citation_f1") is not None]
    surveys = [r for r in yes if "survey" in r["tags"]]
    recall = [0.0 if declined(r, plain, survey) else r["metrics"].get("survey_recall") or 0.0 for r in surveys]
    line = f"unanswerable abstained {below}/{len(no)} (declined {right}), answerable abstained {below_yes}/{len(yes)}"
    line += f" (declined {len(wrong)})"
    line += f", citation F1 {sum(f1) / len(f1):.3f}" if f1 else ""
    line += f", survey recall {sum(recall) / len(recall):.3f}" if recall else ""
    return line + (f" (false: {', '.join(wrong[:6])}{' ...' if len(wrong) > 6 else ''})" if wrong else "")


def _below(row: dict, plain: float, survey: float) -> bool:
    """Abstained on for its relevance (the threshold's own decision, whatever the near-miss check says)."""
    floor = survey if (row.get("plan") or {}).get("kind") == "survey" else plain
    return (row["relevance"] or 0.0) < floor


def margins(rows: list[dict]) -> str:
    """The lowest answerable and the highest unanswerable relevance of each plan kind (the run's own declines
    apart): a threshold between them separates the two."""
    out = []
    for name, is_survey in (("plain", False), ("survey", True)):
        own = [r for r in rows if ((r.get("plan") or {}).get("kind") == "survey") == is_survey]
        low = sorted((r["relevance"], r["id"]) for r in own if r["answerable"])[:4]
        high = sorted(((r["relevance"], r["id"]) for r in own if not r["answerable"]), reverse=True)[:4]
        if own:
            out.append(f"{name}: lowest answerable {low}; highest unanswerable {high}")
    return "\n".join(out)


def steps(spec: str) -> list[float]:
    lo, hi, step = (float(x) for x in spec.split(":"))
    n = round((hi - lo) / step)
    return [round(lo + i * step, 4) for i in range(n + 1)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--plain", default="0.14:0.20:0.01", help="abstain_threshold values lo:hi:step")
    ap.add_argument("--survey", default="0.11:0.11:0.01", help="survey_abstain_threshold values lo:hi:step")
    args = ap.parse_args()
    rows = load(args.runs)
    for survey in steps(args.survey):
        for plain in steps(args.plain):
            print(f"abstain {plain:.3f} survey {survey:.3f}: {summary(rows, plain, survey)}")
    print(margins(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
