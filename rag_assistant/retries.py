"""Calls to an OpenAI-compatible server (the LLM, an embedding service) through the `openai` client: what kind of
failure an exception is, and bounded retries that honour Retry-After.

The `openai` client's own retries are off (max_retries=0): stacked with ours they would multiply requests and
waits. Ours back off 0.5, 1, 2, 4, 8, 8 ... s, or wait what the server asks for (Retry-After / retry-after-ms)
up to RETRY_AFTER_MAX; a server asking for longer is reported, not waited for. Each caller decides what is
retryable and words its own error; the message gets the attempts made and the time they took."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from rag_assistant.errors import ServiceError

RETRY_AFTER_MAX = 60.0
BACKOFF_FIRST, BACKOFF_CAP = 0.5, 8.0

T = TypeVar("T")
Classify = Callable[[Exception], tuple[bool, ServiceError]]  # (retryable, the error to raise if not retried)


def retry_after(exc: Exception) -> float | None:
    """Seconds the server asked to wait (Retry-After / retry-after-ms headers), if any."""
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
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
        return "dropped", None  # the server went away mid-request: worth one more try
    if isinstance(exc, openai.APIConnectionError | httpx.TransportError):
        return "connect", None
    if isinstance(exc, openai.APIStatusError):
        return "status", exc.status_code
    return "other", None


def retryable_status(code: int) -> bool:
    """Rate limits, timeouts, conflicts and server errors may pass; other 4xx (key, model, request) will not."""
    return code == 429 or code >= 500 or code in (408, 409)


def with_retries(call: Callable[[], T], attempts: int, classify: Classify) -> T:
    """call(), tried up to `attempts` times while `classify` calls its failure retryable."""
    started = time.perf_counter()
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except Exception as exc:
            retryable, error = classify(exc)
            wait = retry_after(exc)
            if wait is not None and wait > RETRY_AFTER_MAX:
                retryable = False
                error.message += f"; it asks to retry after {wait:g}s"
            if not retryable or attempt == attempts:
                took = time.perf_counter() - started
                error.message += f" ({attempt} attempt{'s' if attempt > 1 else ''}, {took:.1f}s in all)"
                raise error from None
            time.sleep(wait if wait is not None else min(BACKOFF_CAP, BACKOFF_FIRST * 2 ** (attempt - 1)))
    raise AssertionError("unreachable: attempts >= 1")
