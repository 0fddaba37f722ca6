"""Paper-level fusion and dense pseudo-relevance feedback (docs/retrieval.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_assistant.config import Settings
from rag_assistant.index.store import ChunkHit
from rag_assistant.retrieve import Retriever, _Agg, fuse, fuse_papers


def test_paper_fusion_joins_the_best_cosine_and_the_best_bm25_of_different_chunks() -> None:
    settings = Settings(dense_weight=0.5)
    dense = [ChunkHit("a#0", "a", "x", 0.8), ChunkHit("b#0", "b", "y", 0.6), ChunkHit("c#0", "c", "z", 0.4)]
    lexical = [("a#1", 10.0), ("b#0", 8.0)]
    per_chunk = fuse(dense, lexical, settings)
    # per chunk, a's cosine and its keyword match sit in different chunks: each gets the other side's floor
    assert per_chunk["a#0"] == pytest.approx(0.5 * 0.8) and per_chunk["a#1"] == pytest.approx(0.5 * 0.4 + 0.5)
    aggs = {"a": _Agg(dense=0.8, keyword=10.0), "b": _Agg(dense=0.6, keyword=8.0), "c": _Agg(dense=0.4)}
    per_paper = fuse_papers(aggs, settings)
    assert per_paper["a"] == pytest.approx(0.5 * 0.8 + 0.5 * 1.0)
    assert per_paper["b"] == pytest.approx(0.5 * 0.6 + 0.5 * 0.8) and per_paper["c"] == pytest.approx(0.2)


def test_feedback_searches_again_and_keeps_the_questions_own_cosine(ready: Path) -> None:
    question = "Which papers make LLM inference cheaper by compressing or offloading the KV cache?"
    plain = Retriever(Settings(feedback_papers=0, fuse_per="paper"))
    fed = Retriever(Settings(feedback_papers=2, fuse_per="paper"), reader=plain.reader, embedder=plain.embedder)
    calls: list[int] = []
    query = plain.reader.query

    def counting(vector: list[float], n: int, exclude: object = ()) -> list[ChunkHit]:
        calls.append(n)
        return query(vector, n, exclude)  # type: ignore[arg-type]

    plain.reader.query = counting  # type: ignore[method-assign]
    before = plain.search(question, 10)
    assert len(calls) == 1
    after = fed.search(question, 10)
    assert len(calls) == 3  # the first pass and the moved vector's search
    assert after[0].paper_id == before[0].paper_id
    cosine = {s.paper_id: s.dense_score for s in before}
    # abstention reads dense_score: the feedback must not inflate it
    assert all(s.dense_score == cosine[s.paper_id] for s in after if s.paper_id in cosine)
    assert [s.paper_id for s in after] != [s.paper_id for s in before] or after[4].score != before[4].score
