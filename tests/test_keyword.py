"""The keyword index scores exactly like bm25s, and one updated in place scores like one rebuilt from scratch."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import architecture as arch
import pytest

from rag_assistant.corpus import bundled_corpus_path, load_corpus
from rag_assistant.index import keyword_segments
from rag_assistant.index.keyword import KeywordIndex
from rag_assistant.stopwords import STOPWORDS_EN
from rag_assistant.text import english_stemmer, query_terms, split_sentences, tokenize

QUERIES = [
    "low-rank key cache offloading for long-context inference",
    "equivariant graph neural networks for molecules",
    "zebras migrating across savannas",
    "quantization error accumulated in earlier layers",
    "safety of fine-tuned language models",
    "model model training data",  # a repeated term counts twice, as in bm25s
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


def _same_scores(got: dict[str, float], want: dict[str, float]) -> None:
    assert got.keys() == want.keys()
    assert all(got[k] == pytest.approx(want[k], rel=1e-5) for k in want)


def test_tokenizer_is_bm25s() -> None:
    import bm25s
    from bm25s.stopwords import STOPWORDS_EN as theirs

    assert frozenset(theirs) == STOPWORDS_EN  # the copy in stopwords.py

    texts = [text for _, text in _chunks()] + [
        "",
        "a",
        "Ünïcödé naïve café's x_1 β-VAE 3D U-Net l2 (ICML'25) don't",
        "THE the The of OF",
        "tab\tnew\nline — dash",
    ]
    want = bm25s.tokenize(texts, stopwords="en", stemmer=english_stemmer(), return_ids=False, show_progress=False)
    assert tokenize(texts) == want


def test_fresh_index_scores_are_bm25s(tmp_path: Path) -> None:
    import bm25s

    chunks = _chunks()
    index = KeywordIndex(tmp_path / "kw")
    index.build(chunks, "r1")
    reference = bm25s.BM25()
    tokens = bm25s.tokenize([t for _, t in chunks], stopwords="en", stemmer=english_stemmer(), show_progress=False)
    reference.index(tokens, show_progress=False)
    for query in QUERIES:
        terms = [t for t in query_terms(query) if t in reference.vocab_dict]
        scores = reference.get_scores(terms) if terms else [0.0] * len(chunks)
        want = {cid: float(s) for (cid, _), s in zip(chunks, scores, strict=True) if s > 0}
        _same_scores(dict(KeywordIndex(tmp_path / "kw").query(query, len(chunks))), want)
    indptr, vocab, n = reference.scores["indptr"], reference.vocab_dict, len(chunks)
    for term in ("cach", "graph", "model"):
        df = int(indptr[vocab[term] + 1] - indptr[vocab[term]])
        assert index.idf([term])[term] == pytest.approx(math.log(1 + (n - df + 0.5) / (df + 0.5)))


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
    assert reloaded.revision == "r2" and sorted(reloaded.chunk_ids()) == sorted(final)
    for got, want in zip(_results(reloaded), _results(rebuilt), strict=True):
        _same_scores(got, want)
    assert _results(reloaded)[2] and next(iter(_results(reloaded)[2])) == first[10][0]
    terms = ["zebra", "quantum", "cach", "nosuchterm"]
    assert reloaded.idf(terms) == pytest.approx(rebuilt.idf(terms))


def test_many_updates_merge_segments_and_keep_scores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Small segments so that updates merge, compact and cap them: scores stay those of a rebuild, the
    number of segments stays small, and the directory holds only what the meta names."""
    monkeypatch.setattr(keyword_segments, "SEGMENT_MAX", 16)
    chunks = _chunks()
    index = KeywordIndex(tmp_path / "kw")
    index.build(chunks[:20], "r0")
    live = dict(chunks[:20])
    for step, start in enumerate(range(20, len(chunks), 4)):
        added = chunks[start : start + 4]
        removed = [cid for cid in list(live)[step % 3 :: 7]][:2]
        index.update(added, removed, f"r{step + 1}")
        for cid in removed:
            live.pop(cid, None)
        live.update(added)
    reloaded = KeywordIndex(tmp_path / "kw")
    meta = json.loads((tmp_path / "kw" / "meta.json").read_text())
    assert sorted(reloaded.chunk_ids()) == sorted(live) and len(meta["segments"]) <= 8
    on_disk = {p.name for p in (tmp_path / "kw").iterdir()}
    assert on_disk == {"meta.json", meta["vocab"], meta["df"]} | {e["name"] for e in meta["segments"]}
    rebuilt = KeywordIndex(tmp_path / "rebuilt")
    rebuilt.build(list(live.items()), "x")
    for got, want in zip(_results(reloaded), _results(rebuilt), strict=True):
        _same_scores(got, want)


