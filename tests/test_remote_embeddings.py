"""Remote embeddings through the real `openai` client against a scripted /v1/embeddings server: batching,
order, normalisation, retries, errors as one line, nothing half-written after a fault, the model signature."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fake_embeddings import FakeEmbeddingServer, fake_vector
from fake_llm import drop, status

from rag_assistant.config import RemoteEmbedding, Settings
from rag_assistant.corpus import bundled_corpus_path, load_corpus
from rag_assistant.errors import ConfigError, EmbeddingError
from rag_assistant.index.embedding import get_embedder
from rag_assistant.index.remote_embedding import RemoteEmbedder, remote_signature

MODEL = "fake-embed"
TEXTS = ["key cache offloading", "safety of fine-tuned deltas", "mesh relocation", "graph networks", "sparse attention"]


def unit(vector: list[float]) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float32)
    return v / np.linalg.norm(v)


def embedder(srv: FakeEmbeddingServer, batch_size: int = 2, retries: int = 3, **kw: object) -> RemoteEmbedder:
    return RemoteEmbedder(RemoteEmbedding(srv.base_url, MODEL, max_retries=retries, **kw), batch_size)  # type: ignore[arg-type]


def test_batches_keep_order_and_normalise() -> None:
    with FakeEmbeddingServer() as srv:
        got = embedder(srv).embed([*TEXTS[:2], "  ", *TEXTS[2:]])
        sizes = [len(r["input"]) for r in srv.requests]
        models = {r["model"] for r in srv.requests}
    assert sizes == [2, 2, 1] and models == {MODEL}  # the blank text is not sent
    assert got.shape == (6, 48) and got.dtype == np.float32
    expected = [unit(fake_vector(t)) for t in TEXTS]
    assert np.allclose(np.delete(got, 2, axis=0), expected, atol=1e-6)  # server answers in reverse order
    assert not got[2].any()  # blank: a zero vector, similar to nothing


def test_embed_cached_and_dimension() -> None:
    with FakeEmbeddingServer() as srv:
        e = embedder(srv, batch_size=8)
        first = e.embed_cached(TEXTS[:3])
        again = e.embed_cached([TEXTS[2], TEXTS[0]])
        assert np.allclose(again, first[[2, 0]]) and len(srv.requests) == 1
        assert e.dimension == 48 and e.embed([]).shape == (0, 48)


def test_retries_honour_retry_after() -> None:
    with FakeEmbeddingServer() as srv:
        srv.script(status(503, headers={"retry-after": "0"}), status(429), drop())
        got = embedder(srv, batch_size=8).embed(TEXTS)
        assert len(srv.requests) == 4 and np.allclose(got[0], unit(fake_vector(TEXTS[0])))


def test_long_retry_after_is_reported_not_waited_for() -> None:
    with FakeEmbeddingServer() as srv:
        srv.script(status(503, headers={"retry-after": "600"}))
        with pytest.raises(EmbeddingError, match="retry after 600s") as err:
            embedder(srv).embed(TEXTS[:1])
        assert err.value.reason == "server" and len(srv.requests) == 1


@pytest.mark.parametrize(("code", "reason"), [(401, "auth"), (404, "not_found"), (400, "server")])
def test_client_errors_are_not_retried(code: int, reason: str) -> None:
    with FakeEmbeddingServer() as srv:
        srv.script(status(code))
        with pytest.raises(EmbeddingError) as err:
            embedder(srv).embed(TEXTS[:1])
        assert err.value.reason == reason and len(srv.requests) == 1 and err.value.exit_code == 3


def test_server_that_never_recovers_gives_up() -> None:
    with FakeEmbeddingServer(rule=lambda n, req: status(500, headers={"retry-after": "0"})) as srv:
        with pytest.raises(EmbeddingError, match=r"HTTP 500.*\(3 attempts") as err:
            embedder(srv, retries=2).embed(TEXTS[:1])
        assert err.value.reason == "server" and len(srv.requests) == 3


def test_unreachable_server_is_one_error() -> None:
    with FakeEmbeddingServer() as srv:
        url = srv.base_url
    e = RemoteEmbedder(RemoteEmbedding(url, MODEL, max_retries=0))
    with pytest.raises(EmbeddingError, match="cannot connect") as err:
        e.embed(TEXTS[:1])
    assert err.value.reason == "connect"


def test_malformed_response_is_one_error() -> None:
    with FakeEmbeddingServer() as srv:
        srv.script(status(200, body={"object": "list", "data": [], "model": MODEL}))
        with pytest.raises(EmbeddingError, match="0 vectors for 2 texts") as err:
            embedder(srv).embed(TEXTS[:2])
        assert err.value.reason == "malformed"


def test_token_vectors_are_mean_pooled_one_text_per_request() -> None:
    with FakeEmbeddingServer(per_token=True) as srv:
        got = embedder(srv, batch_size=4).embed(TEXTS[:3])
        sizes = [len(r["input"]) for r in srv.requests]
    assert sizes == [3, 1, 1, 1]  # the batched answer is not trusted: one text per request from then on
    pooled = [unit(list(np.mean([fake_vector(w) for w in t.split()], axis=0))) for t in TEXTS[:3]]
    assert np.allclose(got, pooled, atol=1e-6)


def test_secrets_stay_out_of_messages() -> None:
    with FakeEmbeddingServer(api_key="right-key") as srv:
        url = srv.base_url.replace("http://", "http://user:url-secret@")
        e = RemoteEmbedder(RemoteEmbedding(url, MODEL, api_key="wrong-key-123", max_retries=0))
        with pytest.raises(EmbeddingError) as err:
            e.embed(TEXTS[:1])
    text = f"{err.value} {err.value!r} {e.remote!r}"
    assert err.value.reason == "auth" and "HTTP 401" in text
    assert not any(s in text for s in ("wrong-key-123", "url-secret"))
    assert remote_signature(e.remote) == f"remote:127.0.0.1:{srv.port}/{MODEL}"


def test_get_embedder_picks_the_server() -> None:
    settings = Settings(embedding_base_url="http://127.0.0.1:9/v1", embedding_api_model="m", embed_batch_size=7)
    e = get_embedder(settings.embedding_model, settings.embedding_backend, 7, settings.remote_embedding)
    assert isinstance(e, RemoteEmbedder) and e.batch_size == 7 and e.name == "m"
    assert Settings().remote_embedding is None


def remote_settings(srv: FakeEmbeddingServer, model: str = MODEL, **kw: object) -> Settings:
    return Settings(embedding_base_url=srv.base_url, embedding_api_model=model, **kw)  # type: ignore[arg-type]


def test_model_signature_keeps_vectors_apart(ready: Path, tmp_path: Path) -> None:
    from rag_assistant.retrieve import Retriever

    papers = load_corpus([bundled_corpus_path()]).papers[:3]
    with FakeEmbeddingServer() as srv:
        with pytest.raises(ConfigError, match=f"built with embedding model bundled:.*not remote:127.0.0.1:{srv.port}"):
            Retriever(remote_settings(srv, data_dir=ready)).search("key cache", 2)  # a local index
        own = tmp_path / "remote-index"
        from rag_assistant.index.ingest import ingest_papers

        ingest_papers(papers, remote_settings(srv, data_dir=own))
        assert Retriever(remote_settings(srv, data_dir=own)).search("key cache", 2)
        with pytest.raises(ConfigError, match=f"/{MODEL}, not remote:.*/other-model"):
            Retriever(remote_settings(srv, "other-model", data_dir=own)).search("key cache", 2)
        with pytest.raises(ConfigError, match="not bundled:all-MiniLM-L6-v2"):
            Retriever(Settings(data_dir=own)).search("key cache", 2)


def stored_chunks(settings: Settings) -> dict[str, tuple[int, int]]:
    """Paper id -> (chunks stored, chunks it has), read straight from Chroma."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    client = chromadb.PersistentClient(str(settings.chroma_dir), settings=ChromaSettings(anonymized_telemetry=False))
    metas = client.get_collection(settings.collection).get(include=["metadatas"])["metadatas"] or []
    out: dict[str, tuple[int, int]] = {}
    for m in metas:
        have, _ = out.get(str(m["paper_id"]), (0, 0))
        out[str(m["paper_id"])] = (have + 1, int(m["n_chunks"]))  # type: ignore[arg-type]
    return out


