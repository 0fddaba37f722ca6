"""Embedding backends compared in one run: torch vs our ONNX export (plain, ORT-optimised, int8-quantised).

Throughput on the bundled corpus' chunks repeated to ~600 texts, interleaved rounds (noisy machine: read
the per-round ratios), then vector agreement and retrieval-ranking agreement against torch.

    python benchmarks/embed_backends.py --rounds 3 --batch-sizes 32,64
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _util as U  # noqa: E402


def build_variants(work: Path, names: list[str]) -> dict[str, Path | None]:
    """Variant name -> ONNX file (None = torch). Optimised files use onnxruntime's own BERT fusions
    (what optimum's O2/O3 wrap); quantised ones onnxruntime's dynamic int8 quantisation."""
    import logging

    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    from rag_assistant.index.embedding import bundled_model_path, load_model
    from rag_assistant.index.onnx_embedding import ONNX_FILE, onnx_export_dir

    logging.getLogger().setLevel(logging.ERROR)  # quantize_dynamic's pre-processing advice
    load_model(bundled_model_path(), "onnx", work)  # exports once
    plain = onnx_export_dir(bundled_model_path(), work) / ONNX_FILE
    files: dict[str, Path | None] = {"torch": None, "onnx": plain}
    for level in ("O2", "O3"):
        options = FusionOptions("bert")
        options.enable_gelu_approximation = level == "O3"
        opt = optimize_model(
            str(plain), "bert", num_heads=12, hidden_size=384, optimization_options=options, opt_level=1
        )
        files[f"onnx-{level}"] = work / f"model_{level}.onnx"
        opt.save_model_to_file(str(files[f"onnx-{level}"]))
    for src in [s for s in ("onnx", "onnx-O2") if f"{s}-int8" in names]:
        out = work / f"model_{src}_int8.onnx"
        quantize_dynamic(
            str(files[src]),
            str(out),
            weight_type=QuantType.QInt8,
            per_channel=True,
            extra_options={"DefaultTensorType": TensorProto.FLOAT},
        )  # fused ops lack shape info
        files[f"{src}-int8"] = out
    return {k: v for k, v in files.items() if k in names}


def load_variant(file: Path | None):  # noqa: ANN201
    """torch (file None) or an OnnxEncoder running `file`, exactly as the onnx backend runs its export."""
    import json

    from rag_assistant.index.embedding import bundled_model_path, load_model
    from rag_assistant.index.onnx_embedding import OnnxEncoder

    if file is None:
        return load_model(bundled_model_path(), "torch")
    names = json.loads(next(file.parent.rglob("export.json")).read_text())["inputs"]
    return OnnxEncoder(bundled_model_path(), file, names, 256)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch-sizes", default="32,64")
    ap.add_argument("--texts", type=int, default=600, help="bundled chunks repeated to this many texts")
    ap.add_argument("--rank-papers", type=int, default=600, help="papers of the large corpus for the ranking check")
    ap.add_argument("--variants", default="torch,onnx,onnx-O2,onnx-O3,onnx-int8")
    args = ap.parse_args()
    U.isolate_env()
    import numpy as np

    from rag_assistant.config import Settings

    work = Path(tempfile.mkdtemp(prefix="embed-backends-"))
    settings = Settings(data_dir=work)
    base = U.chunk_texts(U.bundled_papers(), settings)
    texts = (base * (args.texts // len(base) + 1))[: args.texts]
    files = build_variants(work, args.variants.split(","))
    models = {name: load_variant(f) for name, f in files.items()}
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    rate: dict[tuple[str, int], list[float]] = {}
    ratio: dict[tuple[str, int], list[float]] = {}
    for r in range(args.rounds):
        for bs in sizes:
            for name, model in models.items():  # interleaved: every variant in every round
                model.encode(texts[:bs], batch_size=bs)  # warm this shape
                s, _ = U.timed(lambda m=model, b=bs: m.encode(texts, batch_size=b, normalize_embeddings=True))
                rate.setdefault((name, bs), []).append(len(texts) / s)
            for name in models:
                ratio.setdefault((name, bs), []).append(rate[(name, bs)][r] / rate[("torch", bs)][r])
    rows = []
    for (name, bs), values in rate.items():
        rs = ratio[(name, bs)]
        note = f"x torch per round: {', '.join(f'{x:.2f}' for x in rs)}"
        rows.append(("speed", f"{name} bs={bs} texts/s (median)", U.median(values), note))
    singles = U.queries(30)
    for name, model in models.items():  # what a search pays: one short question at a time
        model.encode(singles[:3])
        times = [U.timed(lambda m=model, q=q: m.encode([q], normalize_embeddings=True))[0] * 1000 for q in singles]
        rows.append(("speed", f"{name} single query ms (median)", U.median(times), f"{len(singles)} dev questions"))

    # agreement: unique chunks + queries, normalised vectors against torch
    qs = U.queries(30)
    probe = base + qs
    vecs = {n: m.encode(probe, batch_size=64, normalize_embeddings=True) for n, m in models.items()}
    large, _ = U.large_papers(args.rank_papers, work)
    corpus = U.chunk_texts(large, settings)
    cvecs = {n: m.encode(corpus, batch_size=64, normalize_embeddings=True) for n, m in models.items()}
    qvecs = {n: m.encode(qs, normalize_embeddings=True) for n, m in models.items()}
    top_ref = np.argsort(-(qvecs["torch"] @ cvecs["torch"].T), axis=1)[:, :10]
    for name in models:
        if name == "torch":
            continue
        diff = float(np.abs(vecs[name] - vecs["torch"]).max())
        cos = float((vecs[name] * vecs["torch"]).sum(1).min())
        top = np.argsort(-(qvecs[name] @ cvecs[name].T), axis=1)[:, :10]
        same10 = int(sum((a == b).all() for a, b in zip(top, top_ref, strict=True)))
        same5 = int(sum(set(a[:5]) == set(b[:5]) for a, b in zip(top, top_ref, strict=True)))
        rows.append(("agree", f"{name} max|diff| / min cos", f"{diff:.2e} / {cos:.6f}", f"{len(probe)} texts"))
        rows.append(
            (
                "agree",
                f"{name} ranking vs torch",
                f"{same10}/{len(qs)} top10 identical",
                f"{same5}/{len(qs)} same top-5 set; {len(corpus)} chunks",
            )
        )
    for name, f in files.items():
        if f is not None:
            rows.append(("size", f"{name} file MB", f.stat().st_size / 2**20, f.name))
    shutil.rmtree(work, ignore_errors=True)
    U.print_table("embedding backends (bundled model, CPU)", rows)
    U.write_results(
        {
            "benchmark": "embed_backends",
            "env": U.environment(),
            "args": vars(args),
            "rows": [list(map(str, r)) for r in rows],
        }
    )


if __name__ == "__main__":
    main()
