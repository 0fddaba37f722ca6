"""Sentence vectors computed once at ingest (index/sentences.py): stored, reused by answers, invalidated with
their paper, computed on read when missing, and never written by the read side."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rag_assistant import text as text_module
from rag_assistant.answer.chain import AnswerChain
from rag_assistant.config import Settings
from rag_assistant.corpus import bundled_corpus_path, load_corpus
from rag_assistant.index.chunking import token_counter
from rag_assistant.index.embedder_base import BaseEmbedder
from rag_assistant.index.embedding import get_embedder, get_tokenizer
from rag_assistant.index.ingest import ingest_papers
from rag_assistant.index.sentence_store import LEGACY_FINGERPRINTS, content_digest, legacy_split
from rag_assistant.index.sentences import SentenceStore, digest, layout, sidecar_path, signature
from rag_assistant.index.state import recorded_chunking
from rag_assistant.index.store import open_store
from rag_assistant.retrieve import Retriever
from rag_assistant.text import split_sentences


def _records(n: int = 6) -> list[dict[str, Any]]:
    papers = load_corpus([bundled_corpus_path()]).papers[:n]
    return [{"id": p.paper_id.replace(":", "-"), "title": p.title, "abstract": p.text} for p in papers]


def _ingest(path: Path, records: list[dict[str, Any]], settings: Settings) -> Any:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return ingest_papers(load_corpus([path]).papers, settings)


def _stored(settings: Settings) -> tuple[SentenceStore, str]:
    chunking = recorded_chunking(open_store(settings).get_info(), lambda: 1)
    assert chunking is not None
    return SentenceStore(sidecar_path(settings)), signature(settings, chunking)


def test_ingest_stores_vectors_and_answers_embed_no_abstract_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings()
    records = _records()
    report = _ingest(tmp_path / "a.jsonl", records, settings)
    assert report.sentence_papers == len(records)
    store, sig = _stored(settings)
    papers = load_corpus([tmp_path / "a.jsonl"]).papers
    got = store.get(papers, sig)
    assert set(got) == {p.paper_id for p in papers}
    for paper in papers:
        assert got[paper.paper_id].shape == (len(split_sentences(paper.text)), 384)
        assert np.allclose(np.linalg.norm(got[paper.paper_id], axis=1), 1.0, atol=1e-2)

    embedder = Retriever(settings).embedder
    seen: list[str] = []
    real = embedder.embed
    monkeypatch.setattr(embedder, "embed", lambda texts: seen.extend(texts) or real(texts))
    embedder._cache.clear()  # what the ingest left in the cache must not hide an embedding
    retriever = Retriever(settings)
    chain = AnswerChain(settings, retriever, log=False)
    sentences = {s for p in papers for s in split_sentences(p.text)}
    for question in ("How does the Non-Equilibrium Transport Sampler work?", "What is WAVE attention?"):
        answer = chain.ask(question, k=3)
        assert answer.sources and not answer.abstained
        assert not sentences & set(seen), "an abstract sentence was embedded while answering"
    assert retriever.reader._sentences is not None and retriever.reader._sentences.computed == 0
    # the second question embeds only its own texts: question, question words, non-quoted claims
    assert all(len(t) <= 200 for t in seen)


def test_changed_and_removed_papers_lose_their_vectors(tmp_path: Path) -> None:
    settings = Settings()
    records = _records()
    path = tmp_path / "a.jsonl"
    _ingest(path, records, settings)
    store, sig = _stored(settings)
    before = store.digests(sig)
    assert len(before) == len(records)

    edited = [{**records[0], "abstract": records[0]["abstract"] + " We also release the code."}, *records[1:-1]]
    report = _ingest(path, edited, settings)
    assert (report.changed, report.removed, report.sentence_papers) == (1, 1, 1)
    after = store.digests(sig)
    now = load_corpus([path]).papers
    assert after == {digest(p) for p in now}  # the old version's and the removed paper's rows are gone
    vectors = store.get(now, sig)
    assert vectors[now[0].paper_id].shape[0] == len(split_sentences(now[0].text))


def test_missing_sidecar_is_computed_on_read_without_writing_and_backfilled_by_ingest(tmp_path: Path) -> None:
    settings = Settings()
    records = _records(4)
    path = tmp_path / "a.jsonl"
    _ingest(path, records, settings)
    store, sig = _stored(settings)
    papers = load_corpus([path]).papers
    stored = store.get(papers, sig)
    store.close()
    sidecar = sidecar_path(settings)
    sidecar.unlink()

    retriever = Retriever(settings)
    assert retriever.search("KV cache compression", 2)
    computed = retriever.sentence_vectors(papers)
    assert retriever.reader._sentences is not None and retriever.reader._sentences.computed == len(papers)
    assert not sidecar.exists(), "the read side created the sidecar"
    for paper in papers:  # the same function as at ingest: equal up to float16 storage
        assert np.allclose(computed[paper.paper_id], stored[paper.paper_id], atol=1e-2)
    retriever.sentence_vectors(papers)
    assert retriever.reader._sentences.computed == len(papers)  # kept in memory, not computed twice

    report = ingest_papers(papers, settings)  # unchanged: chunks reused, sentence vectors backfilled
    assert (report.unchanged, report.chunks_embedded, report.sentence_papers) == (len(papers), 0, len(papers))
    assert set(SentenceStore(sidecar).get(papers, sig)) == {p.paper_id for p in papers}


def test_read_side_opens_the_sidecar_read_only(tmp_path: Path) -> None:
    settings = Settings()
    _ingest(tmp_path / "a.jsonl", _records(2), settings)
    reader = SentenceStore(sidecar_path(settings), readonly=True)
    paper = load_corpus([tmp_path / "a.jsonl"]).papers[0]
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        reader.put([(paper, np.zeros((1, 384), dtype=np.float32))], "another signature")


class _Standalone(BaseEmbedder):
    """No token states (like torch or a remote server): hashed bag-of-words vectors."""

    name, batch_size = "fake", 8

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), 16), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.split():
                out[i, hash(word) % 16] += 1.0
        return out / np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-9, None)


def test_layout_spans_and_both_kinds_give_one_vector_per_sentence() -> None:
    paper = load_corpus([bundled_corpus_path()]).papers[0]
    count = token_counter(get_tokenizer())
    lay = layout(paper, count, (40, 1))  # a small window: long sentences are cut into pieces across chunks
    assert len(lay.chunks) > 2
    pieces: dict[int, list[str]] = {}
    for text, spans in zip(lay.chunks, lay.spans, strict=True):
        for start, end, i in spans:
            pieces.setdefault(i, []).append(text[start:end])
    assert sorted(pieces) == list(range(len(lay.sentences)))
    for i, sentence in enumerate(lay.sentences):
        assert all(piece in sentence for piece in pieces[i])

    fake = _Standalone()
    (vectors,) = fake.sentence_vectors([lay])
    assert vectors.shape == (len(lay.sentences), 16)
    assert fake.calls == [lay.sentences]  # standalone: each sentence, whole

    onnx = get_embedder(None, Settings().embedding_backend)
    assert onnx.pools_tokens
    (pooled,) = onnx.sentence_vectors([lay])
    standalone = onnx.embed(lay.sentences)
    assert pooled.shape == standalone.shape
    assert np.allclose(np.linalg.norm(pooled, axis=1), 1.0, atol=1e-5)
    assert float(np.min(np.sum(pooled * standalone, axis=1))) > 0.6  # the same sentences, read in context


def _legacy_sidecar(settings: Settings, papers: list[Any], vectors: dict[str, Any], sig: str) -> None:
    """The sidecar as the code before issue 23 wrote it: rows keyed by the title, the text and a fingerprint of the
    regex splitter of the time, aligned with that splitter's sentences, without the content and splitter columns."""
    path = sidecar_path(settings)
    path.unlink()
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE sentences (digest TEXT NOT NULL, signature TEXT NOT NULL, paper_id TEXT NOT NULL, "
            "n INTEGER NOT NULL, dim INTEGER NOT NULL, vectors BLOB NOT NULL, PRIMARY KEY (digest, signature))"
        )
        for paper in papers:
            key = json.dumps([paper.title, paper.text, LEGACY_FINGERPRINTS[0]], ensure_ascii=False)
            n = len(legacy_split(paper.text))
            rows = vectors[paper.paper_id] if n == len(vectors[paper.paper_id]) else np.ones((n, 384))
            blob = np.asarray(rows, dtype=np.float16).tobytes()
            digest_ = hashlib.sha1(key.encode("utf-8")).hexdigest()[:16]
            db.execute("INSERT INTO sentences VALUES (?, ?, ?, ?, ?, ?)", (digest_, sig, paper.paper_id, n, 384, blob))
    db.close()


