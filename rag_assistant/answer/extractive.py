"""Offline answerer: picks the abstract sentences that best answer the question and cites each one.

Sentence score = 0.65 * cosine(question, sentence)
               + 0.25 * question-term recall (Snowball stems, weighted by IDF among the candidate sentences)
               + 0.10 * the paper's retrieval score relative to the best paper
               + 0.06 when the sentence states the paper's own contribution ("we ...", "our ...", "this paper"):
                 in abstracts those answer questions, while opening background sentences mostly restate them.
Sentences are then chosen greedily with maximal marginal relevance (lambda 0.75) so that near-duplicates are
skipped, at most three per paper, and only while they stay within 75% of the best sentence's score (0.70 let an
off-topic paper into a third of single-paper answers on the dev set; 0.80 began dropping papers that multi-paper
questions need). The answer lists them by paper rank, in abstract order within a paper. Deterministic: same
index and question, same answer."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

import numpy as np

from rag_assistant.answer.models import Draft
from rag_assistant.index.embedding import MODEL_NAME
from rag_assistant.retrieve import Source
from rag_assistant.text import split_sentences, stems

_MMR_LAMBDA = 0.75
_RELATIVE_FLOOR = 0.75
_PER_PAPER = 3
_CONTRIBUTION = re.compile(r"\b(we|our|this (?:paper|work|study))\b", re.IGNORECASE)
_MIN_WORDS = 5


def term_recall(question_terms: set[str], sentence_terms: set[str], idf: dict[str, float]) -> float:
    """IDF-weighted share of the question's terms that the sentence contains."""
    unseen = max(idf.values(), default=1.0)  # a term no candidate has is as rare as they come
    total = sum(idf.get(t, unseen) for t in question_terms)
    return sum(idf.get(t, unseen) for t in question_terms & sentence_terms) / total if total else 0.0


def local_idf(sentence_terms: list[set[str]]) -> dict[str, float]:
    """IDF over the candidate sentences: words every abstract uses ('model', 'language') weigh little."""
    n = len(sentence_terms)
    df: dict[str, int] = {}
    for terms in sentence_terms:
        for t in terms:
            df[t] = df.get(t, 0) + 1
    return {t: math.log(1 + n / d) for t, d in df.items()}


def cite(sentence: str, paper_id: str) -> str:
    """Put the citation before the final punctuation: '... memory [004:17].'"""
    body = sentence.rstrip()
    end = body[-1] if body and body[-1] in ".!?" else "."
    body = body[:-1] if body and body[-1] in ".!?" else body
    return f"{body} [{paper_id}]{end}"


class ExtractiveGenerator:
    mode = "extractive"
    sentence_floor = _RELATIVE_FLOOR  # a sentence must score this share of the best sentence

    def __init__(self, embed: Callable[[list[str]], np.ndarray], max_sentences: int = 4) -> None:
        self.embed = embed
        self.max_sentences = max_sentences
        self.model = f"extractive ({MODEL_NAME} sentence ranking)"

    def answer(self, question: str, sources: Sequence[Source]) -> Draft:
        candidates: list[tuple[int, int, str, str]] = []  # (paper rank, position, paper id, sentence)
        for rank, source in enumerate(sources):
            for pos, sentence in enumerate(split_sentences(source.paper.text)):
                if len(sentence.split()) >= _MIN_WORDS:
                    candidates.append((rank, pos, source.paper_id, sentence))
        if not candidates:
            return Draft("", self.model, abstained=True)

        vectors = self.embed([question] + [c[3] for c in candidates])
        q_vec, s_vecs = vectors[0], vectors[1:]
        terms = set(stems(question))
        sentence_terms = [set(stems(c[3])) for c in candidates]
        idf = local_idf(sentence_terms)
        top_score = max(s.score for s in sources) or 1.0
        relevance = np.array(
            [
                0.65 * float(s_vecs[i] @ q_vec)
                + 0.25 * term_recall(terms, sentence_terms[i], idf)
                + 0.10 * (sources[c[0]].score / top_score)
                + (0.06 if _CONTRIBUTION.search(c[3]) else 0.0)
                for i, c in enumerate(candidates)
            ]
        )
        chosen: list[int] = []
        per_paper: dict[str, int] = {}
        best = float(relevance.max())
        while len(chosen) < self.max_sentences:
            mmr = relevance.copy()
            if chosen:
                redundancy = (s_vecs @ s_vecs[chosen].T).max(axis=1)
                mmr = _MMR_LAMBDA * relevance - (1 - _MMR_LAMBDA) * redundancy
            order = np.argsort(-mmr, kind="stable")
            pick = next(
                (
                    int(i)
                    for i in order
                    if int(i) not in chosen
                    and per_paper.get(candidates[i][2], 0) < _PER_PAPER
                    and relevance[i] >= self.sentence_floor * best
                    and (not chosen or float((s_vecs[chosen] @ s_vecs[i]).max()) < 0.9)
                ),
                None,
            )
            if pick is None:
                break
            chosen.append(pick)
            per_paper[candidates[pick][2]] = per_paper.get(candidates[pick][2], 0) + 1
        chosen.sort(key=lambda i: (candidates[i][0], candidates[i][1]))
        text = " ".join(cite(candidates[i][3], candidates[i][2]) for i in chosen)
        return Draft(text, self.model)
