"""Questions that name metadata, in the chain: the index's fields read once per process (for answer/named.py),
the named filters applied to one question's searches only, and the answers made from the metadata alone: an
author's papers (how many, each with its byline and one cited sentence: every paper, not the top k), a name
that is nobody's here (said, with the closest names), a track or year no paper has (said). Also a question's
own filters written as fields (a batch row's `filter` object, chat's /filter), parsed and applied."""

from __future__ import annotations

import re
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from rag_assistant.answer.models import Answer, AnswerWarning, Draft, WarningKind
from rag_assistant.answer.named import Named, Names, detect, may_name_metadata
from rag_assistant.corpus.fields import byline
from rag_assistant.corpus.models import Paper
from rag_assistant.errors import FilterError
from rag_assistant.index.filters import Catalogue, catalogue, matches, parse_filters, resolve
from rag_assistant.index.keyword_fields import FieldFilter
from rag_assistant.retrieve import Retriever, Source
from rag_assistant.text import clean_markup, split_sentences

if TYPE_CHECKING:
    from rag_assistant.answer.shapes import AnswerChain

_CITED = re.compile(r"\[([^\[\]]+)\]")
LISTED_FROM_METADATA = AnswerWarning(
    WarningKind.METADATA, "author question: the papers are listed from the index's metadata, the LLM was not asked"
)


@dataclass
class _Fields:
    chunks: int  # the index's size when read: re-read after an ingest
    papers: list[Paper]
    fields: Catalogue
    names: Names | None
    vocabulary: set[str]


_READ: weakref.WeakKeyDictionary[Retriever, _Fields] = weakref.WeakKeyDictionary()


def _fields(retriever: Retriever) -> _Fields:
    """The index's papers, fields, author names and abstract words, read once per index state and process."""
    count = retriever.count()
    held = _READ.get(retriever)
    if held is None or held.chunks != count:
        papers = retriever.reader.stored_papers()
        fields = catalogue(papers)
        words = [w for p in papers for w in re.findall(r"\b[^\W\d_][\w-]+\b", p.text)]
        vocabulary = {w for w in words if w.islower()}
        names = Names(fields["authors"], {w.lower() for w in words}) if "authors" in fields else None
        held = _READ[retriever] = _Fields(count, papers, fields, names, vocabulary)
    return held


def named_in(retriever: Retriever, question: str) -> Named:
    """The metadata the question names, less what the explicit filters already decide (flags win)."""
    if not may_name_metadata(question) or retriever.reader.empty():
        return Named()
    held = _fields(retriever)
    if not held.fields:
        return Named()  # papers without metadata (the bundled corpus): nothing to name
    named = detect(question, held.fields, held.names, held.vocabulary)
    given = {f.field for f in retriever.where}
    if not given:
        return named
    keep = tuple(f for f in named.filters if f.field not in given)
    authors_given = "authors" in given
    return replace(
        named,
        filters=keep,
        authors=() if authors_given else named.authors,
        listing=named.listing and not authors_given,
        unknown="" if authors_given else named.unknown,
        several=named.several and not authors_given,
        closest=() if authors_given else named.closest,
    )


def filters_from(spec: Any) -> list[FieldFilter]:  # noqa: ANN401 - a JSON value, checked here
    """Filters written as fields (a batch row's `filter` object, chat's `/filter author="A B" year=2024`):
    `author`/`authors` (a name or a list: any of them), `year` (2024, "2023-2025"), `topic`/`track` (parts of
    the track, any case), any other field = its exact value. FilterError when malformed."""
    if not isinstance(spec, dict) or not spec:
        raise FilterError(
            f"malformed filter {spec!r}", 'give an object of fields, e.g. {"author": "A. Name", "year": 2024}'
        )
    authors: list[str] = []
    topics: list[str] = []
    where: list[str] = []
    years = None
    for key, value in spec.items():
        values = value if isinstance(value, list) else [value]
        if not values or any(not isinstance(v, str | int | float) or isinstance(v, bool) for v in values):
            raise FilterError(f"malformed filter value {key}={value!r}", "give text or a number, or a list of them")
        field = str(key).strip().lower()
        if field in ("author", "authors"):
            authors += [str(v) for v in values]
        elif field in ("topic", "track"):
            topics += [str(v) for v in values]
        elif field in ("year", "years") and len(values) == 1:
            years = str(values[0])
        else:
            where += [f"{key}={v}" for v in values]
    return parse_filters(authors, years, topics, where)


@contextmanager
def given(retriever: Retriever, filters: Sequence[FieldFilter] | None) -> Iterator[None]:
    """One question's own filters (a batch row's), checked against the index's fields (FilterError: that
    question fails), in place of the retriever's standing ones for the fields they name."""
    if not filters:
        yield
        return
    resolved = resolve(filters, _fields(retriever).fields)
    before = retriever.where
    mine = {f.field for f in resolved}
    retriever.where = [*(f for f in before if f.field not in mine), *resolved]
    try:
        yield
    finally:
        retriever.where = before


