"""Evaluation datasets: JSON Lines, one question per line (format in eval/README.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_assistant.errors import RagAssistantError

_KNOWN = {
    "id", "question", "gold_papers", "borderline_papers", "criterion", "gold_answer", "key_points", "tags", "provenance"
}  # fmt: skip


class DatasetError(RagAssistantError):
    """An evaluation dataset is missing or has an invalid line; nothing was run."""

    exit_code = 2


@dataclass(frozen=True)
class EvalItem:
    id: str
    question: str
    gold_papers: tuple[str, ...] = ()
    borderline_papers: tuple[str, ...] = ()  # arguable papers: counted neither right nor wrong
    criterion: str | None = None  # the written rule the gold papers were judged by
    gold_answer: str | None = None
    key_points: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    line: int = 0
    # what made a generated question (eval-generate): kept with it, never scored
    provenance: dict[str, Any] | None = field(default=None, compare=False, hash=False)

    @property
    def answerable(self) -> bool:
        """An empty gold_papers list means the corpus cannot answer the question."""
        return bool(self.gold_papers)


def _strings(row: dict[str, Any], key: str) -> tuple[str, ...]:
    value = row.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f"{key!r} must be a list of non-empty strings")
    return tuple(dict.fromkeys(v.strip() for v in value))


def parse_item(row: Any, line: int) -> EvalItem:
    """One dataset record; raises ValueError saying what is wrong with it."""
    if not isinstance(row, dict):
        raise ValueError("each line must be a JSON object")
    for key in ("id", "question"):
        if not isinstance(row.get(key), str) or not row[key].strip():
            raise ValueError(f"{key!r} is required and must be a non-empty string")
    if "gold_papers" not in row:
        raise ValueError("'gold_papers' is required (use [] for a question the corpus cannot answer)")
    for key in ("gold_answer", "criterion"):
        if row.get(key) is not None and not isinstance(row[key], str):
            raise ValueError(f"{key!r} must be a string")
    if row.get("provenance") is not None and not isinstance(row["provenance"], dict):
        raise ValueError("'provenance' must be an object")
    unknown = sorted(set(row) - _KNOWN)
    if unknown:
        raise ValueError(f"unknown field(s) {unknown}; allowed: {sorted(_KNOWN)}")
    return EvalItem(
        id=row["id"].strip(),
        question=row["question"].strip(),
        gold_papers=_strings(row, "gold_papers"),
        borderline_papers=_strings(row, "borderline_papers"),
        criterion=row.get("criterion"),
        gold_answer=row.get("gold_answer"),
        key_points=_strings(row, "key_points"),
        tags=_strings(row, "tags"),
        line=line,
        provenance=row.get("provenance"),
    )


def load_dataset(path: Path, limit: int | None = None) -> list[EvalItem]:
    """Read and validate every line (blank lines are skipped); raises DatasetError listing each bad line."""
    if not path.is_file():
        raise DatasetError(f"dataset not found: {path}", "pass a .jsonl file, e.g. eval/dev.jsonl")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read dataset {path}: {exc}") from None
    items: list[EvalItem] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            item = parse_item(json.loads(text), number)
        except json.JSONDecodeError as exc:
            problems.append(f"{path}:{number}: invalid JSON ({exc.msg} at column {exc.colno})")
            continue
        except ValueError as exc:
            problems.append(f"{path}:{number}: {exc}")
            continue
        if item.id in seen:
            problems.append(f"{path}:{number}: duplicate id {item.id!r} (first on line {seen[item.id]})")
            continue
        seen[item.id] = number
        items.append(item)
    if problems:
        raise DatasetError(
            problems[0] if len(problems) == 1 else f"{len(problems)} invalid lines in {path}, first: {problems[0]}",
            "fix the lines listed; the format is described in eval/README.md",
            details=problems if len(problems) > 1 else [],
        )
    if not items:
        raise DatasetError(f"dataset {path} has no questions", "add one JSON object per line")
    return items[:limit] if limit else items
