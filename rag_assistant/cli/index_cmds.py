"""ingest, search, stats: the commands that build and inspect the index."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rag_assistant.cli.common import err, out, print_json, settings_from
from rag_assistant.cli.options import AuthorOpt, TopicOpt, WhereOpt, YearOpt, apply_filters
from rag_assistant.cli.progress import ProgressBar
from rag_assistant.cli.safe import safe, tag
from rag_assistant.text import plural

if TYPE_CHECKING:
    from rag_assistant.index.ingest import IngestReport


def ingest(
    ctx: typer.Context,
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="PATH...", help="Files or folders (.txt, .jsonl, .json, .csv). None: the bundled ICML 2025 corpus."
        ),
    ] = None,
    skip_bad: Annotated[
        bool, typer.Option("--skip-bad", help="Ingest the valid files and records, reporting the bad ones.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Parse, chunk, embed and store abstracts. Unchanged papers are skipped; changed ones replaced."""
    from rag_assistant.corpus import CorpusLoad
    from rag_assistant.index.ingest import ingest_paths

    settings = settings_from(ctx)

    def loaded(found: CorpusLoad) -> None:
        for line in found.errors:
            err().print(f"[red]skipped:[/] {safe(line)}")
        for line in found.warnings:
            err().print(f"[yellow]warning:[/] {safe(line)}")

    with ProgressBar("embedding", "chunks", hidden=True) as bar, _sigterm_as_ctrl_c():

        def advance(done: int, total: int) -> None:
            bar.update(done, total)
            bar.note(f"embedded {done}/{total} chunks")  # logs and pipes get plain lines instead of a bar

        try:
            result = ingest_paths(settings, paths, skip_bad, progress=advance, on_loaded=loaded)
        except KeyboardInterrupt:
            err().print(
                "[yellow]ingest interrupted:[/] papers it did not finish stay hidden from search until you run it again"
            )
            raise
    report = result.report
    for line in report.warnings:
        err().print(f"[yellow]warning:[/] {safe(line)}")
    if as_json:
        print_json(result.as_dict())
    else:
        reused = report.chunks_added - report.chunks_embedded
        resumed = f"{report.resumed} resumed (completed from an interrupted ingest), " if report.resumed else ""
        upgraded = f"{report.upgraded} upgraded (to the compact storage layout), " if report.upgraded else ""
        out().print(
            f"Ingested {plural(report.papers, 'paper')} from {plural(len(result.loaded.files), 'file')}: "
            f"{report.new} new, {resumed}{report.changed} changed, {upgraded}{report.unchanged} unchanged, "
            f"{report.removed} removed; {plural(report.chunks_added, 'new chunk')}"
            f"{f' ({reused} with a stored vector reused)' if reused else ''}, {report.chunks_deleted} deleted in "
            f"{report.seconds:.1f}s."
        )
        _sentence_vectors_line(report)
    if result.loaded.errors:  # --skip-bad skipped some input: scripts can tell, --json or not
        raise typer.Exit(1)


def _sentence_vectors_line(report: IngestReport) -> None:
    """Say so when sentence vectors were computed beyond the new and changed papers' (a backfill, or a new
    splitter version re-cutting stored papers), and how many stored rows still lined up and were kept."""
    written = report.new + report.changed + report.resumed  # their sentence vectors come with their chunks
    kept = report.sentence_papers_kept
    if kept or report.sentence_papers > written:
        out().print(
            f"Sentence vectors computed for {plural(report.sentence_papers, 'paper')}"
            + (f"; kept for {plural(kept, 'paper')} whose sentences did not change." if kept else ".")
        )


