"""The candidates file of a generation run: OUT.candidates.jsonl beside the set, append-only, one complete JSON
line per finished slot (fsynced), after a header line saying what made them. It is what a killed run resumes
from (slots with an `ok` line are not written again; failed ones are) and what a reader audits: every
candidate with its filter verdicts, kept or removed, and why. As in batch's journal, a truncated last line
(a kill mid-write) is cut off, the last line of a slot wins, and a file that is not ours is never touched."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

from rag_assistant.errors import OutputError
from rag_assistant.files import open_private, private_dir

_HEADER = b'{"header": '
FRESH_HINT = "pass --fresh to start over, or choose another -o"


def candidates_path(output: Path) -> Path:
    return output.with_name(f"{output.stem}.candidates.jsonl")


class Candidates:
    """`load(header)` reads what an earlier run left (refusing one made differently), `append` adds a slot."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: dict[str, dict[str, Any]] = {}
        self._file: IO[bytes] | None = None

    def load(self, header: dict[str, Any]) -> None:
        if not self.path.exists():
            self._write({"header": header})
            return
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end == 0 and _HEADER.startswith(data[: len(_HEADER)]):  # killed while writing its header
            self.path.unlink()
            self._write({"header": header})
            return
        lines = data[:end].splitlines()
        first = _json(lines[0]) if lines else None
        if not isinstance(first, dict) or not isinstance(first.get("header"), dict):
            raise OutputError(f"{self.path} is not a candidates file of eval-generate", FRESH_HINT)
        changed = sorted(k for k in header.keys() | first["header"].keys() if header.get(k) != first["header"].get(k))
        if changed:
            raise OutputError(
                f"{self.path} was made with other settings ({', '.join(changed)} differ): it cannot be resumed",
                FRESH_HINT,
            )
        for n, raw in enumerate(lines[1:], start=2):
            record = _json(raw)
            if not isinstance(record, dict) or "slot" not in record or "status" not in record:
                raise OutputError(f"{self.path}: line {n} is not a candidate record", FRESH_HINT)
            self.records[record["slot"]] = record
        if end < len(data):  # a line cut by a kill: its slot is simply written again
            with open(self.path, "r+b") as f:
                f.truncate(end)
                os.fsync(f.fileno())

    def append(self, record: dict[str, Any]) -> None:
        """One whole line, fsynced: after this returns the slot survives a kill."""
        self._write(record)
        self.records[record["slot"]] = record

    def _write(self, record: dict[str, Any]) -> None:
        if self._file is None:
            private_dir(self.path.parent)
            self._file = open_private(self.path, "ab", buffering=0)
        data = memoryview((json.dumps(record, ensure_ascii=False, default=str) + "\n").encode())
        while data:
            data = data[self._file.write(data) or 0 :]
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _json(raw: bytes) -> Any:  # noqa: ANN401 - any JSON value
    try:
        return json.loads(raw)
    except ValueError:
        return None
