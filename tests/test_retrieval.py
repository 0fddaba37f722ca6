"""Retrieval quality on a small hand-labelled query set over the bundled corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_assistant.config import Settings
from rag_assistant.errors import EmptyIndexError
from rag_assistant.retrieve import Retriever

QUERIES = [json.loads(line) for line in (Path(__file__).parent / "data" / "retrieval_queries.jsonl").open()]


def test_recall_at_3_on_labelled_queries(ready: Path) -> None:
    retriever = Retriever(Settings())
    hits_at_1 = hits_at_3 = 0
    for q in QUERIES:
        ids = [s.paper_id for s in retriever.search(q["query"], 5)]
        hits_at_1 += ids[0] == q["paper_id"]
        hits_at_3 += q["paper_id"] in ids[:3]
    assert hits_at_3 / len(QUERIES) >= 0.95
    assert hits_at_1 / len(QUERIES) >= 0.85


def test_results_are_grouped_by_paper_with_scores(ready: Path) -> None:
    sources = Retriever(Settings()).search("KV cache offloading for long-context inference", 5)
    assert sources[0].paper_id == "004:17"
    ids = [s.paper_id for s in sources]
    assert len(ids) == len(set(ids)) == 5
    assert [s.rank for s in sources] == [1, 2, 3, 4, 5]
    assert all(a.score >= b.score for a, b in zip(sources, sources[1:], strict=False))
    assert sources[0].dense_score is not None and sources[0].dense_score > 0.4
    assert sources[0].chunks and sources[0].paper.text.startswith("With the widespread")


def test_empty_index_raises_clear_error() -> None:
    with pytest.raises(EmptyIndexError, match="empty"):
        Retriever(Settings()).search("anything")
