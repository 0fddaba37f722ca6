"""Metric deltas between two evaluation runs (B - A), overall and optionally per tag."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rag_assistant.evaluate.dataset import DatasetError
from rag_assistant.evaluate.metrics import lower_is_better, main_metrics

_EPS = 1e-9


@dataclass
class Delta:
    metric: str
    a: float | None
    b: float | None
    delta: float | None
    better: bool | None  # None: unchanged or not comparable
    group: str = "all"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_summary(path: Path) -> dict[str, Any]:
    """A run directory (or its summary.json)."""
    file = path / "summary.json" if path.is_dir() else path
    if not file.is_file():
        raise DatasetError(f"no evaluation run at {path} (summary.json missing)", "pass a directory written by `eval`")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DatasetError(f"cannot read {file}: {exc}") from None
    if not isinstance(data, dict) or "overall" not in data:
        raise DatasetError(f"{file} is not an evaluation summary")
    return data


def _delta(metric: str, a: Any, b: Any, group: str) -> Delta:
    if not isinstance(a, int | float) or not isinstance(b, int | float):
        return Delta(metric, a, b, None, None, group)
    d = round(b - a, 6)
    better = None if abs(d) < _EPS else (d < 0) == lower_is_better(metric)
    return Delta(metric, a, b, d, better, group)


def _ordered(a: dict[str, Any], b: dict[str, Any], k: int) -> list[str]:
    main = [x for x in main_metrics(k) if x in a or x in b]
    return main + [x for x in dict.fromkeys([*a, *b]) if x not in main and not x.startswith("recall@")]


def compare(a: dict[str, Any], b: dict[str, Any], tags: bool = False) -> list[Delta]:
    """One row per metric present in either run; per-tag rows for tags present in both when `tags`."""
    k = b.get("run", {}).get("k") or a.get("run", {}).get("k") or 5
    rows = [_delta(x, a["overall"].get(x), b["overall"].get(x), "all") for x in _ordered(a["overall"], b["overall"], k)]
    if tags:
        for tag in [t for t in b.get("by_tag", {}) if t in a.get("by_tag", {})]:
            ma, mb = a["by_tag"][tag]["metrics"], b["by_tag"][tag]["metrics"]
            rows += [_delta(x, ma.get(x), mb.get(x), tag) for x in _ordered(ma, mb, k)]
    return rows


def describe(summary: dict[str, Any]) -> str:
    run = summary.get("run", {})
    judge = run.get("judge", {}).get("name", "?")
    parts = [summary.get("dataset", "?"), run.get("mode", "?"), f"k={run.get('k', '?')}", f"judge: {judge}"]
    return " · ".join(str(p) for p in [*parts, run.get("started", "")])
