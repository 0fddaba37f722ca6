"""Keyword search in the Chroma server where the deployment can do it (issue 21, item 4; index/sparse.py). What can
be tested on this machine: the capability detection on the two deployments it has, embedded Chroma and a single-
node `chroma run` server, which both refuse sparse indexes (probed once, when an ingest creates the collection,
in a scratch collection that is deleted; the answer recorded in the collection's metadata; search unchanged), and
the switch behind the store interface, with a store that reports the capability (a real embedded store whose
keyword search is answered by a client index standing in for the server: the only fake here). The server-side
ranking itself needs distributed Chroma or Chroma Cloud, which this machine does not have."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from chroma_server import BACKENDS, backend_settings

from rag_assistant.config import Settings
from rag_assistant.corpus import bundled_corpus_path, load_corpus
from rag_assistant.index import keyword_cache, sparse
from rag_assistant.index.filters import chroma_where
from rag_assistant.index.ingest import ingest_papers
from rag_assistant.index.keyword import FieldFilter, KeywordIndex
from rag_assistant.index.reader import IndexReader, StoreKeywords
from rag_assistant.index.state import keyword_dir
from rag_assistant.index.stats import KEYWORD_SERVER, index_stats
from rag_assistant.index.store import ChromaStore, open_store
from rag_assistant.retrieve import Retriever

QUERIES = ["KV cache offloading for long-context inference", "fine-tuning safety", "graph neural networks"]


@pytest.fixture(params=BACKENDS)
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    with backend_settings(request.param, tmp_path, "keywords") as settings:
        yield settings


@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every probe's answer, in order (the real probe runs: this only counts it)."""
    answers: list[bool] = []
    real = sparse.probe

    def counted(client: Any) -> bool:  # noqa: ANN401 - a chromadb client
        answers.append(real(client))
        return answers[-1]

    monkeypatch.setattr(sparse, "probe", counted)
    return answers


def _papers(n: int = 12) -> list[Any]:
    return load_corpus([bundled_corpus_path()]).papers[:n]


def _ranked(retriever: Retriever) -> list[list[tuple[str, float]]]:
    return [[(s.paper_id, round(s.score, 6)) for s in retriever.search(q, k=6)] for q in QUERIES]


def _collections(store: ChromaStore) -> set[str]:
    return {c.name for c in store.client.list_collections()}


def test_both_deployments_here_refuse_and_keyword_search_stays_on_the_client(
    settings: Settings, probes: list[bool]
) -> None:
    papers = _papers()
    ingest_papers(papers[:8], settings)
    assert probes == [False]  # probed once, when the ingest created the collection: refused
    store = open_store(settings, write=False)
    assert not any(name.startswith(sparse.PROBE_PREFIX) for name in _collections(store))  # nothing left behind
    assert not sparse.has_index(store.collection)
    info = store.get_info()
    assert info[sparse.INFO_KEY] == sparse.CLIENT and not sparse.server_side(info)

    ingest_papers(papers, settings)  # a second ingest into the collection: it exists, nothing is probed
    reader = IndexReader(settings)
    retriever = Retriever(settings, reader)
    ranked = _ranked(retriever)
    assert isinstance(reader.keyword, KeywordIndex)  # today's client index (a server client's: its cache)
    assert probes == [False]  # readers never probe
    assert store.get_info()[sparse.INFO_KEY] == sparse.CLIENT

    # Ranks exactly as an index without the record (every index before this change) does
    writer = open_store(settings)
    writer.set_info({k: v for k, v in writer.get_info().items() if k != sparse.INFO_KEY})
    assert _ranked(Retriever(settings)) == ranked
    assert probes == [False]


def test_the_search_requests_are_built_and_refused_by_the_local_executor(settings: Settings) -> None:
    """The Search payloads (a sparse Knn, the filters, the score selected) are built with chromadb's own classes;
    a single-node server parses them and checks them against the collection's schema (its Knn key `bm25` has no
    sparse index there: "Cannot filter using metadata key 'bm25' with type 'SparseVector' because indexing is
    disabled"; any Search on it: "Not implemented"), embedded Chroma refuses any Search in the client. As far as
    a request to a distributed server can be checked here."""
    from chromadb.errors import ChromaError

    ingest_papers(_papers(3), settings)
    store = open_store(settings, write=False)
    refused = (ChromaError, NotImplementedError)
    said = "bm25' with type 'SparseVector' because indexing is disabled" if settings.chroma_url else "not implemented"
    with pytest.raises(refused, match=said):
        store.keyword_search("KV cache offloading", 5, exclude={"x:0"}, where={"f_year": 2025})
    with pytest.raises(refused, match=said):
        store.keyword_idf(["cach", "offload"])
    assert store.keyword_search("the of and", 5) == []  # no term left to rank by: no request at all


