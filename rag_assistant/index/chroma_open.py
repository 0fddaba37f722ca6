"""How the Chroma collection is opened: for writing (ingest) or for reading (everything else), embedded in the data
dir or on a server, with one clear line when it cannot be. Reading creates nothing: a data dir or collection that
does not exist reads as an empty index. Embedded Chroma (chromadb 1.x) writes to its SQLite file whenever a
client opens it (a row in its `acquire_write` table), so an index on read-only storage is read through a private
temporary copy of that one file, its vector segments in place. A server is reached as a deployment has it
(ChromaEndpoint): a token or basic auth, a tenant and database, TLS verified against a CA file; those secrets
are masked in every error, and a rejected or missing credential is one line, as an unreachable server is.
Creating the chunks' collection probes once whether the deployment ranks keywords itself (index/sparse.py)."""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from rag_assistant.errors import ConfigError, StoreUnavailableError
from rag_assistant.files import connect_read_only, private_dir, private_file

SQLITE = "chroma.sqlite3"
_snapshots: list[Any] = []  # the temporary copies of this process, removed at exit by their finalizers
_MIN_SECRET = 3  # shorter values would mask ordinary text without protecting anything
_CREDENTIALS_HINT = (
    "set chroma_token (RAG_ASSISTANT_CHROMA_TOKEN; header: chroma_token_header) or chroma_user and "
    "chroma_password to credentials this server accepts"
)


@dataclass(frozen=True, repr=False)
class ChromaEndpoint:
    """A Chroma server and how to reach it. Its repr and `shown` hold no credential."""

    url: str
    token: str | None = None
    token_header: str = "Authorization"
    user: str | None = None
    password: str | None = None
    tenant: str = "default_tenant"
    database: str = "default_database"
    verify: bool | str = True  # or the path of a CA bundle

    @classmethod
    def of(cls, settings: Any) -> ChromaEndpoint | None:  # noqa: ANN401 - Settings (config is above no layer)
        """The server the settings name, None for the embedded index."""
        if not settings.chroma_url:
            return None
        ca = settings.chroma_ca_file
        if ca is not None and not Path(ca).expanduser().is_file():
            raise ConfigError(f"chroma_ca_file not found: {ca}", "point it at the PEM file of the server's CA")
        verify: bool | str = str(Path(ca).expanduser()) if ca is not None else bool(settings.chroma_tls_verify)
        reveal = lambda secret: secret.get_secret_value() if secret is not None else None  # noqa: E731
        return cls(
            settings.chroma_url, reveal(settings.chroma_token), settings.chroma_token_header, settings.chroma_user,
            reveal(settings.chroma_password), settings.chroma_tenant, settings.chroma_database, verify,
        )  # fmt: skip

    def __repr__(self) -> str:
        return f"ChromaEndpoint({self.shown!r}, tenant={self.tenant!r}, database={self.database!r})"

    @property
    def parts(self) -> tuple[str, str, int]:
        """(scheme, host, port); ConfigError for a URL without a host."""
        try:
            parsed = urlparse(self.url if "://" in self.url else f"http://{self.url}")
            host, port = parsed.hostname, parsed.port
        except ValueError:
            host = port = None
        if not host:
            raise ConfigError(f"invalid Chroma URL: {self.shown}", "use e.g. http://localhost:8000")
        scheme = "https" if parsed.scheme == "https" else "http"
        return scheme, host, port or (443 if scheme == "https" else 8000)

    @property
    def shown(self) -> str:
        """The URL as it may be shown: scheme, host and port, never user info, path or query."""
        try:
            scheme, host, port = self.parts
        except ConfigError:
            return "<invalid Chroma URL>"
        return f"{scheme}://{host}:{port}"

    def _basic(self) -> tuple[str, str] | None:
        parsed = urlparse(self.url if "://" in self.url else f"http://{self.url}")
        user = self.user if self.user is not None else parsed.username
        password = self.password if self.password is not None else parsed.password
        return (user or "", password or "") if user or password else None

    def headers(self) -> dict[str, str]:
        """The headers that authenticate every request; ConfigError when two credentials would share one."""
        headers: dict[str, str] = {}
        basic = self._basic()
        if basic:
            headers["Authorization"] = "Basic " + base64.b64encode(":".join(basic).encode()).decode()
        if self.token:
            if self.token_header == "Authorization" and basic:
                raise ConfigError(
                    "chroma_token and basic auth (chroma_user/chroma_password or user:pass@ in the URL) both set",
                    "keep one, or send the token as chroma_token_header = X-Chroma-Token",
                )
            headers[self.token_header] = f"Bearer {self.token}" if self.token_header == "Authorization" else self.token
        return headers

    def secrets(self) -> list[str]:
        """Every credential value, longest first (a key containing another is masked whole)."""
        basic = self._basic()
        found = [self.token or "", *(basic or ())] + [v.split(" ", 1)[-1] for v in self._safe_headers().values()]
        return sorted({s for s in found if len(s) >= _MIN_SECRET}, key=len, reverse=True)

    def _safe_headers(self) -> dict[str, str]:
        try:
            return self.headers()
        except ConfigError:
            return {}

    def mask(self, text: str) -> str:
        for secret in self.secrets():
            text = text.replace(secret, "***")
        return text