def test_a_new_splitter_reembeds_only_the_papers_whose_sentences_changed(tmp_path: Path) -> None:
    settings = Settings()
    records = _records(4)
    # a join ("...sentence.Next") the regex splitter before issue 23 kept as one sentence, today's splits
    first = split_sentences(records[0]["abstract"])
    records[0]["abstract"] = first[0] + "".join(" " + s for s in first[1:]).replace(" ", "", 1)
    path = tmp_path / "a.jsonl"
    _ingest(path, records, settings)
    store, sig = _stored(settings)
    papers = load_corpus([path]).papers
    assert len(legacy_split(papers[0].text)) == len(split_sentences(papers[0].text)) - 1
    assert all(legacy_split(p.text) == split_sentences(p.text) for p in papers[1:])
    stored = store.get(papers, sig)
    store.close()
    _legacy_sidecar(settings, papers, stored, sig)

    # meanwhile the read side uses the legacy rows that still line up, and computes the other paper's
    retriever = Retriever(settings)
    read = retriever.sentence_vectors(papers)
    assert retriever.reader._sentences is not None and retriever.reader._sentences.computed == 1
    for paper in papers:
        assert read[paper.paper_id].shape == (len(split_sentences(paper.text)), 384)
        assert np.allclose(read[paper.paper_id], stored[paper.paper_id], atol=1e-2)

    report = ingest_papers(papers, settings)  # unchanged papers: only the one whose sentences changed re-embedded
    assert (report.unchanged, report.sentence_papers) == (len(papers), 1)
    store = SentenceStore(sidecar_path(settings))
    assert store.current(sig).keys() == {content_digest(p) for p in papers}
    now = store.get(papers, sig)
    for paper in papers:
        assert np.allclose(now[paper.paper_id], stored[paper.paper_id], atol=1e-2)

    text_module._split.cache_clear()
    report = ingest_papers(papers, settings)  # an unchanged re-ingest splits no abstract
    assert (report.sentence_papers, text_module._split.cache_info().misses) == (0, 0)
