"""The ONNX embedding backend: the model's transformer exported once, then run by onnxruntime with the
model's own fast tokenizer and mean pooling, without importing torch (a search in a new process starts
seconds sooner, and a question embeds 2-3x faster than with torch).

sentence-transformers' own backend="onnx" needs optimum-onnx, whose newest release (0.1.0) pins
transformers<4.58 and does not import under transformers 5 (which sentence-transformers 6 requires). So the
export is ours (torch's TorchScript exporter, needs the `onnx` package; torch is only imported to export)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

ONNX_EXPORT_VERSION = 3  # bump when the export recipe changes, so older exports are not reused
ONNX_FILE = "model.onnx"
INT8_FILE = "model_int8.onnx"
# the probe's cosine to the torch vector that a load must reach; int8 weights move vectors a little (~0.99)
_AGREEMENT = {False: 0.999, True: 0.97}
_ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_PROBE = "onnx export check: retrieval of paper abstracts"


def onnx_cache_dir() -> Path:
    """Where ONNX exports of the embedding model are kept (per user, shared by every data directory)."""
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("rag-assistant", appauthor=False)) / "onnx"


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


class UnsupportedModelError(RuntimeError):
    """The model's pipeline is not transformer + mean pooling: torch is the right backend for it, no warning."""


def _check_supported(path: Path) -> int:
    """The model's max_seq_length, if it is transformer -> mean pooling (-> normalize), which is all this
    backend implements; RuntimeError otherwise (the caller falls back to torch)."""
    try:
        modules = [m["type"].rsplit(".", 1)[-1] for m in json.loads((path / "modules.json").read_text())]
        pooling = json.loads((path / "1_Pooling" / "config.json").read_text())
        max_len = int(json.loads((path / "sentence_bert_config.json").read_text()).get("max_seq_length", 256))
    except (OSError, ValueError, KeyError) as exc:
        raise UnsupportedModelError(f"cannot read the model's sentence-transformers config: {exc}") from exc
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v}
    if (
        modules[:2] != ["Transformer", "Pooling"]
        or modules[2:] not in ([], ["Normalize"])
        or modes != {"pooling_mode_mean_tokens"}
    ):
        raise UnsupportedModelError("only transformer + mean pooling models can run on the onnx backend")
    return max_len


def _require_onnx_stack() -> None:
    """ImportError naming what is missing, before any work is done."""
    import importlib.util

    missing = [m for m in ("onnx", "onnxruntime") if importlib.util.find_spec(m) is None]
    if missing:
        raise ImportError(f"the onnx embedding backend needs {' and '.join(missing)} (pip install {' '.join(missing)})")


def export_onnx(path: Path, target: Path) -> None:
    """Export the transformer of the model at `path` to `target/model.onnx`, with the torch model's vector
    of a probe text beside it (every later load is checked against it). Written aside and renamed, so a
    killed or concurrent export never leaves a half-written model behind.

    The export traces eager attention, not the SDPA that transformers uses by default: onnxruntime fuses
    the eager graph into its own attention kernels, while an export of the SDPA graph runs no faster than torch."""
    import warnings

    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    probe = SentenceTransformer(str(path), device="cpu").encode([_PROBE], normalize_embeddings=True)[0]
    encoder = AutoModel.from_pretrained(str(path), attn_implementation="eager").eval()
    tokenizer = _tokenizer(path, 64)
    sample = [tokenizer.encode(t) for t in ("a short text", "a somewhat longer text, so that the batch needs padding")]
    arrays = _batch_arrays(sample)
    names = [n for n in _ONNX_INPUTS if n in arrays]

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
                tuple(torch.from_numpy(arrays[n]) for n in names),
                str(tmp / ONNX_FILE),
                dynamo=False,  # the TorchScript exporter needs only `onnx`; dynamo would add onnxscript
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]},
                opset_version=17,
            )
        meta = {
            "inputs": names,
            "torch": torch.__version__,
            "export_version": ONNX_EXPORT_VERSION,
            "probe": [float(x) for x in probe],
        }
        (tmp / "export.json").write_text(json.dumps(meta))
        try:
            tmp.rename(target)
        except OSError:  # another process finished the same export first: use theirs
            if not (target / ONNX_FILE).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _tokenizer(path: Path, max_length: int) -> Any:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path / "tokenizer.json"))
    tok.enable_truncation(max_length)  # counts the special tokens, like sentence-transformers
    tok.no_padding()  # padded per batch below
    return tok


def _batch_arrays(encodings: list[Any]) -> dict[str, np.ndarray]:
    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    types = np.zeros_like(ids)
    for row, e in enumerate(encodings):
        n = len(e.ids)
        ids[row, :n], mask[row, :n], types[row, :n] = e.ids, e.attention_mask, e.type_ids
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


