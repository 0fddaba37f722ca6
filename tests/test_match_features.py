"""The match model's features read over the papers judged together (the top k of an answer): the best and the
least of each paper's scores, the same on every row, so that whether any of them meets the question shows."""

from __future__ import annotations

import numpy as np

from rag_assistant.answer.analysis import PaperView, QuestionView
from rag_assistant.answer.match import FEATURES, features
from rag_assistant.corpus.models import Paper
from rag_assistant.retrieve import Source
from rag_assistant.text import query_terms, stems, tokenize

AXES = {"merging": 0, "speech": 1}  # word -> the axis of its one-hot vector; sentences live on axis 2


def _embed(texts: list[str]) -> np.ndarray:
    out = np.zeros((len(texts), 4), dtype=np.float32)
    for i, t in enumerate(texts):
        out[i, AXES.get(t, 3)] = 1.0
    return out


def _question() -> QuestionView:
    vector = np.array([0.6, 0.6, 0.5, 0.0], dtype=np.float32)
    text = "merging speech models"
    return QuestionView(text, vector / np.linalg.norm(vector), query_terms(text), ["merging", "speech"], _embed)


def _paper(pid: str, rank: int, text: str) -> PaperView:
    paper = Paper(paper_id=pid, text=text, source="x.txt", position=rank)
    vectors = np.array([[0.0, 0.0, 1.0, 0.0]], dtype=np.float32)  # says neither word in other words
    source = Source(paper, 1.0 - rank / 10, rank=rank + 1)
    return PaperView(source, [text], vectors, frozenset(stems(text)), frozenset(tokenize([text])[0]))


def _column(x: np.ndarray, name: str) -> np.ndarray:
    return x[:, FEATURES.index(name)]


def test_a_word_no_paper_says_leaves_a_gap_in_every_paper_until_one_says_it() -> None:
    question = _question()
    vision = [_paper("a", 0, "Model merging of vision transformers."), _paper("b", 1, "Merging weights of LLMs.")]
    x = features(question, vision, lambda terms: dict.fromkeys(terms, 1.0))
    least_gap = _column(x, "least_max_gap")
    assert least_gap[0] > 0.3 and np.all(least_gap == least_gap[0])  # "speech": said by neither paper
    with_speech = [*vision, _paper("c", 2, "Merging speech recognition models by weight averaging.")]
    x = features(question, with_speech, lambda terms: dict.fromkeys(terms, 1.0))
    assert np.all(_column(x, "least_max_gap") == 0.0)  # one paper says every word of the question


def test_best_and_least_are_the_extremes_over_the_papers_judged_together() -> None:
    question = _question()
    papers = [_paper("a", 0, "Model merging of vision transformers."), _paper("c", 1, "Speech model merging.")]
    x = features(question, papers, lambda terms: dict.fromkeys(terms, 1.0))
    share = _column(x, "term_share")
    assert share[1] > share[0]
    assert np.all(_column(x, "best_term_share") == share.max())
    assert np.all(_column(x, "least_term_share") == share.min())
    assert np.all(_column(x, "least_max_gap") == _column(x, "max_gap").min())
