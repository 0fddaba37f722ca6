"""A paper's common fields, normalised from whatever its source called them: `authors` (a list in order),
`year`, `venue`, `topic`, `categories`, `doi`, `url`, and every other scalar field as given. `SOURCE_NAMES` is
the documented mapping (README "Paper fields"): arXiv metadata snapshots (`authors_parsed`, `journal-ref`,
`categories`, `update_date`), OpenReview exports (`{"value": ...}` wrappers, `venue`, `primary_area`, `cdate`
in epoch ms), Semantic Scholar (`authors: [{"name"}]`, `externalIds.DOI`, `publicationDate`, `fieldsOfStudy`),
CSV/BibTeX columns (`author` as "Last, First and Last, First", `booktitle`, `journal`). The first name of a
field's list found in a record wins. The index stores the result as real (filterable) metadata; the record
itself is kept as it was."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from rag_assistant.corpus.models import DUPLICATE_IDS

MAX_VALUE = 300  # longer strings are not filter values (an abstract-like field)
FieldValue = str | int | float | bool

SOURCE_NAMES: dict[str, tuple[str, ...]] = {
    "authors": ("authors", "author", "authors_parsed", "author_names", "creators", "creator"),
    "year": ("year", "pub_year", "publication_year", "publicationdate", "publication_date", "published", "date")
    + ("pdate", "cdate", "versions", "update_date"),
    "venue": ("venue", "journal", "journal-ref", "journal_ref", "booktitle", "conference", "publicationvenue"),
    "topic": ("topic", "track", "primary_area", "area", "subject_area"),
    "categories": ("categories", "fieldsofstudy", "subjects", "keywords"),
    "doi": ("doi", "externalids.doi"),
    "url": ("url", "link", "pdf_url", "html_url", "paper_url"),
}  # names compared in lower case; "a.b" is key b of the object under key a
_YEAR = re.compile(r"(?<!\d)(1[89]\d\d|20\d\d)(?!\d)")
_NAME_FOLDS = str.maketrans({"ø": "o", "ł": "l", "đ": "d", "ß": "ss", "æ": "ae", "œ": "oe", "þ": "th", "ı": "i"})


def _unwrap(value: Any) -> Any:  # noqa: ANN401 - any JSON value
    """OpenReview's API v2 wraps each content field as {"value": ...}."""
    return value["value"] if isinstance(value, dict) and set(value) == {"value"} else value


def _lookup(record: Mapping[str, Any], name: str) -> Any:  # noqa: ANN401 - any JSON value
    lowered = {str(k).lower(): k for k in record}
    head, _, rest = name.partition(".")
    if head not in lowered:
        return None
    value = _unwrap(record[lowered[head]])
    return _lookup(value, rest) if rest and isinstance(value, Mapping) else (None if rest else value)


def _scalar(value: Any) -> FieldValue | None:  # noqa: ANN401 - any JSON value
    if isinstance(value, str):
        value = " ".join(value.split())
        return value if 0 < len(value) <= MAX_VALUE else None
    if isinstance(value, bool) or (isinstance(value, int | float) and math.isfinite(value)):
        return value
    return None


def _person(item: Any) -> str | None:  # noqa: ANN401 - any JSON value
    """One author: "Name", {"name": ...}, {"given", "family"}, or arXiv's [last, first, suffix]."""
    if isinstance(item, Mapping):
        if isinstance(item.get("name"), str):
            return _scalar(item["name"])  # type: ignore[return-value]
        parts = [item.get(k) for k in ("given", "first", "firstname", "family", "last", "lastname")]
        return _scalar(" ".join(p for p in parts if isinstance(p, str))) or None  # type: ignore[return-value]
    if isinstance(item, list) and all(isinstance(p, str) for p in item) and item:
        last, first, *suffix = [*item, ""]
        return _scalar(" ".join(p for p in (first, last, *suffix) if p)) or None  # type: ignore[return-value]
    if isinstance(item, str):
        return _flip(item)
    return None


def _flip(name: str) -> str | None:
    """ "Last, First" -> "First Last"; other names as written."""
    name = " ".join(name.split()).strip(" ,;")
    if name.count(",") == 1:
        last, first = (p.strip() for p in name.split(","))
        name = f"{first} {last}".strip()
    return name if 0 < len(name) <= MAX_VALUE and name.lower() not in ("et al", "et al.", "others") else None


def split_authors(value: Any) -> list[str]:  # noqa: ANN401 - any JSON value
    """Authors in order from a list (of names, objects or arXiv triples) or a string: "A, B and C", "A; B",
    BibTeX's "Last, First and Last, First"."""
    if isinstance(value, list):
        names = [_person(item) for item in value]
    elif isinstance(value, str):
        text = " ".join(value.split())
        parts = [p for p in re.split(r"\s+and\s+|\s*&\s*", text) if p.strip(" ,")]
        if ";" in text:
            names = [_flip(p) for p in text.replace(" and ", ";").split(";")]
        elif len(parts) > 1 and all(p.count(",") == 1 for p in parts):  # BibTeX: Last, First and Last, First
            names = [_flip(p) for p in parts]
        else:
            names = [n.strip() or None for p in parts for n in p.split(",")]
            names = [_flip(n) if n else None for n in names]
    else:
        return []
    return [n for n in names if n]


