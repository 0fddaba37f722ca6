"""BM25 keyword index over chunks on tantivy (Python bindings of a Lucene-class engine), persisted beside Chroma
and tied to the store's revision. Written only by ingest (`build`, `update`); the read face opens it, or builds
one in memory when it is stale, and never writes (on read-only storage, where tantivy cannot take its lock
file, it searches a private copy).

One document per chunk (index/keyword_fields.py): its text (which starts with the paper's title, if any), the
paper's title and authors as fields of their own, its paper id, and the paper's metadata as filterable values.
A title word scores a boosted title match on top of its text match. Authors are kept as whole names (lower
case, accents folded, initials dropped: "Yann N. Dauphin" -> "yann dauphin") matching runs of 2-4 words of the
question, scored by the rarity of the full name (its IDF) whatever the number of co-authors: "Papers by Yi
Wang" finds Yi Wang's papers although "wang" is in thousands of author lists, and a surname that is also a word
("Long", "Song") does not lift its papers in every question using the word. Excluded papers and filters
(`FieldFilter`) apply before ranking. Scores are tantivy's BM25 (Lucene's: k1 1.2, b 0.75; bm25s's k1 1.5
before) over chunks.

Segments, merges and atomic commits are tantivy's: a killed write leaves the last commit whole. The store
revision an index reflects is written beside it after each commit, so a kill in between reads as stale (the
next ingest rebuilds it). Removed chunks count in tantivy's statistics until a merge drops them, so an update
that would leave more than REBUILD_SHARE of the index removed is refused and ingest rebuilds instead."""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Collection, Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from rag_assistant.errors import IndexStoreError
from rag_assistant.files import FILE_MODE, private_dir, write_private
from rag_assistant.index.keyword_fields import (
    FieldFilter,
    KeywordDoc,
    analyzers,
    field_name,
    name_key,
    query_terms,
    tokenize,
)
from rag_assistant.index.store import paper_of
from rag_assistant.text import bm25_idf

__all__ = ["FieldFilter", "KeywordDoc", "KeywordIndex", "KeywordSearch", "query_terms", "tokenize"]

FORMAT = 3  # 2: numpy segments, 1: one bm25s matrix; both read as stale, so the next ingest rebuilds them
STATE = "rag-assistant.json"  # {"format", "revision"} (tantivy's own files include a meta.json)
TITLE_BOOST = 1.0  # on top of the text field's match (chunks start with the title): a title word counts ~twice
AUTHOR_BOOST = 5.0  # times the name's IDF: 1 -> recall@10 0.54, 3 -> 1.0, 5 -> 1.0 and MRR 1.0 (docs/benchmarks.md)
REBUILD_SHARE = 0.1  # removed chunks still in the statistics, as a share of the live ones, that an update allows
WRITER_HEAP = 128_000_000  # bytes buffered before tantivy writes a segment
_ALL = ("all", "chunk")  # a term every document holds: its document frequency counts removed ones too


class KeywordSearch(Protocol):
    """The keyword index as the read face hands it out: searching and term statistics only."""

    revision: str | None

    def query(
        self, text: str, n: int, exclude: Collection[str] = (), where: Sequence[FieldFilter] = ()
    ) -> list[tuple[str, float]]: ...

    def idf(self, tokens: list[str]) -> dict[str, float]: ...


@lru_cache(maxsize=1)
def _schema() -> Any:  # noqa: ANN401 - tantivy.Schema
    import tantivy

    b = tantivy.SchemaBuilder()
    b.add_text_field("chunk_id", stored=True, tokenizer_name="raw", index_option="basic")
    b.add_text_field("paper_id", tokenizer_name="raw", index_option="basic")
    b.add_text_field(_ALL[0], tokenizer_name="raw", index_option="basic")
    b.add_text_field("text", tokenizer_name="en", index_option="freq")
    b.add_text_field("title", tokenizer_name="en", index_option="freq")
    b.add_text_field("authors", tokenizer_name="raw", index_option="basic")  # whole names (name_key)
    b.add_json_field("meta", tokenizer_name="raw", index_option="basic")
    b.add_integer_field("year", indexed=True, fast=True)  # ranges (tantivy's on JSON values can panic)
    return b.build()


def _ready(index: Any) -> tuple[Any, Any]:  # noqa: ANN401 - tantivy.Index
    """(index, searcher) with our analyzers registered; the searcher sees the commit it opened, never a later one."""
    for name, analyzer in analyzers().items():
        index.register_tokenizer(name, analyzer)
    index.config_reader(reload_policy="Manual")
    return index, index.searcher()


