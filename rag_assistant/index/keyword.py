"""BM25 keyword index over chunks (bm25s), persisted beside Chroma and tied to the store's revision. Written
only by ingest (`build`, `update`); the read face loads it, or builds one in memory when it is stale."""

from __future__ import annotations

import json
import logging
import math
import shutil
from collections.abc import Collection, Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

TOKENS_FILE = "tokens.npz"  # every chunk's token ids, concatenated, with offsets
VOCAB_FILE = "vocab.json"  # token strings by id


def tokenize(texts: list[str]) -> list[list[str]]:
    import bm25s

    from rag_assistant.text import english_stemmer

    return bm25s.tokenize(  # type: ignore[return-value]
        texts, stopwords="en", stemmer=english_stemmer(), return_ids=False, show_progress=False
    )


def query_terms(text: str) -> list[str]:
    """BM25 tokens of a question without question words ('what', 'which', 'paper', ...) that bm25s's
    English stop-word list keeps: they match every abstract and only add noise."""
    return [t for t in tokenize([text])[0] if t not in _question_stopwords()]


def _token_ids(docs: list[list[str]], vocab: dict[str, int]) -> list[list[int]]:
    """Token strings to ids, growing `vocab` with unseen tokens."""
    return [[vocab.setdefault(token, len(vocab)) for token in doc] for doc in docs]


def _tokenized(chunks: Iterable[tuple[str, str]]) -> tuple[list[str], list[list[int]], dict[str, int]]:
    """(chunk ids, their token ids, the vocabulary) of (chunk_id, text) pairs."""
    pairs = list(chunks)
    vocab: dict[str, int] = {}
    docs = _token_ids(tokenize([text for _, text in pairs]), vocab)
    return [cid for cid, _ in pairs], docs, vocab


def _bm25(docs: list[list[int]], vocab: dict[str, int]) -> Any:  # noqa: ANN401 - bm25s.BM25, or None when empty
    """The BM25 matrix of these token-id documents."""
    if not docs:
        return None
    import bm25s

    retriever = bm25s.BM25()
    # bm25s adds its empty token to the vocabulary it is given: hand it a copy
    retriever.index(bm25s.tokenization.Tokenized(ids=docs, vocab=dict(vocab)), show_progress=False)
    return retriever


class KeywordSearch(Protocol):
    """The keyword index as the read face hands it out: searching and term statistics only."""

    revision: str | None

    def query(self, text: str, n: int, exclude: Collection[str] = ()) -> list[tuple[str, float]]: ...

    def idf(self, tokens: list[str]) -> dict[str, float]: ...


@lru_cache(maxsize=1)
def _question_stopwords() -> frozenset[str]:
    from rag_assistant.text import STOPWORDS

    return frozenset(tokenize([" ".join(sorted(STOPWORDS))])[0])


