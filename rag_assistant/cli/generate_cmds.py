"""eval-generate: write a question set for `eval` from the ingested corpus with an OpenAI-compatible LLM;
rerunning resumes. Parses the options, calls rag_assistant.evaluate.generate and renders progress and summary."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rag_assistant.cli.common import err, out, print_json, settings_from
from rag_assistant.cli.options import BaseUrlOpt, ModelOpt, unset_option

if TYPE_CHECKING:
    from rag_assistant.evaluate.generate.run import GenerateSummary

KINDS_HELP = "Comma list of question kinds: known-item, method, result, survey, unanswerable (default: all)."


def eval_generate(
    ctx: typer.Context,
    output: Annotated[Path, typer.Option("-o", "--output", help="The question set to write (.jsonl).")],
    n: Annotated[int, typer.Option("-n", help="Questions to keep, shared evenly among the kinds.", min=1)] = 200,
    kinds: Annotated[str | None, unset_option("--kinds", help=KINDS_HELP, metavar="KIND,...")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the paper sample (same seed, same set).")] = 0,
    concurrency: Annotated[
        int, typer.Option("-c", "--concurrency", help="Candidates written at once (remote models).", min=1, max=64)
    ] = 1,
    attempts: Annotated[
        int, typer.Option("--attempts", help="Candidates written per question asked for, at most.", min=1, max=20)
    ] = 3,
    max_overlap: Annotated[
        float,
        typer.Option("--max-overlap", help="Share of a question's word trigrams it may copy from its abstract.", min=0),
    ] = 0.3,
    llm_model: ModelOpt = None,
    llm_base_url: BaseUrlOpt = None,
    judge: Annotated[
        str | None, unset_option("--judge", help="Judge the candidates with this model (default: the LLM's).")
    ] = None,
    judge_base_url: Annotated[
        str | None, unset_option("--judge-base-url", help="Base URL of the judge's server (default: the LLM's).")
    ] = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="Discard an earlier (partial) run and start over.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Write a question set with verified gold papers from the ingested corpus, for `eval`: an LLM writes each
    question from sampled abstracts, a judge checks it, filters remove the bad ones. Rerun the same command to
    resume. Exit 1 when some candidate failed (rerun to retry) or no question was kept."""
    from rag_assistant.cli.progress import ProgressBar
    from rag_assistant.evaluate.generate.run import GenerateOptions, generate
    from rag_assistant.evaluate.generate.sampling import KINDS

    chosen = [k.strip() for k in kinds.split(",") if k.strip()] if kinds is not None else list(KINDS)
    options = GenerateOptions(
        output, n, chosen, seed, concurrency, attempts, max_overlap, judge, judge_base_url, fresh=fresh
    )
    settings = settings_from(ctx, llm_model=llm_model, llm_base_url=llm_base_url)
    columns = ("{task.fields[candidates]} candidates", "[red]{task.fields[failed]} failed[/]")
    with ProgressBar("generating", *columns, total=n, elapsed=True, candidates=0, failed=0) as bar:

        def started(asked: int, resumed: int) -> None:
            if resumed:
                err().print(f"resuming: {resumed} candidate(s) already written")

        def advance(event) -> None:  # noqa: ANN001 - a generate.run.Progress
            bar.update(min(event.passed, n), candidates=event.done, failed=event.failed)
            if event.done % 10 == 0:
                bar.note(f"{event.done} candidates written, {event.passed} passed the filters so far")

        summary = generate(settings, options, advance, started)
    _print_summary(summary, as_json)
    if summary.exit_code:
        raise typer.Exit(summary.exit_code)


def _print_summary(summary: GenerateSummary, as_json: bool) -> None:
    kept, asked = sum(summary.kept.values()), sum(summary.requested.values())
    if as_json:
        _warn_if_short(kept, asked)
        print_json(summary.as_dict())
        return
    from rich.table import Table

    from rag_assistant.cli.safe import safe

    out().print(f"[bold]Generated {kept} of {asked} questions[/] -> {safe(summary.output)}")
    table = Table(title_justify="left")
    for name in ("kind", "asked", "kept"):
        table.add_column(name, justify="left" if name == "kind" else "right")
    for kind, wanted in summary.requested.items():
        table.add_row(kind, str(wanted), str(summary.kept.get(kind, 0)))
    out().print(table)
    resumed = f" ({summary.resumed} from an earlier run)" if summary.resumed else ""
    out().print(f"{summary.candidates} candidates written{resumed}; removed by each filter:")
    for name, count in sorted(summary.removed.items(), key=lambda x: (-x[1], x[0])):
        out().print(f"  {name}: {count}")
    if not summary.removed:
        out().print("  none")
    if summary.surplus:
        out().print(f"  (passed but not needed: {summary.surplus})")
    if summary.mean_overlap is not None:
        out().print(f"mean overlap of the kept single-paper questions with their abstract: {summary.mean_overlap:.3f}")
    made = summary.made_by
    out().print(
        f"model: {safe(str(made.get('model')))} · judge: {safe(str(made.get('judge')))} · seed {made.get('seed')}"
    )
    out().print(f"every candidate and its verdicts: {safe(summary.candidates_file)} · {summary.seconds:.1f}s")
    if summary.failed:
        out().print(f"[red]{summary.failed} candidate(s) failed[/]: rerun the same command to retry them")
    _warn_if_short(kept, asked)


def _warn_if_short(kept: int, asked: int) -> None:
    if kept < asked:
        err().print(
            f"[yellow]warning:[/] {asked - kept} question(s) short of -n: too few candidates passed the filters"
        )


def register(app: typer.Typer) -> None:
    app.command("eval-generate")(eval_generate)
