"""The keyword index (tantivy): bm25s's tokens, Lucene's BM25 over chunks, updates that stay close to a rebuild
(and are refused when removed chunks would skew the statistics), fields (a boosted title, author names as
pairs), filters and excluded papers applied before ranking, older formats read as stale."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rag_assistant.corpus import bundled_corpus_path, load_corpus
from rag_assistant.index.keyword import FieldFilter, KeywordDoc, KeywordIndex, query_terms, tokenize
from rag_assistant.text import english_stemmer, split_sentences

QUERIES = [
    "low-rank key cache offloading for long-context inference",
    "equivariant graph neural networks for molecules",
    "zebras migrating across savannas",
    "quantization error accumulated in earlier layers",
    "safety of fine-tuned language models",
    "model model training data",  # a repeated term counts twice, as in bm25s
]


def _chunks() -> list[KeywordDoc]:
    out = []
    for paper in load_corpus([bundled_corpus_path()]).papers:
        sentences = split_sentences(paper.text)
        half = len(sentences) // 2
        out += [
            KeywordDoc(f"{paper.paper_id}#0", " ".join(sentences[:half])),
            KeywordDoc(f"{paper.paper_id}#1", " ".join(sentences[half:])),
        ]
    return out


def _results(index: KeywordIndex) -> list[dict[str, float]]:
    return [dict(index.query(q, 200)) for q in QUERIES]  # every matching chunk


def _close(got: dict[str, float], want: dict[str, float], rel: float) -> None:
    """The same chunks, scores within `rel`, and the same order where scores differ by more than that."""
    assert got.keys() == want.keys()
    assert all(got[k] == pytest.approx(want[k], rel=rel) for k in want)
    ranked = sorted(want, key=lambda k: -want[k])
    for a, b in zip(ranked, ranked[1:], strict=False):
        if want[a] > want[b] * (1 + 3 * rel):
            assert got[a] > got[b], (a, b)


def test_tokenizer_is_bm25s() -> None:
    import bm25s

    texts = [doc.text for doc in _chunks()] + [
        "",
        "a",
        "Ünïcödé naïve café's x_1 β-VAE 3D U-Net l2 (ICML'25) don't",
        "THE the The of OF",
        "tab\tnew\nline — dash",
    ]
    want = bm25s.tokenize(texts, stopwords="en", stemmer=english_stemmer(), return_ids=False, show_progress=False)
    assert tokenize(texts) == want


def test_scores_are_lucene_bm25_over_chunks(tmp_path: Path) -> None:
    """tantivy's BM25 is Lucene's: idf * (k1 + 1) * tf / (tf + k1 * norm) with k1 1.2, chunk lengths stored in
    one byte (exact to 40 tokens, then within a few percent). So it is bm25s's with k1 1.2 times 2.2, the
    same chunks matching; bm25s's default k1 1.5 (our index before tantivy) ranks nearly alike."""
    import bm25s

    chunks = _chunks()
    index = KeywordIndex(tmp_path / "kw")
    assert index.build(chunks, "r1") == len(chunks)
    reference = bm25s.BM25(k1=1.2, b=0.75)
    tokens = bm25s.tokenize([d.text for d in chunks], stopwords="en", stemmer=english_stemmer(), show_progress=False)
    reference.index(tokens, show_progress=False)
    for query in QUERIES:
        terms = [t for t in query_terms(query) if t in reference.vocab_dict]
        scores = reference.get_scores(terms) if terms else [0.0] * len(chunks)
        want = {d.chunk_id: 2.2 * float(s) for d, s in zip(chunks, scores, strict=True) if s > 0}
        _close(dict(KeywordIndex(tmp_path / "kw").query(query, len(chunks))), want, rel=0.04)
    indptr, vocab, n = reference.scores["indptr"], reference.vocab_dict, len(chunks)
    for term in ("cach", "graph", "model"):
        df = int(indptr[vocab[term] + 1] - indptr[vocab[term]])
        assert index.idf([term])[term] == pytest.approx(math.log(1 + (n - df + 0.5) / (df + 0.5)))
    assert index.idf(["nosuchterm"])["nosuchterm"] > index.idf(["cach"])["cach"]