def open_collection(path: Path | None, name: str, url: str | ChromaEndpoint | None, write: bool) -> tuple[Any, Any]:
    """(client, collection) of the embedded index in `path`, or of the server at `url`."""
    logging.getLogger("chromadb").setLevel(logging.ERROR)
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    settings = ChromaSettings(anonymized_telemetry=False)
    if url:
        return _server(chromadb, settings, url if isinstance(url, ChromaEndpoint) else ChromaEndpoint(url), name, write)
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


def _server(chromadb: Any, settings: Any, server: ChromaEndpoint, name: str, write: bool) -> tuple[Any, Any]:  # noqa: ANN401
    scheme, host, port = server.parts
    headers = server.headers()
    settings.chroma_server_ssl_verify = server.verify
    try:
        client = chromadb.HttpClient(
            host=host, port=port, ssl=scheme == "https", headers=dict(headers), settings=settings,
            tenant=server.tenant, database=server.database,
        )  # fmt: skip
        collection = _collection(client, name, write)
    except Exception as exc:
        raise _server_error(server, headers, exc) from None
    return (client, collection) if collection is not None else _empty(chromadb, name)


def _server_error(server: ChromaEndpoint, headers: dict[str, str], exc: BaseException) -> StoreUnavailableError:
    """One line for a server that could not be used: credentials refused or missing, not Chroma, or chromadb's
    own first line; every credential masked."""
    base = server.shown
    status, other = _probe(base, headers, server.verify)
    if status in (401, 403):
        said = "rejected the credentials sent" if headers else "requires credentials and none are set"
        return StoreUnavailableError(f"the Chroma server at {base} {said} (HTTP {status})", _CREDENTIALS_HINT)
    if other:
        return StoreUnavailableError(
            f"{base} is not a Chroma server ({server.mask(other)})",
            "point --chroma-url (RAG_ASSISTANT_CHROMA_URL) at a Chroma 1.x server, e.g. one started with "
            "`chroma run --path DIR` (port 8000), or unset it to use the embedded index",
        )
    line = server.mask(_tls_failure(exc) or _first_line(exc))
    hint = "check that the server runs (chroma run --path DIR) or unset RAG_ASSISTANT_CHROMA_URL"
    if "CERTIFICATE_VERIFY_FAILED" in line:
        hint = "set chroma_ca_file (RAG_ASSISTANT_CHROMA_CA_FILE) to the PEM file of the CA of the server's certificate"
    elif "tenant" in line.lower() or "database" in line.lower():
        hint = "check chroma_tenant and chroma_database (RAG_ASSISTANT_CHROMA_TENANT, RAG_ASSISTANT_CHROMA_DATABASE)"
    return StoreUnavailableError(f"cannot open Chroma at {base}: {line}", hint)


def _collection(client: Any, name: str, write: bool) -> Any:  # noqa: ANN401 - a chromadb Collection or None
    """The collection; for reading, None when it does not exist (reading must not create it). A new one is created
    with a sparse index for keyword search in the server where the deployment has one (index/sparse.py: probed
    here, once per collection, since a schema cannot be changed later), else as before."""
    from chromadb.errors import NotFoundError

    try:
        return client.get_collection(name, embedding_function=None)
    except NotFoundError:
        if not write:
            return None
    from rag_assistant.index import sparse

    cosine = {"configuration": {"hnsw": {"space": "cosine"}}}
    made = {"schema": sparse.sparse_schema()} if sparse.probe(client) else cosine
    return client.get_or_create_collection(name, embedding_function=None, **made)  # another writer may be first


def sibling_collection(store: object, suffix: str, write: bool) -> Any:  # noqa: ANN401 - a Collection or None
    """The collection named after a ChromaStore's chunks' one plus `suffix` (the run log, the sentence vectors), on
    the same client: created for writing; for reading None when it does not exist (reading creates nothing), and
    None for a store that is not Chroma."""
    client, chunks = getattr(store, "client", None), getattr(store, "collection", None)
    if client is None or chunks is None:
        return None
    name = chunks.name + suffix
    if write:
        return client.get_or_create_collection(name, embedding_function=None)
    from chromadb.errors import NotFoundError

    try:
        return client.get_collection(name, embedding_function=None)
    except NotFoundError:
        return None