@contextmanager
def narrowed(retriever: Retriever, named: Named) -> Iterator[None]:
    """The retriever's searches within the named filters as well, for one question (its own filters after)."""
    before = retriever.where
    retriever.where = [*before, *named.filters]
    try:
        yield
    finally:
        retriever.where = before


def metadata_answer(chain: AnswerChain, answer: Answer, named: Named, question: str) -> bool:
    """Answer from the metadata when the question asks for it (True: answered): an author's papers listed, or
    why there is nothing to list."""
    if named.several:
        shown = ", ".join(named.closest[:6]) + (f" and {len(named.closest) - 6} more" if len(named.closest) > 6 else "")
        _no_answer(
            answer, f"Several authors of this index are named {named.unknown}: {shown}. Ask with the whole name."
        )
        return True
    if named.unknown:
        closest = f"; the closest names: {', '.join(named.closest)}" if named.closest else ""
        _no_answer(answer, f"No author named {named.unknown} in this index{closest}.")
        return True
    if named.empty:
        _no_answer(answer, f"No answer: {named.empty}.")
        return True
    if named.listing:
        list_papers(chain, answer, named, question)
        return True
    return False


def _no_answer(answer: Answer, text: str) -> None:
    answer.abstained = True
    answer.answer = text


def papers_named(retriever: Retriever, named: Named) -> list[Paper]:
    """The papers passing the retriever's filters and the named ones."""
    filters = [*retriever.where, *(f for f in named.filters if f not in retriever.where)]
    return [p for p in _fields(retriever).papers if matches(p, filters)]


def list_papers(chain: AnswerChain, answer: Answer, named: Named, question: str) -> None:
    """Every paper of the named author(s) (within the other named filters), best match for the rest of the
    question first, each with its byline and the sentence that best says what it does, cited and verified."""
    from rag_assistant.answer.analysis import analyse_papers, analyse_question
    from rag_assistant.answer.extractive import ExtractiveGenerator, cite, key_sentence

    r = chain.retriever
    papers = papers_named(r, named)
    ranked_by = re.search(r"\b(on|about|in|for)\s+\w", _topic_part(question, named), re.I) is not None
    if not papers:  # the author, but none of their papers passes the other filters (a track, a year)
        _no_answer(answer, _header(named, 0, False))
        return
    ranked = r.search(_topic_part(question, named), k=len(papers))
    seen = {s.paper_id for s in ranked}
    sources = ranked + [Source(p, 0.0) for p in papers if p.paper_id not in seen]
    sources = [replace(s, rank=i) for i, s in enumerate(sources, start=1)]
    answer.sources = sources
    view = analyse_question(_topic_part(question, named), r.embedder.embed_cached)
    views = analyse_papers(sources, r.sentence_vectors, r.embedder.embed_cached)
    lines = ["- " + cite(key_sentence(view, v) or _first_sentence(v.source.paper), v.paper_id) for v in views]
    if answer.mode != "extractive":
        answer.warnings.append(LISTED_FROM_METADATA)
        answer.mode, answer.model = "extractive", ExtractiveGenerator.describe()
    chain.verify(answer, Draft("\n\n".join(lines), answer.model, quotes=True), views)
    answer.abstained = False
    by_id = {s.paper_id: s.paper for s in sources}
    body = [_with_byline(p, by_id) for p in answer.answer.split("\n\n") if p.strip()]
    if left_out := [p for p in by_id if p not in answer.citations]:  # every paper listed, never silently dropped
        detail = f"{len(left_out)} of {len(by_id)} papers listed without a sentence"
        answer.warnings.append(AnswerWarning(WarningKind.METADATA, detail))
        body.append("Also by them, not described: " + ", ".join(f"[{p}]" for p in left_out))
    answer.answer = "\n\n".join([_header(named, len(sources), ranked_by), *body])


def _header(named: Named, n: int, ranked: bool) -> str:
    who = " and ".join(named.authors)
    others = [f for f in named.filters if f.field != "authors"]
    where = f" ({Named(tuple(others)).shown})" if others else ""
    count = "no papers" if n == 0 else "1 paper" if n == 1 else f"{n} papers"
    order = ", the best match for the question first" if ranked and n > 1 else ""
    return f"{who}: {count} in this index{where}{order}."


def _with_byline(paragraph: str, papers: dict[str, Paper]) -> str:
    """ "- Title (Xie, Chen, ... (6 authors) · topic · year): sentence [id]." for the paper the line cites."""
    cited = next((c for c in _CITED.findall(paragraph) if c in papers), None)
    if cited is None or not paragraph.startswith("- "):
        return paragraph
    paper = papers[cited]
    label = " · ".join(x for x in (byline(paper.metadata),) if x)
    head = f"{paper.title} ({label})" if paper.title and label else paper.title or label
    return f"- {head}: {paragraph[2:]}" if head else paragraph


def _topic_part(question: str, named: Named) -> str:
    """The question without the words that named the metadata (what the papers are ranked against)."""
    out = question
    for start, end in sorted(named.spans, reverse=True):
        out = out[:start] + out[end:]
    return " ".join(out.split()) or question


def _first_sentence(paper: Paper) -> str:
    sentences = split_sentences(clean_markup(paper.text))
    return sentences[0] if sentences else clean_markup(paper.text)[:300]
