"""Batch journal and resume: the append-only JSONL of finished rows, its records, and which rows are done.

The journal is the only durable state of a batch: one complete JSON line per finished question, appended
with fsync. A rerun answers only the rows whose id has no `ok` line for the same question; when the journal
of a finished .csv/.md output is gone, the output's own markers say which rows are done."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from rag_assistant.answer.models import Answer
from rag_assistant.batch.inputs import BatchInputError, InputRow
from rag_assistant.batch.outputs import MD_MARKER, fsync_dir
from rag_assistant.files import open_private, private_dir

RECORD_START = b'{"id": '  # how every journal line begins (make_record puts the id first)
NOT_OURS_HINT = "choose another output file, or pass --fresh to replace it"


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

    @classmethod
    def of(cls, record: dict[str, Any], offset: int = 0, length: int = 0) -> Entry:
        timings = record.get("timings") or {}
        return cls(
            offset,
            length,
            str(record.get("status")),
            str(record.get("question") or ""),
            bool(record.get("abstained")),
            timings.get("total") if isinstance(timings, dict) else None,
            str(record.get("mode") or ""),
            str(record.get("model") or ""),
        )


def make_record(row: InputRow, answer: Answer) -> dict[str, Any]:
    """The journal/JSONL line of one row: id, status, the input's other fields, the whole Answer."""
    return {"id": row.id, "status": "failed" if answer.error else "ok", **row.fields, **answer.as_dict()}


def journal_path(output: Path) -> Path:
    """The .jsonl output is its own journal; a .csv/.md output's journal is OUT.partial.jsonl beside it."""
    return output if output.suffix.lower() == ".jsonl" else output.with_name(output.name + ".partial.jsonl")


def is_done(entry: Entry | None, row: InputRow) -> bool:
    # An edited question under the same id (a txt line rewritten in place) is answered again.
    return entry is not None and entry.status == "ok" and entry.question == row.question


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
                    f"{self.path} is not a batch output (line {n} is not a batch record)", NOT_OURS_HINT
                )
            self._index(record, offset, len(raw))
            offset += len(raw)
        tail = data[end:]
        if tail and not (tail.startswith(RECORD_START) or RECORD_START.startswith(tail)):
            raise BatchInputError(
                f"{self.path} is not a batch output (its last line is not a batch record)", NOT_OURS_HINT
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
            private_dir(self.path.parent)
            self._file = open_private(self.path, "ab", buffering=0)  # kept open across appends
            if created:
                fsync_dir(self.path.parent)
        view = memoryview(data)
        while view:
            view = view[self._file.write(view) or 0 :]
        os.fsync(self._file.fileno())
        self._index(record, self._size, len(data))
        self._size += len(data)

    def _index(self, record: dict[str, Any], offset: int, length: int) -> None:
        row_id = str(record["id"])
        self.entries[row_id] = Entry.of(record, offset, length)
        self.sequence.append(row_id)

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


def read_final_status(path: Path) -> dict[str, Entry]:
    """Ids, status and question of a finished .csv or .md output (used when its journal is gone)."""
    entries: dict[str, Entry] = {}
    text = path.read_text(encoding="utf-8")

    def add(item: dict[str, Any]) -> None:
        abstained = str(item.get("abstained")).lower() == "true"  # a csv cell says "True" or "False"
        entries[str(item.get("id"))] = replace(Entry.of(item), abstained=abstained, seconds=None)

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
