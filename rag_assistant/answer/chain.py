"""The answer chain: retrieve -> abstain? -> generate -> verify citations -> Answer (-> provenance log)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from rag_assistant.answer.citations import SupportScorer, is_not_found, references, verify
from rag_assistant.answer.models import Answer, Draft
from rag_assistant.answer.question import check_question
from rag_assistant.answer.refs import Resolver
from rag_assistant.config import Settings
from rag_assistant.corpus.models import Paper
from rag_assistant.errors import ConfigError
from rag_assistant.retrieve import Retriever, Source
from rag_assistant.text import clean_markup

if TYPE_CHECKING:
    from rag_assistant.answer.llm_worker import LLMWorker

ABSTAIN_TEXT = "The corpus does not cover this question: no retrieved abstract is relevant enough to answer it."
MODEL_ABSTAIN_TEXT = "The corpus does not cover this question: the model found no answer in the retrieved abstracts."
EMPTY_ABSTAIN_TEXT = "No answer: the model wrote only references, and nothing was left once they were checked."


class Generator(Protocol):
    """Writes the draft answer from the retrieved sources. `on_token`, when given, receives the answer's text
    as it is produced; a generator that has its answer only whole (extractive) does not call it, and the
    verified answer is shown once ready."""

    mode: str
    model: str

    def answer(self, question: str, sources: list[Source], on_token: Callable[[str], None] | None = None) -> Draft: ...


def make_generator(settings: Settings, retriever: Retriever, worker: LLMWorker | None = None) -> Generator:
    """The generator of the settings' mode; an LLM one sends its first request through `worker` when given."""
    mode = settings.resolved_mode()
    if mode == "llm":
        if not settings.llm_configured:
            raise ConfigError(
                "llm mode needs an LLM: no API key or base URL is configured",
                "set OPENAI_API_KEY and/or OPENAI_BASE_URL (or --llm-base-url), or use --mode extractive",
            )
        from rag_assistant.answer.llm import LLMGenerator

        if worker is None:
            return LLMGenerator(settings)
        from rag_assistant.answer.llm_worker import WorkerClient

        return LLMGenerator(settings, WorkerClient(settings, worker))
    from rag_assistant.answer.extractive import ExtractiveGenerator

    return ExtractiveGenerator(retriever.embedder.embed_cached, settings.answer_sentences, retriever.sentence_vectors)


class AnswerChain:
    def __init__(
        self,
        settings: Settings,
        retriever: Retriever | None = None,
        generator: Generator | None = None,
        log: bool = True,
    ) -> None:
        self.settings = settings
        self.retriever = retriever or Retriever(settings)
        self.generator = generator or make_generator(settings, self.retriever)
        self.log = log

    @property
    def mode(self) -> str:
        return self.generator.mode

    def relevance(self, question: str, sources: list[Source]) -> float:
        """How well the retrieved papers answer the question, 0..1 (answer/relevance.py says how)."""
        from rag_assistant.answer.relevance import relevance

        r = self.retriever
        return relevance(question, sources, r.idf, r.embedder.embed_cached, r.sentence_vectors)

    def pinned_sources(self, paper_ids: list[str]) -> list[Source]:
        """Papers the user pointed at by id (chat follow-ups): answered from directly, no retrieval."""
        papers = self.retriever.papers(paper_ids)
        return [Source(papers[p], 1.0, rank=i + 1) for i, p in enumerate(x for x in paper_ids if x in papers)]

    def ask(
        self,
        question: str,
        k: int | None = None,
        on_token: Callable[[str], None] | None = None,
        kind: str = "ask",
        session: str | None = None,
        retrieval_query: str | None = None,
        pinned: list[str] | None = None,
    ) -> Answer:
        """Answer one question. `retrieval_query` (chat's standalone question) is what is retrieved for and
        answered; `pinned` paper ids, when given, are the only sources (and abstention does not apply)."""
        question, notes = check_question(question, self.settings.max_question_chars)
        started = time.perf_counter()
        answer = Answer(question=question, mode=self.generator.mode, model=self.generator.model)
        if retrieval_query and retrieval_query != question:
            answer.condensed_question = retrieval_query
        query = retrieval_query or question
        sources = self.pinned_sources(pinned) if pinned else []
        if not sources:
            sources = self.retriever.search(query, k)
        answer.sources = [s.as_dict() for s in sources]
        answer.timings["retrieve"] = round(time.perf_counter() - started, 4)

        answer.relevance = self.relevance(query, sources)
        if not (pinned and sources) and answer.relevance < self.settings.abstain_threshold:
            answer.abstained = True
            answer.answer = ABSTAIN_TEXT
        else:
            t = time.perf_counter()
            draft = self.generator.answer(query, sources, on_token=on_token)
            answer.timings["generate"] = round(time.perf_counter() - t, 4)
            answer.model, answer.prompt_version, answer.usage = draft.model, draft.prompt_version, draft.usage
            answer.warnings += draft.warnings
            if draft.abstained:
                answer.abstained = True
                answer.answer = ABSTAIN_TEXT if not draft.text else draft.text
            else:
                t = time.perf_counter()
                self._verify(answer, draft, [s.paper for s in sources])
                answer.timings["verify"] = round(time.perf_counter() - t, 4)
        answer.warnings[:0] = notes
        answer.timings["total"] = round(time.perf_counter() - started, 4)
        if self.log:
            from rag_assistant.answer.provenance import record

            record(self.settings.data_dir, answer, kind=kind, session=session)
        return answer

    def _verify(self, answer: Answer, draft: Draft, papers: list[Paper]) -> None:
        """Verify everything the generator wrote; abstention is decided here, on the whole answer: no valid
        citation at all and nothing but the not-found phrase. Anything else is shown verified, with warnings."""
        scorer = SupportScorer(self.retriever.embedder.embed_cached, self.retriever.sentence_vectors)
        checked = verify(draft.text, papers, scorer, self.settings.support_threshold, labels=draft.labels)
        if not checked.citations and is_not_found(draft.text, Resolver([p.paper_id for p in papers], draft.labels)):
            answer.abstained = True
            answer.answer = MODEL_ABSTAIN_TEXT
            answer.warnings += [w for w in checked.warnings if w.startswith("removed")]
            return
        answer.answer = checked.text  # the text verified is the text shown (LaTeX made readable first)
        answer.sentences = checked.sentences
        answer.citations = checked.citations
        answer.warnings += checked.warnings
        answer.references = [replace(r, snippet=clean_markup(r.snippet)) for r in references(checked.citations, papers)]
        if not checked.text:
            # a model that wrote only references ("[1][2][3]") answered nothing: an abstention, not an answer
            answer.abstained = True
            answer.answer = EMPTY_ABSTAIN_TEXT
            answer.warnings.append("nothing of the model's answer is left after the citation check: only references")
        elif not checked.citations:
            answer.warnings.append("the answer cites no retrieved paper")