def test_exclude_masks_papers_before_ranking(tmp_path: Path) -> None:
    chunks = _chunks()
    index = KeywordIndex(tmp_path / "kw")
    index.build(chunks, "r1")
    top = index.query(QUERIES[0], 3)
    paper = top[0][0].rsplit("#", 1)[0]
    masked = index.query(QUERIES[0], 3, exclude={paper})
    assert len(masked) == 3 and all(not cid.startswith(paper + "#") for cid, _ in masked)
    assert masked[0] == next(hit for hit in index.query(QUERIES[0], 10) if not hit[0].startswith(paper + "#"))


def test_update_to_empty_and_back(tmp_path: Path) -> None:
    chunks = _chunks()[:4]
    index = KeywordIndex(tmp_path / "kw")
    index.build(chunks, "r1")
    index.update([], {cid for cid, _ in chunks}, "r2")
    assert index.query(QUERIES[0], 5) == [] and KeywordIndex(tmp_path / "kw").revision == "r2"
    index.update(chunks, [], "r3")
    assert sorted(KeywordIndex(tmp_path / "kw").chunk_ids()) == sorted(cid for cid, _ in chunks)


def test_older_format_is_stale(tmp_path: Path) -> None:
    """An index of the single-matrix format (before segments) reads as stale: the next ingest rebuilds it."""
    (tmp_path / "kw").mkdir()
    (tmp_path / "kw" / "meta.json").write_text(json.dumps({"revision": "r1", "ids": ["a#0"]}))
    index = KeywordIndex(tmp_path / "kw")
    assert index.revision is None and not index.can_update("r1")
    assert KeywordIndex.stored_revision(tmp_path / "kw") is None


def test_build_and_search_need_no_bm25s(tmp_path: Path) -> None:
    """bm25s is a test extra, not a dependency: the index is built and searched as if it were not installed."""
    code = (
        "import sys; sys.modules['bm25s'] = None; from pathlib import Path; "
        "from rag_assistant.index.keyword import KeywordIndex; "
        f"k = KeywordIndex(Path({str(tmp_path / 'kw')!r})); k.build([('a#0', 'The key cache is offloaded.')], 'r1'); "
        "assert k.query('key cache', 3); assert 'numba' not in sys.modules and 'scipy' not in sys.modules"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_ties_at_the_cut_are_taken_in_index_order(tmp_path: Path) -> None:
    same = "Key cache offloading for long contexts."
    index = KeywordIndex(tmp_path / "kw")
    index.build([("b#0", same), ("a#0", same), ("c#0", "Key cache only."), ("d#0", same)], "r1")
    assert [cid for cid, _ in index.query("key cache offloading", 2)] == ["b#0", "a#0"]
    assert [cid for cid, _ in index.query("key cache offloading", 4)][:3] == ["b#0", "a#0", "d#0"]


def test_only_the_retriever_reads_the_keyword_index_module_from_above() -> None:
    """Issue 25 item 2: the answer layer scores relevance with text.py's terms (the ground floor), not the index's
    tokenizer; above the index only the retriever, which searches the keyword index, imports index/keyword.py."""
    keyword = "rag_assistant.index.keyword"
    above = [m for m in arch.modules() if arch.floor(m.name) > arch.floor(keyword)]
    users = sorted(m.name for m in above if keyword in arch.imports(m))
    assert users == ["rag_assistant.retrieve"]
