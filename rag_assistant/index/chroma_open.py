"""How the Chroma collection is opened: for writing (ingest) or for reading (everything else), embedded in the data
dir or on a server, with one clear line when it cannot be. Reading creates nothing: a data dir or collection that
does not exist reads as an empty index. Embedded Chroma (chromadb 1.x) writes to its SQLite file whenever a
client opens it (a row in its `acquire_write` table), so an index on read-only storage is read through a private
temporary copy of that one file, its vector segments in place."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from rag_assistant.errors import ConfigError, StoreUnavailableError
from rag_assistant.files import connect_read_only, private_dir, private_file

SQLITE = "chroma.sqlite3"
_snapshots: list[Any] = []  # the temporary copies of this process, removed at exit by their finalizers


def open_collection(path: Path | None, name: str, url: str | None, write: bool) -> tuple[Any, Any]:
    """(client, collection) of the embedded index in `path`, or of the server at `url`."""
    logging.getLogger("chromadb").setLevel(logging.ERROR)
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    settings = ChromaSettings(anonymized_telemetry=False)
    if url:
        return _server(chromadb, settings, url, name, write)
    assert path is not None
    try:
        if write:
            client = chromadb.PersistentClient(path=str(private_dir(path)), settings=settings)  # 0700 if new
        elif not (path / SQLITE).is_file():
            return _empty(chromadb, name)
        elif os.access(path, os.W_OK) and os.access(path / SQLITE, os.W_OK):
            client = chromadb.PersistentClient(path=str(path), settings=settings)
        else:
            client = chromadb.PersistentClient(path=str(_snapshot(path)), settings=settings)
        collection = _collection(client, name, write)
    except Exception as exc:
        raise StoreUnavailableError(
            f"cannot open Chroma at {path}: {_first_line(exc)}",
            "check that the data directory is writable and not used by another version of chromadb"
            if write
            else "check that the data directory holds an index of this version of chromadb",
        ) from None
    return (client, collection) if collection is not None else _empty(chromadb, name)


def _server(chromadb: Any, settings: Any, url: str, name: str, write: bool) -> tuple[Any, Any]:  # noqa: ANN401
    parsed = urlparse(url if "://" in url else f"http://{url}")
    if not parsed.hostname:
        raise ConfigError(f"invalid Chroma URL: {url}", "use e.g. http://localhost:8000")
    port = parsed.port or (443 if parsed.scheme == "https" else 8000)
    try:
        client = chromadb.HttpClient(host=parsed.hostname, port=port, ssl=parsed.scheme == "https", settings=settings)
        collection = _collection(client, name, write)
    except Exception as exc:
        base = f"{'https' if parsed.scheme == 'https' else 'http'}://{parsed.hostname}:{port}"
        other = _not_chroma(base)
        if other:
            raise StoreUnavailableError(
                f"{url} is not a Chroma server ({other})",
                "point --chroma-url (RAG_ASSISTANT_CHROMA_URL) at a Chroma 1.x server, e.g. one started with "
                "`chroma run --path DIR` (port 8000), or unset it to use the embedded index",
            ) from None
        raise StoreUnavailableError(
            f"cannot open Chroma at {url}: {_first_line(exc)}",
            "check that the server runs (chroma run --path DIR) or unset RAG_ASSISTANT_CHROMA_URL",
        ) from None
    return (client, collection) if collection is not None else _empty(chromadb, name)


def _collection(client: Any, name: str, write: bool) -> Any:  # noqa: ANN401 - a chromadb Collection or None
    """The collection; for reading, None when it does not exist (reading must not create it)."""
    if write:
        return client.get_or_create_collection(
            name, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
        )
    from chromadb.errors import NotFoundError

    try:
        return client.get_collection(name, embedding_function=None)
    except NotFoundError:
        return None


def _empty(chromadb: Any, name: str) -> tuple[Any, Any]:  # noqa: ANN401
    """An empty in-memory collection: what reading an index that was never built finds (nothing on disk)."""
    from chromadb.config import Settings as ChromaSettings

    # Settings of its own: chromadb's clients write their kind and address into the Settings they are given
    client = chromadb.EphemeralClient(settings=ChromaSettings(anonymized_telemetry=False))
    return client, client.get_or_create_collection(name, embedding_function=None)


def _snapshot(path: Path) -> Path:
    """A private temporary directory holding a consistent copy of the index's SQLite file (read through a
    read-only connection) and links to its vector segments, for a client to open and write in."""
    import tempfile

    tmp = tempfile.TemporaryDirectory(prefix="rag-assistant-readonly-")  # created 0700
    _snapshots.append(tmp)
    target = Path(tmp.name)
    source = connect_read_only(path / SQLITE)
    copy = sqlite3.connect(private_file(target / SQLITE))
    try:
        source.backup(copy)
    finally:
        copy.close()
        source.close()
    for entry in path.iterdir():
        if entry.is_dir():
            (target / entry.name).symlink_to(entry, target_is_directory=True)
    return target


def _not_chroma(base: str) -> str | None:
    """What the server at `base` answered its heartbeat with when it is not Chroma ("HTTP 200, text/html"),
    None when it is Chroma or does not answer (then chromadb's own error says what happened)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{base}/api/v2/heartbeat", timeout=5) as response:  # noqa: S310 - http(s) only
            status, kind, body = response.status, response.headers.get("Content-Type"), response.read(4096)
    except urllib.error.HTTPError as exc:
        status, kind, body = exc.code, exc.headers.get("Content-Type"), exc.read(4096)
    except (OSError, ValueError):
        return None
    try:
        if "nanosecond heartbeat" in json.loads(body):
            return None
    except (ValueError, TypeError):
        pass
    return f"HTTP {status}, {(kind or 'no content type').split(';')[0]}{'' if body else ', empty body'}"


def _first_line(exc: BaseException) -> str:
    """The first non-blank line of an error, at most 200 characters; its type when it has no text."""
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)[:200]
