"""eval and eval-compare: score the answer chain on a question set, and compare two runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rag_assistant.cli.common import err, out, print_json
from rag_assistant.cli.options import (
    AuthorOpt,
    BaseUrlOpt,
    ModelOpt,
    ModeOpt,
    TopicOpt,
    TopKOpt,
    WhereOpt,
    YearOpt,
    answer_settings,
    parsed_filters,
    unset_option,
)
from rag_assistant.cli.progress import ProgressBar

if TYPE_CHECKING:
    from rag_assistant.evaluate.compare import Delta
    from rag_assistant.evaluate.run import EvalOptions, EvalOutcome


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def _delta_table(rows: list[Delta], title: str) -> Any:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for name in ("group", "metric", "A", "B", "change"):
        table.add_column(name, justify="right" if name in ("A", "B", "change") else "left")
    for row in rows:
        style = "" if row.better is None else "green" if row.better else "red"
        change = "-" if row.delta is None else f"{row.delta:+.3f}"
        table.add_row(row.group, row.metric, _fmt(row.a), _fmt(row.b), f"[{style}]{change}[/]" if style else change)
    return table


OutOpt = Annotated[Path | None, unset_option("--out", help="Run directory. Default: eval/runs/<timestamp>-<mode>.")]
JudgeOpt = Annotated[
    str | None,
    unset_option("--judge", help="Judge support with this OpenAI-compatible model (default: offline score)."),
]
JudgeUrlOpt = Annotated[
    str | None, unset_option("--judge-base-url", help="Base URL of the judge's server (default: the LLM's).")
]
BaselineOpt = Annotated[Path | None, unset_option("--baseline", help="A previous run directory to compare with.")]
TagOpt = Annotated[
    list[str] | None,
    unset_option(
        "--tag", help="Only questions carrying this tag; a comma list means any of them, a repeated --tag all of them."
    ),
]


def eval_(
    ctx: typer.Context,
    dataset: Annotated[Path, typer.Argument(help="JSON Lines question set (format: eval/README.md).")],
    out_dir: OutOpt = None,
    mode: ModeOpt = None,
    k: TopKOpt = None,
    llm_model: ModelOpt = None,
    llm_base_url: BaseUrlOpt = None,
    judge: JudgeOpt = None,
    judge_base_url: JudgeUrlOpt = None,
    baseline: BaselineOpt = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Only the first N questions.", min=1)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print summary.json to stdout.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace the run already in --out.")] = False,
    retrieval_only: Annotated[
        bool, typer.Option("--retrieval-only", help="Score the ranking only, without answering (fast).")
    ] = False,
    tags: TagOpt = None,
    export: Annotated[
        str | None,
        unset_option(
            "--export", metavar="ragas", help="Also write the run as RAGAS reads it (ragas.jsonl, ragas.csv)."
        ),
    ] = None,
    author: AuthorOpt = None,
    year: YearOpt = None,
    topic: TopicOpt = None,
    where: WhereOpt = None,
) -> None:
    """Answer every question of DATASET and score retrieval, citations, support, abstention and latency."""
    from rag_assistant.evaluate.run import EvalOptions, plan_eval

    options = EvalOptions(
        dataset, out_dir, judge, judge_base_url, baseline, limit, force, retrieval_only, tags or [], export,
        parsed_filters(author, year, topic, where),
    )  # fmt: skip
    settings = answer_settings(ctx, k, mode, llm_model, llm_base_url)
    plan = plan_eval(settings, options)
    with ProgressBar("evaluating", total=len(plan.items), elapsed=True) as bar:

        def advance(done: int, total: int, record: dict[str, Any]) -> None:
            bar.update(done)
            if done % 10 == 0 or done == total:
                bar.note(f"evaluated {done}/{total} questions")

        outcome = plan.run(advance)
    _render_outcome(outcome, len(plan.items), options, as_json)
    if outcome.summary["counts"]["errors"] == len(plan.items):
        raise typer.Exit(1)


def _render_outcome(outcome: EvalOutcome, n: int, options: EvalOptions, as_json: bool) -> None:
    """Warnings and failures on stderr, then summary.json (--json) or the metric table and the files written;
    the change against the baseline last (on stderr with --json)."""
    from rag_assistant.cli.safe import safe

    summary = outcome.summary
    for line in outcome.run.warnings[:20]:
        err().print(f"[yellow]warning:[/] {safe(line)}")
    for item in summary["errors"][:20]:
        err().print(f"[red]failed:[/] {safe(item['id'])}: {safe(item['error'] or '')}")
    if as_json:
        print_json(summary)
    else:
        out().print(_summary_table(summary, f"{safe(str(options.dataset))}: {n} questions"))
        info = summary["run"]
        model = f" ({safe(info['model'])})" if info["mode"] == "llm" else ""
        model += f" · search p50 {info['search_p50_s'] * 1000:.0f} ms" if options.retrieval_only else ""
        out().print(f"answer mode: {info['mode']}{model} · k={info['k']} · judge: {safe(info['judge']['name'])}")
        out().print(f"{n} questions in {info['duration_s']:.1f}s; wrote:")
        for path in outcome.paths.values():
            out().print(f"  {safe(str(path))}")
    if outcome.deltas is not None:
        table = _delta_table(outcome.deltas, f"change vs {options.baseline}")
        (err() if as_json else out()).print(table)


def _summary_table(summary: dict[str, Any], title: str) -> Any:
    from rich.table import Table

    from rag_assistant.evaluate.metrics import main_metrics

    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    table.add_column("all", justify="right")
    table.add_column("n", justify="right", style="dim")
    for name in main_metrics(summary["run"]["k"]):
        if name in summary["overall"]:
            table.add_row(name, _fmt(summary["overall"][name]), str(summary["n"].get(name, "")))
    return table


def eval_compare(
    a: Annotated[Path, typer.Argument(help="Baseline run directory (or its summary.json).")],
    b: Annotated[Path, typer.Argument(help="New run directory (or its summary.json).")],
    tags: Annotated[bool, typer.Option("--tags", help="Also compare per-tag means.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the deltas as JSON.")] = False,
) -> None:
    """Each metric of run B next to run A and the change (green: better, red: worse)."""
    from rag_assistant.cli.safe import safe
    from rag_assistant.evaluate.compare import compare, describe, load_summary

    sa, sb = load_summary(a), load_summary(b)
    rows = compare(sa, sb, tags=tags)
    if as_json:
        print_json([r.as_dict() for r in rows])
        return
    out().print(f"A: {safe(str(a))} [dim]({safe(describe(sa))})[/]")
    out().print(f"B: {safe(str(b))} [dim]({safe(describe(sb))})[/]")
    out().print(_delta_table(rows, "B - A"))


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_)
    app.command("eval-compare")(eval_compare)
