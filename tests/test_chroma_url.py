"""--chroma-url pointing at an HTTP server that is not Chroma (issue 22, item 12): one line saying so, with the
status and content type it answered, and the exit code of an unreachable server; never a traceback or a line
of the server's HTML. Real tiny servers on 127.0.0.1."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

_ANSWERS = {
    "empty": (200, "text/plain", b""),
    "empty-500": (500, "text/plain", b""),
    "html": (200, "text/html; charset=utf-8", b"<!DOCTYPE HTML>\n<html><body><h1>It works!</h1></body></html>\n"),
    "html-404": (404, "text/html;charset=utf-8", b"<!DOCTYPE HTML>\n<html><title>Error response</title></html>\n"),
    "json-404": (404, "application/json", b'{"detail":"Not Found"}'),
}


@contextmanager
def _server(status: int, kind: str, body: bytes) -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_an_unreachable_server_is_one_line(cli) -> None:
    """The reference: what a server that does not answer gives (exit code and shape)."""
    url = f"http://127.0.0.1:{_unused_port()}"
    res = cli("--chroma-url", url, "search", "KV cache")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.splitlines()[0].startswith(f"error: cannot open Chroma at {url}")


@pytest.mark.slow
@pytest.mark.parametrize("answer", list(_ANSWERS))
def test_a_server_that_is_not_chroma_is_named_as_such(cli, answer: str) -> None:
    status, kind, body = _ANSWERS[answer]
    with _server(status, kind, body) as url:
        res = cli("--chroma-url", url, "search", "KV cache")
    lines = res.stderr.splitlines()
    assert res.returncode == 1, res.stderr  # as for an unreachable server
    described = f"{status}, {kind.split(';')[0]}{', empty body' if not body else ''}"
    assert lines[0] == f"error: {url} is not a Chroma server (HTTP {described})", lines
    assert len(lines) == 2 and lines[1].startswith("hint: point --chroma-url") and "chroma run" in lines[1]
    assert "Traceback" not in res.stderr and "DOCTYPE" not in res.stderr


@pytest.mark.slow
def test_reading_from_a_chroma_server_creates_no_collection(cli, tmp_path) -> None:  # noqa: ANN001
    """search and stats against a real server without the collection: an empty index, and nothing created."""
    import chromadb
    from chroma_server import ChromaServer

    with ChromaServer(tmp_path / "server") as server:
        search = cli("--chroma-url", server.url, "--collection", "never-ingested", "search", "KV cache")
        stats = cli("--chroma-url", server.url, "--collection", "never-ingested", "stats", "--json")
        names = [c.name for c in chromadb.HttpClient(host="127.0.0.1", port=server.port).list_collections()]
    assert search.returncode == 1 and "rag-assistant ingest" in search.stderr, search.stderr
    assert stats.returncode == 0 and json.loads(stats.stdout)["chunks"] == 0, stats.stderr
    assert names == []