class OnnxEncoder:
    """The part of SentenceTransformer.encode that we use, on onnxruntime: tokenize, run, mean-pool, normalise."""

    backend = "onnx"

    def __init__(self, path: Path, onnx_file: Path, input_names: list[str], max_seq_length: int) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        self.session = ort.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])
        self.tokenizer = _tokenizer(path, max_seq_length)
        self.input_names = input_names

    def encode(self, texts: list[str], batch_size: int = 32, normalize_embeddings: bool = True, **_: Any) -> np.ndarray:
        return self.encode_spans(texts, None, batch_size, normalize_embeddings)[0]

    def encode_spans(
        self,
        texts: list[str],
        spans: list[list[tuple[int, int]]] | None,
        batch_size: int = 32,
        normalize_embeddings: bool = True,
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """The texts' vectors and, with `spans`, per text the sum of the token states of each (start, end)
        character span, read from the same run (a token belongs to a span when its characters lie inside)."""
        out = np.zeros((len(texts), 0), dtype=np.float32)
        sums: list[np.ndarray] = [np.zeros((0, 0), dtype=np.float32)] * len(texts)
        # longest first, like sentence-transformers: similar lengths share a batch, so little padding
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start in range(0, len(texts), batch_size):
            rows = order[start : start + batch_size]
            encodings = self.tokenizer.encode_batch([texts[i] for i in rows])
            arrays = _batch_arrays(encodings)
            (hidden,) = self.session.run(["last_hidden_state"], {n: arrays[n] for n in self.input_names})
            mask = arrays["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
            if out.shape[1] == 0:
                out = np.zeros((len(texts), pooled.shape[1]), dtype=np.float32)
            out[rows] = pooled
            for j, row in enumerate(rows if spans is not None else ()):
                sums[row] = _span_sums(encodings[j].offsets, hidden[j], spans[row])  # type: ignore[index]
        if normalize_embeddings:
            out /= np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-12, None)
        return out, sums


def _span_sums(offsets: list[tuple[int, int]], hidden: np.ndarray, spans: list[tuple[int, int]]) -> np.ndarray:
    """(len(spans) x dim) sums of the token states whose characters lie inside each span; special tokens
    (empty offsets) belong to none."""
    if not spans:
        return np.zeros((0, hidden.shape[1]), dtype=np.float32)
    off = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    bounds = np.asarray(spans, dtype=np.int64)
    inside = (
        (off[None, :, 0] >= bounds[:, None, 0])
        & (off[None, :, 1] <= bounds[:, None, 1])
        & (off[None, :, 1] > off[None, :, 0])
    )
    return inside.astype(np.float32) @ hidden[: len(off)]


def quantize_int8(target: Path) -> Path:
    """`target/model_int8.onnx`: dynamic int8 quantisation of the export (weights int8, activations
    quantised on the fly), made once and written atomically."""
    import logging

    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    out = target / INT8_FILE
    if out.is_file():
        return out
    tmp = target / f"{INT8_FILE}.tmp-{os.getpid()}"
    level = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)  # quantize_dynamic advises pre-processing, at warning level
    try:
        quantize_dynamic(
            str(target / ONNX_FILE),
            str(tmp),
            weight_type=QuantType.QInt8,
            per_channel=True,
            extra_options={"DefaultTensorType": TensorProto.FLOAT},
        )
        tmp.replace(out)
    finally:
        logging.getLogger().setLevel(level)
        tmp.unlink(missing_ok=True)
    return out


def load_onnx_encoder(path: Path, cache_dir: Path, int8: bool = False) -> OnnxEncoder:
    """The model at `path` on onnxruntime, exported to `onnx_export_dir(path, cache_dir)` on first use (and
    quantised to int8 if asked). ImportError when onnx/onnxruntime are missing, RuntimeError when the model is
    unsupported or the export fails or disagrees with the torch model, so the caller can decide what to do."""
    _require_onnx_stack()
    max_len = _check_supported(path)
    target = onnx_export_dir(path, cache_dir)
    error: Exception = RuntimeError("no attempt")
    for attempt in (1, 2):
        reused = (target / ONNX_FILE).is_file()
        try:
            if not reused:
                target.parent.mkdir(parents=True, exist_ok=True)
                export_onnx(path, target)
            meta = json.loads((target / "export.json").read_text())
            model_file = quantize_int8(target) if int8 else target / ONNX_FILE
            encoder = OnnxEncoder(path, model_file, meta["inputs"], max_len)
            got = encoder.encode([_PROBE])[0]
            if float(np.dot(np.asarray(meta["probe"], dtype=np.float32), got)) >= _AGREEMENT[int8]:
                return encoder
            error = RuntimeError(f"the onnx export at {target} disagrees with the model")
        except ImportError:
            raise
        except Exception as exc:
            error = exc
        if not (reused and attempt == 1):
            break
        shutil.rmtree(target, ignore_errors=True)  # a damaged or stale export: export once more
    raise RuntimeError(f"onnx embedding backend unavailable ({type(error).__name__}: {error})") from error
