"""The Answer record: what ask --json prints, chat renders, batch writes, eval scores and the log stores."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class SentenceCheck:
    """One answer sentence after verification."""

    text: str
    citations: list[str] = field(default_factory=list)  # valid (retrieved) ids only
    support: dict[str, float] = field(default_factory=dict)  # cited id -> support score 0..1
    flags: list[str] = field(default_factory=list)  # "uncited", "weak_support", "invalid_citation_removed"


@dataclass
class Reference:
    paper_id: str
    source: str
    position: int
    title: str | None
    snippet: str
    byline: str = ""  # first authors · topic · year (corpus/fields.byline), when the paper has them


@dataclass
class Answer:
    question: str
    answer: str = ""
    citations: list[str] = field(default_factory=list)  # distinct valid cited ids, first-cited first
    references: list[Reference] = field(default_factory=list)
    sentences: list[SentenceCheck] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)  # retrieved papers with scores, best first
    mode: str = "extractive"  # extractive | llm
    model: str = ""
    prompt_version: str | None = None
    abstained: bool = False
    relevance: float | None = None  # retrieval relevance that abstention is decided on (see AnswerChain)
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage
    usage: dict[str, int] = field(default_factory=dict)  # LLM tokens when the server reports them
    condensed_question: str | None = None  # chat: the standalone question actually retrieved for
    plan: dict[str, Any] = field(default_factory=dict)  # what the question asks (plan.py): kind, max_papers
    survey: dict[str, Any] | None = None  # survey answers: the papers listed, possibly related, groups (survey.py)
    near_miss: dict[str, Any] | None = None  # no paper does what was asked: what is missing, the closest papers
    error: str | None = None  # batch/eval: set when the chain failed for this question

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Draft:
    """What a generator returns before verification."""

    text: str
    model: str
    prompt_version: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    abstained: bool = False  # the generator had nothing to say (extractive); LLM abstention is the chain's call
    labels: dict[str, str] = field(default_factory=dict)  # short source label in the prompt -> paper id
    warnings: list[str] = field(default_factory=list)  # e.g. the completion was cut at max_tokens
