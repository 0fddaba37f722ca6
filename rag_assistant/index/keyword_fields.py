"""What the keyword index (index/keyword.py) holds of a chunk and how it reads words. A `KeywordDoc` is a chunk with
its paper's title, authors and filterable values (scalar metadata: year, topic, venue, ...); a `FieldFilter` keeps
the chunks whose paper has given values, or a number in a range. `tokenize` is the text fields' analyzer, tantivy's,
reproducing bm25s's tokenization (words of 2+ characters, lower case, bm25s's English stop words, Snowball stems);
the answer layer tokenizes with `text.tokenize`, which gives the same terms (tests/test_keyword.py), so the terms it
weighs are the index's. Author names are read by their own analyzer: no stems or stop words ("He" and "Long" stay
names), accents folded (Jürgen matches Jurgen), initials dropped."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from rag_assistant.corpus.fields import FieldValue as FilterValue
from rag_assistant.corpus.fields import field_key, normalise
from rag_assistant.corpus.models import Paper
from rag_assistant.index.store import StoreReader, paper_of
from rag_assistant.stopwords import STOPWORDS_EN

_WORD = r"(?u)\b\w\w+\b"  # bm25s.tokenize's default token_pattern


@lru_cache(maxsize=1)
def analyzers() -> dict[str, Any]:
    """The text fields' analyzer ("en") and the authors field's ("names": no stems, no stop words, so "He" and
    "Long" stay names; accents folded, so Jürgen matches Jurgen)."""
    import tantivy

    def build(*filters: Any) -> Any:  # noqa: ANN401 - tantivy objects
        builder = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(_WORD))
        for f in filters:
            builder = builder.filter(f)
        return builder.build()

    Filter = tantivy.Filter
    return {
        "en": build(Filter.lowercase(), Filter.custom_stopword(sorted(STOPWORDS_EN)), Filter.stemmer("english")),
        "names": build(Filter.lowercase(), Filter.ascii_fold()),
    }


def tokenize(texts: list[str]) -> list[list[str]]:
    """The text fields' tokens of each text: what bm25s.tokenize(texts, stopwords="en", stemmer=<PyStemmer's
    English>) returns (tests/test_keyword.py checks it on the corpus)."""
    analyze = analyzers()["en"].analyze
    return [analyze(text) for text in texts]


@lru_cache(maxsize=65_536)  # authors repeat across a paper's chunks and across papers
def name_key(name: str) -> str:
    """An author's name as the index keeps it: its words of 2+ characters, lower case, accents folded."""
    return " ".join(analyzers()["names"].analyze(name))


def query_terms(text: str) -> list[str]:
    """BM25 tokens of a question without question words ('what', 'which', 'paper', ...) that bm25s's
    English stop-word list keeps: they match every abstract and only add noise."""
    from rag_assistant.text import question_stopwords

    return [t for t in tokenize([text])[0] if t not in question_stopwords()]


@dataclass(frozen=True)
class KeywordDoc:
    """One chunk as the keyword index holds it: its text and its paper's title, authors and filterable values."""

    chunk_id: str
    text: str
    title: str = ""
    authors: tuple[str, ...] = ()
    values: Mapping[str, FilterValue | list[FilterValue]] = field(default_factory=dict)


@dataclass(frozen=True)
class FieldFilter:
    """Chunks whose paper's `field` holds one of `values` (exact, as stored; `authors`: whole names in any case,
    with or without accents and initials) or, for `year` without values, a year in [low, high] (either side
    open). Several filters must all hold."""

    field: str
    values: tuple[FilterValue, ...] = ()
    low: float | None = None
    high: float | None = None
    contains: tuple[str, ...] = ()  # before index/filters.py resolves them: case-insensitive parts of a value


def field_name(key: str) -> str:
    """A metadata key as a filterable field name (corpus/fields.py's, which the store uses too)."""
    return field_key(key)


def paper_fields(paper: Paper | None) -> tuple[str, tuple[str, ...], dict[str, FilterValue | list[FilterValue]]]:
    """(title, authors, other fields) of a paper, normalised (corpus/fields.py), as its chunks' keyword
    documents carry them."""
    if paper is None:
        return "", (), {}
    fields = normalise(paper.metadata)
    authors = tuple(str(a) for a in fields.pop("authors", None) or ())  # type: ignore[union-attr]
    return paper.title or "", authors, fields


def keyword_doc(chunk_id: str, text: str, paper: Paper | None) -> KeywordDoc:
    return KeywordDoc(chunk_id, text, *paper_fields(paper))


def store_docs(store: StoreReader) -> Iterator[KeywordDoc]:
    """Every chunk of the store as a keyword document (its paper's fields read from the paper's first chunk)."""
    papers = {p.paper_id: paper_fields(p) for p in store.iter_papers()}
    for chunk_id, text in store.iter_chunks():
        yield KeywordDoc(chunk_id, text, *papers.get(paper_of(chunk_id), ("", (), {})))
