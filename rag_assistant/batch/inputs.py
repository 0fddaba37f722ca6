"""Batch question files: the txt, jsonl and csv readers, InputRow, and BatchInputError for a batch that cannot start.

A malformed row (invalid JSON, no or empty question, a malformed `filter`) becomes an InputRow with `error`
set: it is reported as a failed row, not answered. File-level problems (type, encoding, no questions, duplicate
ids) raise.

A row may carry its own filter on paper fields: a `filter` (or `where`) object in a JSONL row, or a `filter`
column holding that object as JSON in a CSV file, e.g. {"author": "Ada Lovelace", "year": "2023-", "topic":
"fairness", "venue": "ICML"} (answer/authors.py `filters_from`). It replaces the command's --author/--year/
--topic/--where for the fields it names; a field the index lacks fails that row only."""

from __future__ import annotations

import csv
import io
import json
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from rag_assistant.answer.authors import filters_from
from rag_assistant.answer.models import Answer
from rag_assistant.batch.outputs import CSV_COLUMNS
from rag_assistant.errors import FilterError, RagAssistantError
from rag_assistant.index.keyword_fields import FieldFilter

INPUT_KINDS = {".txt": "txt", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}
# Output keys an input field must not overwrite; a clashing input field is kept as `input_<name>`
# (e.g. an eval set's reference "answer" column), `id` and `question` are the row's own.
RESERVED = {f.name for f in fields(Answer)} | set(CSV_COLUMNS)
ID_COLUMNS = ("id", "qid", "question_id")
FILTER_COLUMNS = ("filter", "where")


class BatchInputError(RagAssistantError):
    """The batch cannot start: unreadable or unsupported input/output file, duplicate ids. A usage error."""

    exit_code = 2


@dataclass
class InputRow:
    """One question of the input; `error` is set for a malformed row, which is reported, not answered."""

    id: str
    line: int
    question: str
    fields: dict[str, Any] = field(default_factory=dict)  # the other input fields, renamed where they clash
    error: str | None = None
    filters: list[FieldFilter] = field(default_factory=list)  # the row's own filter on paper fields


def input_kind(path: Path) -> str:
    kind = INPUT_KINDS.get(path.suffix.lower())
    if kind is None:
        raise BatchInputError(
            f"unsupported question file type: {path.name}",
            "use .txt (one question per line), .jsonl (a `question` field) or .csv (a `question` column)",
        )
    return kind


def read_input(path: Path) -> list[InputRow]:
    """Every question row of `path`, malformed ones included. Raises BatchInputError for file-level problems."""
    kind = input_kind(path)
    if not path.is_file():
        raise BatchInputError(f"no such file: {path}", "check the question file's path")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BatchInputError(f"{path.name} is not UTF-8 text (byte {exc.start})", "save it as UTF-8") from None
    rows = {"txt": _read_txt, "jsonl": _read_jsonl, "csv": _read_csv}[kind](text, path.name)
    if not rows:
        raise BatchInputError(f"no questions in {path}", "add one question per line (txt) or per record")
    seen: dict[str, int] = {}
    clashes = []
    for row in rows:
        if row.id in seen:
            clashes.append(f"{path.name}:{row.line}: id {row.id!r} already used on line {seen[row.id]}")
        seen.setdefault(row.id, row.line)
    if clashes:
        # Ids key the journal: two rows with one id would overwrite each other's answers on resume.
        raise BatchInputError(f"{len(clashes)} duplicate row id(s) in {path.name}", "make the ids unique", clashes)
    return rows


def _row(line: int, record: dict[str, Any], where: str) -> InputRow:
    # the first id-like column the user filled in names the row (headings, journal, output), else its line
    raw_id = next((record[k] for k in ID_COLUMNS if str(record.get(k) or "").strip()), None)
    row_id = str(line) if raw_id is None else str(raw_id).strip()
    extra = {k if k not in RESERVED else f"input_{k}": v for k, v in record.items() if k not in ("id", "question")}
    question = record.get("question")
    if not isinstance(question, str):
        error = "missing question" if question is None else f"question must be text, not {type(question).__name__}"
        return InputRow(row_id, line, "", extra, f"{where}:{line}: {error}")
    if not question.strip():
        return InputRow(row_id, line, "", extra, f"{where}:{line}: empty question")
    try:
        filters = _row_filters(record)
    except FilterError as exc:
        hint = f" ({exc.hint})" if exc.hint else ""
        return InputRow(row_id, line, question.strip(), extra, f"{where}:{line}: {exc.message}{hint}")
    return InputRow(row_id, line, question.strip(), extra, filters=filters)


def _row_filters(record: dict[str, Any]) -> list[FieldFilter]:
    """The row's `filter`/`where` object (a CSV cell: the object as JSON; empty: none)."""
    spec = next((record[k] for k in FILTER_COLUMNS if record.get(k) not in (None, "", {})), None)
    if spec is None:
        return []
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except ValueError:
            raise FilterError(f"malformed filter {spec!r}", "write it as a JSON object") from None
    return filters_from(spec)


def _read_txt(text: str, where: str) -> list[InputRow]:
    rows = []
    for n, line in enumerate(text.splitlines(), start=1):
        q = line.strip()
        if q and not q.startswith("#"):
            rows.append(InputRow(str(n), n, q))
    return rows


def _read_jsonl(text: str, where: str) -> list[InputRow]:
    rows = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            rows.append(InputRow(str(n), n, "", {}, f"{where}:{n}: invalid JSON ({exc})"))
            continue
        if not isinstance(record, dict):
            rows.append(InputRow(str(n), n, "", {}, f"{where}:{n}: expected a JSON object"))
            continue
        rows.append(_row(n, record, where))
    return rows


def _read_csv(text: str, where: str) -> list[InputRow]:
    csv.field_size_limit(sys.maxsize)
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if header is None or "question" not in [h.strip() for h in header]:
        raise BatchInputError(f"{where} has no `question` column", "its first line must name the columns")
    names = [h.strip() for h in header]
    rows = []
    start = reader.line_num + 1  # a quoted field may span lines: a row's id is the line it starts on
    for values in reader:
        if any(v.strip() for v in values):
            if len(values) > len(names):
                rows.append(InputRow(str(start), start, "", {}, f"{where}:{start}: more values than columns"))
            else:
                rows.append(_row(start, dict(zip(names, values, strict=False)), where))
        start = reader.line_num + 1
    return rows
