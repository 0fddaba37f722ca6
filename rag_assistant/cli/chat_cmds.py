"""chat: a REPL over the answer chain with follow-ups, slash commands and streaming in llm mode."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from rag_assistant.cli.common import err, out
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
from rag_assistant.cli.safe import clean, safe, tag

if TYPE_CHECKING:
    from rag_assistant.chat import ChatSession
    from rag_assistant.config import Settings

HELP = """Ask a question, or a follow-up ("what baseline does the second one use?", "tell me more about [004:17]").
  /sources        the last answer's retrieved papers with scores
  /papers         papers seen in this conversation
  /show ID        a paper's full abstract
  /mode [MODE]    show or switch the answer mode: extractive, llm or auto
  /filter F=V ... only papers with these fields: author="Ada Lovelace" year=2023- topic=fairness venue=ICML
                  (shown in the prompt; /filter alone shows it, /filter off clears it)
  /save FILE      write the conversation as Markdown with references
  /reset          forget the conversation
  /help           this help
  /quit           leave (or Ctrl-D); Ctrl-C cancels an answer in progress"""


def chat(
    ctx: typer.Context,
    k: TopKOpt = None,
    mode: ModeOpt = None,
    llm_model: ModelOpt = None,
    llm_base_url: BaseUrlOpt = None,
    author: AuthorOpt = None,
    year: YearOpt = None,
    topic: TopicOpt = None,
    where: WhereOpt = None,
) -> None:
    """Chat with the corpus in the terminal: cited answers, follow-up questions, slash commands."""
    from rag_assistant.answer.chain import AnswerChain
    from rag_assistant.chat import ChatSession

    settings = answer_settings(ctx, k, mode, llm_model, llm_base_url)
    session = ChatSession(AnswerChain(settings))
    apply_filters(session.chain.retriever, author, year, topic, where)  # as /filter would: shown in the prompt
    read = _reader(settings.data_dir)
    out().print(f"rag-assistant chat · {safe(_mode(session))} · session {session.memory.id} · /help for commands")
    while True:
        try:
            prompt = f"you [{clean(session.filtered)}]> " if session.filtered else "you> "  # plain text: no markup
            line = read(prompt).strip()
        except KeyboardInterrupt:
            continue
        except EOFError:
            break
        if not line:
            continue
        if line.startswith("/"):
            if _command(line, session, settings) == "quit":
                break
            continue
        _answer(session, line)
    out().print("bye")


def _mode(session: ChatSession) -> str:
    return f"mode: {session.chain.mode}" + (
        f" ({session.chain.generator.model})" if session.chain.mode == "llm" else ""
    )


def _answer(session: ChatSession, question: str) -> None:
    from rag_assistant.cli.render import render_answer, stream_answer
    from rag_assistant.errors import RagAssistantError

    reader = session.chain.retriever.reader
    reloads = reader.reloads
    try:
        if session.chain.mode == "llm" and out().is_terminal:
            answer = stream_answer(out(), lambda on_token: session.ask(question, on_token=on_token))
        else:
            with out().status("thinking...", spinner="dots"):
                answer = session.ask(question)
    except KeyboardInterrupt:
        err().print("[yellow]cancelled[/]")
        return
    except RagAssistantError as exc:  # the conversation survives a failed answer
        from rag_assistant.cli.common import report_error

        report_error(exc)
        return
    if reader.reloads != reloads:
        out().print("[dim]the index changed since the chat last read it (an ingest ran): searched it as it is now[/]")
    render_answer(out(), answer)


def _command(line: str, session: ChatSession, settings: Settings) -> str | None:
    from rag_assistant.cli.render import render_sources

    name, _, arg = line.partition(" ")
    arg = arg.strip()
    memory = session.memory
    if name in ("/quit", "/exit", "/q"):
        return "quit"
    if name == "/help":
        out().print(safe(HELP))
    elif name == "/sources":
        if memory.last is None:
            out().print("No answer yet.")
        else:
            render_sources(out(), memory.last)
            memory.sources_shown()
    elif name == "/papers":
        if not memory.papers:
            out().print("No papers yet.")
        cited = {c for t in memory.turns for c in t.answer.citations}
        for pid, paper in memory.papers.items():
            mark = "cited" if pid in cited else "retrieved"
            out().print(
                f"  [bold]{tag(pid)}[/] [dim]{mark} · {safe(paper.source)} #{paper.position}[/] {safe(paper.label)}"
            )
    elif name == "/show":
        _show(session, arg.strip("[]"))
    elif name == "/reset":
        session.reset()
        out().print(f"Conversation cleared (new session {session.memory.id}).")
    elif name == "/save":
        if not arg:
            out().print("usage: /save FILE")
        else:
            from rag_assistant.chat import to_markdown
            from rag_assistant.files import write_private

            path = Path(arg).expanduser()
            try:
                write_private(path, to_markdown(memory))
                out().print(f"Saved {len(memory.turns)} turn(s) to {safe(str(path))}")
            except OSError as exc:
                err().print(f"[red]error:[/] cannot write {safe(str(path))}: {safe(exc.strerror or str(exc))}")
    elif name == "/mode":
        _switch_mode(session, settings, arg)
    elif name == "/filter":
        _filter(session, arg)
    else:
        out().print(f"Unknown command {safe(name)}; /help lists them.")
    return None


def _show(session: ChatSession, paper_id: str) -> None:

    if not paper_id:
        out().print("usage: /show ID")
        return
    paper = session.memory.papers.get(paper_id) or session.chain.retriever.papers([paper_id]).get(paper_id)
    if paper is None:
        out().print(f"No paper {safe(paper_id)} in the index.")
        return
    session.memory.papers.setdefault(paper.paper_id, paper)
    out().print(f"[bold]{tag(paper.paper_id)}[/] [dim]{safe(paper.source)} #{paper.position}[/]")
    if paper.title:
        out().print(f"[bold]{safe(paper.title)}[/]")
    out().print(safe(paper.text))


def _filter(session: ChatSession, arg: str) -> None:
    from rag_assistant.errors import RagAssistantError

    try:
        shown = session.set_filter(arg)
    except RagAssistantError as exc:  # a bad filter leaves the one before in force
        from rag_assistant.cli.common import report_error

        report_error(exc)
        return
    out().print(f"filter: {safe(shown)}" if shown else "No filter: every paper is searched.")


def _switch_mode(session: ChatSession, settings: Settings, arg: str) -> None:
    from rag_assistant.errors import RagAssistantError

    if not arg:
        out().print(safe(_mode(session)))
        return
    if arg not in ("auto", "extractive", "llm"):
        out().print("usage: /mode auto|extractive|llm")
        return
    try:
        session.use_settings(settings.model_copy(update={"mode": arg}))
    except RagAssistantError as exc:
        from rag_assistant.cli.common import report_error

        report_error(exc)
        return
    out().print(safe(_mode(session)))


def _reader(data_dir: Path):  # noqa: ANN202 - Callable[[str], str]
    """prompt-toolkit with history and line editing on a terminal; plain input() otherwise."""
    import sys

    if not sys.stdin.isatty():
        return input
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory, History, InMemoryHistory

    from rag_assistant.files import private_dir, private_file

    history: History
    try:
        history = FileHistory(str(private_file(private_dir(data_dir) / "chat_history")))  # it holds every question
    except OSError:  # read-only storage: this session's lines only
        history = InMemoryHistory()
    prompt = PromptSession(history=history)
    return prompt.prompt


def register(app: typer.Typer) -> None:
    app.command()(chat)
