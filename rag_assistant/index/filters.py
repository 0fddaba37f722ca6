"""Filters on paper fields (`--author`, `--year`, `--topic`, `--where FIELD=VALUE`): parsed from what the user
typed, checked against the fields the index holds (an unknown field, a malformed year, a topic or author no
paper has: a FilterError, exit 2), and turned into a Chroma `where` clause on the papers' `f_` metadata
(index/records.py), which the store resolves to the matching papers. The keyword index takes the same resolved
`FieldFilter`s (index/keyword.py): both apply them before ranking, so a filtered question gets the best papers of
the subset. Several filters must all hold; several values of one filter (`--author A --author B`) any of them."""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from rag_assistant.corpus.fields import field_key, name_key, normalise
from rag_assistant.corpus.models import Paper
from rag_assistant.errors import FilterError
from rag_assistant.index.keyword_fields import FieldFilter
from rag_assistant.index.records import AUTHOR_KEYS, FIELD_PREFIX, OLD_AUTHOR_KEYS

_YEARS = re.compile(r"^\s*(\d{4})?\s*(-|\.\.)?\s*(\d{4})?\s*$")
Catalogue = dict[str, Counter]  # field -> value -> papers carrying it


def parse_years(text: str) -> FieldFilter:
    """ "2024", "2023-2025", "2023-" (from 2023 on), "-2024" (up to 2024)."""
    m = _YEARS.match(text)
    if not m or not (m.group(1) or m.group(3)) or (m.group(2) is None and m.group(3)):
        raise FilterError(f"malformed year {text!r}", "give a year (2024) or a range (2023-2025, 2023-, -2024)")
    low = int(m.group(1)) if m.group(1) else None
    high = int(m.group(3)) if m.group(3) else (low if m.group(2) is None else None)
    if low is not None and high is not None and low > high:
        raise FilterError(f"empty year range {text!r}", "give the earlier year first")
    return FieldFilter("year", low=low, high=high)


def parse_filters(
    authors: Sequence[str] = (), years: str | None = None, topics: Sequence[str] = (), where: Sequence[str] = ()
) -> list[FieldFilter]:
    """The filters the options ask for, not yet checked against an index (`resolve` does). A topic is a
    case-insensitive substring (`contains`); `--where` values are exact, but `year=2020-2022` is a range."""
    out: list[FieldFilter] = []
    if names := [a.strip() for a in authors if a.strip()]:
        out.append(FieldFilter("authors", tuple(names)))
    if years is not None:
        out.append(parse_years(years))
    if parts := [t.strip() for t in topics if t.strip()]:
        out.append(FieldFilter("topic", contains=tuple(parts)))
    grouped: dict[str, list[str]] = {}
    for item in where:
        field, sep, value = item.partition("=")
        if not sep or not field.strip() or not value.strip():
            raise FilterError(f"malformed filter {item!r}", "write --where FIELD=VALUE, e.g. --where venue=ICML")
        grouped.setdefault(field_key(field), []).append(value.strip())
    for field, values in grouped.items():
        ranged = field == "year" and len(values) == 1
        out.append(parse_years(values[0]) if ranged else FieldFilter(field, tuple(values)))
    return out


def catalogue(papers: Iterable[Paper]) -> Catalogue:
    """Each field the papers carry, with its values and how many papers carry each (authors by name)."""
    out: Catalogue = {}
    for paper in papers:
        for field, value in normalise(paper.metadata).items():
            for v in value if isinstance(value, list) else [value]:
                out.setdefault(field, Counter())[v] += 1
    return out


def resolve(filters: Sequence[FieldFilter], fields: Catalogue) -> list[FieldFilter]:
    """The filters with topic substrings turned into the topics that contain them, each field checked to be
    one the index holds, and authors checked to be someone's name (suggesting the closest ones otherwise)."""
    out = []
    for f in filters:
        if f.field not in fields:
            known = ", ".join(sorted(fields)) or "none: its papers carry no metadata"
            raise FilterError(f"unknown field {f.field!r}", f"fields of this index: {known}")
        if f.contains:
            values = tuple(v for v in fields[f.field] if any(c.lower() in str(v).lower() for c in f.contains))
            if not values:
                some = ", ".join(str(v) for v, _ in fields[f.field].most_common(5))
                raise FilterError(f"no {f.field} contains {' or '.join(map(repr, f.contains))}", f"e.g. {some}")
            f = replace(f, values=values, contains=())
        if f.field == "authors":
            _check_authors(f.values, fields["authors"])
        out.append(f)
    return out


