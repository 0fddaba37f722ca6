"""One parser per file format. Each returns papers or raises CorpusError naming the file (and line)."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_assistant.corpus.models import Paper
from rag_assistant.errors import CorpusError
from rag_assistant.text import CONTROL_CHARS

URL_RE = re.compile(r"https?://[^\s)\]}>,;\"']+")
ID_FIELDS = ("id", "paper_id", "doc_id")
TITLE_FIELDS = ("title",)
TEXT_FIELDS = ("abstract", "text", "summary")


def read_text_file(path: Path) -> str:
    """Read a file as UTF-8 text, refusing binary and undecodable files with a clear message."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read ({exc.strerror})") from None
    if b"\x00" in raw[:8192]:
        raise CorpusError(f"{path}: binary file, not text", "give a .txt, .jsonl, .json or .csv file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise CorpusError(f"{path}:{line}: not valid UTF-8 (byte {exc.start})", "re-save the file as UTF-8") from None
    if not text.strip():
        raise CorpusError(f"{path}: empty file, no abstracts found")
    return text


def extract_urls(text: str) -> list[str]:
    return sorted({u.rstrip(".") for u in URL_RE.findall(text)})


def short_stem(path: Path) -> str:
    """`004_f08e38e0363d2af7.txt` -> `004`: short, readable ids such as `004:17`."""
    stem = path.stem
    head = stem.split("_", 1)[0]
    return head or stem


def _is_header(block: str) -> bool:
    """A first block that is one short line without sentence punctuation is a file header, not a paper."""
    return "\n" not in block.strip() and len(block) < 120 and not block.rstrip().endswith((".", "?", "!"))


@dataclass
class Parsed:
    """A file's papers and the problems of its bad records (`file:line: problem`), which `--skip-bad` skips
    while keeping the rest of the file. A file that cannot be read at all raises CorpusError instead."""

    papers: list[Paper] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def location(path: Path | str, line: int | None, position: int) -> str:
    """Where a record is, for messages: `file:line`, or `file: item N` for formats without lines (JSON arrays)."""
    return f"{path}:{line}" if line is not None else f"{path}: item {position}"


def _too_long(text: str, where: str, max_chars: int) -> str | None:
    if len(text) <= max_chars:
        return None
    return (
        f"{where}: abstract is {len(text):,} characters, over the limit of {max_chars:,} "
        "(raise max_abstract_chars, e.g. RAG_ASSISTANT_MAX_ABSTRACT_CHARS)"
    )


def parse_text(path: Path, id_prefix: str, max_chars: int) -> Parsed:
    """Blank-line separated abstracts, optionally after a one-line header."""
    text = read_text_file(path).replace("\r\n", "\n")
    blocks = [
        (m.group(0).strip(), text.count("\n", 0, m.start()) + 1) for m in re.finditer(r"\S(?:.|\n(?!\s*\n))*", text)
    ]
    if blocks and _is_header(blocks[0][0]) and len(blocks) > 1:
        blocks = blocks[1:]
    parsed = Parsed()
    for position, (block, line) in enumerate(blocks):
        body = " ".join(part.strip() for part in block.splitlines())
        if problem := _too_long(body, f"{path}:{line}", max_chars):
            parsed.problems.append(problem)
            continue
        meta: dict[str, Any] = {}
        if urls := extract_urls(body):
            meta["urls"] = urls
        parsed.papers.append(Paper(f"{id_prefix}:{position}", body, path.name, position, None, meta, line))
    return parsed


_ID_BREAKERS = re.compile(r"[\s,;]+")
_ID_CONTROL = re.compile(f"[\t\n{CONTROL_CHARS}]")


def citable_id(raw: str) -> str:
    """An id that survives being cited as `[id]` and listed as `[id1, id2]`: outer brackets dropped
    (`[z9]` -> `z9`), inner ones turned into parentheses (`a[1]` -> `a(1)`), whitespace, commas and
    semicolons into `_`, control characters removed. Scraped ids come in all these shapes."""
    text = _ID_CONTROL.sub("", raw).strip()
    while len(text) >= 2 and text[0] == "[" and text[-1] == "]":
        text = text[1:-1].strip()
    text = text.replace("[", "(").replace("]", ")")
    return _ID_BREAKERS.sub("_", text).strip("_")


def _pick(record: dict[str, Any], names: tuple[str, ...]) -> tuple[str | None, Any]:
    lowered = {k.lower(): k for k in record}
    for name in names:
        if name in lowered:
            value = record[lowered[name]]  # OpenReview's API v2 wraps each field as {"value": ...}
            return lowered[name], value["value"] if isinstance(value, dict) and set(value) == {"value"} else value
    return None, None


def record_to_paper(
    record: dict[str, Any], path: Path, position: int, line: int | None, id_prefix: str, max_chars: int
) -> Paper:
    """Map a JSON/CSV record (id, title, abstract + anything else kept as metadata) to a Paper."""
    where = location(path, line, position)
    text_key, text = _pick(record, TEXT_FIELDS)
    if not isinstance(text, str) or not text.strip():
        raise CorpusError(f"{where}: record has no abstract", "each record needs a non-empty 'abstract' field")
    id_key, raw_id = _pick(record, ID_FIELDS)
    paper_id = citable_id(str(raw_id)) if raw_id not in (None, "") else ""
    paper_id = paper_id or f"{id_prefix}:{position}"
    title_key, title = _pick(record, TITLE_FIELDS)
    title = title.strip() if isinstance(title, str) and title.strip() else None
    used = {text_key, id_key, title_key}
    meta = {k: v for k, v in record.items() if k not in used and v not in (None, "")}
    if id_key and str(raw_id) != paper_id:
        meta["original_id"] = raw_id  # rewritten to be citable; the original stays traceable
    body = " ".join(text.split())
    if problem := _too_long(body, where, max_chars):
        raise CorpusError(problem)
    if urls := extract_urls(body):
        meta.setdefault("urls", urls)
    return Paper(paper_id, body, path.name, position, title, meta, line)


def _add_record(parsed: Parsed, record: Any, path: Path, position: int, line: int | None, *rest: Any) -> None:
    try:
        if not isinstance(record, dict):
            raise CorpusError(f"{location(path, line, position)}: expected a JSON object, got {type(record).__name__}")
        parsed.papers.append(record_to_paper(record, path, position, line, *rest))
    except CorpusError as exc:
        parsed.problems.append(str(exc))


def parse_jsonl(path: Path, id_prefix: str, max_chars: int) -> Parsed:
    """One JSON object per line. Positions count every non-blank line, bad ones included, so that fixing a
    bad line later does not renumber the papers after it."""
    parsed = Parsed()
    position = 0
    for lineno, line in enumerate(read_text_file(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            parsed.problems.append(f"{path}:{lineno}: malformed JSON ({exc.msg})")
        else:
            _add_record(parsed, record, path, position, lineno, id_prefix, max_chars)
        position += 1
    return parsed


def parse_json(path: Path, id_prefix: str, max_chars: int) -> Parsed:
    try:
        data = json.loads(read_text_file(path))
    except json.JSONDecodeError as exc:
        raise CorpusError(f"{path}:{exc.lineno}: malformed JSON ({exc.msg})") from None
    if isinstance(data, dict):  # {"papers": [...]} is a common wrapper
        data = next((v for v in data.values() if isinstance(v, list)), None)
    if not isinstance(data, list):
        raise CorpusError(f"{path}: expected a JSON array of paper objects")
    parsed = Parsed()
    for i, record in enumerate(data):
        _add_record(parsed, record, path, i, None, id_prefix, max_chars)
    return parsed


def parse_csv(path: Path, id_prefix: str, max_chars: int) -> Parsed:
    text = read_text_file(path)
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel  # type: ignore[assignment]
    reader = csv.DictReader(io.StringIO(text), dialect=dialect)
    if not reader.fieldnames or not any(f.lower() in TEXT_FIELDS for f in reader.fieldnames if f):
        raise CorpusError(f"{path}: CSV needs an 'abstract' column", f"found {reader.fieldnames}")
    parsed = Parsed()
    for position, row in enumerate(reader):
        if None in row:
            parsed.problems.append(
                f"{path}:{reader.line_num}: more fields than the header has (quote fields with commas)"
            )
            continue
        _add_record(parsed, dict(row), path, position, reader.line_num, id_prefix, max_chars)
    return parsed


PARSERS: dict[str, Callable[[Path, str, int], Parsed]] = {
    ".txt": parse_text,
    ".md": parse_text,
    ".jsonl": parse_jsonl,
    ".ndjson": parse_jsonl,
    ".json": parse_json,
    ".csv": parse_csv,
    ".tsv": parse_csv,
}
