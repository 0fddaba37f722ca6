"""eval and eval-compare: score the answer chain on a question set, and compare two runs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rag_assistant.cli.common import err, out, print_json
from rag_assistant.cli.options import BaseUrlOpt, ModelOpt, ModeOpt, TopKOpt, answer_settings
from rag_assistant.cli.progress import ProgressBar

if TYPE_CHECKING:
    from rag_assistant.evaluate.compare import Delta


def _default_out(mode: str) -> Path:
    base = Path("eval") / "runs" / f"{time.strftime('%Y%m%d-%H%M%S')}-{mode}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


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


def eval_(
    ctx: typer.Context,
    dataset: Annotated[Path, typer.Argument(help="JSON Lines question set (format: eval/README.md).")],
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", help="Run directory. Default: eval/runs/<timestamp>-<mode>.", show_default=False),
    ] = None,
    mode: ModeOpt = None,
    k: TopKOpt = None,
    llm_model: ModelOpt = None,
    llm_base_url: BaseUrlOpt = None,
    judge: Annotated[
        str | None,
        typer.Option(
            "--judge",
            help="Judge support with this OpenAI-compatible model (default: offline score).",
            show_default=False,
        ),
    ] = None,
    judge_base_url: Annotated[
        str | None,
        typer.Option(
            "--judge-base-url", help="Base URL of the judge's server (default: the LLM's).", show_default=False
        ),
    ] = None,
    baseline: Annotated[
        Path | None, typer.Option("--baseline", help="A previous run directory to compare with.", show_default=False)
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Only the first N questions.", min=1)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print summary.json to stdout.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace the run already in --out.")] = False,
    retrieval_only: Annotated[
        bool, typer.Option("--retrieval-only", help="Score the ranking only, without answering (fast).")
    ] = False,
    tags: Annotated[
        list[str] | None,
        typer.Option(
            "--tag",
            help="Only questions carrying this tag; a comma list means any of them, a repeated --tag all of them.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Answer every question of DATASET and score retrieval, citations, support, abstention and latency."""
    from rich.table import Table

    from rag_assistant.cli.safe import safe
    from rag_assistant.errors import ConfigError
    from rag_assistant.evaluate.compare import compare, load_summary
    from rag_assistant.evaluate.dataset import load_dataset
    from rag_assistant.evaluate.judge import Judge, LLMJudge, OfflineJudge
    from rag_assistant.evaluate.report import check_run_dir, main_metrics, summarize, write_run
    from rag_assistant.evaluate.retrieval_run import run_retrieval, select_tags
    from rag_assistant.evaluate.runner import run_eval

    if judge_base_url and not judge:
        raise ConfigError("--judge-base-url needs --judge MODEL", "name the judge model with --judge")
    settings = answer_settings(ctx, k, mode, llm_model, llm_base_url)
    items = load_dataset(dataset, None if tags else limit)
    if tags:  # filter first, then take the first --limit of what is left
        items = select_tags(items, tags)[:limit]
    base = load_summary(baseline) if baseline else None
    scorer: Judge = LLMJudge(settings, judge, judge_base_url) if judge else OfflineJudge(settings.support_threshold)
    target = out_dir or _default_out("retrieval" if retrieval_only else settings.resolved_mode())
    check_run_dir(target, force)  # before answering anything: a late failure would lose the whole run

    with ProgressBar("evaluating", total=len(items), elapsed=True) as bar:

        def advance(done: int, total: int, record: dict[str, Any]) -> None:
            bar.update(done)
            if done % 10 == 0 or done == total:
                bar.note(f"evaluated {done}/{total} questions")

        if retrieval_only:
            run = run_retrieval(items, settings, k=settings.top_k, on_progress=advance)
        else:
            run = run_eval(items, settings, scorer, k=settings.top_k, on_progress=advance)
    summary = summarize(run, dataset)
    paths = write_run(target, run, summary)

    for line in run.warnings[:20]:
        err().print(f"[yellow]warning:[/] {safe(line)}")
    for item in summary["errors"][:20]:
        err().print(f"[red]failed:[/] {safe(item['id'])}: {safe(item['error'] or '')}")
    if as_json:
        print_json(summary)
    else:
        info = summary["run"]
        table = Table(title=f"{safe(str(dataset))}: {len(items)} questions", title_justify="left")
        table.add_column("metric")
        table.add_column("all", justify="right")
        table.add_column("n", justify="right", style="dim")
        for name in main_metrics(info["k"]):
            if name in summary["overall"]:
                table.add_row(name, _fmt(summary["overall"][name]), str(summary["n"].get(name, "")))
        out().print(table)
        model = f" ({safe(info['model'])})" if info["mode"] == "llm" else ""
        model += f" · search p50 {info['search_p50_s'] * 1000:.0f} ms" if retrieval_only else ""
        out().print(f"answer mode: {info['mode']}{model} · k={info['k']} · judge: {safe(info['judge']['name'])}")
        out().print(f"{len(items)} questions in {info['duration_s']:.1f}s; wrote:")
        for path in paths.values():
            out().print(f"  {safe(str(path))}")
    if base is not None:
        (err() if as_json else out()).print(_delta_table(compare(base, summary), f"change vs {baseline}"))
    if summary["counts"]["errors"] == len(items):
        raise typer.Exit(1)


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
