"""Ingest is idempotent, replaces changed abstracts, prunes removed ones and survives SIGKILL."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kill_helpers import kill_at, start_ingest

from rag_assistant.config import Settings
from rag_assistant.corpus import bundled_corpus_path, load_corpus
from rag_assistant.index.chunking import chunk_paper, token_counter
from rag_assistant.index.embedding import get_tokenizer
from rag_assistant.index.ingest import EMBED_BATCH, ingest_papers
from rag_assistant.index.keyword import KeywordIndex
from rag_assistant.index.keyword_fields import store_docs
from rag_assistant.index.state import keyword_dir
from rag_assistant.index.store import ChromaStore, open_store
from rag_assistant.retrieve import Retriever


def _write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _bundled_records() -> list[dict]:
    return [
        {"id": p.paper_id.replace(":", "-"), "abstract": p.text} for p in load_corpus([bundled_corpus_path()]).papers
    ]


def _expected_chunks(path: Path, settings: Settings) -> int:
    count = token_counter(get_tokenizer())
    return sum(
        len(chunk_paper(p, count, settings.chunk_max_tokens, settings.chunk_overlap_sentences))
        for p in load_corpus([path]).papers
    )


def test_reingest_unchanged_adds_and_embeds_nothing(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings()
    papers = load_corpus([bundled_corpus_path()]).papers
    first = ingest_papers(papers, settings)
    assert first.new == 38 and first.chunks_added == _expected_chunks(bundled_corpus_path(), settings)

    import rag_assistant.index.ingest as ingest_mod

    def no_embedding(*a: object, **k: object) -> None:
        raise AssertionError("unchanged corpus must not load or call the embedder")

    monkeypatch.setattr(ingest_mod, "get_embedder", no_embedding)
    second = ingest_papers(papers, settings)
    assert (second.new, second.changed, second.unchanged, second.chunks_added) == (0, 0, 38, 0)
    assert not second.keyword_rebuilt
    assert open_store(settings).count() == first.chunks_added


def test_changed_abstract_replaces_old_chunks_and_removed_one_is_pruned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings()
    records = _bundled_records()  # enough chunks that the two papers' are < 10% of them: updated, not rebuilt
    path = _write_jsonl(tmp_path / "mini.jsonl", records)
    ingest_papers(load_corpus([path]).papers, settings)
    store = open_store(settings)
    before = store.count()

    records[2] = {**records[2], "abstract": "Zebras migrate across quantum savannas. A short replaced abstract."}
    del records[4]
    _write_jsonl(path, records)
    with monkeypatch.context() as m:  # the keyword index is updated from the changes, not rebuilt from the store
        m.setattr(ChromaStore, "iter_chunks", lambda self: pytest.fail("store read back for the keyword index"))
        report = ingest_papers(load_corpus([path]).papers, settings)
    assert (report.changed, report.removed, report.unchanged) == (1, 1, 36)
    updated = KeywordIndex(keyword_dir(settings))
    rebuilt = KeywordIndex(tmp_path / "rebuilt")
    rebuilt.build(store_docs(open_store(settings)), "check")
    for query in ("zebras in savannas", "key cache", "diffusion models"):
        got, want = dict(updated.query(query, 100)), dict(rebuilt.query(query, 100))
        # close, not equal: the removed chunks count in tantivy's statistics until a merge drops them
        assert got.keys() == want.keys() and [got[k] for k in want] == pytest.approx(list(want.values()), rel=0.1)

    store = open_store(settings)
    assert set(store.paper_states([r["id"] for r in _bundled_records()])) == {r["id"] for r in records}
    texts = dict(store.iter_chunks())
    old_id = records[2]["id"]
    assert [t for cid, t in texts.items() if cid.startswith(old_id + "#")] == [records[2]["abstract"]]
    assert store.count() < before
    top = Retriever(settings).search("zebras migrating across savannas", 1)[0]
    assert top.paper_id == old_id and "Zebras" in top.paper.text


def test_conflicting_id_from_another_file_is_refused_and_index_intact(tmp_path: Path) -> None:
    from rag_assistant.errors import CorpusError

    settings = Settings()
    a = _write_jsonl(tmp_path / "a.jsonl", [{"id": "same", "abstract": "First text about graphs."}])
    b = _write_jsonl(tmp_path / "b.jsonl", [{"id": "same", "abstract": "Other text about caches."}])
    ingest_papers(load_corpus([a]).papers, settings)
    with pytest.raises(CorpusError, match="already in the index"):
        ingest_papers(load_corpus([b]).papers, settings)
    assert open_store(settings).papers(["same"])["same"].text == "First text about graphs."


@pytest.mark.slow
def test_sigkill_halfway_then_rerun_leaves_complete_index(tmp_path: Path, data_dir: Path) -> None:
    records = [
        {"id": f"v{v}-{r['id']}", "abstract": f"Variant {v} study. {r['abstract']}"}
        for v in range(5)
        for r in _bundled_records()
    ]
    corpus = _write_jsonl(tmp_path / "big.jsonl", records)
    settings = Settings()
    expected = _expected_chunks(corpus, settings)
    exe = Path(sys.executable).with_name("rag-assistant")
    # killed while it waits after its first written step of the shipped size: the rest is not stored
    code = kill_at(start_ingest(corpus, EMBED_BATCH), signal.SIGKILL, lambda done, total: done < total)
    assert code == -signal.SIGKILL

    partial = open_store(settings).count()
    assert 0 < partial < expected
    rerun = subprocess.run([str(exe), "ingest", str(corpus), "--json"], capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    report = json.loads(rerun.stdout)
    assert report["unchanged"] > 0 and report["new"] + report["changed"] > 0

    store = open_store(settings)
    ids = [cid for cid, _ in store.iter_chunks()]
    assert len(ids) == len(set(ids)) == expected
    states = store.paper_states([r["id"] for r in records])
    assert len(states) == len(records) and all(s.complete for s in states.values())
    keyword = KeywordIndex(data_dir / "keyword" / settings.collection)
    assert keyword.revision == store.get_info()["revision"]
    assert Retriever(settings).search("low-rank key cache offloading", 3)


def test_chunking_is_fixed_per_index(tmp_path: Path) -> None:
    records = _bundled_records()[:6]
    small = Settings(chunk_max_tokens=80, chunk_overlap_sentences=0)
    ingest_papers(load_corpus([_write_jsonl(tmp_path / "a.jsonl", records[:3])]).papers, small)
    assert open_store(small).get_info()["chunking"] == "80/0"

    later = load_corpus([_write_jsonl(tmp_path / "b.jsonl", records[3:])]).papers
    report = ingest_papers(later, Settings(chunk_max_tokens=200))
    assert any("<= 80 tokens" in w for w in report.warnings)
    count = token_counter(get_tokenizer())
    expected = sum(len(chunk_paper(p, count, 80, 0)) for p in later)
    assert report.chunks_added == expected > len(later)
    assert all(count(text) <= 80 for _, text in open_store(small).iter_chunks())
    assert not ingest_papers(later, Settings()).warnings  # defaults are not a request to re-chunk


def test_overlapping_corpus_reuses_stored_vectors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings()
    records = _bundled_records()[:5]
    ingest_papers(load_corpus([_write_jsonl(tmp_path / "a.jsonl", records)]).papers, settings)

    import rag_assistant.index.ingest as ingest_mod

    class NoModel:
        def embed(self, texts: list[str]) -> object:
            assert not texts, f"re-embedded {len(texts)} stored texts"
            import numpy as np

            return np.zeros((0, 384), dtype=np.float32)

    monkeypatch.setattr(ingest_mod, "get_embedder", lambda *a, **k: NoModel())
    copies = [{**r, "id": "copy-" + r["id"]} for r in records]  # same abstracts, other ids (another corpus)
    report = ingest_papers(load_corpus([_write_jsonl(tmp_path / "b.jsonl", copies)]).papers, settings)
    assert report.new == 5 and report.chunks_added > 0 and report.chunks_embedded == 0
    assert open_store(settings).count() == 2 * report.chunks_added
    hit = Retriever(settings).search(records[1]["abstract"][:120], 3)[0]
    assert {hit.paper_id, *hit.duplicates} == {records[1]["id"], "copy-" + records[1]["id"]}


def test_counts_are_pluralised_in_ingest_and_stats(cli, tmp_path: Path) -> None:  # noqa: ANN001
    one = _write_jsonl(tmp_path / "one.jsonl", [{"id": "g1", "abstract": "Graph neural networks for proteins."}])
    ingested = cli("ingest", str(one))
    assert ingested.returncode == 0, ingested.stderr
    line = "Ingested 1 paper from 1 file: 1 new, 0 changed, 0 unchanged, 0 removed; 1 new chunk, 0 deleted in "
    assert line in ingested.stdout
    shown = cli("stats").stdout
    assert "papers: 1 searchable\n" in shown and "  one.jsonl: 1 paper\n" in shown
    assert "chunking: <= 254 tokens, 0 sentences of overlap\n" in shown
    two = _write_jsonl(tmp_path / "two.jsonl", [{"id": f"t{i}", "abstract": f"Topic {i} of caches."} for i in (1, 2)])
    again = cli("ingest", str(one), str(two))
    assert "Ingested 3 papers from 2 files: 2 new, 0 changed, 1 unchanged, 0 removed; 2 new chunks, " in again.stdout


def test_ingests_into_new_data_dirs_keep_no_descriptors_open(tmp_path: Path) -> None:
    """A library user ingesting into many data dirs in one process: each ingest lets go of the store it opened
    (chromadb keeps ~20 descriptors per path until its last client closes)."""
    import os

    papers = load_corpus([bundled_corpus_path()]).papers[:2]
    ingest_papers(papers, Settings(data_dir=tmp_path / "first"))  # imports and loads what every ingest shares
    before = len(os.listdir("/proc/self/fd"))
    for i in range(3):
        ingest_papers(papers, Settings(data_dir=tmp_path / f"dir{i}"))
    assert len(os.listdir("/proc/self/fd")) - before < 10  # was +20 per data dir


def test_the_same_abstract_in_two_files_is_one_paper_with_both_ids_and_the_richer_fields(tmp_path: Path) -> None:
    """The GUIDE's conference index: the bundled text files and papers.jsonl hold the same abstracts, the text copy
    first and without authors. The paper keeps its text id, answers the author filter, and names the JSON id as a
    duplicate, so a question set that uses either id scores it."""
    from rag_assistant.index.filters import parse_filters

    text = load_corpus([bundled_corpus_path()]).papers[17].text
    (tmp_path / "seed.txt").write_text("ICML 2025 Papers\n\n" + text + "\n")
    record = {"id": "j17", "abstract": text, "authors": ["Ada Lovelace"], "topic": "Deep Learning"}
    loaded = load_corpus([tmp_path / "seed.txt", _write_jsonl(tmp_path / "full.jsonl", [record])])
    ingest_papers(loaded.papers, Settings())
    retriever = Retriever(Settings())
    retriever.restrict(parse_filters(authors=["Ada Lovelace"]))
    (hit,) = retriever.search(text[:120], 3)
    assert hit.paper_id == "seed:0" and hit.duplicates == ["j17"]
    assert hit.paper.metadata["authors"] == ["Ada Lovelace"]


def test_an_eval_gold_id_merged_into_another_paper_is_not_reported_missing(tmp_path: Path) -> None:
    """The JSON id of an abstract the load kept under its text id is in the index (evaluation matches it); only an
    id that is nowhere is reported."""
    from rag_assistant.evaluate.dataset import EvalItem
    from rag_assistant.evaluate.records import missing_gold

    text = load_corpus([bundled_corpus_path()]).papers[17].text
    (tmp_path / "seed.txt").write_text("ICML 2025 Papers\n\n" + text + "\n")
    record = {"id": "j17", "abstract": text, "authors": ["Ada Lovelace"]}
    loaded = load_corpus([tmp_path / "seed.txt", _write_jsonl(tmp_path / "full.jsonl", [record])])
    ingest_papers(loaded.papers, Settings())
    items = [EvalItem("q1", "What does it do?", gold_papers=("j17", "seed:0", "nowhere"))]
    assert missing_gold(Retriever(Settings()), items) == ["q1: gold paper nowhere is not in the index"]
