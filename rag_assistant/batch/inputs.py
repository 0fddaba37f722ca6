"""Batch files: the question readers (txt, jsonl, csv), the append-only JSONL journal, and the final writers.

The journal is the only durable state of a batch: one complete JSON line per finished question, appended
with fsync. Everything else (the final .csv/.md, a reordered .jsonl) is derived from it and written
atomically (temp file + rename), so a kill at any moment leaves either the old file or the new one."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import IO, Any

from rag_assistant.answer.models import Answer
from rag_assistant.errors import RagAssistantError

INPUT_KINDS = {".txt": "txt", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}
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
# Output keys an input field must not overwrite; a clashing input field is kept as `input_<name>`
# (e.g. an eval set's reference "answer" column), `id` and `question` are the row's own.
RESERVED = {f.name for f in fields(Answer)} | set(CSV_COLUMNS)
MD_MARKER = "<!-- rag-assistant-batch "
RECORD_START = b'{"id": '  # how every journal line begins (make_record puts the id first)


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


# -- reading the input ------------------------------------------------------------------------------------


def input_kind(path: Path) -> str:
    kind = INPUT_KINDS.get(path.suffix.lower())
    if kind is None:
        raise BatchInputError(
            f"unsupported question file type: {path.name}",
            "use .txt (one question per line), .jsonl (a `question` field) or .csv (a `question` column)",
        )
    return kind


def output_kind(path: Path) -> str:
    if path.suffix.lower() not in OUTPUT_KINDS:
        raise BatchInputError(f"unsupported output file type: {path.name}", "use -o with .jsonl, .csv or .md")
    return path.suffix.lower()


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


ID_COLUMNS = ("id", "qid", "question_id")


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
    return InputRow(row_id, line, question.strip(), extra)


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


# -- the journal ------------------------------------------------------------------------------------------


@dataclass
class Entry:
    """What the journal remembers of one line without keeping the (large) record in memory."""

    offset: int
    length: int
    status: str
    question: str
    abstained: bool
    seconds: float | None
    mode: str
    model: str


class Journal:
    """Append-only JSONL of finished rows; the last line for an id wins. Only one thread writes to it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, Entry] = {}
        self.sequence: list[str] = []  # ids of the valid lines in file order (repeats = replaced rows)
        self._file: IO[bytes] | None = None
        self._size = 0

    def load(self) -> None:
        """Index an existing journal. A truncated last line (a kill mid-write) is cut off, so the next
        append starts on a fresh line and that question is simply answered again."""
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            data = f.read()
        end = data.rfind(b"\n") + 1
        offset = 0
        for n, raw in enumerate(data[:end].splitlines(keepends=True), start=1):
            try:
                record = json.loads(raw)
            except ValueError:
                record = None
            if not isinstance(record, dict) or "id" not in record or "status" not in record:
                raise BatchInputError(
                    f"{self.path} is not a batch output (line {n} is not a batch record)",
                    "choose another output file, or pass --fresh to replace it",
                )
            row_id = str(record["id"])
            timings = record.get("timings") or {}
            self.entries[row_id] = Entry(
                offset,
                len(raw),
                str(record["status"]),
                str(record.get("question") or ""),
                bool(record.get("abstained")),
                timings.get("total") if isinstance(timings, dict) else None,
                str(record.get("mode") or ""),
                str(record.get("model") or ""),
            )
            self.sequence.append(row_id)
            offset += len(raw)
        tail = data[end:]
        if tail and not (tail.startswith(RECORD_START) or RECORD_START.startswith(tail)):
            raise BatchInputError(
                f"{self.path} is not a batch output (its last line is not a batch record)",
                "choose another output file, or pass --fresh to replace it",
            )
        if tail:  # cut only once the file is known to be ours: never truncate someone else's file
            with open(self.path, "r+b") as f:
                f.truncate(end)
                f.flush()
                os.fsync(f.fileno())
        self._size = end

    def append(self, record: dict[str, Any]) -> None:
        """Write one whole line and fsync it: after this returns the row survives kill -9 and power loss."""
        data = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode()
        if self._file is None:
            created = not self.path.exists()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 - kept open across appends
            if created:
                _fsync_dir(self.path.parent)
        view = memoryview(data)
        while view:
            view = view[self._file.write(view) or 0 :]
        os.fsync(self._file.fileno())
        row_id = str(record["id"])
        timings = record.get("timings") or {}
        self.entries[row_id] = Entry(
            self._size,
            len(data),
            str(record["status"]),
            str(record.get("question") or ""),
            bool(record.get("abstained")),
            timings.get("total"),
            str(record.get("mode") or ""),
            str(record.get("model") or ""),
        )
        self.sequence.append(row_id)
        self._size += len(data)

    def records(self, ids: Iterable[str]) -> Iterator[dict[str, Any]]:
        """The latest record of each id, in the order given (ids not in the journal are skipped)."""
        with open(self.path, "rb") as f:
            for row_id in ids:
                entry = self.entries.get(row_id)
                if entry is not None:
                    f.seek(entry.offset)
                    yield json.loads(f.read(entry.length))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


