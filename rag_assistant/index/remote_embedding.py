"""Remote embeddings: texts sent to any OpenAI-compatible `/v1/embeddings` server (text-embeddings-inference,
vLLM, Ollama, llama.cpp's server with --embedding) through the `openai` client, when embedding_base_url is set.

Owns the request loop: `batch_size` texts per request, input order kept (the response's `index` decides),
blank texts never sent (servers reject them; they get a zero vector, similar to nothing), vectors
L2-normalised for the cosine store. The client retries (retries.py: backoff honouring Retry-After) on 429,
5xx, timeouts and dropped connections, none on other 4xx (key, model). Every
failure becomes one EmbeddingError without the key or URL credentials. A server that returns one vector per
token (llama-cpp-python's server with a model that has no pooling) gets its token vectors mean-pooled, and
one text per request: its batched token outputs are not aligned with the inputs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from rag_assistant.config import RemoteEmbedding
from rag_assistant.errors import EmbeddingError
from rag_assistant.index.embedder_base import BaseEmbedder
from rag_assistant.retries import Server, failure_kind

if TYPE_CHECKING:
    import numpy as np

SIGNATURE_PREFIX = "remote:"


def server_address(base_url: str) -> str:
    """`host[:port]` of the URL, without credentials (what the model signature records)."""
    try:
        parts = urlsplit(base_url)
        host = (parts.hostname or "").lower()
        return f"{host}:{parts.port}" if parts.port else host
    except ValueError:
        return "invalid-url"


def shown_url(base_url: str) -> str:
    """The URL as messages may show it: no user info, query or fragment (they may hold a key)."""
    try:
        parts = urlsplit(base_url)
    except ValueError:
        return "(invalid URL)"
    return f"{parts.scheme}://{server_address(base_url)}{parts.path}"


def remote_signature(remote: RemoteEmbedding) -> str:
    """The index's model signature for vectors made by this server and model: `remote:host:port/model`."""
    return f"{SIGNATURE_PREFIX}{server_address(remote.base_url)}/{remote.model}"


