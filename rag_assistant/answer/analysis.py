"""One analysis of the question and of each retrieved paper, made once per question when its sources are known
and read by everything that judges papers against the question (relevance and abstention, the survey
selection, the near-miss check, the answerers, the citation check): a paper's sentences, their vectors (stored
at ingest), stems and roles, its stems and keyword terms; the question's vector, terms and content words,
with how central each word is to it.

Concept coverage is what lets a survey tell a paper that does what was asked from one that shares the topic:
for each content word w of the question, covered(w, paper) is 1 when the paper has w's stem, else w's best
cosine with one of the paper's sentences (the word said in other words), and centrality(w) = cos(w, question)
(topic words high, filler such as "someone" low). gap(w) = centrality(w) x (1 - covered(w))."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from rag_assistant.answer.roles import abstract_roles
from rag_assistant.text import content_words, query_terms, split_sentences, stems, tokenize

if TYPE_CHECKING:
    from rag_assistant.corpus.models import Paper
    from rag_assistant.retrieve import Source

Embed = Callable[[list[str]], np.ndarray]
Idf = Callable[[list[str]], dict[str, float]]
# papers -> paper id -> the vectors of its sentences, aligned with split_sentences(paper.text): computed once
# at ingest and read from the index (Retriever.sentence_vectors), so answering embeds no abstract sentence
SentenceVectors = Callable[[Sequence["Paper"]], Mapping[str, np.ndarray]]


@dataclass
class PaperView:
    """A retrieved paper as the answer layer reads it."""

    source: Source
    sentences: list[str]
    vectors: np.ndarray  # n x dim, aligned with sentences
    stems: frozenset[str]  # Snowball stems of title and abstract (text.stems)
    terms: frozenset[str]  # keyword-index tokens of title and abstract

    @property
    def paper_id(self) -> str:
        return self.source.paper_id

    @cached_property
    def roles(self) -> list[str]:
        return abstract_roles(self.sentences, self.vectors)  # the classifier reads the vectors (roles.py)

    @cached_property
    def sentence_stems(self) -> list[frozenset[str]]:
        """Each sentence's Snowball stems (term recall of the extractive answer, key sentences)."""
        return [frozenset(stems(s)) for s in self.sentences]


@dataclass
class QuestionView:
    """The question as the answer layer reads it; word vectors are embedded on first use only."""

    text: str
    vector: np.ndarray
    terms: list[str]  # keyword tokens without question words (text.query_terms)
    content: list[str]  # distinct content words, in order (relevance's missing-concept penalty)
    embed: Embed = field(repr=False)

    @cached_property
    def words(self) -> list[str]:
        """The content words about what a paper does (no META_WORDS), in order."""
        return [w for w in self.content if w not in META_WORDS]

    @cached_property
    def word_vectors(self) -> np.ndarray:
        # a call of its own: batched with longer texts, the words would be padded to their length (~10x slower)
        return self.embed(self.words) if self.words else np.zeros((0, len(self.vector)), dtype=np.float32)

    @cached_property
    def centrality(self) -> np.ndarray:
        return np.clip(self.word_vectors @ self.vector, 0.0, None) if self.words else np.zeros(0)

    @cached_property
    def word_stems(self) -> list[str]:
        return [(stems(w) or [w])[0] for w in self.words]


# Words a question uses about the collection or the asking, not about what a paper does ("What approaches in the
# corpus ...", "recent work on ..."): no paper is expected to say them.
META_WORDS = frozenset(
    "corpus collection index conference literature recent recently published proposed paper papers work works "
    "study studies approach approaches method methods research researchers authors article articles list".split()
)


def analyse_question(question: str, embed: Embed) -> QuestionView:
    content = list(dict.fromkeys(content_words(question)))
    return QuestionView(question, embed([question])[0], list(dict.fromkeys(query_terms(question))), content, embed)


def analyse_papers(sources: Sequence[Source], vectors: SentenceVectors | None, embed: Embed) -> list[PaperView]:
    """A view of each source, in order; sentence vectors from the index (`vectors`), else embedded now (a
    caller without an index)."""
    papers = [s.paper for s in sources]
    texts = [f"{p.title or ''} {p.text}" for p in papers]
    sentences = [split_sentences(p.text) for p in papers]
    found = vectors(papers) if vectors is not None else None
    all_vectors = [embed(s) if found is None else found[p.paper_id] for p, s in zip(papers, sentences, strict=True)]
    return [
        PaperView(source, sents, vecs, frozenset(stems(text)), frozenset(terms))
        for source, sents, vecs, text, terms in zip(
            sources, sentences, all_vectors, texts, tokenize(texts), strict=True
        )
    ]


def coverage(question: QuestionView, paper: PaperView) -> np.ndarray:
    """covered(w, paper) for each question word (module docstring)."""
    if not question.words:
        return np.zeros(0)
    near = (
        (question.word_vectors @ paper.vectors.T).max(axis=1) if len(paper.vectors) else np.zeros(len(question.words))
    )
    return np.array(
        [1.0 if st in paper.stems else max(float(c), 0.0) for st, c in zip(question.word_stems, near, strict=True)]
    )


def gaps(question: QuestionView, paper: PaperView) -> np.ndarray:
    """gap(w) for each question word: how much of the question's meaning the paper leaves unsaid."""
    return question.centrality * (1.0 - coverage(question, paper))


def term_share(question: QuestionView, paper: PaperView, weights: dict[str, float]) -> float:
    """IDF-weighted share of the question's keyword terms that the paper contains."""
    total = sum(weights.get(t, 0.0) for t in question.terms)
    if not total:
        return 0.0
    return sum(weights.get(t, 0.0) for t in question.terms if t in paper.terms) / total
