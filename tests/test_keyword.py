"""The keyword index updated in place scores exactly like one rebuilt from scratch."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_assistant.corpus import bundled_corpus_path, load_corpus
from rag_assistant.index.keyword import KeywordIndex
from rag_assistant.text import split_sentences

QUERIES = [
    "low-rank key cache offloading for long-context inference",
    "equivariant graph neural networks for molecules",
    "zebras migrating across savannas",
    "quantization error accumulated in earlier layers",
    "safety of fine-tuned language models",
]


def _chunks() -> list[tuple[str, str]]:
    out = []
    for paper in load_corpus([bundled_corpus_path()]).papers:
        sentences = split_sentences(paper.text)
        half = len(sentences) // 2
        out += [
            (f"{paper.paper_id}#0", " ".join(sentences[:half])),
            (f"{paper.paper_id}#1", " ".join(sentences[half:])),
        ]
    return out


def _results(index: KeywordIndex) -> list[dict[str, float]]:
    return [dict(index.query(q, 20)) for q in QUERIES]


def test_update_equals_full_rebuild(tmp_path: Path) -> None:
    chunks = _chunks()
    first, later = chunks[:50], chunks[50:]
    removed = {cid for cid, _ in first[:6]}
    replaced = [(first[10][0], "Zebras migrate across quantum savannas."), (first[11][0], first[11][1])]

    updated = KeywordIndex(tmp_path / "updated")
    updated.build(first, "r1")
    assert updated.can_update("r1") and not updated.can_update("r0")
    updated.update(later + replaced, removed, "r2")

    final = dict(first)
    for cid in removed:
        del final[cid]
    final.update(later + replaced)
    rebuilt = KeywordIndex(tmp_path / "rebuilt")
    rebuilt.build(list(final.items()), "r2")

    reloaded = KeywordIndex(tmp_path / "updated")  # what the next process sees
    assert reloaded.revision == "r2" and sorted(reloaded._ids) == sorted(final)
    for got, want in zip(_results(reloaded), _results(rebuilt), strict=True):
        assert got.keys() == want.keys()
        assert all(got[k] == pytest.approx(want[k], rel=1e-5) for k in want)
    assert _results(reloaded)[2] and next(iter(_results(reloaded)[2])) == first[10][0]
    terms = ["zebra", "quantum", "cach", "nosuchterm"]
    assert reloaded.idf(terms) == pytest.approx(rebuilt.idf(terms))


def test_update_to_empty_and_back(tmp_path: Path) -> None:
    chunks = _chunks()[:4]
    index = KeywordIndex(tmp_path / "kw")
    index.build(chunks, "r1")
    index.update([], {cid for cid, _ in chunks}, "r2")
    assert index.query(QUERIES[0], 5) == [] and KeywordIndex(tmp_path / "kw").revision == "r2"
    index.update(chunks, [], "r3")
    assert sorted(KeywordIndex(tmp_path / "kw")._ids) == sorted(cid for cid, _ in chunks)