def test_fault_mid_ingest_hides_half_written_papers_and_a_rerun_completes(monkeypatch: pytest.MonkeyPatch) -> None:
    import rag_assistant.index.ingest as ingest_mod
    from rag_assistant.retrieve import Retriever

    monkeypatch.setattr(ingest_mod, "EMBED_BATCH", 6)  # written in steps of 6 chunks
    papers = load_corpus([bundled_corpus_path()]).papers[:8]
    fail_after: dict[str, float] = {"n": float("inf")}

    def rule(n: int, req: dict) -> object:
        return status(500, headers={"retry-after": "0"}) if n > fail_after["n"] else None

    with FakeEmbeddingServer(rule=rule) as srv:  # type: ignore[arg-type]
        settings = remote_settings(srv, chunk_max_tokens=32, embed_batch_size=3, embedding_max_retries=1)
        ingest_mod.ingest_papers(papers[:3], settings)
        fail_after["n"] = len(srv.requests) + 6  # the next run writes two steps, then the server fails
        with pytest.raises(EmbeddingError, match="HTTP 500"):
            ingest_mod.ingest_papers(papers, settings)
        stored = stored_chunks(settings)
        partial = {pid for pid, (have, total) in stored.items() if have < total}
        assert partial, "the fault should have hit a paper split across steps"
        fail_after["n"] = float("inf")
        queries = ("key cache", "safety", "graph", "learning", "language models")
        found = {s.paper_id for q in queries for s in Retriever(settings).search(q, 8)}
        assert found and not found & partial  # half-written papers are hidden
        report = ingest_mod.ingest_papers(papers, settings)
        # what the faulted run stored whole is kept; the papers it stored in part are completed
        assert report.unchanged >= 3 and report.resumed == len(partial) and report.changed == 0
        assert report.unchanged + report.resumed + report.new == len(papers)
    assert all(have == total for have, total in stored_chunks(settings).values())
    assert len(stored_chunks(settings)) == len(papers)


