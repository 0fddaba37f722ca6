"""Scripted OpenAI-compatible `/v1/embeddings` server for tests (stdlib only).

``with FakeEmbeddingServer() as srv: srv.script(status(503, headers={"retry-after": "0"}), drop())`` -- each
POST consumes one step (FIFO, steps from fake_llm: Status, Drop; None = answer normally); with the queue
empty, ``rule(n, request)`` (n counts requests from 1) may return a step, else the request is answered.
Vectors are hashed bags of words (similar texts get similar vectors, so retrieval works), scaled so they are
not unit length, and answered in reverse order with their `index` (a client must sort by it).
``per_token=True`` answers one vector per word, like llama-cpp-python's server with a model without pooling.
``dim`` (settable while it runs) is the length of its vectors: another model behind the same name.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import socket
import threading
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from fake_llm import Drop, Status

DIM = 48
EmbedStep = Status | Drop | None
Rule = Callable[[int, dict[str, Any]], EmbedStep]


def fake_vector(text: str, dim: int = DIM) -> list[float]:
    """Hashed bag of words, never unit length."""
    vector = [0.05] * dim
    for word in re.findall(r"\w+", text.lower()):
        vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % dim] += 3.0
    return vector


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode() if not isinstance(body, bytes) else body
        self.send_response(code)
        for key, value in {
            "Content-Type": "application/json",
            "Content-Length": str(len(data)),
            **(headers or {}),
        }.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802
        owner = self.server.owner
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.split("?")[0].rstrip("/") != "/v1/embeddings":
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found_error"}})
            return
        req = json.loads(raw or b"{}")
        step = owner._record_and_pop(req, self.headers.get("Authorization", ""))
        if isinstance(step, Drop):
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
        elif isinstance(step, Status):
            body = step.body if step.body is not None else {"error": {"message": f"HTTP {step.code}", "type": "x"}}
            self._send(step.code, body, step.headers)
        else:
            self._send(200, owner.answer(req))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: FakeEmbeddingServer


class FakeEmbeddingServer:
    """Scripted `/v1/embeddings` on 127.0.0.1:<free port>; `api_key` set = other keys get HTTP 401."""

    def __init__(
        self, rule: Rule | None = None, api_key: str | None = None, per_token: bool = False, dim: int = DIM
    ) -> None:
        self.rule = rule
        self.api_key = api_key
        self.per_token = per_token
        self.dim = dim
        self._queue: deque[EmbedStep] = deque()
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self._httpd: _Server | None = None
        self.port = 0
        self.base_url = ""

    def __enter__(self) -> FakeEmbeddingServer:
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self.port = int(self._httpd.server_address[1])
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()

    def script(self, *steps: EmbedStep) -> FakeEmbeddingServer:
        with self._lock:
            self._queue.extend(steps)
        return self

    def texts(self) -> list[str]:
        """Every text sent, in request order."""
        with self._lock:
            return [t for req in self.requests for t in _inputs(req)]

    def answer(self, req: dict[str, Any]) -> dict[str, Any]:
        inputs = _inputs(req)
        if self.per_token:
            vectors: list[Any] = [[fake_vector(w, self.dim) for w in text.split()] for text in inputs]
        else:
            vectors = [fake_vector(text, self.dim) for text in inputs]
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)][::-1]
        return {
            "object": "list",
            "data": data,
            "model": req.get("model"),
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }

    def _record_and_pop(self, req: dict[str, Any], auth: str) -> EmbedStep:
        with self._lock:
            self.requests.append(req)
            n = len(self.requests)
            if self._queue:
                return self._queue.popleft()
        if self.api_key is not None and auth != f"Bearer {self.api_key}":
            return Status(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})
        return self.rule(n, req) if self.rule else None


def _inputs(req: dict[str, Any]) -> list[str]:
    value = req.get("input", [])
    return [value] if isinstance(value, str) else list(value)
