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

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from rag_assistant.answer.citations import SentenceVectors
    from rag_assistant.retrieve import Source

Embed = Callable[[list[str]], np.ndarray]
Idf = Callable[[list[str]], dict[str, float]]  # BM25 IDF of terms over the indexed chunks (Retriever.idf)


def relevance(
    question: str, sources: Sequence[Source], idf: Idf, embed: Embed, vectors: SentenceVectors | None = None
) -> float:
    """0..1; see the module docstring. `embed` embeds the question and its words; `vectors` gives the
    abstracts' sentence vectors."""
    if not sources:
        return 0.0
    from rag_assistant.answer.citations import sentence_vectors
    from rag_assistant.text import split_sentences

    top = list(sources[:3])
    dense = max((s.dense_score for s in sources if s.dense_score is not None), default=0.0)
    per_paper = [split_sentences(source.paper.text) for source in top]
    sentences = [s for group in per_paper for s in group]
    q_vec = embed([question])[0]
    s_vecs = np.concatenate(sentence_vectors([s.paper for s in top], vectors, embed))
    statement = float((s_vecs @ q_vec).max()) if sentences else 0.0
    base = (max(dense, 0.0) + _coverage(question, top, idf) + max(statement, 0.0)) / 3
    penalty = _missing_concept(question, top, per_paper, q_vec, s_vecs, embed)
    return round(max(base - penalty, 0.0), 4)


def _coverage(question: str, top: list[Source], idf: Idf) -> float:
    from rag_assistant.text import query_terms, tokenize

    terms = set(query_terms(question))
    weights = idf(sorted(terms))
    total = sum(weights.values())
    if not total:
        return 0.0
    best = 0.0
    for source in top:
        words = set(tokenize([f"{source.paper.title or ''} {source.paper.text}"])[0])
        best = max(best, sum(weights[t] for t in terms & words) / total)
    return best


def _missing_concept(
    question: str,
    top: list[Source],
    per_paper: list[list[str]],
    q_vec: np.ndarray,
    s_vecs: np.ndarray,
    embed: Embed,
) -> float:
    from rag_assistant.text import content_words, stems

    words = list(dict.fromkeys(content_words(question)))
    if not words or not len(s_vecs):
        return 0.0
    # a call of its own: batched with the sentences, the words would be padded to sentence length (~10x slower)
    w_vecs = embed(words)
    centrality = np.clip(w_vecs @ q_vec, 0.0, None)
    word_stems = [(stems(w) or [w])[0] for w in words]
    penalty, start = 1.0, 0
    for source, group in zip(top, per_paper, strict=True):
        block = s_vecs[start : start + len(group)]
        start += len(group)
        have = set(stems(f"{source.paper.title or ''} {source.paper.text}"))
        near = (w_vecs @ block.T).max(axis=1) if len(group) else np.zeros(len(words))
        covered = np.array([1.0 if st in have else float(c) for st, c in zip(word_stems, near, strict=True)])
        penalty = min(penalty, float(np.sort(centrality * (1.0 - covered))[-2:].mean()))
    return penalty