class KeywordIndex:
    """Loaded lazily from `directory`; `revision` says which store state it was built from.

    Beside the bm25s index it keeps every chunk's tokens (as ids into a vocabulary), so an ingest that
    adds or removes a few papers tokenizes only those and never reads the store back: `update` rebuilds
    the BM25 matrix from the cached token ids (IDF and document lengths are corpus-wide, so the matrix
    itself is recomputed; that is the cheap part)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._retriever: Any = None
        self._ids: list[str] = []
        self.revision: str | None = None
        self._load()

    def _load(self) -> None:
        meta_file = self.directory / "meta.json"
        if not meta_file.is_file():
            return
        try:
            meta = json.loads(meta_file.read_text())
            self._ids = meta["ids"]
            self.revision = meta["revision"]
            if self._ids:
                import bm25s

                logging.getLogger("bm25s").setLevel(logging.ERROR)
                self._retriever = bm25s.BM25.load(str(self.directory / "bm25"), mmap=True, show_progress=False)
        except Exception:  # a damaged index is rebuilt, never trusted
            self._retriever, self._ids, self.revision = None, [], None

    @staticmethod
    def stored_revision(directory: Path) -> str | None:
        """The revision of the index in `directory` without loading it (a no-op ingest needs only this)."""
        try:
            return str(json.loads((directory / "meta.json").read_text())["revision"])
        except (OSError, ValueError, KeyError):
            return None

    def build(self, chunks: Iterable[tuple[str, str]], revision: str) -> int:
        """Rebuild from (chunk_id, text) pairs and persist atomically (write aside, then rename)."""
        ids, docs, vocab = _tokenized(chunks)
        return self._write(ids, docs, vocab, revision)

    def build_in_memory(self, chunks: Iterable[tuple[str, str]], revision: str) -> int:
        """Rebuild from (chunk_id, text) pairs for this object only: nothing on disk changes (what the read
        face does with a stale index). Scores are those `build` would persist."""
        ids, docs, vocab = _tokenized(chunks)
        self._retriever, self._ids, self.revision = _bm25(docs, vocab), ids, revision
        return len(ids)

    def can_update(self, revision: str) -> bool:
        """True when this index reflects store `revision` and has its token cache (older indexes lack it)."""
        return self.revision == revision and (self.directory / TOKENS_FILE).is_file()

    def update(self, added: Sequence[tuple[str, str]], removed: Iterable[str], revision: str) -> int:
        """Drop `removed` chunk ids, add or replace `added` (chunk_id, text) pairs; only those are tokenized."""
        import numpy as np

        vocab_list = json.loads((self.directory / VOCAB_FILE).read_text())
        vocab = {token: i for i, token in enumerate(vocab_list)}
        with np.load(self.directory / TOKENS_FILE) as cached:
            flat, offsets = cached["flat"].tolist(), cached["offsets"].tolist()
        gone = set(removed) | {cid for cid, _ in added}
        keep = [i for i, cid in enumerate(self._ids) if cid not in gone]
        ids = [self._ids[i] for i in keep] + [cid for cid, _ in added]
        docs = [flat[offsets[i] : offsets[i + 1]] for i in keep]
        docs += _token_ids(tokenize([text for _, text in added]), vocab)
        return self._write(ids, docs, vocab, revision)

    def _write(self, ids: list[str], docs: list[list[int]], vocab: dict[str, int], revision: str) -> int:
        import numpy as np

        tmp = self.directory.with_name(self.directory.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        retriever = _bm25(docs, vocab)
        if retriever is not None:
            retriever.save(str(tmp / "bm25"), show_progress=False)
        lengths = np.fromiter((len(d) for d in docs), dtype=np.int64, count=len(docs))
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        flat = np.fromiter((t for d in docs for t in d), dtype=np.int32, count=int(offsets[-1]))
        np.savez(tmp / TOKENS_FILE, flat=flat, offsets=offsets)
        (tmp / VOCAB_FILE).write_text(json.dumps(sorted(vocab, key=vocab.__getitem__)))
        (tmp / "meta.json").write_text(json.dumps({"revision": revision, "ids": ids}))
        old = self.directory.with_name(self.directory.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if self.directory.exists():
            self.directory.rename(old)
        tmp.rename(self.directory)
        shutil.rmtree(old, ignore_errors=True)
        self._retriever, self._ids, self.revision = retriever, ids, revision
        return len(ids)

    def idf(self, tokens: list[str]) -> dict[str, float]:
        """BM25 (Lucene) inverse document frequency over chunks; a token the corpus never uses gets the
        highest value, since a question that hinges on it is probably not about this corpus."""
        n = len(self._ids)
        if self._retriever is None or not n:
            return {t: 1.0 for t in tokens}
        vocab, indptr = self._retriever.vocab_dict, self._retriever.scores["indptr"]
        out = {}
        for t in tokens:
            df = int(indptr[vocab[t] + 1] - indptr[vocab[t]]) if t in vocab else 0
            out[t] = math.log(1 + (n - df + 0.5) / (df + 0.5))
        return out

    def query(self, text: str, n: int, exclude: Collection[str] = ()) -> list[tuple[str, float]]:
        """(chunk_id, bm25 score) best first; only chunks sharing at least one term and not of a paper in
        `exclude` (masked before ranking, so excluded chunks never take a candidate's place)."""
        if self._retriever is None or not self._ids:
            return []
        known = [[t for t in query_terms(text) if t in self._retriever.vocab_dict]]
        if not known[0]:
            return []
        mask = self._mask(exclude) if exclude else None
        docs, scores = self._retriever.retrieve(known, k=min(n, len(self._ids)), show_progress=False, weight_mask=mask)
        return [(self._ids[int(d)], float(s)) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]

    def _mask(self, papers: Collection[str]) -> Any:  # noqa: ANN401 - numpy array
        import numpy as np

        return np.fromiter(
            (cid.rsplit("#", 1)[0] not in papers for cid in self._ids), dtype=np.float32, count=len(self._ids)
        )
