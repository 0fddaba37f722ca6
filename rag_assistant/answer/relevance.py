"""Does the corpus answer the question? The score the answer chain abstains on (below `abstain_threshold`).

relevance = mean(best chunk cosine, key-term coverage, best sentence cosine) - missing-concept penalty

- best chunk cosine: the topic matches;
- key-term coverage: the largest IDF-weighted share of the question's BM25 terms that one of the top three
  abstracts contains (a rare key term the corpus lacks is a strong "not covered" signal);
- best sentence cosine: some single statement of those abstracts says what was asked (sentence vectors stored
  at ingest, `SentenceVectors`; without them, embedded here);
- missing-concept penalty: a near-topic question ("speech recognition for people who stutter") matches a
  paper's topic and most of its words, but one concept that carries its meaning is expressed nowhere in the
  paper. For each content word w of the question, gap(w) = centrality(w) x (1 - covered(w)), where
  centrality is cos(w, question) (topic words high, filler like "someone" low) and covered is 1 when the
  paper has w's stem, else w's best cosine with one of the paper's sentences. A paper's penalty is the mean of
  its two largest gaps; the question's is the smallest over the top three papers (one paper covering every
  concept is enough). Nothing here knows particular words; the calibration is in docs/retrieval.md#abstention.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from rag_assistant.answer.analysis import Idf, term_share

if TYPE_CHECKING:
    from rag_assistant.answer.analysis import PaperView, QuestionView
    from rag_assistant.retrieve import Source


def relevance(question: QuestionView, sources: Sequence[Source], papers: Sequence[PaperView], idf: Idf) -> float:
    """0..1; see the module docstring. `sources` are the retrieved papers, best first; `papers` the views of (at
    least) the first three (analysis.py)."""
    if not sources:
        return 0.0
    top = list(papers[:3])
    dense = max((s.dense_score for s in sources if s.dense_score is not None), default=0.0)
    s_vecs = np.concatenate([p.vectors for p in top])
    statement = float((s_vecs @ question.vector).max()) if len(s_vecs) else 0.0
    weights = idf(sorted(set(question.terms)))
    coverage = max(term_share(question, p, weights) for p in top)
    base = (max(dense, 0.0) + coverage + max(statement, 0.0)) / 3
    return round(max(base - _missing_concept(question, top, s_vecs), 0.0), 4)


def _missing_concept(question: QuestionView, top: list[PaperView], s_vecs: np.ndarray) -> float:
    from rag_assistant.text import stems

    words = question.content
    if not words or not len(s_vecs):
        return 0.0
    # a call of its own: batched with the sentences, the words would be padded to sentence length (~10x slower)
    w_vecs = question.embed(words)
    centrality = np.clip(w_vecs @ question.vector, 0.0, None)
    word_stems = [(stems(w) or [w])[0] for w in words]
    penalty = 1.0
    for paper in top:
        near = (w_vecs @ paper.vectors.T).max(axis=1) if len(paper.sentences) else np.zeros(len(words))
        covered = np.array([1.0 if st in paper.stems else float(c) for st, c in zip(word_stems, near, strict=True)])
        penalty = min(penalty, float(np.sort(centrality * (1.0 - covered))[-2:].mean()))
    return penalty
