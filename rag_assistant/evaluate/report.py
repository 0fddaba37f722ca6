"""Run outputs: results.jsonl (one scored question per line), summary.json (overall and per-tag means)
and report.html (self-contained, see html_report.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rag_assistant import __version__
from rag_assistant.errors import OutputError
from rag_assistant.evaluate import metrics as m
from rag_assistant.evaluate.records import EvalRun
from rag_assistant.files import open_private, private_dir, write_private


def _group(results: list[dict[str, Any]]) -> tuple[m.Metrics, dict[str, int]]:
    overall, counts = m.aggregate([r["metrics"] for r in results])
    latency = [r["metrics"].get("latency_s") for r in results]
    for q in (50, 95):
        value = m.percentile(latency, q)
        overall[f"latency_p{q}"] = None if value is None else round(value, 4)
        counts[f"latency_p{q}"] = counts.get("latency_s", 0)
    return overall, counts


def summarize(run: EvalRun, dataset: Path) -> dict[str, Any]:
    results = run.results
    k, depth = run.info["k"], run.info["depth"]
    overall, n = _group(results)
    order = m.main_metrics(k)
    overall = {**{x: overall[x] for x in order if x in overall}, **{x: v for x, v in overall.items() if x not in order}}
    tags = sorted({t for r in results for t in r["tags"]})
    by_tag = {}
    for tag in tags:
        tagged = [r for r in results if tag in r["tags"]]
        means, _ = _group(tagged)
        by_tag[tag] = {"n": len(tagged), "metrics": {x: means.get(x) for x in order if x in means}}
    usage = [r["usage"] for r in results if r["usage"]]
    tokens = {key: sum(u.get(key, 0) for u in usage) for key in ("prompt_tokens", "completion_tokens", "total_tokens")}
    return {
        "dataset": str(dataset),
        "version": __version__,
        "run": run.info,
        "counts": {
            "questions": len(results),
            "answerable": sum(r["answerable"] for r in results),
            "unanswerable": sum(not r["answerable"] for r in results),
            "abstained": sum(bool(r["abstained"]) for r in results),
            "errors": sum(r["error"] is not None for r in results),
            "judge_errors": sum(r["judge_error"] is not None for r in results),
        },
        "overall": overall,
        "n": n,
        "recall_curve": {str(i): overall.get(f"recall@{i}") for i in range(1, depth + 1)},
        "by_tag": by_tag,
        "tokens": tokens if usage else None,
        "errors": [
            {"id": r["id"], "error": r["error"] or r["judge_error"]} for r in results if r["error"] or r["judge_error"]
        ],
        "warnings": run.warnings,
    }


RUN_FILES = ("results.jsonl", "summary.json", "report.html")


def check_run_dir(out_dir: Path, force: bool = False) -> None:
    """Before anything is answered: `out_dir` must be a directory we can create, not an earlier run unless
    `force` (a run's files are replaced together, never silently)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise OutputError(f"--out {out_dir} is a file, not a run directory", "give a directory path; it is created")
    existing = [name for name in RUN_FILES if (out_dir / name).exists()]
    if existing and not force:
        raise OutputError(
            f"{out_dir} already holds a run ({', '.join(existing)})",
            "choose another --out directory, or pass --force to replace that run",
        )
    try:
        private_dir(out_dir)  # it will hold every question and answer
    except OSError as exc:
        message = f"cannot create the run directory {out_dir}: {exc.strerror}"
        raise OutputError(message, "choose another --out") from None


def write_run(out_dir: Path, run: EvalRun, summary: dict[str, Any]) -> dict[str, Path]:
    """Write the three files; returns their paths."""
    from rag_assistant.evaluate.html_report import render

    private_dir(out_dir)
    paths = {name: out_dir / name for name in ("results.jsonl", "summary.json", "report.html")}
    with open_private(paths["results.jsonl"], "w", encoding="utf-8") as fh:
        for record in run.results:
            fh.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
    write_private(paths["summary.json"], json.dumps(summary, indent=2, ensure_ascii=False, default=str) + "\n")
    write_private(paths["report.html"], render(summary, run.results))
    return paths


def load_results(run_dir: Path) -> list[dict[str, Any]]:
    with (run_dir / "results.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
