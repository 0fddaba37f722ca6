"""Turn paths (files or folders) into a checked list of papers: ids unique, duplicates reported."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path

from rag_assistant.corpus.models import DUPLICATE_IDS, Paper
from rag_assistant.corpus.parsers import PARSERS, location, short_stem
from rag_assistant.errors import CorpusError


@dataclass
class CorpusLoad:
    papers: list[Paper] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)


def bundled_corpus_path() -> Path:
    """The ICML 2025 demo abstracts shipped inside the package."""
    return Path(str(resources.files("rag_assistant") / "data" / "icml2025"))


def expand_paths(paths: list[Path], problems: list[str]) -> list[Path]:
    """Files as given, folders walked recursively for supported extensions, in a stable order. A path that
    cannot be used (missing, an unsupported file, a folder without corpus files) is a problem like a bad
    record, appended to `problems`: reported with the others and, with --skip-bad, skipped."""
    kinds = ", ".join(PARSERS)
    files: list[Path] = []
    for path in (p.absolute() for p in paths):
        if not path.exists():
            problems.append(f"{path}: no such file or folder")
        elif path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in PARSERS)
            found = [p for p in found if not any(part.startswith(".") for part in p.relative_to(path).parts)]
            if not found:
                problems.append(f"{path}: folder holds no corpus files ({kinds})")
            files.extend(found)
        elif path.suffix.lower() not in PARSERS:
            problems.append(f"{path}: unsupported file type '{path.suffix}' (use {kinds})")
        else:
            files.append(path)
    return list(dict.fromkeys(p.resolve() for p in files))


def id_prefixes(files: list[Path]) -> dict[Path, str]:
    """Short prefix per file (`004`), falling back to the full stem where two files would collide."""
    shorts = {f: short_stem(f) for f in files}
    counts = Counter(shorts.values())
    return {f: (s if counts[s] == 1 else f.stem) for f, s in shorts.items()}


def _where(path: Path, paper: Paper) -> str:
    return location(path, paper.line, paper.position)


def _merged(kept: Paper, copy: Paper) -> Paper:
    """The kept paper with what only its skipped copy knows: the copy's id (`DUPLICATE_IDS`, so a question or an
    evaluation that names the copy still finds the paper), a title, metadata fields it lacks (authors, track, ...).
    The same abstract in two corpora (the bundled text files and the conference's JSON Lines) must not lose the
    richer copy's authors because the poorer one came first. The kept paper's own values win."""
    fields = {
        k: v for k, v in copy.metadata.items() if k not in kept.metadata and k not in ("original_id", DUPLICATE_IDS)
    }
    ids = [*kept.metadata.get(DUPLICATE_IDS, []), copy.paper_id, *copy.metadata.get(DUPLICATE_IDS, [])]
    return replace(kept, title=kept.title or copy.title, metadata={**kept.metadata, **fields, DUPLICATE_IDS: ids})


def load_corpus(paths: list[Path], skip_bad: bool = False, max_abstract_chars: int = 20_000) -> CorpusLoad:
    """Parse every file. Problems are collected (all of them, so the user fixes them in one go), one per bad
    file or record; with skip_bad the bad records (or unreadable files) are left out and the rest kept,
    otherwise the caller must not write anything."""
    result = CorpusLoad()
    result.files = expand_paths(paths, result.errors)
    prefixes = id_prefixes(result.files)
    by_id: dict[str, tuple[Path, Paper]] = {}
    by_text: dict[str, int] = {}  # abstract -> index of its kept paper in result.papers
    for path in result.files:
        try:
            parsed = PARSERS[path.suffix.lower()](path, prefixes[path], max_abstract_chars)
        except CorpusError as exc:
            result.errors.append(str(exc))
            continue
        result.errors.extend(parsed.problems)
        if renamed := [p for p in parsed.papers if "original_id" in p.metadata]:
            first = renamed[0]
            result.warnings.append(
                f"{path}: {len(renamed)} id(s) rewritten to be citable as [id], e.g. "
                f"{first.metadata['original_id']!r} -> {first.paper_id!r} (the original is kept as original_id)"
            )
        for paper in parsed.papers:
            where = _where(path, paper)
            text_hash = paper.text_hash  # a property: computed once here
            if paper.paper_id in by_id:
                first_path, first = by_id[paper.paper_id]
                if first.text_hash == text_hash:
                    result.warnings.append(f"{where}: duplicate of {paper.paper_id}, skipped")
                else:
                    result.errors.append(
                        f"{where}: id '{paper.paper_id}' already used by {_where(first_path, first)} "
                        "with a different abstract"
                    )
                continue
            if text_hash in by_text:
                kept = result.papers[by_text[text_hash]]
                result.warnings.append(
                    f"{where}: same abstract as {kept.paper_id}, skipped (its id, title and fields kept with it)"
                )
                result.papers[by_text[text_hash]] = _merged(kept, paper)
                continue
            by_id[paper.paper_id] = (path, paper)
            by_text[text_hash] = len(result.papers)
            result.papers.append(paper)
    if result.errors and not skip_bad:
        raise CorpusError(
            result.errors[0] if len(result.errors) == 1 else f"{len(result.errors)} problems in the corpus",
            "fix the file(s), or pass --skip-bad to ingest the rest",
            details=result.errors if len(result.errors) > 1 else None,
        )
    return result
