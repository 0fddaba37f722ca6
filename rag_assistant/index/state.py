"""Index state: what made the index (embedding model signature, chunking) and where its keyword index lives and
which store revision that keyword index reflects. Read by both faces: ingest checks and records it, the read
face checks it before answering; nothing here writes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rag_assistant.config import Settings
from rag_assistant.errors import ConfigError
from rag_assistant.index.remote_embedding import remote_signature
from rag_assistant.index.store import StoreReader
from rag_assistant.text import plural

INT8_MARK = " (int8)"  # model signature suffix of indexes embedded by the onnx-int8 backend
LEGACY_CHUNKING = (200, 1)  # indexes made before the chunking was recorded were all cut this way


def keyword_dir(settings: Settings) -> Path:
    return settings.data_dir / "keyword" / settings.collection


def keyword_revision(settings: Settings) -> str | None:
    """The store revision the keyword index on disk was built from; None when it is missing or damaged."""
    from rag_assistant.index.keyword import KeywordIndex

    return KeywordIndex.stored_revision(keyword_dir(settings))  # meta only: loading the index is not needed


def store_revision(info: dict[str, Any]) -> str:
    """The store's revision (a new one is set whenever an ingest starts writing)."""
    return str(info.get("revision", ""))


def model_signature(settings: Settings) -> str:
    """What made the index's vectors. torch and onnx give the same vectors; int8 weights do not."""
    if settings.remote_embedding is not None:  # `remote:host:port/model` (index/remote_embedding.py)
        return remote_signature(settings.remote_embedding)
    base = settings.embedding_model or "bundled:all-MiniLM-L6-v2"
    return base + INT8_MARK if settings.embedding_backend == "onnx-int8" else base


def check_model(store: StoreReader, settings: Settings) -> dict[str, Any]:
    """The store's info, after checking its vectors were made the way the settings embed questions."""
    info = store.get_info()
    built_with = info.get("embedding_model")
    wanted = model_signature(settings)
    if built_with and built_with != wanted and store.count():
        backend = "onnx-int8" if str(built_with).endswith(INT8_MARK) else "onnx"
        same_model = str(built_with).removesuffix(INT8_MARK) == wanted.removesuffix(INT8_MARK)
        raise ConfigError(
            f"the index was built with embedding model {built_with}, not {wanted}",
            f"set embedding_backend = {backend} (RAG_ASSISTANT_EMBEDDING_BACKEND) for this index"
            if same_model
            else "use the same model, or a new --data-dir / collection for the other one",
        )
    return info


def recorded_chunking(info: dict[str, Any], count_chunks: Callable[[], int]) -> tuple[int, int] | None:
    """(max tokens, overlap sentences) recorded in the store's info; None for an empty, new index.
    `count_chunks` is only called for an index older than the record (count() is slow on big stores)."""
    recorded = str(info.get("chunking", ""))
    if recorded:
        tokens, overlap = recorded.split("/")
        return int(tokens), int(overlap)
    return LEGACY_CHUNKING if count_chunks() else None


def index_chunking(info: dict[str, Any], store: StoreReader, settings: Settings) -> tuple[tuple[int, int], str | None]:
    """(max tokens, overlap sentences) this index cuts papers with, and a warning when the settings ask for
    another. Chunking is fixed per index, like the embedding model: mixing two cuts in one index would make
    scores incomparable and re-chunking silently would re-embed everything."""
    wanted = (settings.chunk_max_tokens, settings.chunk_overlap_sentences)
    built = recorded_chunking(info, store.count)
    if built is None:
        return wanted, None
    asked = {"chunk_max_tokens", "chunk_overlap_sentences"} & settings.model_fields_set
    if built == wanted or not asked:
        return built, None
    return built, (
        f"this index cuts abstracts into chunks of <= {built[0]} tokens with {plural(built[1], 'sentence')} of "
        "overlap; the chunk settings apply to new indexes (ingest into another --collection or --data-dir to "
        "re-chunk)"
    )
