"""`eval --export ragas`: the run in the column names RAGAS (and tools reading its format) expect, beside the
run's own files.

- `ragas.jsonl`: one RAGAS SingleTurnSample per question (`EvaluationDataset.from_jsonl` reads it):
  user_input, response, retrieved_contexts (the abstracts of the k papers the answerer saw, title first),
  reference_contexts (the gold papers' abstracts), reference (the gold answer, when the dataset has one), and
  retrieved_context_ids / reference_context_ids for RAGAS's id-based metrics.
- `ragas.csv`: the same columns (lists as JSON) after `id`, then this run's scores under the names RAGAS gives
  its own metrics, as in a RAGAS result table: faithfulness (= support_recall), answer_relevancy
  (= answer_relevance), context_precision, id_based_context_recall (= recall@k) and id_based_context_precision
  (= precision@k). A score not defined for a question is left empty."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_assistant.files import write_private

if TYPE_CHECKING:
    from rag_assistant.corpus.models import Paper
    from rag_assistant.evaluate.dataset import EvalItem

FORMATS = ("ragas",)
SAMPLE = ("user_input", "response", "retrieved_contexts", "reference_contexts", "reference")
IDS = ("retrieved_context_ids", "reference_context_ids")


def scores(metrics: dict[str, Any], k: int) -> dict[str, Any]:
    """This run's per-question metrics under RAGAS's metric names."""
    return {
        "faithfulness": metrics.get("support_recall"),
        "answer_relevancy": metrics.get("answer_relevance"),
        "context_precision": metrics.get("context_precision"),
        "id_based_context_recall": metrics.get(f"recall@{k}"),
        "id_based_context_precision": metrics.get(f"precision@{k}"),
    }


def _text(paper: Paper | None) -> str | None:
    if paper is None:
        return None
    return f"{paper.title}. {paper.text}" if paper.title else paper.text


def samples(
    results: Sequence[dict[str, Any]], items: Sequence[EvalItem], papers: dict[str, Paper], k: int
) -> list[dict[str, Any]]:
    """One RAGAS sample per result, in the run's order."""
    by_id = {item.id: item for item in items}
    out = []
    for r in results:
        retrieved = [s["paper_id"] for s in r["ranking"][:k]]
        item = by_id.get(r["id"])
        out.append(
            {
                "user_input": r["question"],
                "response": r["answer"],
                "retrieved_contexts": [t for t in map(_text, map(papers.get, retrieved)) if t is not None],
                "reference_contexts": [t for t in map(_text, map(papers.get, r["gold_papers"])) if t is not None],
                "reference": item.gold_answer if item is not None else None,
                "retrieved_context_ids": retrieved,
                "reference_context_ids": list(r["gold_papers"]),
            }
        )
    return out


def write_ragas(
    out_dir: Path, rows: list[dict[str, Any]], results: Sequence[dict[str, Any]], k: int
) -> dict[str, Path]:
    """ragas.jsonl and ragas.csv in the run directory; returns their paths."""
    paths = {"ragas.jsonl": out_dir / "ragas.jsonl", "ragas.csv": out_dir / "ragas.csv"}
    write_private(paths["ragas.jsonl"], "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    buf = io.StringIO(newline="")
    names = ["id", *SAMPLE, *IDS, *scores({}, k)]
    writer = csv.DictWriter(buf, fieldnames=names)
    writer.writeheader()
    for row, r in zip(rows, results, strict=True):
        flat = {key: json.dumps(v, ensure_ascii=False) if isinstance(v, list) else v for key, v in row.items()}
        writer.writerow({"id": r["id"], **flat, **scores(r["metrics"], k)})
    write_private(paths["ragas.csv"], buf.getvalue())
    return paths