# -- records and final files ------------------------------------------------------------------------------


def make_record(row: InputRow, answer: Answer) -> dict[str, Any]:
    """The journal/JSONL line of one row: id, status, the input's other fields, the whole Answer."""
    return {"id": row.id, "status": "failed" if answer.error else "ok", **row.fields, **answer.as_dict()}


def flat_row(record: dict[str, Any], input_columns: list[str]) -> dict[str, Any]:
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
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
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


def write_markdown(f: IO[str], records: Iterable[dict[str, Any]], title: str, summary_lines: list[str]) -> None:
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
        f.write(f"{record.get('answer', '').strip()}\n\n")
        refs = record.get("references") or []
        if refs:
            f.write("**References**\n\n")
            for ref in refs:
                title_ = f"{ref['title']}. " if ref.get("title") else ""
                where = f"{ref.get('source')} #{ref.get('position')}"
                f.write(f"- [{ref['paper_id']}] {title_}{_one_line(ref.get('snippet', ''))} ({where})\n")
            f.write("\n")
        warnings = record.get("warnings") or []
        if warnings:
            f.write("**Warnings**\n\n" + "".join(f"- {_one_line(w)}\n" for w in warnings) + "\n")
        seconds = (record.get("timings") or {}).get("total")
        meta = [record.get("mode", ""), record.get("model", "")] + ([f"{seconds:.2f}s"] if seconds else [])
        f.write(f"*{' · '.join(m for m in meta if m)}{' · abstained' if record.get('abstained') else ''}*\n\n")
    f.write("## Summary\n\n" + "".join(f"- {line}\n" for line in summary_lines))


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def read_final_status(path: Path) -> dict[str, Entry]:
    """Ids, status and question of a finished .csv or .md output (used when its journal is gone)."""
    entries: dict[str, Entry] = {}
    text = path.read_text(encoding="utf-8")

    def add(item: dict[str, Any]) -> None:
        entries[str(item.get("id"))] = Entry(
            0,
            0,
            str(item.get("status")),
            str(item.get("question") or ""),
            str(item.get("abstained")).lower() == "true",
            None,
            str(item.get("mode") or ""),
            str(item.get("model") or ""),
        )

    if path.suffix.lower() == ".csv":
        csv.field_size_limit(sys.maxsize)
        for item in csv.DictReader(io.StringIO(text, newline="")):
            if "id" in item and "status" in item:
                add(item)
    else:
        for line in text.splitlines():
            if line.startswith(MD_MARKER) and line.endswith("-->"):
                try:
                    add(json.loads(line[len(MD_MARKER) : -3]))
                except ValueError:
                    continue
    return entries