def test_sparse_vectors_use_the_client_index_terms_hashed_as_chroma_bm25_hashes_tokens() -> None:
    from chromadb.utils.embedding_functions.schemas.bm25_tokenizer import Murmur3AbsHasher

    hasher = Murmur3AbsHasher()
    doc = sparse.vector(["cach", "offload", "cach"])
    assert doc.indices == sorted(hasher.hash(t) for t in ("cach", "offload"))
    weight = dict(zip(doc.indices, doc.values, strict=True))
    assert weight[hasher.hash("cach")] > weight[hasher.hash("offload")] > 0  # BM25's saturating term frequency
    assert sparse.vector(["cach", "cach"], query=True).values == [1.0]  # the server weighs a query by IDF


class ServerRanked:
    """A store whose server ranks keywords, as distributed Chroma's would: a real embedded ChromaStore for every
    read, its info reporting the capability, and its keyword search answered by a client index built from it in
    memory (standing in for the server's BM25), each call recorded."""

    def __init__(self, store: ChromaStore, index: KeywordIndex) -> None:
        self.store, self.index, self.calls = store, index, list[tuple[Any, ...]]()

    def __getattr__(self, name: str) -> Any:  # noqa: ANN401 - the real store's reads
        return getattr(self.store, name)

    def get_info(self) -> dict[str, Any]:
        return {**self.store.get_info(), sparse.INFO_KEY: sparse.SERVER}

    def keyword_search(
        self, text: str, n: int, exclude: Collection[str] = (), where: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        self.calls.append(("search", text, n, frozenset(exclude), where))
        return self.index.query(text, n, exclude)

    def keyword_idf(self, terms: Sequence[str]) -> dict[str, float]:
        self.calls.append(("idf", tuple(terms)))
        return self.index.idf(list(terms))


def test_a_store_that_ranks_keywords_itself_gets_the_keyword_search_and_the_client_keeps_nothing(
    tmp_path: Path,
) -> None:
    from rag_assistant.index.keyword_fields import store_docs
    from rag_assistant.index.runlog import RunLog
    from rag_assistant.index.state import store_revision

    settings = Settings(data_dir=tmp_path / "data", collection="keywords")
    ingest_papers(_papers(), settings)
    store = open_store(settings, write=False)
    client_side = _ranked(Retriever(settings))  # today's path: the keyword index on disk
    index = KeywordIndex(tmp_path / "unused")
    index.build_in_memory(store_docs(store), store_revision(store.get_info()))
    ranked = ServerRanked(store, index)
    keyword_dir(settings).rename(tmp_path / "moved")  # no client keyword state left to find

    reader = IndexReader(settings, store=ranked)  # type: ignore[arg-type]
    retriever = Retriever(settings, reader)
    assert _ranked(retriever) == client_side  # the store's candidates, fused as the client index's are
    assert isinstance(reader.keyword, StoreKeywords)
    assert [c[0] for c in ranked.calls].count("search") >= len(QUERIES)
    assert not keyword_dir(settings).exists() and not reader.synced
    assert index_stats(settings, reader)["keyword_index"] == KEYWORD_SERVER

    # filters go to the store as the dense search's `where`; IDFs are asked once per term
    year = FieldFilter("year", (2025,))
    reader.keyword.query("memory", 3, exclude={"p:1"}, where=[year])
    assert ranked.calls[-1] == ("search", "memory", 3, frozenset({"p:1"}), chroma_where([year]))
    ranked.calls.clear()
    assert retriever.idf(["cach", "graph"]) == retriever.idf(["graph", "cach"]) == index.idf(["cach", "graph"])
    assert ranked.calls == [("idf", ("cach", "graph"))]

    # an ingest's last step, syncing this client's keyword cache, has nothing to do
    log = RunLog.of(ranked, write=False)
    assert log is not None
    report = keyword_cache.sync_client_cache(ranked, settings, log)  # type: ignore[arg-type]
    assert report.as_dict() == keyword_cache.SyncReport().as_dict()
    assert not keyword_dir(settings).exists()