def test_update_stays_close_to_a_rebuild_and_refuses_too_many_removals(tmp_path: Path) -> None:
    chunks = _chunks()
    first, later = chunks[:70], chunks[70:]
    removed = {d.chunk_id for d in first[:3]}
    replaced = [KeywordDoc(first[10].chunk_id, "Zebras migrate across quantum savannas."), first[11]]

    updated = KeywordIndex(tmp_path / "updated")
    updated.build(first, "r1")
    assert updated.can_update("r1") and not updated.can_update("r0")
    assert updated.update(later + replaced, removed, "r2")

    final = {d.chunk_id: d for d in first if d.chunk_id not in removed}
    final.update({d.chunk_id: d for d in later + replaced})
    rebuilt = KeywordIndex(tmp_path / "rebuilt")
    rebuilt.build(list(final.values()), "r2")

    reloaded = KeywordIndex(tmp_path / "updated")  # what the next process sees
    assert reloaded.revision == "r2" and sorted(reloaded.chunk_ids()) == sorted(final)
    for got, want in zip(_results(reloaded), _results(rebuilt), strict=True):
        # The 5 removed chunks still count in N, df and the average length until a merge drops them: a rare
        # term of a replaced chunk has df 2 instead of 1 (in 76 chunks, its IDF 20% lower).
        _close(got, want, rel=0.25)
    assert next(iter(_results(reloaded)[2])) == first[10].chunk_id

    # Removing 8 more would leave 13 removed chunks beside 63 live ones (> 10%): refused, nothing written.
    gone = [d.chunk_id for d in first[20:28]]
    assert not reloaded.update([], gone, "r3")
    assert KeywordIndex.stored_revision(tmp_path / "updated") == "r2"
    assert len(KeywordIndex(tmp_path / "updated").chunk_ids()) == len(final)


def test_many_updates_keep_scores_and_leave_no_stale_files(tmp_path: Path) -> None:
    """Small updates, each a new tantivy segment that tantivy merges: the index holds what a rebuild holds,
    scores stay close, segments stay few, and the directory holds only the last commit's files."""
    chunks = _chunks()
    index = KeywordIndex(tmp_path / "kw")
    index.build(chunks[:40], "r0")
    live = {d.chunk_id: d for d in chunks[:40]}
    for step, start in enumerate(range(40, len(chunks), 4)):
        added = chunks[start : start + 4]
        gone = [list(live)[step * 2 % len(live)]] if step % 4 == 0 else []
        assert index.update(added, gone, f"r{step + 1}")
        for cid in gone:
            live.pop(cid)
        live.update({d.chunk_id: d for d in added})
    reloaded = KeywordIndex(tmp_path / "kw")
    assert sorted(reloaded.chunk_ids()) == sorted(live) and reloaded._searcher.num_segments <= 8
    rebuilt = KeywordIndex(tmp_path / "rebuilt")
    rebuilt.build(list(live.values()), "x")
    for got, want in zip(_results(reloaded), _results(rebuilt), strict=True):
        _close(got, want, rel=0.08)
    meta = json.loads((tmp_path / "kw" / "meta.json").read_text())  # tantivy's
    segments = {s["segment_id"].replace("-", "") for s in meta["segments"]}
    files = [p.name.split(".")[0] for p in (tmp_path / "kw").iterdir() if re.match(r"[0-9a-f]{32}\.", p.name)]
    assert files and set(files) == segments


