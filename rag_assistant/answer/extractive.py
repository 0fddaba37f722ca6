"""Offline answerer: quotes the abstract sentences that answer the question and cites each one.

Sentence score = 0.65 * cosine(question, sentence)
               + 0.25 * question-term recall (Snowball stems, weighted by IDF among the candidate sentences)
               + 0.10 * the paper's retrieval score relative to the best paper
               + a role bonus: +0.04 for method and result sentences, -0.06 for background, -0.3 for other
                 (roles.py): background restates the problem, it does not answer a question about the paper.
The answer's shape follows the question (roles.asks_for_topic; when the words do not say, a runner-up within
90% of the leader's retrieval score makes it a topic):
- one paper: its best-scoring sentence, its best method and best result sentence, then more of its sentences
  within 60% of the best, up to `answer_sentences`, in abstract order; background only if it has nothing else.
- a topic: one line per paper, best first, with its key method or result sentence, for papers scoring at least
  70% of the leader's retrieval score whose key sentence scores at least 40% of the best one. On the dev splits
  (conference and bundled) these two cut-offs gave the best topic citation F1 of a 0-0.8 x 0.4-0.75 grid
  (benchmarks/topic_cutoffs.py).
A sentence that refers back only through a leading clause ("To address this, we propose X") is quoted from its
main clause on ("…we propose X", quotes.py), so its motivation need not be quoted before it; whole when the
sentence it points back to is quoted just before it.
Sentences, their vectors (the index's, computed once at ingest), stems and roles come from the papers' one
analysis (analysis.py); nothing is embedded here. Deterministic: same index and question, same answer."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rag_assistant.answer.analysis import PaperView, QuestionView
from rag_assistant.answer.models import Draft
from rag_assistant.answer.quotes import reads_alone
from rag_assistant.answer.roles import (
    BACKGROUND,
    METHOD,
    OTHER,
    RESULT,
    asks_for_topic,
    asks_to_compare,
    compares,
)
from rag_assistant.index.embedding import MODEL_NAME
from rag_assistant.retrieve import Source
from rag_assistant.text import stems

_RELATIVE_FLOOR = 0.6
# Background and housekeeping sentences rarely answer a question; method and result sentences do.
_ROLE_BONUS = {METHOD: 0.04, RESULT: 0.04, BACKGROUND: -0.06, OTHER: -0.3}
_TOPIC_SCORE_RATIO = 0.7  # a paper in a topic answer scores at least this share of the best paper's score
_TOPIC_SENTENCE_FLOOR = 0.4  # ... and its key sentence at least this share of the best key sentence's score
_AMBIGUOUS_RATIO = 0.9  # without words saying which, a runner-up this close to the leader means a topic
_MIN_WORDS = 5
_COMPARISON_BONUS = 0.08  # a comparison question prefers the sentences that compare


def term_recall(question_terms: set[str], sentence_terms: frozenset[str], idf: dict[str, float]) -> float:
    """IDF-weighted share of the question's terms that the sentence contains."""
    unseen = max(idf.values(), default=1.0)  # a term no candidate has is as rare as they come
    total = sum(idf.get(t, unseen) for t in question_terms)
    return sum(idf.get(t, unseen) for t in question_terms & sentence_terms) / total if total else 0.0


def local_idf(sentence_terms: Sequence[frozenset[str]]) -> dict[str, float]:
    """IDF over the candidate sentences: words every abstract uses ('model', 'language') weigh little."""
    n = len(sentence_terms)
    df: dict[str, int] = {}
    for terms in sentence_terms:
        for t in terms:
            df[t] = df.get(t, 0) + 1
    return {t: math.log(1 + n / d) for t, d in df.items()}


_FINAL = re.compile(r"[.!?]+[\"'\u201d\u2019)\]}*]*$")  # the final stop and the quotes or brackets it closes


def cite(sentence: str, paper_id: str) -> str:
    """Put the citation before the final punctuation: '... memory [004:17].', '... "hallucinations [004:17]."'
    (after it, the citation would start a sentence of its own)."""
    body = sentence.rstrip()
    end = _FINAL.search(body)
    if end is None:
        return f"{body} [{paper_id}]."
    return f"{body[: end.start()].rstrip()} [{paper_id}]{end.group(0)}"


@dataclass
class _Candidate:
    rank: int  # the paper's retrieval rank (0 = best)
    position: int  # the sentence's index in its abstract
    paper_id: str
    sentence: str  # as quoted: trimmed of a leading clause that only points back (quotes.reads_alone)
    role: str
    dangling: bool  # even so, its opening refers back to the sentence before (roles.refers_back)
    full: str = ""  # the abstract's sentence whole, when it is quoted trimmed


