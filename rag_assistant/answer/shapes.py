"""The answer's shape once the papers are judged against the question: a survey (every paper that meets a
"which papers ...?" question, survey.py), a near miss (papers on the topic, none doing what was asked,
nearmiss.py), or the usual answer (the chain's generator). Each candidate is judged once, by the match model
(match.py), over one analysis of the question and of each paper (analysis.py)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from rag_assistant.answer.analysis import PaperView, QuestionView
from rag_assistant.answer.models import Answer, AnswerWarning, Draft, WarningKind
from rag_assistant.config import Settings
from rag_assistant.plan import Plan
from rag_assistant.retrieve import Retriever

if TYPE_CHECKING:
    from rag_assistant.answer.survey import Survey


class AnswerChain(Protocol):
    """What the shapes use of the chain (answer/chain.py), which calls them."""

    settings: Settings
    retriever: Retriever
    generator: Any

    def verify(self, answer: Answer, draft: Draft, views: list[PaperView]) -> None: ...


_CITED = re.compile(r"\[([^\[\]]+)\]")


@dataclass
class Judged:
    """The question and its candidate papers (best retrieved first): `probability`, each one's chance of doing
    what the question asks by the survey model (survey questions; else the near-miss model); `answerable`, the
    near-miss model's verdict on the best of the top k."""

    question: QuestionView
    views: list[PaperView]
    probability: np.ndarray
    answerable: float
    seconds: float

    def near_miss(self, threshold: float) -> bool:
        return self.answerable < threshold

    def by_id(self) -> dict[str, PaperView]:
        return {v.paper_id: v for v in self.views}


def judge(chain: AnswerChain, question: QuestionView, views: list[PaperView], k: int, survey: bool) -> Judged:
    """Every source judged against the question; the near-miss model reads the top k as a plain answer would."""
    from rag_assistant.answer.match import features, load_model

    t = time.perf_counter()
    r = chain.retriever
    near = load_model("near_miss").probability(features(question, views[:k], r.idf))
    probability = load_model("survey").probability(features(question, views, r.idf)) if survey else near
    best = float(near.max()) if len(near) else 0.0
    return Judged(question, views, probability, best, round(time.perf_counter() - t, 4))


def survey_answer(
    chain: AnswerChain, answer: Answer, judged: Judged, plan: Plan
) -> tuple[Callable[[Callable[[str], None] | None], Draft], Callable[[Draft], None]] | None:
    """The papers that meet the question, one verified line each, under the count and group names; the ones
    near the cut-off listed apart; any the generator did not describe named at the end. Returns the generator
    call for the lines and what puts its draft into the answer (the chain makes the call between the two);
    None when no paper clearly meets the question, and the answer is a near miss."""
    from rag_assistant.answer.extractive import key_sentence
    from rag_assistant.answer.survey import select

    s = chain.settings
    survey = select(
        judged.views, judged.probability, s.survey_include, s.survey_possible, plan.max_papers,
        judged.question.word_stems,
    )  # fmt: skip
    if not survey.papers:  # candidates near the cut-off at best: none clearly does what was asked
        near_miss_answer(chain, answer, judged)
        return None
    by_id = judged.by_id()
    survey.notes = {p: key_sentence(judged.question, by_id[p]) or "" for p in survey.possible}
    answer.survey = survey.as_dict()
    listed = [by_id[p] for p in survey.papers + survey.possible]
    answer.sources = [replace(v.source, rank=i) for i, v in enumerate(listed, start=1)]
    chosen = [by_id[p] for p in survey.papers]
    return partial(chain.generator.survey, judged.question, chosen), partial(_use_survey, chain, answer, survey, by_id)


def _use_survey(chain: AnswerChain, answer: Answer, survey: Survey, by_id: dict[str, PaperView], draft: Draft) -> None:
    """The survey's lines verified, every matching paper described or named, assembled under the count."""
    from rag_assistant.answer.survey import assemble

    t = time.perf_counter()
    chain.verify(answer, draft, [by_id[p] for p in survey.papers])
    left_out = [p for p in survey.papers if p not in answer.citations]
    extra = []
    if left_out:  # every listed paper is cited or named as left out, never silently dropped
        who = "the model" if chain.generator.mode == "llm" else "the answerer (no usable sentence)"
        detail = f"{len(left_out)} of {len(survey.papers)} matching papers not described by {who}"
        answer.warnings.append(AnswerWarning(WarningKind.SURVEY, detail))
        extra.append("Also matching, not described: " + ", ".join(f"[{p}]" for p in left_out))
    answer.answer = assemble(survey, _lines(answer.answer, by_id), extra)
    answer.timings["verify"] = round(time.perf_counter() - t, 4)


def near_miss_answer(chain: AnswerChain, answer: Answer, judged: Judged) -> None:
    """ "No paper here does X": the closest papers, each with its key sentence, labelled as near misses. Composed
    from the abstracts whatever the mode (a model asked the question would answer it from these papers)."""
    from rag_assistant.answer.extractive import ExtractiveGenerator, cite, key_sentence
    from rag_assistant.answer.nearmiss import lead_text, near_miss

    miss = near_miss(judged.question, judged.views, judged.probability)
    by_id = judged.by_id()
    lines = []
    for pid in miss.closest:
        sentence = key_sentence(judged.question, by_id[pid])
        if sentence is not None:
            lines.append("- " + cite(sentence, pid))
    answer.near_miss = miss.as_dict()
    model = ExtractiveGenerator.describe()
    if answer.mode != "extractive":
        detail = "near miss: the closest papers are quoted, the LLM was not asked"
        answer.warnings.append(AnswerWarning(WarningKind.NEAR_MISS, detail))
        answer.mode, answer.model = "extractive", model
    draft = Draft("\n\n".join(lines), model, quotes=True)
    chain.verify(answer, draft, [by_id[p] for p in miss.closest])
    answer.answer = "\n\n".join([lead_text(miss), answer.answer])


def _lines(text: str, papers: dict[str, PaperView]) -> dict[str, str]:
    """Verified paragraphs by the first paper each cites."""
    lines: dict[str, str] = {}
    for paragraph in text.split("\n\n"):
        cited = [c for c in _CITED.findall(paragraph) if c in papers]
        if cited and cited[0] not in lines:
            lines[cited[0]] = paragraph
    return lines
