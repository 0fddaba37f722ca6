"""Embedding backends: the ONNX export must give the torch model's vectors; failures fall back to torch."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from rag_assistant.index.embedding import Embedder, bundled_model_path, load_sentence_transformer

TEXTS = [
    "We present ShadowKV, a high-throughput long-context LLM inference system.",
    "Safe Delta adjusts delta parameters after fine-tuning to preserve safety.",
    "Graph neural networks relocate mesh nodes for finite element simulations.",
]


def test_torch_vectors_are_normalised() -> None:
    vectors = Embedder().embed(TEXTS)
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("onnx") is None, reason="onnx not installed (pip install -e '.[onnx]')")
def test_onnx_export_matches_torch(tmp_path: Path) -> None:
    torch_model = load_sentence_transformer(bundled_model_path(), "torch", tmp_path)
    onnx_model = load_sentence_transformer(bundled_model_path(), "onnx", tmp_path)
    assert onnx_model.backend == "onnx" and any(tmp_path.rglob("*.onnx"))
    a = torch_model.encode(TEXTS, normalize_embeddings=True)
    b = onnx_model.encode(TEXTS, normalize_embeddings=True)
    assert float(np.min(np.sum(a * b, axis=1))) > 0.9999
    again = load_sentence_transformer(bundled_model_path(), "onnx", tmp_path)  # reuses the export
    assert np.allclose(again.encode(TEXTS, normalize_embeddings=True), b, atol=1e-5)


def test_unusable_onnx_falls_back_to_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    import rag_assistant.index.embedding as embedding

    real = embedding.load_sentence_transformer

    def no_onnx(path: Path, backend: str, cache_dir: Path):  # noqa: ANN202
        if backend == "onnx":
            raise ImportError("onnx is not installed")
        return real(path, backend, cache_dir)

    monkeypatch.setattr(embedding, "load_sentence_transformer", no_onnx)
    embedder = Embedder(backend="onnx")
    assert embedder.embed(TEXTS[:1]).shape == (1, 384) and embedder.backend == "torch"
