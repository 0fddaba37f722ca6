"""How the tool touches the file system. What it creates (the data dir, the index, the provenance log, batch and
eval outputs) holds questions, answers and the corpus, so it is private from the moment it exists: folders
0700, files 0600; only what the tool creates, when it creates it (an existing folder or file keeps its mode, it
may be the user's; no process-wide umask). What it only reads is opened read-only, so that an index on
read-only storage can be searched."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import IO, Any

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """Create `path` and any missing parents 0700; folders that exist are left as they are."""
    if path.is_dir():
        return path
    if not path.parent.is_dir():
        private_dir(path.parent)
    try:
        path.mkdir(mode=DIR_MODE)
    except FileExistsError:
        if not path.is_dir():
            raise
    return path


def _private_opener(path: str, flags: int) -> int:
    return os.open(path, flags, FILE_MODE)


def open_private(path: Path, mode: str = "w", **kwargs: Any) -> IO[Any]:  # noqa: ANN401 - as open()
    """open() that creates a missing file 0600 (an existing one keeps its mode)."""
    return open(path, mode, opener=_private_opener, **kwargs)  # noqa: SIM115 - the caller closes it


def write_private(path: Path, text: str) -> None:
    """Path.write_text (UTF-8) that creates a missing file 0600."""
    with open_private(path, "w", encoding="utf-8") as f:
        f.write(text)


def private_file(path: Path) -> Path:
    """Make sure `path` exists, creating it empty and 0600 when missing: for files another library opens (an
    SQLite database; SQLite gives its journal and WAL files the database file's mode)."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE))
    return path


def connect_read_only(path: Path) -> sqlite3.Connection:
    """An SQLite database opened for reading only: nothing is created or written, so it works on read-only
    storage. A WAL database there whose -shm file is gone (closed cleanly) cannot be opened `mode=ro` (SQLite
    would create the -shm); no connection can be writing it then, so it is opened immutable."""
    uri = path.resolve().as_uri()
    try:
        db = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=30, check_same_thread=False)
        db.execute("SELECT 1 FROM sqlite_master LIMIT 1")  # the -shm is needed only once it is read
        return db
    except sqlite3.OperationalError:
        if not path.is_file():
            raise
        return sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, check_same_thread=False)