@pytest.mark.parametrize("case", ["auth", "server"])
def test_cli_prints_one_line_and_exits_3(case: str, cli, tmp_path: Path) -> None:  # noqa: ANN001
    corpus = tmp_path / "papers.jsonl"
    rows = [
        {"id": f"p{i}", "title": f"Paper {i}", "abstract": f"{t.capitalize()} for inference."}
        for i, t in enumerate(TEXTS)
    ]
    corpus.write_text("\n".join(json.dumps(r) for r in rows))
    rule = (lambda n, r: status(503, headers={"retry-after": "0"})) if case == "server" else None
    with FakeEmbeddingServer(rule=rule, api_key="right-key") as srv:
        env = {
            "RAG_ASSISTANT_EMBEDDING_API_MODEL": MODEL,
            "RAG_ASSISTANT_EMBEDDING_MAX_RETRIES": "1",
            "RAG_ASSISTANT_EMBEDDING_API_KEY": "wrong-secret-key" if case == "auth" else "right-key",
        }
        result = cli("--embedding-base-url", srv.base_url, "ingest", str(corpus), env=env)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 3, result.stderr
    assert [line.split(":")[0] for line in lines] == ["error", "hint"], result.stderr
    assert ("HTTP 401" if case == "auth" else "HTTP 503") in lines[0] and srv.base_url in lines[0]
    assert "wrong-secret-key" not in result.stderr + result.stdout


def test_the_embedding_servers_key_and_url_credentials_are_masked_like_the_llms() -> None:
    """Everything the CLI prints or writes goes through secrets_of/scrub: the embedding key is a secret too."""
    from rag_assistant.answer.redact import scrub, secrets_of
    from rag_assistant.config import Settings

    settings = Settings(
        embedding_api_key="emb-key-1234567", embedding_base_url="http://user:pass-98765@emb.local/v1?token=tok-555"
    )
    secrets = secrets_of(settings)
    line = scrub("failed: emb-key-1234567 at http://user:pass-98765@emb.local/v1?token=tok-555", secrets)
    assert all(s not in line for s in ("emb-key-1234567", "pass-98765", "tok-555"))


def _corpus(path: Path, texts: list[str], prefix: str = "p") -> Path:
    rows = [
        {"id": f"{prefix}{i}", "title": f"Paper {i}", "abstract": f"{t.capitalize()} for inference."}
        for i, t in enumerate(texts)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return path


@pytest.mark.parametrize("command", ["search", "ask", "ingest"])
def test_a_server_whose_vectors_changed_length_is_one_line_and_exit_3(command: str, cli, tmp_path: Path) -> None:  # noqa: ANN001
    """The server now runs another model under the same name: every vector it returns is checked against the
    index's length, at question time as at ingest, and nothing is written."""
    corpus = _corpus(tmp_path / "papers.jsonl", TEXTS)
    env = {"RAG_ASSISTANT_EMBEDDING_API_MODEL": MODEL}
    with FakeEmbeddingServer() as srv:
        remote = ("--embedding-base-url", srv.base_url)
        assert cli(*remote, "ingest", str(corpus), env=env).returncode == 0
        before = json.loads(cli(*remote, "stats", "--json", env=env).stdout)
        srv.dim = 64
        more = _corpus(tmp_path / "more.jsonl", ["entirely new topic", "another new topic"], "q")
        args = ("ingest", str(more)) if command == "ingest" else (command, "key cache offloading")
        result = cli(*remote, *args, env=env)
        after = json.loads(cli(*remote, "stats", "--json", env=env).stdout)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 3, result.stderr
    assert [line.split(":")[0] for line in lines] == ["error", "hint"], result.stderr
    assert f"embedding server at {srv.base_url} returns 64-dimensional vectors" in lines[0]
    assert "the index holds 48-dimensional ones" in lines[0]
    assert (after["papers"], after["chunks"]) == (before["papers"], before["chunks"]) == (len(TEXTS), len(TEXTS))
    assert after["papers_without_sentence_vectors"] == 0  # no sentence vectors of the other length either


def test_vectors_of_two_lengths_in_one_response_are_one_error() -> None:
    body = {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": fake_vector(t, 48 + i)} for i, t in enumerate(TEXTS[:2])
        ],
        "model": MODEL,
    }
    with FakeEmbeddingServer() as srv:
        srv.script(status(200, body=body))
        with pytest.raises(EmbeddingError, match="vectors of different lengths") as err:
            embedder(srv).embed(TEXTS[:2])
    assert err.value.reason == "malformed" and err.value.exit_code == 3


