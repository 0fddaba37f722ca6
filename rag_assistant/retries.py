"""Calls to an OpenAI-compatible server (the LLM, an embedding service) through the `openai` client, which retries
them; here: what kind of failure an exception is, the attempts and time a failed call took, and no retry after a
Retry-After longer than RETRY_AFTER_MAX.

The client retries timeouts, dropped or refused connections and HTTP 408, 409, 429 and 5xx, backing off 0.5, 1,
2, 4, 8 s (with jitter) or waiting what the server asks for (Retry-After, retry-after-ms). A response asking for
longer than RETRY_AFTER_MAX is marked `x-should-retry: false`, which the client obeys, and the failure says how
long the server asked for. Each caller words its own errors; `Server.call` adds the attempts and the time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from rag_assistant.errors import ServiceError

RETRY_AFTER_MAX = 60.0

T = TypeVar("T")


class Server:
    """One OpenAI-compatible server: its `openai` client (built on first use; one connection pool for every
    thread) retrying `retries` times, and `call`, which words a failure with the attempts and time it took."""

    def __init__(self, base_url: str, api_key: str, timeout: float, retries: int) -> None:
        self._options = {"base_url": base_url, "api_key": api_key, "timeout": timeout, "max_retries": retries}
        self._client: Any = None
        self._lock = threading.Lock()
        self._sent = threading.local()  # requests this thread's current call sent: the client's retries are in it

    @property
    def client(self) -> Any:  # noqa: ANN401 - an openai.OpenAI
        with self._lock:
            if self._client is None:
                import openai

                hooks = {"request": [self._count], "response": [_no_long_waits]}
                http = openai.DefaultHttpxClient(event_hooks=hooks)  # the client's own defaults, and our hooks
                self._client = openai.OpenAI(**self._options, http_client=http)
        return self._client

    def call(self, request: Callable[[], T], error: Callable[[Exception], ServiceError]) -> T:
        """request(), retried by the client; a failure raises error(exc), its message ending with the attempts
        made and the time they took."""
        self._sent.count = 0
        started = time.perf_counter()
        try:
            return request()
        except Exception as exc:
            failed = error(exc)
            wait = retry_after(getattr(getattr(exc, "response", None), "headers", None) or {})
            if wait is not None and wait > RETRY_AFTER_MAX:
                failed.message += f"; it asks to retry after {wait:g}s"
            attempts, took = max(1, self._sent.count), time.perf_counter() - started
            failed.message += f" ({attempts} attempt{'s' if attempts > 1 else ''}, {took:.1f}s in all)"
            raise failed from None

    def _count(self, request: Any) -> None:  # noqa: ANN401 - an httpx.Request
        self._sent.count = getattr(self._sent, "count", 0) + 1


def _no_long_waits(response: Any) -> None:  # noqa: ANN401 - an httpx.Response
    """A server asking to wait longer than RETRY_AFTER_MAX is not retried (newer clients would wait 2 minutes)."""
    wait = retry_after(response.headers)
    if wait is not None and wait > RETRY_AFTER_MAX:
        response.headers["x-should-retry"] = "false"


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked to wait (retry-after-ms / Retry-After headers), if any."""
    for name, unit in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return max(0.0, float(value) * unit)
            except ValueError:
                continue
    return None


def failure_kind(exc: Exception) -> tuple[str, int | None]:
    """("timeout" | "dropped" | "connect" | "status" | "other", the HTTP status for "status")."""
    import httpx
    import openai

    if isinstance(exc, openai.APITimeoutError | httpx.TimeoutException):
        return "timeout", None
    cause = exc.__cause__ if isinstance(exc, openai.APIConnectionError) else exc
    if isinstance(cause, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return "dropped", None  # the server went away mid-request
    if isinstance(exc, openai.APIConnectionError | httpx.TransportError):
        return "connect", None
    if isinstance(exc, openai.APIStatusError):
        return "status", exc.status_code
    return "other", None