class ExtractiveGenerator:
    mode = "extractive"
    sentence_floor = _RELATIVE_FLOOR  # a sentence must score this share of the best sentence

    def __init__(self, max_sentences: int = 4) -> None:
        self.max_sentences = max_sentences
        self.model = self.describe()

    @staticmethod
    def describe() -> str:
        return f"extractive ({MODEL_NAME} sentence ranking)"

    def answer(
        self, question: QuestionView, papers: Sequence[PaperView], on_token: Callable[[str], None] | None = None
    ) -> Draft:
        """The quoted answer. on_token is not called: the answer exists only whole, once every candidate
        sentence is scored, and is shown once verified (as before streaming went through this interface)."""
        candidates = _candidates(papers)
        if not candidates:
            return Draft("", self.model, abstained=True, quotes=True)
        sources = [p.source for p in papers]
        s_vecs = np.stack([papers[c.rank].vectors[c.position] for c in candidates])
        terms = set(stems(question.text))
        sentence_terms = [papers[c.rank].sentence_stems[c.position] for c in candidates]
        idf = local_idf(sentence_terms)
        top_score = max(s.score for s in sources) or 1.0
        comparing = asks_to_compare(question.text)
        relevance = np.array(
            [
                0.65 * float(s_vecs[i] @ question.vector)
                + 0.25 * term_recall(terms, sentence_terms[i], idf)
                + 0.10 * (sources[c.rank].score / top_score)
                + _ROLE_BONUS[c.role]
                + (_COMPARISON_BONUS if comparing and compares(c.sentence) else 0.0)
                for i, c in enumerate(candidates)
            ]
        )
        if _wants_several(question.text, sources):
            # a blank line between items: each stays its own paragraph through citation checking
            text = "\n\n".join(self._topic_lines(candidates, relevance, sources))
        else:
            chosen = self._one_paper(candidates, relevance, s_vecs, sources[0].paper_id, comparing)
            text = " ".join(cite(_shown(i, chosen, candidates), candidates[i].paper_id) for i in chosen)
        return Draft(text, self.model, quotes=True)

    def survey(
        self, question: QuestionView, papers: Sequence[PaperView], on_token: Callable[[str], None] | None = None
    ) -> Draft:
        lines = survey_lines(question, papers)
        text = "\n\n".join("- " + lines[p.paper_id] for p in papers if p.paper_id in lines)
        return Draft(text, self.model, quotes=True)

    def _one_paper(
        self,
        candidates: list[_Candidate],
        relevance: np.ndarray,
        s_vecs: np.ndarray,
        paper_id: str,
        comparing: bool = False,
    ) -> list[int]:
        """The best paper's sentences that answer the question, plus its method and result sentences (and, for a
        comparison question, its best sentence that compares), in abstract order: what a reader asking about one
        paper wants, without its motivation."""
        own = [i for i, c in enumerate(candidates) if c.paper_id == paper_id and c.role not in (OTHER, BACKGROUND)]
        own = own or [i for i, c in enumerate(candidates) if c.paper_id == paper_id]  # all background: use it
        own.sort(key=lambda i: -relevance[i])
        # a sentence that reads alone, or whose antecedents are claims too, before one that needs its motivation
        # quoted first ("However, X struggles ... To address this, we ..."): the answer is what the paper does
        alone = [i for i in own if not _leans_on_background(i, candidates)] or own
        chosen: list[int] = alone[:1]
        # the method slot may take the contribution sentence with its motivation ("To address this, we propose X"):
        # often the only one that names what the paper does
        slots = [(own, lambda c: c.role == METHOD), (alone, lambda c: c.role == RESULT)]
        if comparing:
            slots.insert(0, (alone, lambda c: compares(c.sentence)))
        for pool, wanted in slots:
            best = next((i for i in pool if wanted(candidates[i])), None)
            best = next((i for i in own if wanted(candidates[i])), None) if best is None else best
            if best is not None and best not in chosen:
                chosen.append(best)
        floor = self.sentence_floor * float(relevance[own[0]]) if own else 0.0
        for i in alone:
            if len(chosen) >= self.max_sentences:
                break
            if i not in chosen and relevance[i] >= floor and float((s_vecs[chosen] @ s_vecs[i]).max()) < 0.9:
                chosen.append(i)
        return sorted(_with_antecedents(chosen, candidates, self.max_sentences), key=lambda i: candidates[i].position)

    def _topic_lines(self, candidates: list[_Candidate], relevance: np.ndarray, sources: Sequence[Source]) -> list[str]:
        """One line per paper that answers the question, best first: its key claim (the best method or result
        sentence), cited. A paper joins only if both its retrieval score and its best sentence stay close to the
        leader's: sharing the question's words is not enough."""
        by_paper: dict[str, list[int]] = {}
        for i, c in enumerate(candidates):
            if c.role != OTHER:
                by_paper.setdefault(c.paper_id, []).append(i)
        best_sentence = {pid: _key_sentence(idx, candidates, relevance) for pid, idx in by_paper.items()}
        if not best_sentence:
            return []
        top_sentence = max(float(relevance[i]) for i in best_sentence.values())
        top_score = sources[0].score or 1.0
        lines = []
        for source in sources:
            i = best_sentence.get(source.paper_id)
            if i is None or source.score < _TOPIC_SCORE_RATIO * top_score:
                continue
            if relevance[i] < _TOPIC_SENTENCE_FLOOR * top_sentence:
                continue
            lines.append("- " + cite(candidates[i].sentence, source.paper_id))
        return lines