def _without_rows(settings: Settings, ids: list[str]) -> list[str]:
    """The searchable papers among `ids` that have no sentence vectors in the sidecar (read directly)."""
    from rag_assistant.index.sentences import SentenceStore, sidecar_path, signature
    from rag_assistant.index.state import recorded_chunking
    from rag_assistant.index.store import open_store

    store = open_store(settings)
    complete = [pid for pid, state in store.paper_states(ids).items() if state.complete]
    papers = store.papers(complete)
    chunking = recorded_chunking(store.get_info(), store.count)
    if not papers or chunking is None:
        return []
    have = SentenceStore(sidecar_path(settings)).get(list(papers.values()), signature(settings, chunking))
    return sorted(set(papers) - set(have))


def test_interrupted_remote_ingest_never_leaves_papers_without_sentence_vectors_unreported(
    cli,  # noqa: ANN001
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A remote embedder's sentence vectors are its sentences embedded standalone. A fault while they are embedded
    leaves no searchable paper without them (they are embedded in the step that stores their paper, before its
    chunks); papers that lack them anyway (an index another client of a shared Chroma server filled) are counted
    by `stats` and stored by the next ingest."""
    import rag_assistant.index.ingest as ingest_mod

    monkeypatch.setattr(ingest_mod, "EMBED_BATCH", 2)  # steps of two papers (one chunk each)
    corpus = _corpus(tmp_path / "papers.jsonl", TEXTS)
    ids = [f"p{i}" for i in range(len(TEXTS))]
    broken = {"on": True}

    def rule(n: int, req: dict) -> object:  # the longest paper's sentence fails: its step comes last
        return status(400) if broken["on"] and "Safety of fine-tuned deltas for inference." in req["input"] else None

    env = {"RAG_ASSISTANT_EMBEDDING_API_MODEL": MODEL}
    with FakeEmbeddingServer(rule=rule) as srv:  # type: ignore[arg-type]
        remote = ("--embedding-base-url", srv.base_url)
        settings = remote_settings(srv, embedding_max_retries=0)

        def stats() -> dict:
            return json.loads(cli(*remote, "stats", "--json", env=env).stdout)

        with pytest.raises(EmbeddingError, match="HTTP 400"):
            ingest_mod.ingest_papers(load_corpus([corpus]).papers, settings)
        assert stats()["papers"] >= 2  # the steps before the fault were stored
        assert stats()["papers_without_sentence_vectors"] == len(_without_rows(settings, ids)) == 0
        broken["on"] = False
        assert cli(*remote, "ingest", str(corpus), env=env).returncode == 0
        assert stats()["papers"] == len(TEXTS) and not _without_rows(settings, ids)

        import sqlite3

        from rag_assistant.index.sentences import sidecar_path

        with sqlite3.connect(sidecar_path(settings)) as db:  # as if another client had ingested these two
            db.execute("DELETE FROM sentences WHERE paper_id IN ('p1', 'p3')")
        assert stats()["papers_without_sentence_vectors"] == 2 and _without_rows(settings, ids) == ["p1", "p3"]
        shown = cli(*remote, "stats", env=env).stdout
        assert "sentence vectors: 2 papers without stored ones" in shown and "the next `rag-assistant ingest`" in shown
        again = cli(*remote, "ingest", str(corpus), "--json", env=env)
        report = json.loads(again.stdout)
        assert (report["unchanged"], report["chunks_added"], report["sentence_papers"]) == (len(TEXTS), 0, 2)
        assert stats()["papers_without_sentence_vectors"] == 0 and not _without_rows(settings, ids)