class RemoteEmbedder(BaseEmbedder):
    """Embeds on an OpenAI-compatible server; same interface as the in-process Embedder."""

    backend = "remote"

    def __init__(self, remote: RemoteEmbedding, batch_size: int = 64) -> None:
        super().__init__()
        self.remote = remote
        self.batch_size = batch_size
        self.name = remote.model
        self.signature = remote_signature(remote)
        self.url = shown_url(remote.base_url)
        self._secrets = _secrets(remote)
        key = remote.api_key or "not-needed"  # the client insists on one; local servers ignore it
        self.server = Server(remote.base_url, key, remote.timeout, remote.max_retries)
        self._dimension: int | None = None
        self._one_by_one = False  # set once the server turns out to return token vectors

    @property
    def where(self) -> str:
        return f"the embedding server at {self.url}"

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self.embed(["dimension"])
        assert self._dimension is not None
        return self._dimension

    def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        rows = [i for i, text in enumerate(texts) if text.strip()]
        vectors: dict[int, np.ndarray] = {}
        for start in range(0, len(rows), self.batch_size):
            part = rows[start : start + self.batch_size]
            vectors.update(zip(part, self._embed_batch([texts[i] for i in part]), strict=True))
        if not vectors and texts and self._dimension is None:
            self.embed(["dimension"])  # only blank texts: learn the length of their zero vectors
        out = np.zeros((len(texts), self._dimension or 0), dtype=np.float32)
        for row, vector in vectors.items():
            out[row] = vector
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.clip(norms, 1e-12, None)

    def _embed_batch(self, texts: list[str]) -> list[np.ndarray]:
        if self._one_by_one and len(texts) > 1:
            return [self._embed_batch([text])[0] for text in texts]
        vectors, per_token = self._parse(self._request(texts), len(texts))
        if per_token and len(texts) > 1:
            self._one_by_one = True
            return [self._embed_batch([text])[0] for text in texts]
        return vectors

    def _request(self, texts: list[str]) -> Any:
        """The server's response for one batch, retried by the client; EmbeddingError when it fails."""

        def call() -> Any:
            return self.server.client.embeddings.create(model=self.remote.model, input=texts, encoding_format="float")

        return self.server.call(call, self._classify)

    def _parse(self, response: Any, expected: int) -> tuple[list[np.ndarray], bool]:
        """The vectors in input order, and whether the server sent token vectors (mean-pooled here)."""
        import numpy as np

        try:
            items = sorted(response.data, key=lambda item: item.index)
            raw = [item.embedding for item in items]
            per_token = bool(raw) and isinstance(raw[0], list) and bool(raw[0]) and isinstance(raw[0][0], list)
            arrays = [np.asarray(v, dtype=np.float32) for v in raw]
            vectors = [a.mean(axis=0) if per_token else a for a in arrays]
        except (AttributeError, TypeError, ValueError) as exc:
            raise self._malformed(f"unreadable vectors ({type(exc).__name__})") from None
        if len(vectors) != expected or [item.index for item in items] != list(range(expected)):
            raise self._malformed(f"{len(vectors)} vectors for {expected} texts")
        dims = {v.shape for v in vectors}
        if len(dims) != 1 or len(next(iter(dims))) != 1 or not all(np.isfinite(v).all() for v in vectors):
            raise self._malformed("vectors of different lengths or with non-numbers")
        dim = vectors[0].shape[0]
        if self._dimension not in (None, dim):
            raise self._malformed(f"{dim}-dimensional vectors after {self._dimension}-dimensional ones")
        self._dimension = dim
        return vectors, per_token

    def _error(self, reason: str, message: str, hint: str) -> EmbeddingError:
        for secret in self._secrets:
            message, hint = message.replace(secret, "***"), hint.replace(secret, "***")
        return EmbeddingError(message, hint, reason=reason)

    def _malformed(self, what: str) -> EmbeddingError:
        return self._error(
            "malformed",
            f"the embedding server at {self.url} sent a malformed response: {what}",
            "check that it serves OpenAI-compatible /v1/embeddings for embedding_api_model",
        )

    def _classify(self, exc: Exception) -> EmbeddingError:
        """The error a failed request is reported as."""
        where = f"the embedding server at {self.url}"
        kind, code = failure_kind(exc)
        if kind == "timeout":
            hint = "raise RAG_ASSISTANT_EMBEDDING_TIMEOUT, lower RAG_ASSISTANT_EMBED_BATCH_SIZE or check the server"
            return self._error("timeout", f"{where} did not answer within {self.remote.timeout:g}s per request", hint)
        if kind == "dropped":
            return self._error("dropped", f"{where} closed the connection", "check the server's logs, then retry")
        if kind == "connect":
            hint = "start the server, or fix embedding_base_url (RAG_ASSISTANT_EMBEDDING_BASE_URL)"
            return self._error("connect", f"cannot connect to {where}", hint)
        if code is not None:
            return self._classify_status(code, where)
        return self._error("other", f"embedding failed: {type(exc).__name__}: {str(exc)[:200]}", "retry")

    def _classify_status(self, code: int, where: str) -> EmbeddingError:
        model = self.remote.model
        if code == 429:
            return self._error("rate_limit", f"{where} is rate limiting (HTTP 429)", "wait and retry")
        if code in (401, 403):
            hint = "set embedding_api_key (RAG_ASSISTANT_EMBEDDING_API_KEY) to a key this server accepts"
            return self._error("auth", f"{where} rejected the API key (HTTP {code})", hint)
        if code == 404:
            hint = "set embedding_api_model (RAG_ASSISTANT_EMBEDDING_API_MODEL) to a model the server serves"
            return self._error("not_found", f"{where} has no model {model!r} or no /embeddings (HTTP 404)", hint)
        passing = code >= 500 or code in (408, 409)  # the kinds the client retried
        hint = "check the server's logs" if passing else "check embedding_api_model and the server's limits"
        return self._error("server", f"{where} failed (HTTP {code}) embedding with {model!r}", hint)


def _secrets(remote: RemoteEmbedding) -> list[str]:
    """The key and whatever credentials the URL carries, longest first."""
    from urllib.parse import parse_qsl

    found = [remote.api_key or ""]
    try:
        parts = urlsplit(remote.base_url)
        found += [parts.username or "", parts.password or "", parts.fragment]
        found += [value for _, value in parse_qsl(parts.query)]
    except ValueError:
        found.append(remote.base_url)
    return sorted({s for s in found if len(s) >= 3}, key=len, reverse=True)