def _with_antecedents(chosen: list[int], candidates: list[_Candidate], limit: int) -> list[int]:
    """The chosen sentences (best first), each that refers back with the sentences before it back to one that
    reads alone ("To achieve this, ..." quoted as an antecedent needs its own), within `limit`: a sentence whose
    antecedents do not fit (or are no candidates) is left out, unless nothing else is left."""
    where = {(c.paper_id, c.position): i for i, c in enumerate(candidates)}
    out: list[int] = []
    for i in chosen:
        need: list[int] | None = [i]
        while need and need[0] not in out and candidates[need[0]].dangling:
            c = candidates[need[0]]
            before = where.get((c.paper_id, c.position - 1))
            need = None if before is None else [before, *need]
        need = [j for j in need or [] if j not in out]
        if need and len(out) + len(need) <= limit:
            out += need
    return out or chosen[:1]


def _shown(i: int, chosen: list[int], candidates: list[_Candidate]) -> str:
    """A trimmed sentence is quoted whole when the sentence it points back to is quoted just before it."""
    c = candidates[i]
    before = chosen.index(i) - 1
    follows = before >= 0 and candidates[chosen[before]].position == c.position - 1
    return c.full or c.sentence if follows and candidates[chosen[before]].paper_id == c.paper_id else c.sentence


def _leans_on_background(i: int, candidates: list[_Candidate]) -> bool:
    """Whether the sentence refers back to background or filler (through any chain of sentences that refer back),
    or to a sentence that is no candidate: quoting it means quoting the motivation first, or leaving it dangling."""
    where = {(c.paper_id, c.position): j for j, c in enumerate(candidates)}
    while candidates[i].dangling:
        c = candidates[i]
        before = where.get((c.paper_id, c.position - 1))
        if before is None or candidates[before].role in (BACKGROUND, OTHER):
            return True
        i = before
    return False


def _key_sentence(indices: list[int], candidates: list[_Candidate], relevance: np.ndarray) -> int:
    """A paper's most relevant method or result sentence that reads alone; one that refers back only when it has
    no other, any sentence when it has no claim."""
    best = _claims(indices, [c.role for c in candidates], [c.dangling for c in candidates])
    return max(best, key=lambda i: relevance[i])


def _claims(indices: list[int], roles: Sequence[str], dangling: Sequence[bool]) -> list[int]:
    """The method and result sentences among `indices` that read alone; else those that refer back; else all
    (a paper with no claim sentence): what a one-line summary of the paper may quote."""
    claims = [i for i in indices if roles[i] in (METHOD, RESULT)]
    return [i for i in claims if not dangling[i]] or claims or indices


def _candidates(papers: Sequence[PaperView]) -> list[_Candidate]:
    out = []
    for rank, paper in enumerate(papers):
        for pos, (sentence, role) in enumerate(zip(paper.sentences, paper.roles, strict=True)):
            if len(sentence.split()) >= _MIN_WORDS:
                shown, dangling = reads_alone(sentence)
                out.append(
                    _Candidate(rank, pos, paper.paper_id, shown, role, dangling, sentence if shown != sentence else "")
                )
    return out


def _wants_several(question: str, sources: Sequence[Source]) -> bool:
    """Topic questions get several papers; questions about one paper get one. When the words do not say,
    the ranking does: a clear leader means one paper."""
    topic = asks_for_topic(question)
    if topic is not None:
        return topic
    return len(sources) > 1 and sources[1].score >= _AMBIGUOUS_RATIO * sources[0].score


def key_sentence(question: QuestionView, paper: PaperView) -> str | None:
    """The sentence that best says what the paper does about the question: its most relevant method or result
    sentence (background only when it has nothing else; never filler; one that refers back to the sentence before
    only when no other remains)."""
    usable = [i for i, s in enumerate(paper.sentences) if len(s.split()) >= _MIN_WORDS and paper.roles[i] != OTHER]
    shown, dangling = zip(*map(reads_alone, paper.sentences), strict=True) if paper.sentences else ((), ())
    usable = _claims(usable, paper.roles, dangling)
    if not usable or not len(paper.vectors):
        return None
    terms = set(question.word_stems)
    cosine = paper.vectors @ question.vector

    def score(i: int) -> float:
        share = len(terms & paper.sentence_stems[i]) / len(terms) if terms else 0.0
        return 0.7 * float(cosine[i]) + 0.3 * share + _ROLE_BONUS[paper.roles[i]]

    return shown[max(usable, key=score)]


def survey_lines(question: QuestionView, papers: Sequence[PaperView]) -> dict[str, str]:
    """Paper id -> its cited line in a survey answer."""
    lines = {}
    for view in papers:
        sentence = key_sentence(question, view)
        if sentence is not None:
            lines[view.paper_id] = cite(sentence, view.paper_id)
    return lines
