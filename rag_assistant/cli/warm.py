"""Start-up of the one-off commands (ask, search) overlapped: the store and the embedding model are loaded on
background threads while the main thread imports the answer chain.

A new process spends most of a one-off question loading things: chromadb and the store's first query, the
ONNX session, the keyword index. The ONNX session, Chroma's Rust core and file reads release the GIL, so
loading them side by side shortens the wait. Nothing here changes what a command does: a load that fails on its
thread is forgotten, and the command loads it again where it did before, raising the same error at the same
point."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rag_assistant.answer.chain import AnswerChain
    from rag_assistant.config import Settings
    from rag_assistant.index.reader import IndexReader
    from rag_assistant.retrieve import Retriever


class _Job:
    """One load on a daemon thread (a command that ends early does not wait for it); `result()` is None when
    it failed."""

    def __init__(self, load: Callable[[], Any]) -> None:
        self._value: Any = None
        self._thread = threading.Thread(target=self._run, args=(load,), daemon=True, name="warm-up")
        self._thread.start()

    def _run(self, load: Callable[[], Any]) -> None:
        try:
            self._value = load()
        except BaseException:  # noqa: BLE001 - the command loads it again and reports the error itself
            self._value = None

    def result(self) -> Any:
        self._thread.join()
        return self._value


class Warmup:
    """Loads started for `settings`; `retriever()` hands them over (or None where a load failed)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        _shared_imports()
        self._reader = _Job(lambda: _open_reader(settings))
        self._embedder = _Job(lambda: _load_embedder(settings))

    def retriever(self) -> Retriever:
        """A Retriever over what loaded; what did not load, it loads on first use as usual."""
        from rag_assistant.retrieve import Retriever

        reader: IndexReader | None = self._reader.result()
        return Retriever(self.settings, reader=reader, embedder=self._embedder.result())

    def chain(self) -> AnswerChain:
        """The answer chain over what loaded."""
        from rag_assistant.answer.chain import AnswerChain, make_generator

        retriever = self.retriever()
        return AnswerChain(self.settings, retriever, make_generator(self.settings, retriever))


def _shared_imports() -> None:
    """Imported here, before the threads start, what more than one of them imports: two threads importing the
    same package at once can see it half-initialised (numpy's lazy attributes and import cycles)."""
    import numpy  # noqa: F401
    import numpy.typing  # noqa: F401 - one of numpy's lazy submodules that pydantic-based libraries import

    import rag_assistant.index.embedding  # noqa: F401
    import rag_assistant.index.onnx_embedding  # noqa: F401
    import rag_assistant.index.reader  # noqa: F401


def _open_reader(settings: Settings) -> IndexReader:
    """The store opened and its first query made (Chroma loads the collection then), then the keyword index."""
    from rag_assistant.index.reader import IndexReader

    reader = IndexReader(settings)
    try:
        if not reader.empty():
            reader.keyword  # noqa: B018 - loads it
    except Exception:  # noqa: BLE001 - a search loads it again and reports the error
        pass
    return reader


def _load_embedder(settings: Settings) -> Any:  # noqa: ANN401 - a BaseEmbedder
    from rag_assistant.index.embedding import Embedder, get_embedder

    s = settings
    embedder = get_embedder(s.embedding_model, s.embedding_backend, s.embed_batch_size, s.remote_embedding)
    if isinstance(embedder, Embedder):
        embedder.model  # noqa: B018 - loads the model (the ONNX session)
    return embedder
