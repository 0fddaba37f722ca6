"""The options several commands share, defined once: the answer block (-k, --mode, --llm-model,
--llm-base-url) of ask, chat, batch and eval, and the Settings they make with the global options."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from rag_assistant.cli.common import settings_from

if TYPE_CHECKING:
    from rag_assistant.config import Settings


def unset_option(*names: str, help: str, metavar: str | None = None) -> Any:  # noqa: ANN401 - typer's OptionInfo
    """A typer option whose default is None (not given) and not shown in --help."""
    return typer.Option(*names, help=help, metavar=metavar, show_default=False)


# Not given = the top_k setting, whose default (config.py) tests/test_cli_settings.py checks this against;
# importing the settings here would slow down --help
TopKOpt = Annotated[
    int | None,
    typer.Option(
        "-k", "--top-k", metavar="N", help="Papers retrieved.", min=1, max=50, show_default="the top_k setting, 5"
    ),
]
ModeOpt = Annotated[
    str | None,
    unset_option(
        "--mode", metavar="[auto|extractive|llm]", help="auto: llm when an LLM is configured, else extractive."
    ),
]
ModelOpt = Annotated[
    str | None, unset_option("--llm-model", metavar="MODEL", help="Model name. Env: RAG_ASSISTANT_LLM_MODEL.")
]
BaseUrlOpt = Annotated[
    str | None,
    unset_option("--llm-base-url", metavar="URL", help="OpenAI-compatible base URL. Env: OPENAI_BASE_URL."),
]


def answer_settings(
    ctx: typer.Context, k: int | None, mode: str | None, llm_model: str | None, llm_base_url: str | None
) -> Settings:
    """Settings from the global options plus the answer block (None: not given on the command line)."""
    return settings_from(ctx, top_k=k, mode=mode, llm_model=llm_model, llm_base_url=llm_base_url)


AuthorOpt = Annotated[
    list[str] | None,
    unset_option("--author", metavar="NAME", help="Only papers by this author (repeat: any of them)."),
]
YearOpt = Annotated[
    str | None, unset_option("--year", metavar="YEARS", help="Only papers of these years: 2024, 2023-2025, 2023-.")
]
TopicOpt = Annotated[
    list[str] | None,
    unset_option("--topic", metavar="TEXT", help="Only papers whose topic (track) contains TEXT, in any case."),
]
WhereOpt = Annotated[
    list[str] | None,
    unset_option("--where", metavar="FIELD=VALUE", help="Only papers with this field value (repeatable)."),
]


def parsed_filters(
    author: list[str] | None, year: str | None, topic: list[str] | None, where: list[str] | None
) -> list[Any]:
    """The filter options parsed (a FilterError, exit 2, when malformed), not yet checked against an index."""
    from rag_assistant.index.filters import parse_filters

    return parse_filters(author or (), year, topic or (), where or ())


def apply_filters(
    retriever: Any,  # noqa: ANN401 - a Retriever (imported late: --help stays fast)
    author: list[str] | None,
    year: str | None,
    topic: list[str] | None,
    where: list[str] | None,
) -> str:
    """Restrict the retriever's searches to the papers the filter options select, applied before ranking; what
    they were restricted to, for the reader ("" when no filter was given)."""
    from rag_assistant.index.filters import describe

    filters = parsed_filters(author, year, topic, where)
    return describe(retriever.restrict(filters)) if filters else ""
