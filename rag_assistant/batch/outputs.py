"""Batch final files: the atomic write, the .jsonl/.csv/.md writers and the one builder of summary lines.

Everything here is derived from the journal and written atomically (temp file + rename), so a kill at any
moment leaves either the old file or the new one. Nothing here imports the rest of the batch package."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from rag_assistant.files import open_private

OUTPUT_KINDS = (".jsonl", ".csv", ".md")
CSV_COLUMNS = [
    "id",
    "question",
    "status",
    "mode",
    "model",
    "abstained",
    "answer",
    "citations",
    "n_warnings",
    "total_seconds",
    "error",
]
MD_MARKER = "<!-- rag-assistant-batch "


def summary_lines(
    counts: tuple[int, int, int, int],
    mode: str,
    model: str,
    *,
    skipped: int | None = None,
    times: tuple[float | None, float | None, float | None] = (None, None, None),
    dropped: int = 0,
) -> list[str]:
    """The summary of a batch, for the terminal (with skipped rows, wall time, p95) and the .md report.
    `counts` is (questions, answered, abstained, failed); `times` is (wall, mean, p95) seconds."""
    total, answered, abstained, failed = counts
    head = f"{total} questions: {answered} answered, {abstained} abstained, {failed} failed"
    if skipped is not None:
        head += f", {skipped} skipped (already done)"
    lines = [head, f"mode {mode}" + (f" · model {model}" if model else "")]
    wall, mean, p95 = times
    if mean is not None:
        wall_part = f"wall time {wall:.1f}s · " if wall is not None else ""
        p95_part = f", {p95:.2f}s p95" if p95 is not None else ""
        lines.append(f"{wall_part}{mean:.2f}s mean{p95_part} per question")
    if dropped:
        lines.append(f"{dropped} row(s) of an earlier run are not in the input any more and were dropped")
    return lines


def flat_row(record: dict[str, Any], input_columns: list[str]) -> dict[str, Any]:
    """The .csv row of one record: the fixed columns, then the input's own fields (JSON where not scalar)."""
    timings = record.get("timings") or {}
    row = {
        "id": record["id"],
        "question": record.get("question", ""),
        "status": record["status"],
        "mode": record.get("mode", ""),
        "model": record.get("model", ""),
        "abstained": record.get("abstained", False),
        "answer": record.get("answer", ""),
        "citations": " ".join(record.get("citations") or []),
        "n_warnings": len(record.get("warnings") or []),
        "total_seconds": timings.get("total", ""),
        "error": record.get("error") or "",
    }
    for name in input_columns:
        value = record.get(name, "")
        row[name] = value if isinstance(value, str | int | float) else json.dumps(value, ensure_ascii=False)
    return row


def write_atomic(path: Path, write: Callable[[IO[str]], None]) -> None:
    """Write beside `path`, fsync, then rename over it: readers and a later kill see old or new, never half."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open_private(tmp, "w", encoding="utf-8", newline="") as f:  # it holds questions and answers
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """Make a created or renamed directory entry durable too (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_jsonl(f: IO[str], records: Iterable[dict[str, Any]]) -> None:
    for record in records:
        f.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")


def write_csv(f: IO[str], records: Iterable[dict[str, Any]], input_columns: list[str]) -> None:
    writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS + input_columns, extrasaction="ignore")
    writer.writeheader()
    for record in records:
        writer.writerow(flat_row(record, input_columns))


def write_markdown(f: IO[str], records: Iterable[dict[str, Any]], title: str, summary: list[str]) -> None:
    f.write(f"# {title}\n\n")
    for record in records:
        marker = {k: record.get(k) for k in ("id", "status", "question", "mode", "model")}
        # The marker lets a rerun see which rows are done once the journal is gone; `>` is escaped so an
        # id or question containing "-->" cannot end the comment early.
        f.write(MD_MARKER + json.dumps(marker, ensure_ascii=False).replace(">", "\\u003e") + " -->\n")
        f.write(f"## {record['id']}. {_one_line(record.get('question') or '(no question)')}\n\n")
        if record["status"] != "ok":
            f.write(f"**Failed:** {record.get('error') or 'unknown error'}\n\n")
            continue
        _write_answer(f, record)
    f.write("## Summary\n\n" + "".join(f"- {line}\n" for line in summary))


def _write_answer(f: IO[str], record: dict[str, Any]) -> None:
    """The .md section body of an answered row: the answer, its references and warnings, then a meta line."""
    f.write(f"{record.get('answer', '').strip()}\n\n")
    refs = record.get("references") or []
    if refs:
        f.write("**References**\n\n")
        for ref in refs:
            title_ = f"{ref['title']}. " if ref.get("title") else ""
            where = f"{ref.get('source')} #{ref.get('position')}"
            f.write(f"- [{ref['paper_id']}] {title_}{_one_line(ref.get('snippet', ''))} ({where})\n")
        f.write("\n")
    survey = record.get("survey") or {}
    if survey.get("possible"):  # a survey's papers near the cut-off: apart, as in the terminal
        f.write("**Possibly related** (near the cut-off: check before citing)\n\n")
        for pid in survey["possible"]:
            f.write(f"- [{pid}] {_one_line((survey.get('notes') or {}).get(pid, ''))}\n")
        f.write("\n")
    warnings = record.get("warnings") or []
    if warnings:
        f.write("**Warnings**\n\n" + "".join(f"- {_one_line(w)}\n" for w in warnings) + "\n")
    seconds = (record.get("timings") or {}).get("total")
    meta = [record.get("mode", ""), record.get("model", "")] + ([f"{seconds:.2f}s"] if seconds else [])
    f.write(f"*{' · '.join(m for m in meta if m)}{' · abstained' if record.get('abstained') else ''}*\n\n")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())
