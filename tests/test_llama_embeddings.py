"""Remote embeddings end to end against a real llama.cpp server in embedding mode (llama-cpp-python +
SmolLM2-135M-Instruct): ingest a few bundled papers through it, then answer a question with citations."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_server import LlamaServer, llama_marks

pytestmark = llama_marks()

QUESTION = "How does ShadowKV reduce KV cache memory?"


@pytest.fixture(scope="module")
def embedding_server() -> Iterator[LlamaServer]:
    with LlamaServer(embedding=True, n_ctx=1024) as server:
        yield server


def test_ingest_and_answer_through_a_llama_cpp_embedding_server(
    embedding_server: LlamaServer,
    cli,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    from rag_assistant.corpus import bundled_corpus_path, load_corpus

    papers = load_corpus([bundled_corpus_path()]).papers
    chosen = [p for p in papers if "ShadowKV" in p.text] + papers[:2]
    corpus = tmp_path / "papers.jsonl"
    corpus.write_text("\n".join(json.dumps({"id": p.paper_id, "title": p.title, "abstract": p.text}) for p in chosen))
    env = {"RAG_ASSISTANT_EMBEDDING_API_MODEL": embedding_server.model, "RAG_ASSISTANT_EMBEDDING_TIMEOUT": "300"}
    flags = ("--embedding-base-url", embedding_server.base_url)

    ingest = cli(*flags, "ingest", str(corpus), "--json", env=env, timeout=900)
    assert ingest.returncode == 0, ingest.stderr
    assert json.loads(ingest.stdout)["new"] == 3

    stats = json.loads(cli(*flags, "stats", "--json", env=env).stdout)
    assert stats["embedding_model"] == f"remote:127.0.0.1:{embedding_server.port}/{embedding_server.model}"

    asked = cli(*flags, "ask", QUESTION, "-k", "2", "--json", "--mode", "extractive", env=env, timeout=900)
    assert asked.returncode == 0, asked.stderr
    answer = json.loads(asked.stdout)
    assert answer["sources"][0]["paper_id"] == chosen[0].paper_id  # the ShadowKV paper
    assert answer["citations"] and set(answer["citations"]) <= {p.paper_id for p in chosen}

    local = cli("ask", QUESTION, "--json", env={"RAG_ASSISTANT_DATA_DIR": str(tmp_path / "data")})
    assert local.returncode != 0  # the default data dir of this test holds the remote index: no mixing
    assert "built with embedding model remote:" in local.stderr
