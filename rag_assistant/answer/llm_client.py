"""The one LLM client: a chat completion, whole (`complete`) or streamed (`stream`), from any OpenAI-compatible
server through the `openai` client. It owns the error classification, token usage and finish reason, and the
truncation check (the client retries: retries.py); the LLM generator, chat's condensing and the LLM judge all
call it.

A new process pays for what the call needs and no more: the `openai` package (~0.6 s to import here), and one
POST to /chat/completions made with the client's documented `post` (its `chat.completions` resource would
import all of `openai.resources`, another ~0.4 s). LlamaIndex's OpenAILike, used here before, cost ~2.3 s of
imports for the same request. Every failure becomes one LLMError with a `reason`, a message the user can act
on, the attempts and the time it took, and no secret (see redact.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rag_assistant.answer.redact import redact_url, scrub, secrets_of
from rag_assistant.config import Settings
from rag_assistant.errors import LLMError
from rag_assistant.retries import Server, failure_kind

DEFAULT_BASE_URL = "https://api.openai.com/v1"
CHARS_PER_TOKEN_MAX = 16  # a completion longer than max_tokens x this ignored max_tokens: it is cut
_UNCLOSED_TAIL = re.compile(r"[\[(][^\[\]()\n]*$")


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
        s = self.settings
        key = s.llm_api_key.get_secret_value() if s.llm_api_key else "not-needed"  # local servers ignore it
        self.server = Server(s.llm_base_url or DEFAULT_BASE_URL, key, s.llm_timeout, s.llm_max_retries)

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
        s = self.settings
        body = {
            "model": s.llm_model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "temperature": s.llm_temperature,
            "max_tokens": s.llm_max_tokens,
            "stream": on_token is not None,
        }
        parts: list[str] = []  # what was streamed: a failure says how much (the client retries none of it)
        return self.server.call(
            lambda: self._request(body, parts, on_token), lambda exc: self._classify(exc, sum(map(len, parts)))
        )

    def _request(self, body: dict[str, Any], parts: list[str], on_token: Callable[[str], None] | None) -> Completion:
        """One POST to /chat/completions; streamed pieces are appended to `parts` as they arrive."""
        from openai import Stream
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        if on_token is None:
            response = self.server.client.post("/chat/completions", body=body, cast_to=ChatCompletion)
            if not response.choices:
                raise ValueError("a completion without choices")
            return Completion(response.choices[0].message.content or "", _usage(response), _finish(response))
        finish, received, limit = None, 0, self.char_limit
        stream = self.server.client.post(
            "/chat/completions", body=body, cast_to=ChatCompletion, stream=True, stream_cls=Stream[ChatCompletionChunk]
        )
        with stream:
            for chunk in stream:
                finish = _finish(chunk) or finish
                delta = chunk.choices[0].delta.content if chunk.choices and chunk.choices[0].delta else None
                if delta:
                    parts.append(delta)
                    on_token(delta)
                    received += len(delta)
                    if received > limit:  # past what `bounded` keeps: stop reading (closing the connection)
                        break
        return Completion("".join(parts), {}, finish)

    @property
    def char_limit(self) -> int:
        """The most characters of a completion kept: a longer one ignored max_tokens. A streamed completion is
        read no further, so it is bounded like a whole one in time as well as in length."""
        return self.settings.llm_max_tokens * CHARS_PER_TOKEN_MAX

    def bounded(self, text: str, finish: str | None) -> tuple[str, list[str]]:
        """Cut a completion that ignored max_tokens, and say when the answer was truncated."""
        warnings = []
        limit = self.char_limit
        if len(text) > limit:
            warnings.append(
                f"the completion ran past {limit:,} characters, far more than llm_max_tokens "
                f"({self.settings.llm_max_tokens}) allows: only the first {limit:,} were kept"
            )
            text, finish = text[:limit], "length"
        if finish == "length":
            text = _UNCLOSED_TAIL.sub("", text).rstrip()  # "7. [00": a half-written citation is no citation
            warnings.append(
                f"the answer was cut at llm_max_tokens ({self.settings.llm_max_tokens}): it may be incomplete"
            )
        return text, warnings

    def _classify(self, exc: Exception, streamed: int = 0) -> LLMError:
        """The error a failed request is reported as."""
        where, url = f"{self.model} at {self.where()}", self.where()
        kind, code = failure_kind(exc)
        if kind == "timeout":
            return self.error(
                "timeout",
                f"the LLM ({where}) did not answer within {self.settings.llm_timeout:g}s per attempt",
                "raise RAG_ASSISTANT_LLM_TIMEOUT or use a smaller model",
            )
        if kind == "dropped":
            after = f" after {streamed} characters of the answer" if streamed else " before answering"
            return self.error(
                "dropped",
                f"the LLM server at {url} closed the connection{after}",
                "the server may have crashed or restarted: check its logs, then retry",
            )
        if kind == "connect":
            return self.error(
                "connect",
                f"cannot connect to the LLM server at {url}",
                "start the server, or fix --llm-base-url / OPENAI_BASE_URL; --mode extractive works offline",
            )
        if code is not None:
            return self._classify_status(code, where, url)
        return self._classify_other(exc, url)

    def _classify_status(self, code: int, where: str, url: str) -> LLMError:
        if code == 429:
            return self.error("rate_limit", f"the LLM ({where}) is rate limiting (HTTP 429)", "wait and retry")
        if code in (401, 403):
            return self.error(
                "auth", f"the LLM server at {url} rejected the API key (HTTP {code})", "check OPENAI_API_KEY"
            )
        if code == 404:
            return self.error(
                "not_found",
                f"model {self.model!r} not found at {url} (HTTP 404)",
                "set --llm-model / RAG_ASSISTANT_LLM_MODEL to a model the server serves",
            )
        return self.error(
            "server",
            f"the LLM server failed (HTTP {code}) for {where}",
            "check the server's logs; --mode extractive works offline",
        )

    def _classify_other(self, exc: Exception, url: str) -> LLMError:
        import openai

        # a body that is not JSON, or JSON not shaped like a completion (the client does not validate it)
        shape = json.JSONDecodeError | openai.APIResponseValidationError | ValueError | LookupError
        if isinstance(exc, shape | AttributeError | TypeError):
            return self.error(
                "malformed",
                f"the LLM server at {url} sent a malformed response",
                "check that it is OpenAI-compatible (/v1/chat/completions)",
            )
        return self.error("other", f"the LLM call failed: {type(exc).__name__}: {str(exc)[:200]}")


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
