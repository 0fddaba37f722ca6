"""The Answer record: what ask --json prints, chat renders, batch writes, eval scores and the log stores."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rag_assistant.retrieve import Source


class WarningKind(StrEnum):
    """What a warning shown with an answer is about."""

    QUESTION = "question"  # the question was cut to max_question_chars
    SEARCH = "search"  # the search saw papers hidden by an unfinished ingest
    FOLLOW_UP = "follow_up"  # chat: how a follow-up was resolved
    GENERATION = "generation"  # the model's text: cut at the length bound, a secret masked
    REMOVED = "removed"  # a reference the citation check removed (not retrieved, standing alone, a list)
    UNCITED = "uncited"  # a sentence, or the whole answer, cites no retrieved paper
    WEAK_SUPPORT = "weak_support"  # a cited abstract scores below support_threshold for its sentence
    EMPTY = "empty"  # nothing of the model's answer is left after the check
    SURVEY = "survey"  # matching papers the answer does not describe
    NEAR_MISS = "near_miss"  # a near miss answered from the abstracts, not by the LLM
    LOG = "log"  # the provenance log could not be written
    METADATA = "metadata"  # an author question listed from the index's metadata (authors.py)


@dataclass(frozen=True)
class AnswerWarning:
    """One warning shown with an answer; users see `detail` (terminal, --json, batch, eval, the log)."""

    kind: WarningKind
    detail: str


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
    sources: list[Source] = field(default_factory=list)  # retrieved papers with scores, best first
    mode: str = "extractive"  # extractive | llm
    model: str = ""
    prompt_version: str | None = None
    abstained: bool = False
    relevance: float | None = None  # retrieval relevance that abstention is decided on (see AnswerChain)
    warnings: list[AnswerWarning] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage
    usage: dict[str, int] = field(default_factory=dict)  # LLM tokens when the server reports them
    condensed_question: str | None = None  # chat: the standalone question actually retrieved for
    plan: dict[str, Any] = field(default_factory=dict)  # what the question asks (plan.py): kind, max_papers
    survey: dict[str, Any] | None = None  # survey answers: the papers listed, possibly related, groups (survey.py)
    near_miss: dict[str, Any] | None = None  # no paper does what was asked: what is missing, the closest papers
    error: str | None = None  # batch/eval: set when the chain failed for this question

    def as_dict(self) -> dict[str, Any]:
        """What users see (--json, batch, eval, the log): sources as Source.as_dict, warnings as their text."""
        out = asdict(replace(self, sources=[], warnings=[]))  # field order kept: the JSON is unchanged
        out["sources"] = [s.as_dict() for s in self.sources]
        out["warnings"] = [w.detail for w in self.warnings]
        return out


@dataclass
class Draft:
    """What a generator returns before verification."""

    text: str
    model: str
    prompt_version: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    abstained: bool = False  # the generator had nothing to say (extractive); LLM abstention is the chain's call
    labels: dict[str, str] = field(default_factory=dict)  # short source label in the prompt -> paper id
    warnings: list[AnswerWarning] = field(default_factory=list)  # e.g. the completion was cut at max_tokens
    quotes: bool = False  # its lines are quoted from the abstracts they cite (offline): their own references stay