def test_exclude_masks_papers_before_ranking(tmp_path: Path) -> None:
    index = KeywordIndex(tmp_path / "kw")
    index.build(_chunks(), "r1")
    top = index.query(QUERIES[0], 3)
    paper = top[0][0].rsplit("#", 1)[0]
    masked = index.query(QUERIES[0], 3, exclude={paper})
    assert len(masked) == 3 and all(not cid.startswith(paper + "#") for cid, _ in masked)
    assert masked[0] == next(hit for hit in index.query(QUERIES[0], 10) if not hit[0].startswith(paper + "#"))


def test_title_match_outweighs_the_same_word_in_an_abstract(tmp_path: Path) -> None:
    """Chunks start with their title (index/chunking.py); the title field adds a boosted match on top."""
    filler = "We study methods and report results on standard benchmarks with careful ablations."
    docs = [
        KeywordDoc("in-abstract#0", f"Robust training. {filler} It uses sparse attention.", "Robust training"),
        KeywordDoc("in-title#0", f"Sparse attention. {filler} It is robust to noise.", "Sparse attention"),
        KeywordDoc("other#0", f"{filler} Nothing relevant here at all.", ""),
    ]
    index = KeywordIndex(tmp_path / "kw")
    index.build(docs, "r1")
    hits = index.query("sparse attention", 3)
    assert [cid for cid, _ in hits] == ["in-title#0", "in-abstract#0"]
    assert hits[0][1] > 1.5 * hits[1][1]


def test_authors_match_as_whole_names(tmp_path: Path) -> None:
    """A question naming an author ranks their papers first (accents folded, middle initials skipped, however
    many co-authors), even when the surname is in many other author lists; a surname that is also a word
    ("Long") does not lift its papers in a question that uses the word."""
    text = "We propose a method for long context language modelling with sparse retrieval."
    crowd = tuple(f"Coauthor Number{i}" for i in range(30))
    docs = [
        KeywordDoc("a#0", text, authors=("Jürgen Schmidhuber", "Long Chen")),
        KeywordDoc("b#0", text, authors=("Yann N. Dauphin", *crowd)),
        KeywordDoc("c#0", text, authors=("Ada Lovelace",)),
        KeywordDoc("d#0", text, authors=("Yann Dauphin",)),
        *(KeywordDoc(f"w{i}#0", f"Retrieval study {i}.", authors=(f"Hao{i} Wang", "Yi Zhang")) for i in range(8)),
        KeywordDoc("yi#0", "An unrelated abstract about optimisation.", authors=("Yi Wang", "Hao Zhang")),
    ]
    index = KeywordIndex(tmp_path / "kw")
    index.build(docs, "r1")
    assert index.query("papers by Jurgen Schmidhuber on language modelling", 3)[0][0] == "a#0"
    top = index.query("Which papers did Yann Dauphin write about sparse retrieval?", 3)
    assert {cid for cid, _ in top[:2]} == {"b#0", "d#0"} and top[0][1] == pytest.approx(top[1][1])
    assert index.query("What did Long Chen publish on retrieval?", 3)[0][0] == "a#0"
    assert index.query("List the papers by Yi Wang on retrieval", 3)[0][0] == "yi#0"
    scores = dict(index.query("long context language modelling", 4))
    assert scores["a#0"] == pytest.approx(scores["c#0"])  # "long" alone is no author match