def drop_collection(client: Any, name: str, path: Path | None) -> None:  # noqa: ANN401 - a chromadb client
    """Delete a collection if it exists (another client may have been first), and in an embedded store at `path`
    its vector index's files, which chromadb 1.x leaves on disk (chroma-core/chroma#5259)."""
    import shutil

    from chromadb.errors import NotFoundError

    try:
        cid = str(client.get_collection(name, embedding_function=None).id)
    except NotFoundError:
        return
    segments: list[str] = []
    if path is not None:
        with contextlib.closing(connect_read_only(path / SQLITE)) as db:
            segments = [row[0] for row in db.execute("SELECT id FROM segments WHERE collection = ?", (cid,))]
    with contextlib.suppress(NotFoundError):
        client.delete_collection(name)
    for segment in segments:  # uuid-named directories of Chroma's own, beside its SQLite file
        shutil.rmtree(path / segment, ignore_errors=True)  # type: ignore[operator]


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


def _probe(base: str, headers: dict[str, str], verify: bool | str) -> tuple[int | None, str | None]:
    """(HTTP status of an authenticated request, what the heartbeat answered when the server is not Chroma:
    "HTTP 200, text/html"). The heartbeat is left open by Chroma's own auth and by many proxies, so credentials
    are checked on the identity endpoint, the first one a client calls."""
    status, _, _ = _fetch(f"{base}/api/v2/auth/identity", headers, verify)
    if status in (401, 403) or status is None:  # None: nothing answers (a hanging server is not waited for twice)
        return status, None
    beat, kind, body = _fetch(f"{base}/api/v2/heartbeat", headers, verify)
    if beat is None:
        return status, None
    try:
        if "nanosecond heartbeat" in json.loads(body):
            return status, None
    except (ValueError, TypeError):
        pass
    return status, f"HTTP {beat}, {(kind or 'no content type').split(';')[0]}{'' if body else ', empty body'}"


def _fetch(url: str, headers: dict[str, str], verify: bool | str) -> tuple[int | None, str | None, bytes]:
    """(status, content type, first 4 KiB of the body) of a GET, (None, None, b"") when nothing answers."""
    import ssl
    import urllib.error
    import urllib.request

    context = ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)
    if verify is False:
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 - http(s) only
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as response:  # noqa: S310
            return response.status, response.headers.get("Content-Type"), response.read(4096)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type"), exc.read(4096)
    except (OSError, ValueError):
        return None, None, b""


def _tls_failure(exc: BaseException) -> str | None:
    """The certificate error behind `exc` (chromadb reports it as "Could not connect to a Chroma server")."""
    import ssl

    seen: BaseException | None = exc
    for _ in range(10):  # the chain is short; a cycle must not hang us
        if seen is None:
            return None
        if isinstance(seen, ssl.SSLCertVerificationError):
            return f"[SSL: CERTIFICATE_VERIFY_FAILED] {seen.verify_message or 'certificate verify failed'}"
        seen = seen.__cause__ or seen.__context__
    return None


def _first_line(exc: BaseException) -> str:
    """The first non-blank line of an error, at most 200 characters; its type when it has no text."""
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)[:200]


PERSIST_EVERY = 1000  # Chroma's default sync_threshold: how many records an HNSW index takes between writes to disk
_NO_SUCH_ID = "rag-assistant:persist"  # deleted to make a write that changes nothing


def persist_vectors(path: Path, name: str) -> None:
    """Write the vector index of an embedded index's chunks to disk now. Chroma writes HNSW files
    only every PERSIST_EVERY records, and every process that opens a collection replays the rest from its log
    before its first query: 0.3 s of each one-off command on the conference index after an ingest of a few hundred
    chunks. A write made with a threshold of 2 persists them; the threshold is put back so that ingests keep
    writing in large steps. Chroma keeps one set of loaded indexes per path and process, which reads its settings
    once: this works only when no other client of `path` is open in this process, and changes nothing otherwise."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    client = chromadb.PersistentClient(path=str(path), settings=ChromaSettings(anonymized_telemetry=False))
    try:
        if (collection := _collection(client, name, write=False)) is not None:
            collection.modify(configuration={"hnsw": {"sync_threshold": 2}})
            try:
                collection.delete(ids=[_NO_SUCH_ID])
            finally:
                collection.modify(configuration={"hnsw": {"sync_threshold": PERSIST_EVERY}})
    finally:
        client.close()


def compact(path: Path) -> None:
    """Give back what rewriting chunks freed in an embedded Chroma's SQLite file (after an upgrade to the layout of
    index/records.py, which empties every document): FTS5 keeps a deleted document's terms until its segments are
    merged, so its index is merged ('optimize'), then the file vacuumed (what `chroma vacuum` does). SQLite waits
    up to a minute for another process's transaction; a busy or locked file is left as it is."""
    try:
        with sqlite3.connect(path / SQLITE, timeout=60) as db:
            db.execute("INSERT INTO embedding_fulltext_search(embedding_fulltext_search) VALUES('optimize')")
        db.close()
        with sqlite3.connect(path / SQLITE, timeout=60, isolation_level=None) as db:
            db.execute("VACUUM")
        db.close()
    except sqlite3.OperationalError as exc:  # locked by a reader or writer elsewhere: the space stays reusable
        logging.getLogger(__name__).info("not compacted: %s", exc)
