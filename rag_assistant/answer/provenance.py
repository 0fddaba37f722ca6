"""Append-only SQLite log of every answer of ask, chat and batch: what was asked, retrieved and cited. Eval
answers are not logged: each run keeps them all in its own results.jsonl, and logging hundreds of benchmark
questions per run would bury the user's own questions."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from rag_assistant.answer.models import Answer
from rag_assistant.errors import LogNotWrittenError
from rag_assistant.files import connect_read_only, private_dir, private_file

KINDS = ("ask", "chat", "batch")  # what `kind` a logged answer has

SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    kind TEXT NOT NULL,
    session TEXT,
    question TEXT NOT NULL,
    answer TEXT NOT NULL,
    citations TEXT NOT NULL,
    retrieved TEXT NOT NULL,
    mode TEXT NOT NULL,
    model TEXT,
    prompt_version TEXT,
    abstained INTEGER NOT NULL,
    warnings TEXT NOT NULL,
    timings TEXT NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS answers_session ON answers(session);
"""


def log_path(data_dir: Path) -> Path:
    return data_dir / "provenance.sqlite"


def _connect(data_dir: Path) -> sqlite3.Connection:
    """The log opened for writing; the data dir and the log are created private when missing."""
    private_dir(data_dir)
    conn = sqlite3.connect(private_file(log_path(data_dir)), timeout=30)  # its WAL files get its mode
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(SCHEMA)
    return conn


def record(data_dir: Path, answer: Answer, kind: str = "ask", session: str | None = None) -> int:
    """Store one answer. The record holds no settings, so no API key can reach the log. LogNotWrittenError when
    the log cannot be written (read-only storage, a full disk): the answer stands, its caller warns."""
    try:
        return _insert(data_dir, answer, kind, session)
    except (OSError, sqlite3.Error) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise LogNotWrittenError(f"not logged: cannot write {log_path(data_dir)} ({reason})") from None


def _insert(data_dir: Path, answer: Answer, kind: str, session: str | None) -> int:
    shown = answer.as_dict()  # the record as users see it (--json), its sources and warnings as text
    retrieved = [
        {"paper_id": s["paper_id"], "score": s["score"], "dense_score": s["dense_score"]} for s in shown["sources"]
    ]
    conn = _connect(data_dir)
    try:
        with conn:
            cur = conn.execute(
                "INSERT INTO answers (ts, kind, session, question, answer, citations, retrieved, mode, model,"
                " prompt_version, abstained, warnings, timings, record) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    time.time(),
                    kind,
                    session,
                    answer.question,
                    answer.answer,
                    json.dumps(answer.citations),
                    json.dumps(retrieved),
                    answer.mode,
                    answer.model,
                    answer.prompt_version,
                    int(answer.abstained),
                    json.dumps(shown["warnings"]),
                    json.dumps(answer.timings),
                    json.dumps(shown, default=str),
                ),
            )
        return int(cur.lastrowid or 0)
    finally:
        conn.close()


def recent(
    data_dir: Path, limit: int = 20, session: str | None = None, kind: str | None = None
) -> list[dict[str, Any]]:
    if not log_path(data_dir).exists():
        return []
    query = (
        "SELECT id, ts, kind, session, question, answer, citations, retrieved, mode, model, prompt_version,"
        " abstained, warnings, timings FROM answers"
    )
    clauses, params = [], []
    if session:
        clauses.append("session = ?")
        params.append(session)
    if kind:
        clauses.append("kind = ?")
        params.append(kind)
    if clauses:
        query += " WHERE " + " AND ".join(clauses)
    query += " ORDER BY id DESC LIMIT ?"
    conn = connect_read_only(log_path(data_dir))  # reading creates and writes nothing (read-only storage)
    try:
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute(query, (*params, limit))]
    finally:
        conn.close()
    for row in rows:
        for key in ("citations", "retrieved", "warnings", "timings"):
            row[key] = json.loads(row[key])
        row["abstained"] = bool(row["abstained"])
    return rows
