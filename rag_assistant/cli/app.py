"""Typer application and entry point. Heavy libraries are imported inside commands, never here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import click
import typer
from typer.core import TyperCommand

from rag_assistant import __version__

app = typer.Typer(
    name="rag-assistant",
    help="Answer questions about a corpus of paper abstracts, citing the papers used.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"rag-assistant {__version__}")
        raise typer.Exit()


@app.callback()
def _global(
    ctx: typer.Context,
    data_dir: Annotated[  # a str: typer would turn "" into Path("."), the current directory
        str | None,
        typer.Option(
            metavar="PATH", help="Data directory (index, logs). Env: RAG_ASSISTANT_DATA_DIR.", show_default=False
        ),
    ] = None,
    chroma_url: Annotated[
        str | None,
        typer.Option(
            metavar="URL", help="Use a Chroma server at this URL instead of the embedded one.", show_default=False
        ),
    ] = None,
    collection: Annotated[
        str | None, typer.Option(metavar="NAME", help="Chroma collection name.", show_default=False)
    ] = None,
    chroma_tenant: Annotated[
        str | None, typer.Option(metavar="NAME", help="Chroma tenant on the server.", show_default=False)
    ] = None,
    chroma_database: Annotated[
        str | None, typer.Option(metavar="NAME", help="Chroma database on the server.", show_default=False)
    ] = None,
    embedding_base_url: Annotated[
        str | None,
        typer.Option(metavar="URL", help="Embed on this OpenAI-compatible /v1/embeddings server.", show_default=False),
    ] = None,
    embedding_api_model: Annotated[
        str | None,
        typer.Option(metavar="MODEL", help="Model name sent to the embedding server.", show_default=False),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(metavar="PATH", help="TOML settings file. Env: RAG_ASSISTANT_CONFIG.", show_default=False),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    ctx.obj = {"data_dir": data_dir, "chroma_url": chroma_url, "collection": collection, "config_file": config}
    ctx.obj |= {"embedding_base_url": embedding_base_url, "embedding_api_model": embedding_api_model}
    ctx.obj |= {"chroma_tenant": chroma_tenant, "chroma_database": chroma_database}


class ReadableHelp(TyperCommand):
    """--help in click's plain style: a metavar a user can read (PATH..., N, QUESTION) where typer prints
    Python types (`<list[Path]>`, `<int range>`, `{query}`). Declared metavars are kept; a parameter without
    one is shown by its name, as click does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # noqa: ANN401 - click's signature
        super().__init__(*args, **kwargs)
        for param in self.params:
            if param.metavar is None and not getattr(param, "is_flag", False):
                param.metavar = _metavar(param)

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                pieces.append(param.metavar if param.required else f"[{param.metavar}]")
        return pieces

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        args, opts = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                args.append((str(param.metavar), record[1]))  # typer would add the Python type after the name
            else:
                opts.append(record)
        for title, rows in (("Arguments", args), ("Options", opts)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def _metavar(param: click.Parameter) -> str:
    """click's own default: the parameter's name (QUERY, PATHS..., LIMIT); commands declare better ones."""
    name = (param.name or "value").upper()
    return f"{name}..." if param.param_type_name == "argument" and param.nargs != 1 else name


def _register() -> None:
    from rag_assistant.cli import answer_cmds, batch_cmds, chat_cmds, eval_cmds, generate_cmds, index_cmds

    for module in (index_cmds, answer_cmds, chat_cmds, batch_cmds, eval_cmds, generate_cmds):
        module.register(app)
    for command in app.registered_commands:
        if command.cls in (None, TyperCommand):  # a command that chose its own class keeps it
            command.cls = ReadableHelp


_register()


def main() -> None:
    from rag_assistant.cli.common import report_error

    try:
        app()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    except Exception as exc:  # only our own errors are turned into a line; bugs keep their traceback
        sys.exit(report_error(exc))
