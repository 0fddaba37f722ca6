"""An eval run as one library call, the wiring behind `rag-assistant eval`: the dataset (limited, filtered by
tags), the judge, the run directory, the full or retrieval-only run, its three files and the comparison with
a baseline run. `plan_eval` checks everything that can fail before a question is answered; `EvalPlan.run`
answers, scores and writes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rag_assistant.config import Settings
    from rag_assistant.evaluate.compare import Delta
    from rag_assistant.evaluate.dataset import EvalItem
    from rag_assistant.evaluate.judge import Judge
    from rag_assistant.evaluate.records import EvalRun, Progress


@dataclass
class EvalOptions:
    """What an eval run is asked to do beyond the answer settings (the `eval` command's options)."""

    dataset: Path
    out_dir: Path | None = None  # None: eval/runs/<timestamp>-<mode>
    judge: str | None = None  # an OpenAI-compatible judge model; None: the offline judge
    judge_base_url: str | None = None
    baseline: Path | None = None  # a previous run to compare with
    limit: int | None = None
    force: bool = False  # replace the run already in out_dir
    retrieval_only: bool = False
    tags: list[str] = field(default_factory=list)  # groups of comma-separated tags (see select_tags)
    export: str | None = None  # also write the run for another tool (export.py): "ragas"
    filters: list[Any] = field(default_factory=list)  # --author/--year/--topic/--where, parsed (index/filters.py)

    def __post_init__(self) -> None:
        from rag_assistant.errors import ConfigError
        from rag_assistant.evaluate.export import FORMATS

        if self.judge_base_url and not self.judge:
            raise ConfigError("--judge-base-url needs --judge MODEL", "name the judge model with --judge")
        if self.export is not None and self.export not in FORMATS:
            raise ConfigError(f"--export {self.export}: unknown format", f"use one of: {', '.join(FORMATS)}")


@dataclass
class EvalOutcome:
    """A finished run: its records, summary.json, the files written, and the deltas against the baseline."""

    run: EvalRun
    summary: dict[str, Any]
    paths: dict[str, Path]
    deltas: list[Delta] | None


@dataclass
class EvalPlan:
    """A checked run, ready to go: the questions, the judge, the run directory and the baseline summary."""

    settings: Settings
    options: EvalOptions
    items: list[EvalItem]
    judge: Judge
    target: Path
    baseline: dict[str, Any] | None

    def run(self, on_progress: Progress | None = None) -> EvalOutcome:
        """Answer (or only rank) every question, score, write the run's files and compare with the baseline."""
        from rag_assistant.evaluate.compare import compare
        from rag_assistant.evaluate.report import summarize, write_run

        k = self.settings.top_k
        if self.options.retrieval_only:
            from rag_assistant.evaluate.retrieval_run import run_retrieval

            run = run_retrieval(self.items, self.settings, k=k, on_progress=on_progress, filters=self.options.filters)
        else:
            from rag_assistant.evaluate.runner import run_eval

            run = run_eval(
                self.items, self.settings, self.judge, k=k, on_progress=on_progress, filters=self.options.filters
            )
        summary = summarize(run, self.options.dataset)
        paths = write_run(self.target, run, summary)
        if self.options.export:
            paths.update(self.export(run, k))
        deltas = compare(self.baseline, summary) if self.baseline is not None else None
        return EvalOutcome(run, summary, paths, deltas)

    def export(self, run: EvalRun, k: int) -> dict[str, Path]:
        """The run in another tool's format (export.py), the papers' abstracts read from the index."""
        from rag_assistant.evaluate.export import samples, write_ragas
        from rag_assistant.retrieve import Retriever

        ids = {s["paper_id"] for r in run.results for s in r["ranking"][:k]}
        papers = Retriever(self.settings).papers(sorted(ids | {g for r in run.results for g in r["gold_papers"]}))
        return write_ragas(self.target, samples(run.results, self.items, papers, k), run.results, k)


def default_out(mode: str) -> Path:
    """eval/runs/<timestamp>-<mode>, with -2, -3 ... when that directory exists."""
    base = Path("eval") / "runs" / f"{time.strftime('%Y%m%d-%H%M%S')}-{mode}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def plan_eval(settings: Settings, options: EvalOptions) -> EvalPlan:
    """Load and select the questions, the baseline and the judge, and claim the run directory: before anything
    is answered, since a late failure would lose the whole run."""
    from rag_assistant.evaluate.compare import load_summary
    from rag_assistant.evaluate.dataset import load_dataset
    from rag_assistant.evaluate.judge import LLMJudge, OfflineJudge
    from rag_assistant.evaluate.report import check_run_dir
    from rag_assistant.evaluate.retrieval_run import select_tags

    items = load_dataset(options.dataset, None if options.tags else options.limit)
    if options.tags:  # filter first, then take the first --limit of what is left
        items = select_tags(items, options.tags)[: options.limit]
    baseline = load_summary(options.baseline) if options.baseline else None
    judge: Judge = (
        LLMJudge(settings, options.judge, options.judge_base_url)
        if options.judge
        else OfflineJudge(settings.support_threshold)
    )
    target = options.out_dir or default_out("retrieval" if options.retrieval_only else settings.resolved_mode())
    check_run_dir(target, options.force)
    return EvalPlan(settings, options, items, judge, target, baseline)
