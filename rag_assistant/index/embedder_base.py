"""What every embedder is: texts in, L2-normalised vectors out in input order, with a cache of recent texts.
The in-process model (embedding.py) and the embedding server (remote_embedding.py) implement it."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


class BaseEmbedder:
    """Turns texts into L2-normalised vectors, so cosine similarity is a dot product; `embed` keeps the order
    of its inputs. Subclasses set `name` and `batch_size` and implement `embed`."""

    name: str
    batch_size: int

    def __init__(self) -> None:
        self._cache: dict[str, np.ndarray] = {}
        # batch answers from threads: the HF fast tokenizer is not reentrant and the cache is shared
        self._lock = threading.RLock()

    def embed(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    @property
    def dimension(self) -> int:
        """Length of the vectors (computed once, by embedding a probe text)."""
        return int(self.embed_cached(["dimension"]).shape[1])

    def embed_cached(self, texts: list[str]) -> np.ndarray:
        """Like embed, remembering recent texts: answering and verifying embed the same sentences."""
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
