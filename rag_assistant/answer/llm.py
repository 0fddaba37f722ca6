"""LLM answerer: any OpenAI-compatible server through LlamaIndex's OpenAILike (the `openai` client).

Retries are ours, not LlamaIndex's (its tenacity decorator and the SDK would both retry, multiplying
requests and waits): bounded exponential backoff that honours Retry-After, on 429, 5xx, timeouts and
dropped connections. Every failure becomes one LLMError with a message the user can act on."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from rag_assistant.answer.models import Draft
from rag_assistant.answer.prompts import load_prompt
from rag_assistant.config import Settings
from rag_assistant.errors import LLMError
from rag_assistant.retrieve import Source

NOT_FOUND = "The corpus does not cover this question."
_BACKOFF_CAP = 8.0


def format_sources(sources: Sequence[Source]) -> str:
    blocks = []
    for s in sources:
        title = f"{s.paper.title}. " if s.paper.title else ""
        blocks.append(f"[{s.paper_id}] {title}{s.paper.text}")
    return "\n\n".join(blocks)


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    for key, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            if key in headers:
                return min(_BACKOFF_CAP, float(headers[key]) * scale)
        except ValueError:
            pass
    return None


class LLMGenerator:
    mode = "llm"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.model = settings.llm_model
        self.system = load_prompt("answer_system")
        self.user = load_prompt("answer_user")
        self.prompt_version = f"{self.system.version}+{self.user.version}"
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
        return self.settings.llm_base_url or "https://api.openai.com/v1"

    def complete(self, system: str, user: str, on_token: Callable[[str], None] | None = None) -> tuple[str, dict]:
        """One chat completion with bounded retries; streams through on_token when given."""
        from llama_index.core.llms import ChatMessage

        messages = [ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)]
        attempts = self.settings.llm_max_retries + 1
        for attempt in range(attempts):
            parts: list[str] = []
            try:
                if on_token is None:
                    response = self.llm.chat(messages)
                    return (response.message.content or ""), _usage(response.raw)
                for chunk in self.llm.stream_chat(messages):
                    if chunk.delta:
                        parts.append(chunk.delta)
                        on_token(chunk.delta)
                return "".join(parts), {}
            except Exception as exc:
                retryable, error = self._classify(exc)
                if not retryable or attempt == attempts - 1 or (on_token is not None and parts):
                    raise error from None
                time.sleep(_retry_after(exc) or min(_BACKOFF_CAP, 0.5 * 2**attempt))
        raise AssertionError("unreachable")

    def answer(self, question: str, sources: Sequence[Source], on_token: Callable[[str], None] | None = None) -> Draft:
        system = self.system.format(not_found=NOT_FOUND)
        user = self.user.format(question=question, sources=format_sources(sources))
        text, usage = self.complete(system, user, on_token)
        text = text.strip()
        if not text:
            raise LLMError(
                f"the LLM ({self.model} at {self.where()}) returned an empty completion",
                "check the model name and that the server can run it; retry",
            )
        abstained = NOT_FOUND.lower().rstrip(".") in text.lower()
        return Draft(text, self.model, self.prompt_version, usage, abstained)

    def _classify(self, exc: Exception) -> tuple[bool, LLMError]:
        import openai

        where = f"{self.model} at {self.where()}"
        if isinstance(exc, openai.APITimeoutError):
            return True, LLMError(
                f"the LLM ({where}) did not answer within {self.settings.llm_timeout:g}s",
                "raise RAG_ASSISTANT_LLM_TIMEOUT or use a smaller model",
            )
        if isinstance(exc, openai.APIConnectionError):
            return True, LLMError(
                f"cannot connect to the LLM server at {self.where()}",
                "start the server, or fix --llm-base-url / OPENAI_BASE_URL; --mode extractive works offline",
            )
        if isinstance(exc, openai.RateLimitError):
            return True, LLMError(f"the LLM ({where}) is rate limiting (HTTP 429) after retries", "wait and retry")
        if isinstance(exc, openai.AuthenticationError):
            return False, LLMError(
                f"the LLM server rejected the API key (HTTP 401) at {self.where()}", "check OPENAI_API_KEY"
            )
        if isinstance(exc, openai.NotFoundError):
            return False, LLMError(
                f"model {self.model!r} not found at {self.where()} (HTTP 404)",
                "set --llm-model / RAG_ASSISTANT_LLM_MODEL to a model the server serves",
            )
        if isinstance(exc, openai.APIStatusError):
            retryable = exc.status_code >= 500 or exc.status_code in (408, 409)
            return retryable, LLMError(
                f"the LLM server failed (HTTP {exc.status_code}) for {where}" + (" after retries" if retryable else ""),
                "check the server's logs; --mode extractive works offline",
            )
        if isinstance(exc, json.JSONDecodeError | openai.APIResponseValidationError | ValueError | KeyError):
            return False, LLMError(
                f"the LLM server at {self.where()} sent a malformed response",
                "check that it is OpenAI-compatible (/v1/chat/completions)",
            )
        return False, LLMError(f"the LLM call failed: {type(exc).__name__}: {str(exc)[:200]}")


def _usage(raw: Any) -> dict[str, int]:
    usage = getattr(raw, "usage", None) or (raw.get("usage") if isinstance(raw, dict) else None)
    if usage is None:
        return {}
    get = usage.get if isinstance(usage, dict) else lambda k: getattr(usage, k, None)
    return {k: int(get(k)) for k in ("prompt_tokens", "completion_tokens", "total_tokens") if get(k) is not None}