def _open(directory: Path) -> tuple[Any, Any]:
    import tantivy

    if os.access(directory, os.W_OK):
        return _ready(tantivy.Index.open(str(directory)))
    # tantivy opens a lock file for writing to open an index: on read-only storage, search a private copy
    # (its files are memory-mapped once open, so the copy is deleted at once).
    copy = Path(tempfile.mkdtemp(prefix="rag-assistant-keyword-"))
    try:
        for path in directory.iterdir():
            if path.is_file():
                shutil.copyfile(path, copy / path.name)
        return _ready(tantivy.Index.open(str(copy)))
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def _document(doc: KeywordDoc) -> Any:  # noqa: ANN401 - tantivy.Document
    import tantivy

    out = tantivy.Document(chunk_id=doc.chunk_id, paper_id=paper_of(doc.chunk_id), text=doc.text)
    out.add_text(_ALL[0], _ALL[1])
    if doc.title:
        out.add_text("title", doc.title)
    for key in filter(None, map(name_key, doc.authors)):
        out.add_text("authors", key)
    if doc.values:
        out.add_json("meta", dict(doc.values))
    year = doc.values.get("year")
    if isinstance(year, int) and not isinstance(year, bool):
        out.add_integer("year", year)
    return out


def _write(index: Any, docs: Iterable[KeywordDoc], removed: Sequence[str]) -> int:  # noqa: ANN401
    """Delete `removed` chunk ids, add `docs` (deleted first, so a replaced chunk's new version stays), commit
    (atomic: a kill leaves the last commit) and wait for the merges it started. One thread: chunks stay in the
    order given, which breaks ties between equal scores."""
    try:
        writer = index.writer(WRITER_HEAP, 1)
    except ValueError as e:  # its lock file is held
        raise IndexStoreError(f"cannot write the keyword index: {e}", "is another ingest running?") from e
    for chunk_id in removed:
        writer.delete_documents_by_term("chunk_id", chunk_id)
    count = 0
    for doc in docs:
        writer.add_document(_document(doc))
        count += 1
    writer.commit()
    writer.wait_merging_threads()
    return count


def _files(directory: Path) -> set[tuple[str, int]]:
    return {(e.name, e.inode()) for e in os.scandir(directory) if e.is_file()}


def _seal(directory: Path, before: set[tuple[str, int]], revision: str) -> None:
    """After a commit: make the files tantivy created private (it creates them by the umask; the folder is 0700
    from the start), then record the revision the index now reflects."""
    for name, _ in _files(directory) - before:
        os.chmod(directory / name, FILE_MODE)
    write_private(directory / (STATE + ".tmp"), json.dumps({"format": FORMAT, "revision": revision}))
    os.replace(directory / (STATE + ".tmp"), directory / STATE)


