"""Specific exceptions raised by the library; the CLI renders each as one line plus a hint."""

from __future__ import annotations


class RagAssistantError(Exception):
    """Base class: `message` says what happened, `hint` says how to fix it."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details or []

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} ({self.hint})"


class ConfigError(RagAssistantError):
    """Settings or a config file are invalid."""

    exit_code = 2


class CorpusError(RagAssistantError):
    """A corpus file could not be read or parsed; nothing was written to the index."""

    exit_code = 2


class FilterError(RagAssistantError):
    """A filter on paper fields is malformed, names a field the index lacks, or matches no paper's value."""

    exit_code = 2


class IndexStoreError(RagAssistantError):
    """The index (Chroma or the keyword index) is missing, unreachable or inconsistent."""


class EmptyIndexError(IndexStoreError):
    """Nothing has been ingested yet."""


class StoreUnavailableError(IndexStoreError):
    """The vector store (e.g. a Chroma server) could not be reached."""


class LogNotWrittenError(RagAssistantError):
    """An answer could not be written to the provenance log (read-only storage, a full disk): the answer is
    shown with this as a warning, not failed."""


class PromptError(RagAssistantError):
    """A prompt file is missing or its variables do not match what the code fills in."""


class ServiceError(RagAssistantError):
    """A server we call (the LLM, the embedding server) failed. `reason` names the kind of failure (auth, connect,
    timeout, dropped, rate_limit, server, not_found, malformed, dimension, empty, other)."""

    exit_code = 3

    def __init__(
        self, message: str, hint: str | None = None, details: list[str] | None = None, reason: str = "other"
    ) -> None:
        super().__init__(message, hint, details)
        self.reason = reason


class LLMError(ServiceError):
    """The LLM call failed (timeout, HTTP error, refused connection, malformed or empty completion): batch stops
    early on failures that would repeat for every question."""


class EmbeddingError(ServiceError):
    """The embedding server (embedding_base_url) failed: unreachable, timed out, rejected the key or model, or
    sent malformed vectors; or an embedder's vectors are not as long as the index's (reason "dimension"). An
    ingest it stops leaves nothing visible half-written."""


class BatchStoppedError(LLMError):
    """Batch stopped: several questions in a row failed alike (wrong key, server down or hanging)."""


class QuestionError(RagAssistantError):
    """The question is empty or has no words; a usage error, so nothing is retrieved or logged. Not a
    ConfigError: in a batch it fails its own row, not the whole run."""

    exit_code = 2


class OutputError(RagAssistantError):
    """An output path cannot be used (it is a file, or it holds an earlier run that --force would replace)."""

    exit_code = 2


# Failures that would repeat for every question (wrong key, server down or hanging, unknown model, an embedding
# model whose vectors no longer fit the index):
# batch and eval stop after STOP_AFTER of one kind in a row instead of paying retries and timeouts per row.
SYSTEMIC_REASONS = frozenset({"auth", "connect", "timeout", "not_found", "dimension"})
STOP_AFTER = 3


def failure_streak(streak: list[str], exc: BaseException | None) -> list[str]:
    """The systemic failures in a row once `exc` is counted (None: a success ends the streak). Any ServiceError
    counts, the LLM's or the embedding server's: each row would pay the same retries and timeouts."""
    reason = getattr(exc, "reason", None)
    if reason not in SYSTEMIC_REASONS:
        return []
    return [*streak, reason] if streak[-1:] == [reason] else [reason]
