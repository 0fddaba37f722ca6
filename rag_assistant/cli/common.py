"""Shared CLI plumbing: global options -> Settings, consoles, JSON output, error rendering."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from rag_assistant.config import Settings

_consoles: dict[str, Console] = {}
_warned: list[bool] = []  # unknown variables are warned about once per process


def out() -> Console:
    if "out" not in _consoles:
        from rich.console import Console

        _consoles["out"] = _wrapping(Console(highlight=False))
    return _consoles["out"]


def err() -> Console:
    if "err" not in _consoles:
        from rich.console import Console

        _consoles["err"] = _wrapping(Console(stderr=True, highlight=False))
    return _consoles["err"]


def _wrapping(console: Console) -> Console:
    """Word-wrapped to the window on a terminal (the terminal itself would cut words in half); one line per
    line in pipes and files, so that output stays greppable."""
    console.soft_wrap = not console.is_terminal
    return console


def settings_from(ctx: typer.Context, **flags: Any) -> Settings:
    """Global options (stored on the context) plus this command's flags; None means not given. RAG_ASSISTANT_*
    variables that set nothing are warned about, once."""
    import os

    from rag_assistant.config import load_settings, unknown_env

    root = ctx.find_root()
    globals_: dict[str, Any] = dict(root.obj or {})
    config_file: Path | None = globals_.pop("config_file", None)
    settings = load_settings(config_file, **globals_, **flags)
    if not _warned:
        _warned.append(True)
        from rag_assistant.cli.safe import safe

        for note in unknown_env(os.environ):
            err().print(f"[yellow]warning:[/] {safe(note)}")
    return settings


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def report_error(exc: BaseException) -> int:
    """One line saying what happened, one saying how to fix it. Returns the exit code."""
    from rag_assistant.cli.safe import safe
    from rag_assistant.errors import RagAssistantError

    if isinstance(exc, RagAssistantError):
        console = err()
        console.print(f"[bold red]error:[/] {safe(exc.message)}")
        for line in exc.details[:50]:
            console.print(f"  - {safe(line)}")
        if len(exc.details) > 50:
            console.print(f"  ... and {len(exc.details) - 50} more")
        if exc.hint:
            console.print(f"[yellow]hint:[/] {safe(exc.hint)}")
        return exc.exit_code
    raise exc
