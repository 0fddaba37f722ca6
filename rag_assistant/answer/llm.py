"""LLM answerer: any OpenAI-compatible server through LlamaIndex's OpenAILike (the `openai` client).

Retries are ours, not LlamaIndex's (its tenacity decorator and the SDK would both retry, multiplying
requests and waits): bounded exponential backoff that honours Retry-After (up to RETRY_AFTER_MAX seconds;
a server asking for longer is reported, not waited for), on 429, 5xx, timeouts and dropped connections.
Every failure becomes one LLMError with a `reason`, a message the user can act on, the attempts and the
time it took, and no secret (see redact.py)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from rag_assistant.answer.citations import NOT_FOUND
from rag_assistant.answer.models import Draft
from rag_assistant.answer.prompts import load_prompt
from rag_assistant.answer.redact import redact_url, scrub, secrets_of
from rag_assistant.answer.refs import CitationStream, Resolver
from rag_assistant.config import Settings
from rag_assistant.errors import LLMError
from rag_assistant.retrieve import Source

_BACKOFF_CAP = 8.0
RETRY_AFTER_MAX = 60.0
CHARS_PER_TOKEN_MAX = 16  # a completion longer than max_tokens x this ignored max_tokens: it is cut
_UNCLOSED_TAIL = re.compile(r"[\[(][^\[\]()\n]*$")


def source_labels(sources: Sequence[Source], numbered: bool) -> dict[str, str]:
    """Prompt label -> paper id: "1".."k" (short, easy to copy; PaperQA2 does the same), or the ids themselves."""
    return {(str(i) if numbered else s.paper_id): s.paper_id for i, s in enumerate(sources, start=1)}


def format_sources(sources: Sequence[Source], labels: dict[str, str] | None = None) -> str:
    label_of = {pid: label for label, pid in (labels or {}).items()}
    blocks = []
    for s in sources:
        title = f"{s.paper.title}. " if s.paper.title else ""
        blocks.append(f"[{label_of.get(s.paper_id, s.paper_id)}] {title}{s.paper.text}")
    return "\n\n".join(blocks)


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


class LLMGenerator:
    mode = "llm"
    numbered_labels = True  # see docs/llm.md: SmolLM2 copies [1] more reliably than [004:17]

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.model = settings.llm_model
        self.system = load_prompt("answer_system")
        self.user = load_prompt("answer_user")
        self.prompt_version = f"{self.system.version}+{self.user.version}"
        self.secrets = secrets_of(settings)
        self._llm: Any = None

    @property
    def llm(self) -> Any:
        if self._llm is None:
            from llama_index.llms.openai_like import OpenAILike

            s = self.settings
            self._llm = OpenAILike(
                model=s.llm_model,
                api_base=s.llm_base_url or "https://api.openai.com/v1",
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
        return redact_url(self.settings.llm_base_url or "https://api.openai.com/v1")

    def error(self, reason: str, message: str, hint: str | None = None) -> LLMError:
        return LLMError(scrub(message, self.secrets), hint and scrub(hint, self.secrets), reason=reason)

    def complete(self, system: str, user: str, on_token: Callable[[str], None] | None = None) -> tuple[str, dict]:
        """One chat completion with bounded retries; streams through on_token when given."""
        text, usage, _ = self.complete_full(system, user, on_token)
        return text, usage

    def complete_full(
        self, system: str, user: str, on_token: Callable[[str], None] | None = None
    ) -> tuple[str, dict[str, int], str | None]:
        """Text, token usage and finish reason ("length" = cut at max_tokens)."""
        from llama_index.core.llms import ChatMessage

        messages = [ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)]
        attempts = self.settings.llm_max_retries + 1
        started = time.perf_counter()
        for attempt in range(attempts):
            parts: list[str] = []
            try:
                if on_token is None:
                    response = self.llm.chat(messages)
                    return (response.message.content or ""), _usage(response.raw), _finish(response.raw)
                finish = None
                for chunk in self.llm.stream_chat(messages):
                    finish = _finish(chunk.raw) or finish
                    if chunk.delta:
                        parts.append(chunk.delta)
                        on_token(chunk.delta)
                return "".join(parts), {}, finish
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

    def answer(self, question: str, sources: Sequence[Source], on_token: Callable[[str], None] | None = None) -> Draft:
        labels = source_labels(sources, self.numbered_labels)
        example = "[1]" if self.numbered_labels else f"[{sources[0].paper_id if sources else '004:17'}]"
        system = self.system.format(not_found=NOT_FOUND, example=example)
        user = self.user.format(question=question, sources=format_sources(sources, labels))
        if on_token is not None:
            on_token = CitationStream(on_token, Resolver([s.paper_id for s in sources], labels))
        text, usage, finish = self.complete_full(system, user, on_token)
        text = text.strip()
        if not text:
            raise self.error(
                "empty",
                f"the LLM ({self.model} at {self.where()}) returned an empty completion",
                "check the model name and that the server can run it; retry",
            )
        text, warnings = self._bounded(text, finish)
        return Draft(text, self.model, self.prompt_version, usage, labels=labels, warnings=warnings)

    def _bounded(self, text: str, finish: str | None) -> tuple[str, list[str]]:
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