class KeywordIndex:
    """The index in `directory`, opened on creation; `revision` says which store state it reflects (None:
    missing, damaged or of an older format, so stale)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.revision: str | None = None
        self._index: Any = None
        self._searcher: Any = None
        for _ in range(2):  # a reader racing a writer's clean-up opens the new commit once more
            try:
                revision = self.stored_revision(directory)  # read first: the commit opened is at least as new
                if revision is not None:
                    self._index, self._searcher = _open(directory)
                self.revision = revision
                return
            except (OSError, ValueError):
                self._index = self._searcher = self.revision = None

    @staticmethod
    def stored_revision(directory: Path) -> str | None:
        """The revision of the index in `directory` without opening it (a no-op ingest needs only this)."""
        try:
            state = json.loads((directory / STATE).read_text())
            return str(state["revision"]) if state.get("format") == FORMAT else None
        except (OSError, ValueError, KeyError, AttributeError):
            return None

    def build(self, docs: Iterable[KeywordDoc], revision: str) -> int:
        """Rebuild from `docs` and persist atomically (written aside, then renamed into place)."""
        import tantivy

        tmp = self.directory.with_name(self.directory.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        private_dir(tmp)
        count = _write(_ready(tantivy.Index(_schema(), str(tmp)))[0], docs, ())
        _seal(tmp, set(), revision)
        old = self.directory.with_name(self.directory.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if self.directory.exists():
            self.directory.rename(old)
        tmp.rename(self.directory)
        shutil.rmtree(old, ignore_errors=True)
        self.__init__(self.directory)  # type: ignore[misc]
        return count

    def build_in_memory(self, docs: Iterable[KeywordDoc], revision: str) -> int:
        """Rebuild from `docs` for this object only: nothing on disk changes (what the read face does with a
        stale index). Scores are those `build` would persist."""
        import tantivy

        index, _ = _ready(tantivy.Index(_schema()))
        count = _write(index, docs, ())
        index.reload()
        self._index, self._searcher, self.revision = index, index.searcher(), revision
        return count

    def can_update(self, revision: str) -> bool:
        """True when this index reflects store `revision` and is of the current format."""
        return self.revision == revision and self._index is not None

    def update(self, added: Sequence[KeywordDoc], removed: Iterable[str], revision: str) -> bool:
        """Drop `removed` chunk ids, add or replace `added`; only those are analysed. False, with nothing
        written, when the index would then hold more than REBUILD_SHARE removed chunks: rebuild it instead."""
        if self._searcher is None:
            return False
        gone = sorted(set(removed) | {doc.chunk_id for doc in added})
        live = self._searcher.num_docs
        dead = self._total() - live + self._count_ids(gone)
        if dead > REBUILD_SHARE * max(1, live + len(added) - self._count_ids(gone)):
            return False
        before = _files(self.directory)
        _write(self._index, added, gone)
        _seal(self.directory, before, revision)
        self.__init__(self.directory)  # type: ignore[misc]
        return True

    def _total(self) -> int:
        """Documents in the index, removed ones not merged away yet included (what BM25 counts)."""
        return int(self._searcher.doc_freq(*_ALL))

    def _count_ids(self, chunk_ids: Sequence[str]) -> int:
        import tantivy

        if not chunk_ids:
            return 0
        query = tantivy.Query.term_set_query(self._index.schema, "chunk_id", list(chunk_ids))
        return int(self._searcher.search(query, 1, count=True).count)

    def chunk_ids(self) -> list[str]:
        """Every chunk id the index holds."""
        import tantivy

        s = self._searcher
        if s is None or not s.num_docs:
            return []
        return [s.doc(addr)["chunk_id"][0] for _, addr in s.search(tantivy.Query.all_query(), s.num_docs).hits]

    def idf(self, tokens: list[str]) -> dict[str, float]:
        """BM25 (Lucene) inverse document frequency over chunks; a token the corpus never uses gets the
        highest value, since a question that hinges on it is probably not about this corpus."""
        n = self._total() if self._searcher is not None else 0
        if not n:
            return {t: 1.0 for t in tokens}
        return {t: bm25_idf(n, int(self._searcher.doc_freq("text", t))) for t in tokens}

    def query(
        self, text: str, n: int, exclude: Collection[str] = (), where: Sequence[FieldFilter] = ()
    ) -> list[tuple[str, float]]:
        """(chunk_id, bm25 score) best first, at most n; only chunks sharing at least one term, not of a paper
        in `exclude` and passing every filter in `where` (all applied before ranking, so they never take a
        candidate's place). Equal scores keep index order."""
        import tantivy

        scoring = self._scoring(text) if self._searcher is not None and n > 0 else None
        if scoring is None:
            return []
        Q, occur = tantivy.Query, tantivy.Occur
        clauses = [(occur.Must, scoring)]
        if exclude:
            clauses.append((occur.MustNot, Q.term_set_query(self._index.schema, "paper_id", sorted(exclude))))
        clauses += [(occur.Must, Q.const_score_query(self._filter(f), 0.0)) for f in where]
        s = self._searcher
        hits = s.search(Q.boolean_query(clauses) if len(clauses) > 1 else scoring, n, count=False).hits
        return [(s.doc(addr)["chunk_id"][0], float(score)) for score, addr in hits]

    def _scoring(self, text: str) -> Any:  # noqa: ANN401 - tantivy.Query, or None: nothing to match
        """Each question term in the text and (boosted) title fields; each run of 2-4 words that is an author's
        whole name, at the name's IDF (a constant: the number of co-authors does not dilute it)."""
        import tantivy

        Q, should, schema = tantivy.Query, tantivy.Occur.Should, self._index.schema
        terms = query_terms(text)
        clauses = [(should, Q.term_query(schema, "text", t, "freq")) for t in terms]
        clauses += [(should, Q.boost_query(Q.term_query(schema, "title", t, "freq"), TITLE_BOOST)) for t in terms]
        words, n = analyzers()["names"].analyze(text), self._total()
        runs = {" ".join(words[i : i + k]) for k in (2, 3, 4) for i in range(len(words) - k + 1)}
        for key in sorted(runs):
            df = int(self._searcher.doc_freq("authors", key))
            if df:
                weight = AUTHOR_BOOST * bm25_idf(n, df)
                clauses.append((should, Q.const_score_query(Q.term_query(schema, "authors", key), weight)))
        return Q.boolean_query(clauses) if clauses else None

    def _filter(self, f: FieldFilter) -> Any:  # noqa: ANN401 - tantivy.Query
        import tantivy

        path, schema = f"meta.{field_name(f.field)}", self._index.schema
        if f.values and field_name(f.field) == "authors":
            return tantivy.Query.term_set_query(schema, "authors", [name_key(str(v)) for v in f.values])
        if f.values:
            terms = [tantivy.Query.term_query(schema, path, v) for v in _typed(f.values)]
            return tantivy.Query.boolean_query([(tantivy.Occur.Should, q) for q in terms])
        if field_name(f.field) != "year" or (f.low is None and f.high is None):
            raise ValueError(f"filter on {f.field}: give values, or a range of years")
        low = None if f.low is None else math.ceil(f.low)
        high = None if f.high is None else math.floor(f.high)
        return tantivy.Query.range_query(schema, "year", tantivy.FieldType.Integer, low, high)


def _typed(values: Sequence[Any]) -> list[Any]:
    """Filter values as given, plus the number a string spells ("2024" also matches a year stored as 2024)."""
    out = list(values)
    for v in values:
        if isinstance(v, str):
            try:
                number = float(v)
            except ValueError:
                continue
            if math.isfinite(number):
                out.append(int(number) if number.is_integer() else number)
    return out
