"""ask and log: one cited answer, and the provenance log of past answers."""

from __future__ import annotations

from typing import Annotated

import typer

from rag_assistant.cli.common import err, out, print_json, settings_from
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
    apply_filters,
)
from rag_assistant.cli.safe import safe


def ask(
    ctx: typer.Context,
    question: Annotated[str, typer.Argument(help="The question.")],
    k: TopKOpt = None,
    mode: ModeOpt = None,
    llm_model: ModelOpt = None,
    llm_base_url: BaseUrlOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the Answer record as JSON.")] = False,
    sources: Annotated[bool, typer.Option("--sources", help="Also list every retrieved paper.")] = False,
    author: AuthorOpt = None,
    year: YearOpt = None,
    topic: TopicOpt = None,
    where: WhereOpt = None,
) -> None:
    """Answer a question with inline [paper_id] citations, each checked against the retrieved papers."""
    from rag_assistant.answer.chain import AnswerChain
    from rag_assistant.cli.render import render_answer, stream_answer

    chain = AnswerChain(answer_settings(ctx, k, mode, llm_model, llm_base_url))
    if restricted := apply_filters(chain.retriever, author, year, topic, where):
        err().print(f"filtered: {safe(restricted)}")
    stream = not as_json and chain.mode == "llm" and out().is_terminal
    if stream:
        answer = stream_answer(out(), lambda on_token: chain.ask(question, on_token=on_token))
    else:
        answer = chain.ask(question)
    if as_json:
        print_json(answer.as_dict())
    else:
        render_answer(out(), answer, show_sources=sources)


def log(
    ctx: typer.Context,
    limit: Annotated[
        int, typer.Option("-n", "--limit", metavar="N", help="Entries to show, newest first.", min=1)
    ] = 20,
    session: Annotated[str | None, typer.Option(metavar="ID", help="Only this chat session.")] = None,
    kind: Annotated[str | None, typer.Option(metavar="[ask|chat|batch]", help="Only entries of this command.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Recent answers of ask, chat and batch from the provenance log (question, citations, mode, timings).
    Eval runs keep their answers in their own results.jsonl."""
    from datetime import datetime

    from rag_assistant.answer.provenance import KINDS, log_path, recent
    from rag_assistant.cli.safe import safe

    if kind is not None and kind not in KINDS:
        raise typer.BadParameter(f"{kind!r} is not one of {', '.join(KINDS)}", param_hint="'--kind'")
    settings = settings_from(ctx)
    rows = recent(settings.data_dir, limit, session, kind)
    if as_json:
        print_json(rows)
        return
    if not rows:
        err().print(f"No answers logged yet in {safe(log_path(settings.data_dir))}.")
        return
    for row in rows:
        when = datetime.fromtimestamp(row["ts"]).strftime("%Y-%m-%d %H:%M:%S")
        cites = " ".join(f"[{c}]" for c in row["citations"]) or ("(abstained)" if row["abstained"] else "(none)")
        sess = f" session {row['session']}" if row["session"] else ""
        out().print(f"[bold]#{row['id']}[/] {when} {row['kind']}{sess} · {row['mode']} · {safe(row['model'] or '')}")
        out().print(f"  Q: {safe(row['question'])}")
        out().print(f"  A: {safe(row['answer'][:200])}{'...' if len(row['answer']) > 200 else ''}")
        out().print(f"  cited: {safe(cites)} · {row['timings'].get('total', 0):.2f}s")


def register(app: typer.Typer) -> None:
    app.command()(ask)
    app.command()(log)
