"""Embedding backends: the ONNX export must give the torch model's vectors; failures fall back to torch."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rag_assistant.index.embedding import Embedder, bundled_model_path, load_model

TEXTS = [
    "We present ShadowKV, a high-throughput long-context LLM inference system.",
    "Safe Delta adjusts delta parameters after fine-tuning to preserve safety.",
    "Graph neural networks relocate mesh nodes for finite element simulations.",
]


def test_torch_vectors_are_normalised() -> None:
    vectors = Embedder().embed(TEXTS)
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


LONG = " ".join(["Transformers compress long contexts into low-rank key caches for efficient decoding."] * 40)


class _EightDimensional:
    """A model of another dimension than the bundled one's 384."""

    def encode(self, texts: list[str], **_: object) -> np.ndarray:
        return np.ones((len(texts), 8), dtype=np.float32) / np.sqrt(8)


def test_no_texts_give_vectors_of_the_models_dimension() -> None:
    embedder = Embedder()
    embedder._model = _EightDimensional()
    assert embedder.embed([]).shape == (0, 8) == (0, embedder.embed(TEXTS).shape[1])


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("onnx") is None, reason="onnx not installed")
def test_onnx_export_matches_torch(tmp_path: Path) -> None:
    texts = [*TEXTS, LONG, "x"]  # LONG is cut at the model's 256 tokens on both backends
    torch_model = load_model(bundled_model_path(), "torch")
    onnx_model = load_model(bundled_model_path(), "onnx", tmp_path)
    assert onnx_model.backend == "onnx" and any(tmp_path.rglob("*.onnx"))
    a = torch_model.encode(texts, normalize_embeddings=True)
    b = onnx_model.encode(texts, batch_size=2, normalize_embeddings=True)
    assert b.shape == a.shape and float(np.min(np.sum(a * b, axis=1))) > 0.9999
    again = load_model(bundled_model_path(), "onnx", tmp_path)  # reuses the export
    assert np.allclose(again.encode(texts), b, atol=1e-5)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("onnx") is None, reason="onnx not installed")
def test_onnx_backend_runs_without_torch(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    code = (
        "import sys; from rag_assistant.index.embedding import Embedder; e = Embedder(backend='onnx'); "
        "v = e.embed(['a query about key caches']); print(e.backend, v.shape, 'torch' in sys.modules)"
    )
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split()[0] == "onnx"  # the first run exports (with torch)
    later = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert later.stdout.strip() == "onnx (1, 384) False", later.stderr


def test_damaged_export_is_redone(tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    load_model(bundled_model_path(), "onnx", tmp_path)
    (model_file,) = tmp_path.rglob("model.onnx")
    model_file.write_bytes(b"not a model")
    assert load_model(bundled_model_path(), "onnx", tmp_path).encode(TEXTS[:1]).shape == (1, 384)


def test_unusable_onnx_falls_back_to_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    import rag_assistant.index.embedding as embedding

    real = embedding.load_model

    def no_onnx(path: Path, backend: str, cache_dir: Path | None = None):  # noqa: ANN202
        if backend == "onnx":
            raise ImportError("onnx is not installed")
        return real(path, backend, cache_dir)

    monkeypatch.setattr(embedding, "load_model", no_onnx)
    embedder = Embedder(backend="onnx")
    assert embedder.embed(TEXTS[:1]).shape == (1, 384) and embedder.backend == "torch"


@pytest.mark.slow
def test_int8_backend_is_close_to_torch_and_fixed_per_index(tmp_path: Path, data_dir: Path) -> None:
    from rag_assistant.config import Settings
    from rag_assistant.corpus import bundled_corpus_path, load_corpus
    from rag_assistant.errors import ConfigError
    from rag_assistant.index.ingest import ingest_papers
    from rag_assistant.retrieve import Retriever

    int8 = load_model(bundled_model_path(), "onnx-int8", tmp_path)
    assert any(tmp_path.rglob("model_int8.onnx"))
    a = load_model(bundled_model_path(), "torch").encode(TEXTS, normalize_embeddings=True)
    b = int8.encode(TEXTS, normalize_embeddings=True)
    assert 0.97 < float(np.min(np.sum(a * b, axis=1))) < 0.9999  # close, but not the same vectors

    papers = load_corpus([bundled_corpus_path()]).papers[:4]
    ingest_papers(papers, Settings(embedding_backend="onnx-int8"))
    assert Retriever(Settings(embedding_backend="onnx-int8")).search("key cache", 2)
    with pytest.raises(ConfigError) as err:
        Retriever(Settings(embedding_backend="onnx")).search("key cache", 2)
    assert "(int8)" in str(err.value) and "onnx-int8" in err.value.hint


def test_int8_never_falls_back_to_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    import rag_assistant.index.embedding as embedding
    from rag_assistant.errors import ConfigError

    def no_onnx(path: Path, backend: str, cache_dir: Path | None = None):  # noqa: ANN202
        raise ImportError("onnxruntime is not installed")

    monkeypatch.setattr(embedding, "load_model", no_onnx)
    with pytest.raises(ConfigError, match="onnx-int8"):
        Embedder(backend="onnx-int8").embed(TEXTS[:1])


def test_model_onnx_cannot_run_uses_torch_quietly(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model = tmp_path / "cls-model"
    shutil.copytree(bundled_model_path(), model, copy_function=os.symlink)  # weights shared, config edited
    pooling = model / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text()) | {"pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True}
    pooling.unlink()
    pooling.write_text(json.dumps(config))
    embedder = Embedder(str(model), backend="onnx")
    with caplog.at_level("INFO"):
        assert embedder.embed(TEXTS[:1]).shape == (1, 384)
    assert embedder.backend == "torch"
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