@contextmanager
def _sigterm_as_ctrl_c() -> Iterator[None]:
    """`kill` or a service stop ends an ingest like Ctrl-C: the write in flight completes and the user is told.
    Only tidiness: the index is safe from any kill, SIGKILL included (index/pending.py)."""
    import signal

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(metavar="QUERY", help="What to look for.")],
    k: Annotated[
        int | None,
        typer.Option(
            "-k", "--top-k", metavar="N", help="Number of papers.", min=1, max=100, show_default="the top_k setting, 5"
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list, best first.")] = False,
    author: AuthorOpt = None,
    year: YearOpt = None,
    topic: TopicOpt = None,
    where: WhereOpt = None,
) -> None:
    """Hybrid (dense + keyword) search, one result per paper."""
    from rag_assistant.answer.question import check_question
    from rag_assistant.corpus.fields import byline
    from rag_assistant.retrieve import Retriever

    settings = settings_from(ctx, top_k=k)
    query, notes = check_question(query, settings.max_question_chars)  # refused and cut as `ask` does
    for line in notes:
        err().print(f"[yellow]warning:[/] {safe(line)}")
    retriever = Retriever(settings)
    if restricted := apply_filters(retriever, author, year, topic, where):
        err().print(f"filtered: {safe(restricted)}")
    sources = retriever.search(query, settings.top_k)
    for line in retriever.search_warnings():
        err().print(f"[yellow]warning:[/] {safe(line)}")
    if as_json:
        print_json([s.as_dict() for s in sources])
        return
    if not sources:
        out().print("No matching papers.")
    for s in sources:
        dense = f"{s.dense_score:.3f}" if s.dense_score is not None else "-"
        out().print(
            f"[bold]{s.rank}. {tag(s.paper_id)}[/] score {s.score:.4f} (cosine {dense})  "
            f"[dim]{safe(byline(s.paper.metadata) or f'{s.paper.source} #{s.paper.position}')}[/]"
        )
        if s.paper.title:
            out().print(f"   {safe(s.paper.title)}")
        snippet = s.chunks[0] if s.chunks else s.paper.text
        out().print(f"   [dim]{safe(snippet[:240])}{'...' if len(snippet) > 240 else ''}[/]")


def stats(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """What the index holds and where it lives."""
    from rag_assistant.index.stats import index_stats

    data = index_stats(settings_from(ctx))
    if as_json:
        print_json(data)
        return
    for key, value in data.items():
        if key == "papers":
            pending = data["unfinished_papers"]
            out().print(f"papers: {value} searchable{f', {pending} pending (incomplete ingest)' if pending else ''}")
        elif key == "unfinished_papers":
            if value:
                out().print(
                    f"[yellow]incomplete ingest:[/] {plural(value, 'paper')} pending (hidden from search) — "
                    "run `rag-assistant ingest` again, unless one is still running"
                )
        elif key == "papers_without_sentence_vectors":
            if value:
                out().print(
                    f"[yellow]sentence vectors:[/] {plural(value, 'paper')} without stored ones (answers compute "
                    "them each time) — the next `rag-assistant ingest` stores them"
                )
        elif key == "sources":
            for name, n in value.items():
                out().print(f"  {safe(name)}: {plural(n, 'paper')}")
        elif key == "fields":
            shown = ", ".join(f"{name} ({n})" for name, n in value.items()) or "none (no paper metadata)"
            out().print(f"fields (papers carrying each; filter with --author, --year, --topic, --where): {safe(shown)}")
        else:
            out().print(f"{key}: {safe(value)}")


def papers(
    ctx: typer.Context,
    author: AuthorOpt = None,
    year: YearOpt = None,
    topic: TopicOpt = None,
    where: WhereOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list with every field.")] = False,
) -> None:
    """The papers of the index with their title, first authors, topic and year; the filters pick which."""
    from rag_assistant.corpus.fields import byline, normalise
    from rag_assistant.errors import EmptyIndexError
    from rag_assistant.index.filters import catalogue, describe, matches, parse_filters, resolve
    from rag_assistant.index.reader import IndexReader

    reader = IndexReader(settings_from(ctx))
    if reader.empty():
        raise EmptyIndexError("the index is empty", "run `rag-assistant ingest` first")
    stored = sorted(reader.stored_papers(), key=lambda p: (p.source, p.position, p.paper_id))
    filters = parse_filters(author or (), year, topic or (), where or ())
    resolved = resolve(filters, catalogue(stored)) if filters else []
    chosen = [p for p in stored if matches(p, resolved)]
    if resolved:
        err().print(f"filtered: {safe(describe(resolved))}")
    if as_json:
        rows = [{"paper_id": p.paper_id, "title": p.title, "source": p.source, "position": p.position} for p in chosen]
        print_json([{**row, "fields": normalise(p.metadata)} for row, p in zip(rows, chosen, strict=True)])
        return
    for p in chosen:
        shown = byline(p.metadata) or f"{p.source} #{p.position}"
        out().print(f"[bold]{tag(p.paper_id)}[/] {safe(p.label)} [dim]{safe(shown)}[/]")
    err().print(plural(len(chosen), "paper"))


def register(app: typer.Typer) -> None:
    app.command()(ingest)
    app.command()(search)
    app.command()(stats)
    app.command()(papers)
