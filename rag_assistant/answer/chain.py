"""The answer chain: retrieve -> abstain? -> generate -> verify citations -> Answer (-> provenance log), in three
phases: `prepare` (retrieve and judge; an abstention or a near miss is answered there), `generate` (the
generator's draft: in llm mode the model's request, which reads nothing shared) and `finish` (verify, log).
`ask` runs the three; batch runs them itself, holding its lock around the ones that need it."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Protocol

from rag_assistant.answer.analysis import PaperView, QuestionView, analyse_papers, analyse_question
from rag_assistant.answer.authors import given, metadata_answer, named_in, narrowed, papers_named
from rag_assistant.answer.citations import SupportScorer, is_not_found, references, verify
from rag_assistant.answer.models import Answer, AnswerWarning, Draft, WarningKind
from rag_assistant.answer.named import Named
from rag_assistant.answer.question import check_question
from rag_assistant.answer.refs import Resolver
from rag_assistant.answer.relevance import relevance
from rag_assistant.answer.thresholds import calibrated
from rag_assistant.config import Settings
from rag_assistant.errors import ConfigError, LogNotWrittenError
from rag_assistant.index.filters import describe
from rag_assistant.index.keyword_fields import FieldFilter
from rag_assistant.plan import Plan, plan_question, with_metadata
from rag_assistant.retrieve import Retriever, Source
from rag_assistant.text import clean_markup

ABSTAIN_TEXT = "The corpus does not cover this question: no retrieved abstract is relevant enough to answer it."
MODEL_ABSTAIN_TEXT = "The corpus does not cover this question: the model found no answer in the retrieved abstracts."
EMPTY_ABSTAIN_TEXT = "No answer: the model wrote only references, and nothing was left once they were checked."


class Generator(Protocol):
    """Writes the draft answer from the retrieved sources. `on_token`, when given, receives the answer's text
    as it is produced; a generator that has its answer only whole (extractive) does not call it, and the
    verified answer is shown once ready."""

    mode: str
    model: str

    def answer(
        self, question: QuestionView, papers: list[PaperView], on_token: Callable[[str], None] | None = None
    ) -> Draft: ...

    def survey(
        self, question: QuestionView, papers: list[PaperView], on_token: Callable[[str], None] | None = None
    ) -> Draft:
        """A survey answer: one cited paragraph per paper (a line: "- ... [id]."), in the given order."""
        ...


def make_generator(settings: Settings, retriever: Retriever) -> Generator:
    """The generator of the settings' mode."""
    mode = settings.resolved_mode()
    if mode == "llm":
        if not settings.llm_configured:
            raise ConfigError(
                "llm mode needs an LLM: no API key or base URL is configured",
                "set OPENAI_API_KEY and/or OPENAI_BASE_URL (or --llm-base-url), or use --mode extractive",
            )
        from rag_assistant.answer.llm import LLMGenerator

        return LLMGenerator(settings)
    from rag_assistant.answer.extractive import ExtractiveGenerator

    return ExtractiveGenerator(settings.answer_sentences)


@dataclass
class Job:
    """An answer between the chain's phases: `request` is the generator call still to make (None: `prepare`
    answered), `use` puts its draft, verified, into the answer."""

    answer: Answer
    started: float
    notes: list[AnswerWarning]
    depth: int | None = None  # rank this many papers (eval's metrics); the answer reads the first k
    ranking: list[Source] = field(default_factory=list)  # all retrieval returned, best first
    request: Callable[[Callable[[str], None] | None], Draft] | None = None
    use: Callable[[Draft], None] | None = None
    draft: Draft | None = None