def test_filters_apply_before_ranking(tmp_path: Path) -> None:
    """Only chunks of papers with the given values (or years in a range) are ranked: the best of the subset,
    however far down the unfiltered ranking it sits, and nothing outside it."""
    base = _chunks()
    docs = [
        KeywordDoc(
            d.chunk_id,
            d.text,
            authors=(f"Ana Núñez{i % 5}", "Bo Li"),
            values={"year": 2020 + i % 6, "topic": ["Theory", "Deep Learning->LLMs"][i % 2]},
        )
        for i, d in enumerate(base)
    ]
    index = KeywordIndex(tmp_path / "kw")
    index.build(docs, "r1")
    by_id = {d.chunk_id: d for d in docs}
    everything = index.query(QUERIES[1], len(docs))
    cases = [
        ([FieldFilter("topic", ("Theory",))], lambda d: d.values["topic"] == "Theory"),
        ([FieldFilter("year", low=2023, high=2024)], lambda d: 2023 <= d.values["year"] <= 2024),
        ([FieldFilter("year", ("2021",))], lambda d: d.values["year"] == 2021),  # as a command line spells it
        (  # author names as people write them: case, accents, a middle initial
            [FieldFilter("authors", ("ana nunez3", "Ana M. Núñez4")), FieldFilter("year", low=2022)],
            lambda d: d.authors[0] in ("Ana Núñez3", "Ana Núñez4") and d.values["year"] >= 2022,
        ),
    ]
    for where, keep in cases:
        want = [(cid, score) for cid, score in everything if keep(by_id[cid])][:3]
        got = index.query(QUERIES[1], 3, where=where)
        assert len(got) == 3 and [c for c, _ in got] == [c for c, _ in want], where
        assert [s for _, s in got] == pytest.approx([s for _, s in want])
    assert index.query(QUERIES[1], 3, where=[FieldFilter("topic", ("No such track",))]) == []
    with pytest.raises(ValueError, match="range of years"):
        index.query(QUERIES[1], 3, where=[FieldFilter("topic", low=1)])


def test_removing_everything_is_refused_then_rebuilt(tmp_path: Path) -> None:
    chunks = _chunks()[:4]
    index = KeywordIndex(tmp_path / "kw")
    index.build(chunks, "r1")
    assert not index.update([], {d.chunk_id for d in chunks}, "r2")
    index.build([], "r2")
    assert index.query(QUERIES[0], 5) == [] and KeywordIndex(tmp_path / "kw").revision == "r2"
    assert index.update(chunks, [], "r3")
    assert sorted(KeywordIndex(tmp_path / "kw").chunk_ids()) == sorted(d.chunk_id for d in chunks)


def test_older_formats_are_stale(tmp_path: Path) -> None:
    """Indexes of our own formats before tantivy (one bm25s matrix; numpy segments) read as stale even when
    their revision is the store's: the next ingest rebuilds them, readers build one in memory meanwhile."""
    for n, meta in enumerate([{"revision": "r1", "ids": ["a#0"]}, {"format": 2, "revision": "r1", "segments": []}]):
        (tmp_path / f"kw{n}").mkdir()
        (tmp_path / f"kw{n}" / "meta.json").write_text(json.dumps(meta))
        index = KeywordIndex(tmp_path / f"kw{n}")
        assert index.revision is None and not index.can_update("r1") and index.query("anything", 3) == []
        assert KeywordIndex.stored_revision(tmp_path / f"kw{n}") is None
        index.build(_chunks()[:4], "r1")
        assert KeywordIndex(tmp_path / f"kw{n}").can_update("r1")


