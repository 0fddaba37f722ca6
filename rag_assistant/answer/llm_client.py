"""The one LLM client: a chat completion, whole (`complete`) or streamed (`stream`), from any OpenAI-compatible
server through LlamaIndex's OpenAILike (the `openai` client). It owns the retries, the error classification,
token usage and finish reason, and the truncation check; the LLM generator, chat's condensing and the LLM
judge all call it.

Retries are ours, not LlamaIndex's (its tenacity decorator and the SDK would both retry, multiplying
requests and waits): bounded exponential backoff that honours Retry-After (up to RETRY_AFTER_MAX seconds;
a server asking for longer is reported, not waited for), on 429, 5xx, timeouts and dropped connections.
Every failure becomes one LLMError with a `reason`, a message the user can act on, the attempts and the
time it took, and no secret (see redact.py).

Importing LlamaIndex takes a new process about 3 s: a command that knows it will call an LLM starts that
import early on a thread (`import_in_background`), and the client waits for it rather than importing
alongside it (two threads importing llama_index at once see its modules half-initialised)."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rag_assistant.answer.redact import redact_url, scrub, secrets_of
from rag_assistant.config import Settings
from rag_assistant.errors import LLMError

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_BACKOFF_CAP = 8.0
RETRY_AFTER_MAX = 60.0
CHARS_PER_TOKEN_MAX = 16  # a completion longer than max_tokens x this ignored max_tokens: it is cut
_UNCLOSED_TAIL = re.compile(r"[\[(][^\[\]()\n]*$")
_importing: list[threading.Thread] = []  # the background import of LlamaIndex, when one was started


def import_in_background(after: Callable[[], object] | None = None) -> None:
    """Import LlamaIndex's modules of the client on a daemon thread, once `after()` (another load it must not
    overlap) has returned. An import error is left for the client to raise when it imports them itself."""

    def load() -> None:
        if after is not None:
            after()
        try:
            import llama_index.core.llms  # noqa: F401
            import llama_index.llms.openai_like  # noqa: F401
        except Exception:  # noqa: BLE001, S110 - raised again, in the caller's thread, by the client's import
            pass

    thread = threading.Thread(target=load, daemon=True, name="llm-import")
    _importing.append(thread)
    thread.start()


def _imported() -> None:
    """Wait for a background import of LlamaIndex to end (a no-op when none was started)."""
    for thread in _importing:
        thread.join()


@dataclass
class Completion:
    """What the server answered: the text, its token usage (empty when streamed) and the finish reason
    ("length" = cut at max_tokens; None when the server did not say)."""

    text: str
    usage: dict[str, int] = field(default_factory=dict)
    finish: str | None = None


class LLMClient:
    """Chat completions for the LLM settings (model, base URL, API key, timeout, retries, temperature,
    max tokens); `model`, `base_url`, `temperature` and `max_tokens` override them (the judge has its own)."""

    def __init__(
        self,
        settings: Settings,
        *,
        model: str | None = None,
        base_url: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> None:
        overrides = {
            "llm_model": model,
            "llm_base_url": base_url,
            "llm_temperature": temperature,
            "llm_max_tokens": max_tokens,
        }
        update = {key: value for key, value in overrides.items() if value is not None}
        self.settings = settings.model_copy(update=update) if update else settings
        self.model = self.settings.llm_model
        self.secrets = secrets_of(self.settings)
        self._llm: Any = None

    @property
    def llm(self) -> Any:
        """The LlamaIndex OpenAILike, built on first use (importing it is slow); it never retries itself."""
        if self._llm is None:
            _imported()
            from llama_index.llms.openai_like import OpenAILike

            s = self.settings
            self._llm = OpenAILike(
                model=s.llm_model,
                api_base=s.llm_base_url or DEFAULT_BASE_URL,
                api_key=s.llm_api_key.get_secret_value() if s.llm_api_key else "not-needed",
                is_chat_model=True,
                context_window=32768,
                temperature=s.llm_temperature,
                max_tokens=s.llm_max_tokens,
                timeout=s.llm_timeout,
                max_retries=0,
            )
        return self._llm

    def where(self) -> str:
        """The server's URL as it may be shown: credentials and query values masked."""
        return redact_url(self.settings.llm_base_url or DEFAULT_BASE_URL)

    def error(self, reason: str, message: str, hint: str | None = None) -> LLMError:
        """An LLMError with every secret of the settings masked in its message and hint."""
        return LLMError(scrub(message, self.secrets), hint and scrub(hint, self.secrets), reason=reason)

    def complete(self, system: str, user: str) -> Completion:
        """One chat completion, whole, with bounded retries."""
        return self._call(system, user, None)

    def stream(self, system: str, user: str, on_token: Callable[[str], None]) -> Completion:
        """One chat completion, each piece passed to on_token as it arrives. A request that fails after
        some of the answer was streamed is not retried (the reader has seen part of it)."""
        return self._call(system, user, on_token)

    def _call(self, system: str, user: str, on_token: Callable[[str], None] | None) -> Completion:
        _imported()
        from llama_index.core.llms import ChatMessage

        messages = [ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)]
        attempts = self.settings.llm_max_retries + 1
        started = time.perf_counter()
        for attempt in range(attempts):
            parts: list[str] = []
            try:
                if on_token is None:
                    response = self.llm.chat(messages)
                    return Completion(response.message.content or "", _usage(response.raw), _finish(response.raw))
                finish = None
                for chunk in self.llm.stream_chat(messages):
                    finish = _finish(chunk.raw) or finish
                    if chunk.delta:
                        parts.append(chunk.delta)
                        on_token(chunk.delta)
                return Completion("".join(parts), {}, finish)
            except Exception as exc:
                retryable, error = self._classify(exc, streamed=sum(map(len, parts)))
                wait = _retry_after(exc)
                if wait is not None and wait > RETRY_AFTER_MAX:
                    retryable = False
                    error.message += f"; it asks to retry after {wait:g}s"
                if not retryable or attempt == attempts - 1 or parts:
                    elapsed = time.perf_counter() - started
                    error.message += f" ({attempt + 1} attempt{'s' if attempt else ''}, {elapsed:.1f}s in all)"
                    raise error from None
                time.sleep(wait if wait is not None else min(_BACKOFF_CAP, 0.5 * 2**attempt))
        raise AssertionError("unreachable")

    def bounded(self, text: str, finish: str | None) -> tuple[str, list[str]]:
        """Cut a completion that ignored max_tokens, and say when the answer was truncated."""
        warnings = []
        limit = self.settings.llm_max_tokens * CHARS_PER_TOKEN_MAX
        if len(text) > limit:
            warnings.append(
                f"the completion had {len(text):,} characters, far more than llm_max_tokens "
                f"({self.settings.llm_max_tokens}) allows: only the first {limit:,} were kept"
            )
            text, finish = text[:limit], "length"
        if finish == "length":
            text = _UNCLOSED_TAIL.sub("", text).rstrip()  # "7. [00": a half-written citation is no citation
            warnings.append(
                f"the answer was cut at llm_max_tokens ({self.settings.llm_max_tokens}): it may be incomplete"
            )
        return text, warnings

    def _classify(self, exc: Exception, streamed: int = 0) -> tuple[bool, LLMError]:
        """(retryable, the error to raise)."""
        import httpx
        import openai

        where, url = f"{self.model} at {self.where()}", self.where()
        if isinstance(exc, openai.APITimeoutError | httpx.TimeoutException):
            return True, self.error(
                "timeout",
                f"the LLM ({where}) did not answer within {self.settings.llm_timeout:g}s per attempt",
                "raise RAG_ASSISTANT_LLM_TIMEOUT or use a smaller model",
            )
        cause = exc.__cause__ if isinstance(exc, openai.APIConnectionError) else exc
        if isinstance(cause, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
            after = f" after {streamed} characters of the answer" if streamed else " before answering"
            return True, self.error(
                "dropped",
                f"the LLM server at {url} closed the connection{after}",
                "the server may have crashed or restarted: check its logs, then retry",
            )
        if isinstance(exc, openai.APIConnectionError | httpx.TransportError):
            return True, self.error(
                "connect",
                f"cannot connect to the LLM server at {url}",
                "start the server, or fix --llm-base-url / OPENAI_BASE_URL; --mode extractive works offline",
            )
        return self._classify_status(exc, where, url)

    def _classify_status(self, exc: Exception, where: str, url: str) -> tuple[bool, LLMError]:
        import openai

        if isinstance(exc, openai.RateLimitError):
            return True, self.error("rate_limit", f"the LLM ({where}) is rate limiting (HTTP 429)", "wait and retry")
        if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
            code = getattr(exc, "status_code", 401)
            return False, self.error(
                "auth", f"the LLM server at {url} rejected the API key (HTTP {code})", "check OPENAI_API_KEY"
            )
        if isinstance(exc, openai.NotFoundError):
            return False, self.error(
                "not_found",
                f"model {self.model!r} not found at {url} (HTTP 404)",
                "set --llm-model / RAG_ASSISTANT_LLM_MODEL to a model the server serves",
            )
        if isinstance(exc, openai.APIStatusError):
            retryable = exc.status_code >= 500 or exc.status_code in (408, 409)
            return retryable, self.error(
                "server",
                f"the LLM server failed (HTTP {exc.status_code}) for {where}",
                "check the server's logs; --mode extractive works offline",
            )
        if isinstance(exc, json.JSONDecodeError | openai.APIResponseValidationError | ValueError | KeyError):
            return False, self.error(
                "malformed",
                f"the LLM server at {url} sent a malformed response",
                "check that it is OpenAI-compatible (/v1/chat/completions)",
            )
        return False, self.error("other", f"the LLM call failed: {type(exc).__name__}: {str(exc)[:200]}")


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    for key, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            if key in headers:
                return max(0.0, float(headers[key]) * scale)
        except ValueError:
            pass
    return None


def _usage(raw: Any) -> dict[str, int]:
    usage = getattr(raw, "usage", None) or (raw.get("usage") if isinstance(raw, dict) else None)
    if usage is None:
        return {}
    get = usage.get if isinstance(usage, dict) else lambda k: getattr(usage, k, None)
    return {k: int(get(k)) for k in ("prompt_tokens", "completion_tokens", "total_tokens") if get(k) is not None}


def _finish(raw: Any) -> str | None:
    choices = getattr(raw, "choices", None) or (raw.get("choices") if isinstance(raw, dict) else None) or []
    if not choices:
        return None
    first = choices[0]
    reason = first.get("finish_reason") if isinstance(first, dict) else getattr(first, "finish_reason", None)
    return str(reason) if reason else None
