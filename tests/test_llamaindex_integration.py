"""The LlamaIndex integration (rag_assistant/integrations/llamaindex.py): our retriever as a LlamaIndex retriever,
and a LlamaIndex query engine answering through the real openai client against the scripted server. LlamaIndex is
an extra (scripts/test.sh installs it); without it these tests skip, saying so."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import architecture as arch
import pytest
from fake_llm import FakeLLMServer
from llm_helpers import user_text

from rag_assistant.config import Settings, load_settings
from rag_assistant.errors import ConfigError
from rag_assistant.retrieve import Retriever

QUESTION = "How does ShadowKV reduce KV cache memory?"
SCRIPTED = "ShadowKV keeps a low-rank key cache on the GPU and offloads the value cache."
needs_llamaindex = pytest.mark.skipif(
    importlib.util.find_spec("llama_index") is None,
    reason='LlamaIndex is not installed: it is the llamaindex extra (pip install -e ".[llamaindex]"; scripts/test.sh '
    "installs it)",
)


@needs_llamaindex
def test_paper_retriever_returns_our_papers_in_our_order(ready: Path) -> None:
    from llama_index.core.schema import NodeWithScore, TextNode

    from rag_assistant.integrations.llamaindex import PaperRetriever

    settings = load_settings()
    ours = Retriever(settings).search(QUESTION, 4)
    nodes = PaperRetriever(settings, k=4).retrieve(QUESTION)
    assert all(isinstance(n, NodeWithScore) and isinstance(n.node, TextNode) for n in nodes)
    assert [n.node.node_id for n in nodes] == [s.paper_id for s in ours]
    assert "004:17" in [n.node.node_id for n in nodes]
    assert [n.node.metadata["paper_id"] for n in nodes] == [s.paper_id for s in ours]
    assert [n.node.metadata["title"] for n in nodes] == [s.paper.label for s in ours]
    assert [n.node.metadata["source"] for n in nodes] == [s.paper.source for s in ours]
    assert [n.score for n in nodes] == pytest.approx([s.score for s in ours])
    assert [n.node.metadata["rank"] for n in nodes] == [1, 2, 3, 4]
    assert all(s.paper.text in n.node.get_content() for n, s in zip(nodes, ours, strict=True))


@needs_llamaindex
def test_paper_retriever_shares_an_existing_retriever(ready: Path) -> None:
    from rag_assistant.integrations.llamaindex import PaperRetriever

    retriever = Retriever(load_settings(top_k=3))
    papers = PaperRetriever(retriever=retriever)
    assert papers.retriever is retriever and papers.settings is retriever.settings
    assert len(papers.retrieve(QUESTION)) == 3  # k defaults to the settings' top_k


@needs_llamaindex
def test_query_engine_answers_through_the_scripted_server(ready: Path) -> None:
    from rag_assistant.integrations.llamaindex import query_engine

    with FakeLLMServer(default=SCRIPTED) as srv:
        settings = Settings(llm_base_url=srv.base_url, llm_model="fake-model", llm_api_key="sk-test", llm_timeout=5)
        response = query_engine(settings, k=3).query(QUESTION)
        requests = list(srv.requests)
    assert str(response).strip() == SCRIPTED
    ours = Retriever(settings).search(QUESTION, 3)
    assert [n.node.node_id for n in response.source_nodes] == [s.paper_id for s in ours]
    assert "004:17" in [n.node.node_id for n in response.source_nodes]
    assert len(requests) == 1 and requests[0]["model"] == "fake-model"
    prompt = user_text(requests[0])
    assert QUESTION in prompt
    for source in ours:  # every retrieved abstract reached the LLM, labelled with its paper id
        assert source.paper.text in prompt and f"paper_id: {source.paper_id}" in prompt
    assert "dense_score" not in prompt  # scores and file names stay out of the prompt


@needs_llamaindex
def test_no_llm_configured_is_a_config_error(ready: Path) -> None:
    from rag_assistant.integrations.llamaindex import llm, query_engine

    settings = Settings()
    assert not settings.llm_configured
    with pytest.raises(ConfigError) as err:
        query_engine(settings)
    assert "OPENAI_BASE_URL" in (err.value.hint or "")
    with pytest.raises(ConfigError):
        llm(settings)


@needs_llamaindex
def test_llm_is_configured_like_our_client() -> None:
    from rag_assistant.integrations.llamaindex import llm

    settings = Settings(
        llm_base_url="http://127.0.0.1:9/v1", llm_model="m", llm_temperature=0.3, llm_max_tokens=99, llm_max_retries=1
    )
    model = llm(settings)
    assert (model.model, model.api_base, model.api_key) == ("m", "http://127.0.0.1:9/v1", "not-needed")
    assert (model.temperature, model.max_tokens, model.timeout, model.max_retries) == (0.3, 99, 60.0, 1)
    assert model.is_chat_model


def test_nothing_in_the_package_imports_the_integration() -> None:
    """Importing it imports LlamaIndex: only users who want it pay for that."""
    inside = [m.name for m in arch.modules() if m.name.startswith("rag_assistant.integrations")]
    users = [m.name for m in arch.modules() if m.name not in inside and set(inside) & arch.imports(m)]
    assert inside and users == []


def test_without_llamaindex_the_import_names_the_extra() -> None:
    code = "import sys; sys.modules['llama_index'] = None; import rag_assistant.integrations.llamaindex"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    extra = 'pip install "rag-assistant[llamaindex]"'
    error = f"ImportError: rag_assistant.integrations.llamaindex needs LlamaIndex: {extra}"
    assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1] == error