def test_build_and_search_need_no_bm25s(tmp_path: Path) -> None:
    """bm25s is a test extra, not a dependency: the index is built and searched as if it were not installed."""
    code = (
        "import sys; sys.modules['bm25s'] = None; from pathlib import Path; "
        "from rag_assistant.index.keyword import KeywordDoc, KeywordIndex; "
        f"k = KeywordIndex(Path({str(tmp_path / 'kw')!r})); "
        "k.build([KeywordDoc('a#0', 'The key cache is offloaded.')], 'r1'); "
        "assert k.query('key cache', 3); assert 'numba' not in sys.modules and 'scipy' not in sys.modules"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_the_index_and_text_py_tokenize_alike() -> None:
    """The answer layer scores relevance with text.tokenize (the ground floor); the index analyses with tantivy:
    both must give bm25s's tokens, so the terms the answer weighs are the index's. bm25s's stop words are copied in
    stopwords.py."""
    from bm25s.stopwords import STOPWORDS_EN as theirs

    from rag_assistant import text
    from rag_assistant.stopwords import STOPWORDS_EN

    assert frozenset(theirs) == STOPWORDS_EN
    texts = [t for _, t in ((d.chunk_id, d.text) for d in _chunks())] + ["Jürgen's ML-based x2 ünïcode test"]
    assert tokenize(texts) == text.tokenize(texts)
    assert query_terms("Which papers reduce the KV cache?") == text.query_terms("Which papers reduce the KV cache?")


def test_only_the_retriever_reads_the_keyword_index_module_from_above() -> None:
    """Issue 25 item 2: above the index only the retriever, which searches the keyword index, imports
    index/keyword.py."""
    import architecture as arch

    keyword = "rag_assistant.index.keyword"
    above = [m for m in arch.modules() if arch.floor(m.name) > arch.floor(keyword)]
    users = sorted(m.name for m in above if keyword in arch.imports(m))
    assert users == ["rag_assistant.retrieve"]


def test_ties_at_the_cut_are_taken_in_index_order(tmp_path: Path) -> None:
    same = "Key cache offloading for long contexts."
    index = KeywordIndex(tmp_path / "kw")
    index.build(
        [KeywordDoc(cid, same if cid != "c#0" else "Key cache only.") for cid in ("b#0", "a#0", "c#0", "d#0")], "r1"
    )
    assert [cid for cid, _ in index.query("key cache offloading", 2)] == ["b#0", "a#0"]
    assert [cid for cid, _ in index.query("key cache offloading", 4)][:3] == ["b#0", "a#0", "d#0"]


_WRITER = """
import sys
from pathlib import Path
from rag_assistant.index.keyword import KeywordDoc, KeywordIndex
index = KeywordIndex(Path(sys.argv[1]))
for i in range(1, 10_000):
    text = "zebra marker " + " ".join(f"filler{j}" for j in range(i % 50))
    assert index.update([KeywordDoc(f"u{i}#0", text)], [], f"r{i}")
    print(i, flush=True)
"""

_READER = """
import sys, time
from pathlib import Path
from rag_assistant.index.keyword import KeywordIndex
seen, end = set(), time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    index = KeywordIndex(Path(sys.argv[1]))
    k = int(index.revision[1:])
    markers = {cid for cid, _ in index.query("zebra marker", 100_000) if cid.startswith("u")}
    assert len(markers) >= k and len(index.query("key cache offloading", 5)) == 5, (k, len(markers))
    seen.add(k)
print(len(seen))
"""


@pytest.mark.slow
def test_one_writer_several_readers_and_a_kill(tmp_path: Path) -> None:
    """A writer commits update after update while three reader processes open and search the index: every
    reader sees a whole commit at least as new as the revision it read (what the read face relies on), none
    fails. Then the writer is SIGKILLed mid-stream: the index opens at its last recorded revision with that
    commit's chunks (or a later one's), and the next update takes the lock the dead writer held."""
    import signal

    directory = tmp_path / "kw"
    KeywordIndex(directory).build([KeywordDoc(d.chunk_id, d.text) for d in _chunks()], "r0")
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(directory)], stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None
    assert writer.stdout.readline().strip() == "1"
    readers = [
        subprocess.Popen([sys.executable, "-c", _READER, str(directory), "6"], stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    outputs = [r.communicate(timeout=120)[0] for r in readers]
    assert [r.returncode for r in readers] == [0, 0, 0]
    assert all(int(out) >= 2 for out in outputs), outputs  # each saw several commits
    writer.send_signal(signal.SIGKILL)
    writer.wait(30)

    index = KeywordIndex(directory)
    k = int(str(index.revision)[1:])
    markers = {cid for cid in index.chunk_ids() if cid.startswith("u")}
    assert k >= 1 and markers >= {f"u{i}#0" for i in range(1, k + 1)} and len(markers) <= k + 1
    assert index.update([KeywordDoc("after#0", "zebra marker after the kill")], [], "after")
    assert KeywordIndex(directory).query("after the kill", 1)[0][0] == "after#0"
