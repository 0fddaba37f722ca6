"""Scripted OpenAI-compatible HTTP server for tests (stdlib only).

``with FakeLLMServer() as srv: srv.script(reply("hi"), status(429), delay(2.0), drop())`` -- each POST
consumes one step (FIFO); with the queue empty the ``default`` (str or ``(request_json) -> str``) answers.
A callable default may also return a Step (e.g. ``status(500)``) to script failures by request content, which
stays deterministic when requests arrive concurrently (the FIFO does not).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Responder = Callable[[dict[str, Any]], str]

__all__ = [
    "FakeLLMServer",
    "Step",
    "Reply",
    "ReplyFn",
    "Status",
    "Delay",
    "Garbage",
    "Empty",
    "Drop",
    "reply",
    "reply_fn",
    "status",
    "delay",
    "garbage",
    "empty",
    "drop",
    "Cut",
    "cut",
]


@dataclass(frozen=True)
class Reply:
    """Normal reply; streamed in ``chunks`` content deltas when the request asks for streaming.
    ``finish="length"`` says the completion was cut at max_tokens."""

    text: str
    chunks: int = 4
    finish: str = "stop"


@dataclass(frozen=True)
class ReplyFn:
    """Reply whose content is ``fn(request_json)``."""

    fn: Responder
    finish: str = "stop"


@dataclass
class Status:
    """HTTP error; ``body=None`` -> OpenAI-style error JSON (dict/str/bytes bodies sent as-is)."""

    code: int
    body: Any = None
    headers: dict[str, str] | None = None

    def __post_init__(self) -> None:
        self.headers = dict(self.headers or {})
        if self.code == 429 and not any(k.lower().startswith("retry-after") for k in self.headers):
            # openai ignores "retry-after: 0" (falls back to ~0.5s backoff) but honours retry-after-ms.
            self.headers.update({"retry-after": "0", "retry-after-ms": "1"})


@dataclass(frozen=True)
class Delay:
    """Sleep (interruptible by stop()) then answer with ``then`` or the default responder."""

    seconds: float
    then: Step | None = None


@dataclass(frozen=True)
class Garbage:
    """200 with content-type application/json but an invalid body."""

    body: bytes = b"not json{"


@dataclass(frozen=True)
class Empty:
    """Valid completion with content "" (or ``"choices": []`` when no_choices=True)."""

    no_choices: bool = False


@dataclass(frozen=True)
class Drop:
    """Close the connection without sending any response."""


@dataclass(frozen=True)
class Cut:
    """Start answering (status 200, then ``text``: one SSE chunk, or part of a promised body) and close."""

    text: str = "ShadowKV stores"


Step = Reply | ReplyFn | Status | Delay | Garbage | Empty | Drop | Cut
DefaultResponder = Callable[[dict[str, Any]], "str | Step"]  # a default may also answer with a Step
# Lower-case helper aliases: reply("hi"), status(429), delay(2, then=reply("x")), drop(), ...
reply, reply_fn, status, delay, garbage, empty, drop, cut = Reply, ReplyFn, Status, Delay, Garbage, Empty, Drop, Cut


def _count_tokens(req: dict[str, Any]) -> int:
    msgs = req["messages"] if isinstance(req.get("messages"), list) else [{"content": req.get("prompt")}]
    return sum(len(str(m.get("content") or "").split()) for m in msgs if isinstance(m, dict))


def _error(message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.server.owner._track(self.connection, add=False)

    def _send(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        """Send a complete response with Content-Length; ``body`` is bytes, str or JSON-able."""
        if not isinstance(body, bytes):
            body = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(code)
        hdrs = {"Content-Type": "application/json", "Content-Length": str(len(body)), **(headers or {})}
        for k, v in hdrs.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def do_GET(self) -> None:  # noqa: N802
        if self.path.split("?")[0].rstrip("/") == "/v1/models":
            models = self.server.owner.models
            self._send(
                200,
                {
                    "object": "list",
                    "data": [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in models],
                },
            )
        else:
            self._send(404, _error(f"no route {self.path}", "not_found_error"))

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.split("?")[0].rstrip("/")
        if path not in ("/v1/chat/completions", "/v1/completions"):
            self._send(404, _error(f"no route {self.path}", "not_found_error"))
            return
        try:
            req = json.loads(raw or b"{}")
        except ValueError:
            self._send(400, _error("invalid JSON body", "invalid_request_error"))
            return
        step = self.server.owner._record_and_pop(req)
        try:
            self._answer(step, req, chat=path.endswith("chat/completions"))
        except OSError:
            self.close_connection = True  # client went away (e.g. timed out)

    def _answer(self, step: Step | None, req: dict[str, Any], chat: bool) -> None:
        owner = self.server.owner
        if isinstance(step, Delay):
            if owner._stopping.wait(step.seconds):
                self._drop()  # server stopping: abandon the request
            else:
                self._answer(step.then, req, chat)
        elif isinstance(step, Drop):
            self._drop()
        elif isinstance(step, Cut):
            self._cut(step.text, bool(req.get("stream")))
        elif isinstance(step, Garbage):
            self._send(200, step.body)
        elif isinstance(step, Status):
            kind = {429: "rate_limit_exceeded"}.get(
                step.code, "server_error" if step.code >= 500 else "invalid_request_error"
            )
            body = _error(f"fake error {step.code}", kind, str(step.code)) if step.body is None else step.body
            self._send(step.code, body, step.headers)
        elif isinstance(step, Empty):
            self._complete(req, "", chat, no_choices=step.no_choices)
        elif isinstance(step, Reply):
            self._complete(req, step.text, chat, chunks=step.chunks, finish=step.finish)
        elif isinstance(step, ReplyFn):
            self._complete(req, step.fn(req), chat, finish=step.finish)
        else:
            result = owner.default(req) if callable(owner.default) else owner.default
            if isinstance(result, str):
                self._complete(req, result, chat)
            elif isinstance(result, Delay) and result.then is None:  # would ask this default again, forever
                raise ValueError("a Delay returned by the default responder needs `then`")
            else:
                self._answer(result, req, chat)

    def _cut(self, text: str, stream: bool) -> None:
        self.send_response(200)
        if stream:
            # Chunked like real servers, so that the client sees the body end early (RemoteProtocolError).
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
            chunk["choices"] = [{"index": 0, "delta": {"content": text}, "finish_reason": None}]
            event = b"data: " + json.dumps(chunk).encode() + b"\n\n"
            self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
        else:
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            self.wfile.write(b'{"id": "x", "choices": [{"message": {"content": "' + text.encode())
        self.wfile.flush()
        self._drop()

    def _complete(
        self,
        req: dict[str, Any],
        text: str,
        chat: bool,
        chunks: int = 4,
        no_choices: bool = False,
        finish: str = "stop",
    ) -> None:
        model = str(req.get("model") or self.server.owner.models[0])
        base = {
            "id": ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24],
            "created": int(time.time()),
            "model": model,
        }
        p_tok, c_tok = _count_tokens(req), len(text.split())
        usage = {"prompt_tokens": p_tok, "completion_tokens": c_tok, "total_tokens": p_tok + c_tok}

        def choice(body: dict[str, Any], finish: str | None) -> dict[str, Any]:
            part = {"delta" if req.get("stream") else "message": body} if chat else {"text": body["content"]}
            return {"index": 0, **part, "logprobs": None, "finish_reason": finish}

        if not req.get("stream"):
            choices = [] if no_choices else [choice({"role": "assistant", "content": text}, finish)]
            obj = "chat.completion" if chat else "text_completion"
            self._send(200, {**base, "object": obj, "choices": choices, "usage": usage})
            return
        # Streaming: SSE body delimited by connection close (no Content-Length, no keep-alive).
        self.close_connection = True
        self.send_response(200)
        for k, v in {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "Connection": "close"}.items():
            self.send_header(k, v)
        self.end_headers()
        include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
        events: list[tuple[list[dict[str, Any]], dict[str, int] | None]] = []
        if not no_choices:
            size = max(1, -(-len(text) // max(1, chunks)))  # ceil division -> about `chunks` pieces
            parts = [text[i : i + size] for i in range(0, len(text), size)]
            deltas = [{"role": "assistant", "content": ""}] + [{"content": p} for p in parts]
            events += [([choice(d, None)], None) for d in deltas[0 if chat else 1 :]]
            events.append(([choice({} if chat else {"content": ""}, finish)], None))
        if include_usage:
            events.append(([], usage))
        for choices, usage_ in events:
            payload = {
                **base,
                "object": "chat.completion.chunk" if chat else "text_completion",
                "choices": choices,
                **({"usage": usage_} if include_usage else {}),
            }
            self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: FakeLLMServer


class FakeLLMServer:
    """Scripted OpenAI-compatible server on 127.0.0.1:<free port>."""

    def __init__(
        self, default: str | DefaultResponder = "I don't know.", models: Iterable[str] = ("fake-model",)
    ) -> None:
        self.default = default
        self.models: list[str] = list(models) or ["fake-model"]
        self._queue: deque[Step] = deque()
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self._conns: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self.port = 0

    def start(self) -> FakeLLMServer:
        if self._httpd is None:
            self._stopping.clear()
            self._httpd = _Server(("127.0.0.1", 0), _Handler)
            self._httpd.owner = self
            self.port = int(self._httpd.server_address[1])
            threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=f"fake-llm-{self.port}",
                daemon=True,
            ).start()
        return self

    def stop(self) -> None:
        """Stop serving; wakes sleeping delay steps and closes open (keep-alive) connections."""
        self._stopping.set()
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()  # returns once serve_forever has exited
            httpd.server_close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *steps: Step) -> FakeLLMServer:
        """Append steps to the FIFO queue; each POST consumes one step."""
        with self._lock:
            self._queue.extend(steps)
        return self

    @property
    def pending(self) -> int:
        return len(self._queue)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Snapshot of the JSON bodies of all POST requests received so far."""
        with self._lock:
            return list(self._requests)

    @property
    def request_count(self) -> int:
        return len(self.requests)

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            (self._conns.add if add else self._conns.discard)(conn)

    def _record_and_pop(self, req: dict[str, Any]) -> Step | None:
        with self._lock:
            self._requests.append(req)
            return self._queue.popleft() if self._queue else None