def _check_authors(names: Sequence[Any], authors: Counter) -> None:
    keys: dict[str, str] = {name_key(str(a)): str(a) for a in authors}
    missing = [n for n in names if name_key(str(n)) not in keys]
    if len(missing) == len(names):  # one name that matches is enough: the others are alternatives
        close = difflib.get_close_matches(name_key(str(missing[0])), list(keys), n=3, cutoff=0.6)
        hint = f"closest: {', '.join(keys[c] for c in close)}" if close else "check the spelling"
        raise FilterError(f"no author named {', '.join(map(str, missing))!r} in the index", hint)


def matches(paper: Paper, filters: Sequence[FieldFilter]) -> bool:
    """Whether a paper passes every resolved filter, as `chroma_where` and the keyword index decide it."""
    fields = normalise(paper.metadata)
    for f in filters:
        value = fields.get(f.field)
        items = value if isinstance(value, list) else [] if value is None else [value]
        if f.field == "authors":
            ok = bool({name_key(str(v)) for v in f.values} & {name_key(str(a)) for a in items})
        elif f.values:
            ok = any(item in set(_typed(f.values)) for item in items)
        else:
            numbers = [i for i in items if isinstance(i, int | float) and not isinstance(i, bool)]
            ok = any((f.low is None or n >= f.low) and (f.high is None or n <= f.high) for n in numbers)
        if not ok:
            return False
    return True


def describe(filters: Sequence[FieldFilter]) -> str:
    """`author = A or B, year 2023-2025, topic = T`: what a filtered answer was restricted to."""
    parts = []
    for f in filters:
        if f.values:
            shown = [str(v) for v in f.values[:3]] + ([f"{len(f.values) - 3} more"] if len(f.values) > 3 else [])
            parts.append(f"{f.field} = {' or '.join(shown)}")
        elif f.low is not None and f.high is not None:
            parts.append(f"{f.field} = {f.low}" if f.low == f.high else f"{f.field} {f.low}-{f.high}")
        else:
            parts.append(f"{f.field} >= {f.low}" if f.low is not None else f"{f.field} <= {f.high}")
    return ", ".join(parts)


def chroma_where(filters: Sequence[FieldFilter]) -> dict[str, Any] | None:
    """The resolved filters as a Chroma `where` on the chunks' field metadata (None: no filter). A value matches
    a scalar field by equality and a list field (authors, categories) by membership."""
    clauses: list[dict[str, Any]] = []
    for f in filters:
        if f.field == "authors":
            keys = (AUTHOR_KEYS, OLD_AUTHOR_KEYS)  # the second layout's first chunks too, until re-ingested
            clauses.append(_any([{k: {"$contains": name_key(str(v))}} for v in f.values for k in keys]))
        elif f.values:
            key, values = FIELD_PREFIX + f.field, _typed(f.values)
            by_type: dict[type, list[Any]] = {}
            for v in values:
                by_type.setdefault(type(v), []).append(v)
            options = [{key: {"$in": vs}} for vs in by_type.values()]
            options += [{key: {"$contains": v}} for v in values if isinstance(v, str)]  # list fields
            clauses.append(_any(options))
        else:
            if f.low is not None:
                clauses.append({FIELD_PREFIX + f.field: {"$gte": f.low}})
            if f.high is not None:
                clauses.append({FIELD_PREFIX + f.field: {"$lte": f.high}})
    return _all(clauses)


def _typed(values: Sequence[Any]) -> list[Any]:
    """Values as given, plus the whole number a string spells ("2024" also matches a number stored as 2024)."""
    out = list(dict.fromkeys(values))
    out += [int(v) for v in values if isinstance(v, str) and re.fullmatch(r"-?\d{1,15}", v.strip())]
    return list(dict.fromkeys(out))


def _any(clauses: list[dict[str, Any]]) -> dict[str, Any]:
    return clauses[0] if len(clauses) == 1 else {"$or": clauses}


def _all(clauses: list[dict[str, Any]]) -> dict[str, Any] | None:
    return None if not clauses else clauses[0] if len(clauses) == 1 else {"$and": clauses}