def _year(value: Any) -> int | None:  # noqa: ANN401 - any JSON value
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and math.isfinite(value):
        if value > 10**11:  # OpenReview's dates: milliseconds since 1970
            return datetime.fromtimestamp(value / 1000, UTC).year
        return int(value) if 1800 <= value <= 2100 else None
    if isinstance(value, str) and (match := _YEAR.search(value)):
        return int(match.group(1))
    if isinstance(value, list) and value:  # arXiv's versions: the first is the submission
        return _year(value[0].get("created") if isinstance(value[0], Mapping) else value[0])
    return None


def _categories(value: Any) -> list[str]:  # noqa: ANN401 - any JSON value
    items = value.split() if isinstance(value, str) and "," not in value else value
    if isinstance(items, str):
        items = items.split(",")
    if not isinstance(items, list):
        return []
    out = [_scalar(i.get("category") if isinstance(i, Mapping) else i) for i in items]
    return list(dict.fromkeys(str(v) for v in out if v is not None))


def _doi(value: Any) -> str | None:  # noqa: ANN401 - any JSON value
    text = _scalar(value)
    if not isinstance(text, str):
        return None
    return re.sub(r"^(https?://(dx\.)?doi\.org/|doi:)", "", text.strip(), flags=re.I).lower() or None


def _first(record: Mapping[str, Any], field: str) -> tuple[str | None, Any]:
    for name in SOURCE_NAMES[field]:
        value = _lookup(record, name)
        if value not in (None, "", []):
            return name, value
    return None, None


def normalise(metadata: Mapping[str, Any]) -> dict[str, FieldValue | list[FieldValue]]:
    """The common fields of a record's metadata (its id, title and abstract already taken out) and its other
    scalar fields (or lists of them), as the index stores them. Empty for a paper without metadata."""
    readers = {"authors": split_authors, "year": _year, "categories": _categories, "doi": _doi}
    out: dict[str, FieldValue | list[FieldValue]] = {}
    used: set[str] = set()
    for field, _ in SOURCE_NAMES.items():
        name, raw = _first(metadata, field)
        value = readers.get(field, _scalar)(raw) if name else None
        if value not in (None, "", []):
            out[field] = value  # type: ignore[assignment]
            used.add(name.split(".")[0])  # type: ignore[union-attr]
    for key, raw in metadata.items():
        name = field_key(str(key))
        if str(key).lower() in used or name in out or key == DUPLICATE_IDS:  # ids, not a field to filter by
            continue
        raw = _unwrap(raw)
        items = [_scalar(v) for v in raw] if isinstance(raw, list) else [_scalar(raw)]
        kept = [v for v in items if v is not None]
        if kept and len({type(v) for v in kept}) == 1:  # Chroma lists hold one type
            out[name] = kept if isinstance(raw, list) else kept[0]
    return out


def field_key(key: str) -> str:
    """A metadata key as a field name: lower case, runs of anything but letters, digits and _ as one _."""
    return re.sub(r"\W+", "_", key.strip().lower()).strip("_") or "_"


def name_key(name: str) -> str:
    """An author's name as filters compare it: its words of 2+ letters, lower case, accents folded, initials
    dropped ("Jürgen  Schmidhuber" and "jurgen schmidhuber" match; "Yann N. Dauphin" -> "yann dauphin")."""
    folded = unicodedata.normalize("NFKD", name.lower().translate(_NAME_FOLDS))
    plain = "".join(c for c in folded if not unicodedata.combining(c))
    return " ".join(re.findall(r"(?u)\b\w\w+\b", plain))


def first_authors(authors: list[str]) -> str:
    """ "Xie, Chen, ... (6 authors)": the first two surnames, and how many authors in all when more."""
    surnames = [a.split()[-1] for a in authors if a.split()]
    if len(surnames) <= 2:
        return ", ".join(surnames)
    return f"{surnames[0]}, {surnames[1]}, ... ({len(surnames)} authors)"


def byline(metadata: Mapping[str, Any]) -> str:
    """A paper's first authors, topic (track) and year, as references show them ("" without any: the caller
    falls back to the file and position)."""
    fields = normalise(metadata)
    authors = fields.get("authors")
    parts = [first_authors([str(a) for a in authors]) if isinstance(authors, list) else ""]
    parts += [str(fields[k]) for k in ("topic", "year") if k in fields]
    return " · ".join(p for p in parts if p)
