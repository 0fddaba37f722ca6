"""Append-only SQLite log of every answer (ask, chat, batch, eval): what was asked, retrieved and cited."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from rag_assistant.answer.models import Answer

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
    data_dir.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(log_path(data_dir), timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(SCHEMA)
    return conn


def record(data_dir: Path, answer: Answer, kind: str = "ask", session: str | None = None) -> int:
    """Store one answer. The record holds no settings, so no API key can reach the log."""
    retrieved = [
        {"paper_id": s["paper_id"], "score": s["score"], "dense_score": s["dense_score"]} for s in answer.sources
    ]
    with _connect(data_dir) as conn:
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
                json.dumps(answer.warnings),
                json.dumps(answer.timings),
                json.dumps(answer.as_dict(), default=str),
            ),
        )
        return int(cur.lastrowid or 0)


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
    conn = _connect(data_dir)
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
