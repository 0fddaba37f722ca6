"""Terminal rendering of an Answer (ask and chat share it)."""

from __future__ import annotations

import re
from collections.abc import Callable

from rich.console import Console

from rag_assistant.answer.models import Answer
from rag_assistant.cli.safe import clean, safe, tag
from rag_assistant.text import clean_markup

# Lists, headings, emphasis, code: what an answer needs Markdown for (a plain paragraph reads the same without it,
# and rich's Markdown costs 0.06 s to import on a one-off `ask`)
_MARKDOWN = re.compile(r"^\s*(?:[-*+] |\d+[.)] |#)|[*_`]", re.M)


def mode_line(answer: Answer) -> str:
    if answer.mode == "llm":
        return f"mode: llm · model: {answer.model}"
    return "mode: extractive (offline, sentences quoted from the abstracts)"


def render_answer(console: Console, answer: Answer, show_sources: bool = False) -> None:
    if answer.condensed_question:
        console.print(f"[dim]searched for: {safe(answer.condensed_question)}[/]")
    if answer.plan.get("filtered"):  # metadata the question named (answer/named.py), like the flags' line
        console.print(f"[dim]filtered: {safe(str(answer.plan['filtered']))} (named in the question)[/]")
    text = clean(answer.answer)
    if console.is_terminal and _MARKDOWN.search(text):
        from rich.markdown import Markdown

        console.print(Markdown(text))
    else:  # pipes and files get the text itself: rich would crop list items to 80 columns
        console.print(text, markup=False, highlight=False)
    render_possible(console, answer)
    flagged = [s for s in answer.sentences if s.flags]
    if flagged:
        console.print(f"[yellow]{len(flagged)} sentence(s) flagged by the citation check (see warnings)[/]")
    if answer.references:
        console.print("\n[bold]References[/]")
        width = 160 if len(answer.references) <= 8 else 70  # a survey's long list stays scannable
        for ref in answer.references:
            where = ref.byline or f"{ref.source} #{ref.position}"
            label = f"{ref.title}. " if ref.title else ""
            text = label + ref.snippet
            text = text if len(text) <= width else text[:width].rstrip() + "..."
            console.print(f"  [bold cyan]{tag(ref.paper_id)}[/] [dim]{safe(where)}[/] {safe(text)}")
    if show_sources or answer.abstained:
        render_sources(console, answer, heading="Closest papers" if answer.abstained else "Sources")
    for warning in answer.warnings:
        console.print(f"[yellow]warning:[/] {safe(warning.detail)}")
    console.print(f"[dim]{safe(mode_line(answer))} · {answer.timings.get('total', 0):.1f}s[/]")


def render_possible(console: Console, answer: Answer) -> None:
    """A survey's papers near the cut-off: shown apart, never mixed into the answer."""
    possible = (answer.survey or {}).get("possible") or []
    if not possible:
        return
    notes = (answer.survey or {}).get("notes") or {}
    console.print(f"\n[bold]Possibly related[/] [dim]({len(possible)}, near the cut-off: check before citing)[/]")
    for pid in possible:
        console.print(f"  [bold cyan]{tag(pid)}[/] {safe(clean(clean_markup(notes.get(pid, ''))))}")


def render_sources(console: Console, answer: Answer, heading: str = "Sources") -> None:
    console.print(f"\n[bold]{heading}[/]")
    for s in answer.sources:
        dense = f"{s.dense_score:.3f}" if s.dense_score is not None else "-"
        snippet = (s.paper.title or s.paper.text)[:100]
        console.print(
            f"  {s.rank}. [bold]{tag(s.paper_id)}[/] score {s.score:.3f} cosine {dense} [dim]{safe(snippet)}...[/]"
        )


def stream_answer(console: Console, ask: Callable[[Callable[[str], None]], Answer]) -> Answer:
    """Show an LLM answer as its tokens arrive; the verified answer is rendered after, in its place."""
    draft = StreamDraft(console)
    try:
        return ask(draft.write)
    finally:
        draft.erase()


class StreamDraft:
    """The streamed text of an answer, shown as it arrives and erased when the verified answer is ready.

    Output stays linear in the text: new text is appended as written (the terminal wraps it) and never
    rendered again; re-rendering the whole text at every token wrote 18 MB for a 168 KB completion. The draft
    keeps to the rows the window shows, so that all of it can be erased (rows scrolled into the scrollback
    cannot be); past them one status line counts what arrives, rewritten only after as many new characters as
    it is long. The verified answer is rendered as Markdown afterwards; the draft is the model's text as is."""

    def __init__(self, console: Console) -> None:
        self.file = console.file
        self.width = max(2, console.width)
        self.last_row = max(0, console.height - 2)  # the draft's rows; the status line goes on the row after
        self.row = self.col = 0
        self.started = False
        self.hidden = 0  # characters past the window, counted on the status line
        self.counted = -1  # `hidden` when the status line was last written; -1: not shown yet

    def write(self, delta: str) -> None:
        text = clean(delta).replace("\t", "    ")
        if self.counted < 0:
            shown = self._fit(text)
            self._out(text[:shown])
            text = text[shown:]
            if not text:
                return
        self.hidden += len(text)
        status = f"... {self.hidden:,} more characters, shown checked when the answer is complete"[: self.width - 1]
        if self.counted < 0 or self.hidden - self.counted >= len(status):
            self._out(("\r\n" if self.counted < 0 else "\r") + status + "\x1b[K")
            self.counted = self.hidden

    def erase(self) -> None:
        """Remove the draft and the status line: back to where the stream started, everything below cleared."""
        if self.started:
            up = self.row + (self.counted >= 0)
            self._out("\r" + (f"\x1b[{up}A" if up else "") + "\x1b[J")
            self.started = False

    def _fit(self, text: str) -> int:
        """How much of `text` fits on the draft's rows; moves the cursor position past it."""
        from rich.cells import get_character_cell_size

        for i, char in enumerate(text):
            cells = 0 if char == "\n" else get_character_cell_size(char)
            if char == "\n" or self.col + cells > self.width:  # a new row, explicit or wrapped by the terminal
                if self.row == self.last_row:
                    return i
                self.row, self.col = self.row + 1, 0
            self.col += cells
        return len(text)

    def _out(self, text: str) -> None:
        if text:
            self.started = True
            self.file.write(text)
            self.file.flush()
