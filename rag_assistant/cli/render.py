"""Terminal rendering of an Answer (ask and chat share it)."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.markdown import Markdown

from rag_assistant.answer.models import Answer
from rag_assistant.cli.safe import clean, safe, tag


def mode_line(answer: Answer) -> str:
    if answer.mode == "llm":
        return f"mode: llm · model: {answer.model}"
    return "mode: extractive (offline, sentences quoted from the abstracts)"


def render_answer(console: Console, answer: Answer, show_sources: bool = False) -> None:
    if answer.condensed_question:
        console.print(f"[dim]searched for: {safe(answer.condensed_question)}[/]")
    if console.is_terminal:
        console.print(Markdown(clean(answer.answer)))
    else:  # pipes and files get the text itself: rich would crop list items to 80 columns
        console.print(clean(answer.answer), markup=False)
    flagged = [s for s in answer.sentences if s.flags]
    if flagged:
        console.print(f"[yellow]{len(flagged)} sentence(s) flagged by the citation check (see warnings)[/]")
    if answer.references:
        console.print("\n[bold]References[/]")
        for ref in answer.references:
            where = f"{ref.source} #{ref.position}"
            label = f"{ref.title}. " if ref.title else ""
            console.print(f"  [bold cyan]{tag(ref.paper_id)}[/] [dim]{safe(where)}[/] {safe(label + ref.snippet)}")
    if show_sources or answer.abstained:
        render_sources(console, answer, heading="Closest papers" if answer.abstained else "Sources")
    for warning in answer.warnings:
        console.print(f"[yellow]warning:[/] {safe(warning)}")
    console.print(f"[dim]{safe(mode_line(answer))} · {answer.timings.get('total', 0):.1f}s[/]")


def render_sources(console: Console, answer: Answer, heading: str = "Sources") -> None:
    console.print(f"\n[bold]{heading}[/]")
    for s in answer.sources:
        dense = f"{s['dense_score']:.3f}" if s.get("dense_score") is not None else "-"
        snippet = (s.get("title") or s["text"])[:100]
        console.print(
            f"  {s['rank']}. [bold]{tag(s['paper_id'])}[/] score {s['score']:.3f} cosine {dense} "
            f"[dim]{safe(snippet)}...[/]"
        )


def stream_answer(console: Console, ask: Callable[[Callable[[str], None]], Answer]) -> Answer:
    """Show an LLM answer as its tokens arrive; the verified answer is rendered after, in its place."""
    from rich.live import Live

    parts: list[str] = []
    with Live(console=console, transient=True, refresh_per_second=12) as live:

        def on_token(delta: str) -> None:
            parts.append(delta)
            live.update(Markdown(clean("".join(parts))))

        return ask(on_token)