class AnswerChain:
    def __init__(
        self,
        settings: Settings,
        retriever: Retriever | None = None,
        generator: Generator | None = None,
        log: bool = True,
    ) -> None:
        # the cut-offs of the index's kind of sentence vectors (pooled or standalone), where the user set none
        self.settings = calibrated(settings)
        self.retriever = retriever or Retriever(settings)
        self.generator = generator or make_generator(settings, self.retriever)
        self.log = log

    @property
    def mode(self) -> str:
        return self.generator.mode

    def analyse(self, question: str, sources: list[Source]) -> tuple[QuestionView, list[PaperView]]:
        """The question and each source read once (answer/analysis.py) for everything that judges them."""
        return analyse_question(question, self.retriever.embedder.embed_cached), self.analyse_papers(sources)

    def analyse_papers(self, sources: list[Source]) -> list[PaperView]:
        return analyse_papers(sources, self.retriever.sentence_vectors, self.retriever.embedder.embed_cached)

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
        retrieved: list[Source] | None = None,
    ) -> Answer:
        """Answer one question (`prepare` says what the arguments mean)."""
        job = self.prepare(question, k, retrieval_query, pinned, retrieved)
        self.generate(job, on_token)
        return self.finish(job, kind, session)

    def prepare(
        self,
        question: str,
        k: int | None = None,
        retrieval_query: str | None = None,
        pinned: list[str] | None = None,
        retrieved: list[Source] | None = None,
        filters: Sequence[FieldFilter] | None = None,
        depth: int | None = None,
    ) -> Job:
        """Retrieve and judge. `retrieval_query` (chat's standalone question) is what is retrieved for and
        answered; `pinned` paper ids, when given, are the only sources (and abstention does not apply);
        `retrieved` is what a search for the query found already (chat's topic-shift check), used unless the
        question asks for a survey (which retrieves deeper); `filters` (a batch row's own, not yet resolved)
        restrict this question's searches, in place of the retriever's for the fields they name; `depth` ranks
        that many papers (the job's `ranking`, for eval's metrics) of which the first k are answered from."""
        question, notes = check_question(question, self.settings.max_question_chars)
        started = time.perf_counter()
        answer = Answer(question=question, mode=self.generator.mode, model=self.generator.model)
        if retrieval_query and retrieval_query != question:
            answer.condensed_question = retrieval_query
        query = retrieval_query or question
        job = Job(answer, started, notes, depth=depth)
        with given(self.retriever, filters):
            plan = plan_question(query, k or self.settings.top_k, self.settings.survey_max_papers)
            named = named_in(self.retriever, query) if not pinned else Named()
            if named:
                listed = len(papers_named(self.retriever, named)) if named.listing else None
                plan = with_metadata(plan, named.as_dict(), listed)
            answer.plan = plan.as_dict()
            if self.retriever.where:  # the flags', chat's /filter or a batch row's: what the search was held to
                answer.plan["filters"] = describe(self.retriever.where)
            with narrowed(self.retriever, named):
                if metadata_answer(self, answer, named, query):
                    answer.timings["retrieve"] = round(time.perf_counter() - started, 4)
                    return job
                self._prepare(job, query, plan, k, pinned, None if named.filters else retrieved)
        return job

    def _prepare(
        self, job: Job, query: str, plan: Plan, k: int | None, pinned: list[str] | None, retrieved: list[Source] | None
    ) -> None:
        """Retrieve (within the filters, the flags' and the question's) and judge, as `prepare` says."""
        answer, started, notes = job.answer, job.started, job.notes
        sources = self.pinned_sources(pinned) if pinned else []
        if not sources:
            job.ranking = retrieved if retrieved and not plan.survey else self._retrieve(query, plan, k, job.depth)
            sources = job.ranking if plan.survey else job.ranking[: k or self.settings.top_k]
            notes += [AnswerWarning(WarningKind.SEARCH, w) for w in self.retriever.search_warnings()]
        answer.sources = sources[: plan.max_papers if plan.survey else len(sources)]
        answer.timings["retrieve"] = round(time.perf_counter() - started, 4)

        # relevance reads the top three papers (and every score); the rest are read only when not abstaining
        question_view, views = self.analyse(query, sources[:3])
        answer.relevance = relevance(question_view, sources, views, self.retriever.idf)  # 0..1, relevance.py
        # a survey question's relevance is read over its many candidates and runs lower (config: survey_abstain_...)
        floor = self.settings.survey_abstain_threshold if plan.survey else self.settings.abstain_threshold
        if not (pinned and sources) and answer.relevance < floor:
            answer.abstained = True
            answer.answer = ABSTAIN_TEXT
            return
        views += self.analyse_papers(sources[3:])
        if pinned:
            self._answer_job(job, question_view, views)
        else:
            from rag_assistant.answer import shapes

            judged = shapes.judge(self, question_view, views, k or self.settings.top_k, plan.survey)
            answer.timings["judge"] = judged.seconds
            if judged.near_miss(self.settings.near_miss_threshold):
                shapes.near_miss_answer(self, answer, judged)
            elif plan.survey:
                job.request, job.use = shapes.survey_answer(self, answer, judged, plan) or (None, None)
            else:
                self._answer_job(job, question_view, views)

    def generate(self, job: Job, on_token: Callable[[str], None] | None = None) -> None:
        """The generator's draft, when `prepare` left one to write."""
        if job.request is not None:
            t = time.perf_counter()
            job.draft = job.request(on_token)
            job.answer.timings["generate"] = round(time.perf_counter() - t, 4)

    def finish(self, job: Job, kind: str = "ask", session: str | None = None) -> Answer:
        """The draft verified into the answer, the answer logged."""
        answer, draft = job.answer, job.draft
        if draft is not None and job.use is not None:
            answer.model, answer.prompt_version, answer.usage = draft.model, draft.prompt_version, draft.usage
            answer.warnings += draft.warnings
            job.use(draft)
        answer.warnings[:0] = job.notes
        answer.timings["total"] = round(time.perf_counter() - job.started, 4)
        if self.log:
            from rag_assistant.answer.provenance import record

            try:
                record(self.settings.data_dir, answer, kind=kind, session=session)
            except LogNotWrittenError as exc:  # e.g. an index on read-only storage: the answer stands
                answer.warnings.append(AnswerWarning(WarningKind.LOG, exc.message))
        return answer

    def _retrieve(self, query: str, plan: Plan, k: int | None, depth: int | None) -> list[Source]:
        if plan.survey:  # deeper: every paper that meets the question, not the top k
            return self.retriever.survey(query, self.settings.survey_candidates, self.settings.survey_depth)
        return self.retriever.search(query, max(k or self.settings.top_k, depth or 0))

    def _answer_job(self, job: Job, question: QuestionView, papers: list[PaperView]) -> None:
        job.request = partial(self.generator.answer, question, papers)
        job.use = partial(self._use_answer, job.answer, papers)

    def _use_answer(self, answer: Answer, papers: list[PaperView], draft: Draft) -> None:
        if draft.abstained:
            answer.abstained = True
            answer.answer = ABSTAIN_TEXT if not draft.text else draft.text
            return
        t = time.perf_counter()
        self.verify(answer, draft, papers)
        answer.timings["verify"] = round(time.perf_counter() - t, 4)

    def verify(self, answer: Answer, draft: Draft, views: list[PaperView]) -> None:
        """Verify everything the generator wrote against these papers; abstention is decided here, on the whole
        answer: no valid citation at all and nothing but the not-found phrase. Anything else is shown verified,
        with warnings."""
        scorer = SupportScorer(self.retriever.embedder.embed_cached, views)
        papers = [v.source.paper for v in views]
        threshold = self.settings.support_threshold
        checked = verify(draft.text, papers, scorer, threshold, labels=draft.labels, quotes=draft.quotes)
        if not checked.citations and is_not_found(draft.text, Resolver([p.paper_id for p in papers], draft.labels)):
            answer.abstained = True
            answer.answer = MODEL_ABSTAIN_TEXT
            answer.warnings += [w for w in checked.warnings if w.kind is WarningKind.REMOVED]
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
            detail = "nothing of the model's answer is left after the citation check: only references"
            answer.warnings.append(AnswerWarning(WarningKind.EMPTY, detail))
        elif not checked.citations:
            answer.warnings.append(AnswerWarning(WarningKind.UNCITED, "the answer cites no retrieved paper"))
