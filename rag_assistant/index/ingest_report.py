"""What an ingest reports: counts of papers and chunks by what happened to them, for the CLI and `--json`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_assistant.corpus.loader import CorpusLoad


@dataclass
class IngestReport:
    papers: int = 0
    new: int = 0
    resumed: int = 0  # stored in part by an interrupted ingest, same content: completed now
    changed: int = 0
    upgraded: int = 0  # unchanged, stored in an older layout (index/records.py): rewritten with their stored vectors
    unchanged: int = 0
    removed: int = 0
    chunks_added: int = 0
    chunks_embedded: int = 0  # the rest reused the vector of an identical stored (or sibling) chunk text
    chunks_deleted: int = 0
    sentence_papers: int = 0  # papers whose sentence vectors were computed and stored (index/sentences.py)
    sentence_papers_kept: int = 0  # papers whose stored vectors an older splitter cut still line up with them
    keyword_rebuilt: bool = False
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class FilesIngest:
    """An ingest of files: what the loader read, skipped (`loaded.errors`) and warned about, and the report."""

    loaded: CorpusLoad
    report: IngestReport
    data_dir: Path

    def as_dict(self) -> dict[str, Any]:
        """The report with the loader's warnings and skipped records first, the files and the data dir."""
        warnings = self.loaded.warnings + [f"skipped: {e}" for e in self.loaded.errors] + self.report.warnings
        files = [str(f) for f in self.loaded.files]
        return {**self.report.as_dict(), "warnings": warnings, "files": files, "data_dir": self.data_dir}
