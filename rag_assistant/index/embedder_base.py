"""What every embedder is: texts in, L2-normalised vectors out in input order, with a cache of recent texts.
The in-process model (embedding.py) and the embedding server (remote_embedding.py) implement it.

It also gives the vectors of an abstract's sentences (`sentence_vectors`, stored by index/sentences.py). An
embedder with token states (the ONNX encoder: `pools_tokens`) pools them from the pass that embeds the chunks
("late chunking": each sentence's tokens, read from the tokenizer's character offsets, averaged over every
chunk the sentence or a piece of it lies in), so they cost almost nothing beside the chunk vectors. The others
(torch, a remote server) embed each sentence on its own, whole."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, NamedTuple

from rag_assistant.errors import EmbeddingError

if TYPE_CHECKING:
    import numpy as np

Span = tuple[int, int, int]  # (start, end, sentence index): characters of a chunk text that belong to a sentence


class SentenceLayout(NamedTuple):
    """One abstract as it is indexed: its sentences (text.split_sentences), its chunk texts, and per chunk the
    character spans of the sentences (or pieces of a long sentence) it holds."""

    sentences: list[str]
    chunks: list[str]
    spans: list[list[Span]]


class BaseEmbedder:
    """Turns texts into L2-normalised vectors, so cosine similarity is a dot product; `embed` keeps the order
    of its inputs. Subclasses set `name` and `batch_size` and implement `embed`; one with token states also
    sets `pools_tokens` and implements `embed_spans`."""

    name: str
    batch_size: int

    def __init__(self) -> None:
        self._cache: dict[str, np.ndarray] = {}
        # batch answers from threads: the HF fast tokenizer is not reentrant and the cache is shared
        self._lock = threading.RLock()

    def embed(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    @property
    def pools_tokens(self) -> bool:
        """Whether `embed_spans` works: sentence vectors are then pooled from chunk passes."""
        return False

    def embed_spans(self, texts: list[str], spans: list[list[tuple[int, int]]]) -> tuple[np.ndarray, list[np.ndarray]]:
        """The vectors of `texts` (as `embed`) and, per text, the sum of the token states of each character span
        (len(spans[i]) x dim; a zero row for a span with no token)."""
        raise NotImplementedError(f"{type(self).__name__} has no token states")

    def sentence_vectors(self, layouts: list[SentenceLayout]) -> list[np.ndarray]:
        """Per layout, the vectors of its sentences (n x dim, in order): pooled from a pass over its chunks when
        the embedder has token states, else each sentence embedded standalone. Ingest and the read side's
        fallback both call this, so one index never mixes the two kinds."""
        import numpy as np

        if not layouts:
            return []
        if not self.pools_tokens:
            flat = [s for layout in layouts for s in layout.sentences]
            vectors = self.embed(flat) if flat else np.zeros((0, self.dimension), dtype=np.float32)
            bounds = np.cumsum([len(layout.sentences) for layout in layouts])[:-1]
            return list(np.split(vectors, bounds))
        texts = [chunk for layout in layouts for chunk in layout.chunks]
        spans = [[(a, b) for a, b, _ in chunk] for layout in layouts for chunk in layout.spans]
        _, sums = self.embed_spans(texts, spans) if texts else (None, [])
        out, start = [], 0
        for layout in layouts:
            out.append(self.pool_sentences(layout, sums[start : start + len(layout.chunks)]))
            start += len(layout.chunks)
        return out

    def pool_sentences(self, layout: SentenceLayout, sums: list[np.ndarray]) -> np.ndarray:
        """Sentence vectors from the span sums of the layout's chunks (`embed_spans`): each sentence's sums
        added over the chunks that hold it, normalised. A sentence no chunk pass covered (none: only if the
        tokenizer cut a chunk) is embedded standalone."""
        import numpy as np

        dim = next((s.shape[1] for s in sums if s.size), None) or self.dimension
        total = np.zeros((len(layout.sentences), dim), dtype=np.float32)
        for chunk_spans, chunk_sums in zip(layout.spans, sums, strict=True):
            for (_, _, sentence), row in zip(chunk_spans, chunk_sums, strict=True):
                total[sentence] += row
        norms = np.linalg.norm(total, axis=1)
        empty = [i for i in range(len(total)) if norms[i] == 0]
        if empty:
            total[empty] = self.embed([layout.sentences[i] for i in empty])
            norms[empty] = 1.0
        return total / norms[:, None]

    @property
    def where(self) -> str:
        """How messages name this embedder."""
        return f"the embedding model {self.name}"

    def check_dimension(self, dim: int, index_dim: int | None) -> None:
        """EmbeddingError unless `dim` is the length of the index's vectors (None: an empty index). Chroma would
        refuse a vector of another length with a long traceback; this names the cause in one line."""
        if index_dim is not None and dim != index_dim:
            raise EmbeddingError(
                f"{self.where} returns {dim}-dimensional vectors, but the index holds {index_dim}-dimensional ones",
                "the model behind it changed: embed with the model the index was built with, or ingest into a new "
                "--data-dir or collection",
                reason="dimension",
            )

    @property
    def dimension(self) -> int:
        """Length of the vectors (computed once, by embedding a probe text)."""
        return int(self.embed_cached(["dimension"]).shape[1])

    def embed_cached(self, texts: list[str]) -> np.ndarray:
        """Like embed, remembering recent texts: questions, their words and claims recur within an answer."""
        import numpy as np

        if not texts:
            return self.embed([])
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
            if missing:
                if len(self._cache) > 20000:
                    self._cache.clear()
                self._cache.update(zip(missing, self.embed(missing), strict=True))
            return np.stack([self._cache[t] for t in texts])
