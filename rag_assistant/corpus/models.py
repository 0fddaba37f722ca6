"""The Paper record: what every other part of the system knows about an abstract."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

# What the index derives from a paper's metadata (corpus/fields.py, stored as filterable fields): part of the
# content hash of papers with metadata, so a re-ingest rewrites (and upgrades) those stored by an older version.
FIELDS_VERSION = 1
# Metadata key: the ids of other records with the same abstract that a load skipped (corpus/loader.py).
DUPLICATE_IDS = "duplicate_ids"


@dataclass(frozen=True)
class Paper:
    """One abstract. `paper_id` is stable across re-ingests; `source` + `position` trace it to its file."""

    paper_id: str
    text: str
    source: str
    position: int
    title: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # 1-based line of the record in its file, for messages; not stored in the index, not part of the identity.
    line: int | None = field(default=None, compare=False)

    @property
    def content_hash(self) -> str:
        """Changes whenever anything that is embedded or shown changes."""
        parts: list[Any] = [self.title, self.text, self.metadata] + ([FIELDS_VERSION] if self.metadata else [])
        payload = json.dumps(parts, sort_keys=True, ensure_ascii=False)
        return hashlib.sha1(payload.encode("utf-8")).hexdigest()[:16]

    @property
    def text_hash(self) -> str:
        """Identity of the abstract itself, used to spot the same paper under two ids. Blind to case, unicode
        compatibility forms and all whitespace: copies of one abstract in two corpora differ in exactly those
        (the ICML JSONL drops the space after some full stops that the text files keep)."""
        import unicodedata

        folded = "".join(unicodedata.normalize("NFKC", self.text).casefold().split())
        return hashlib.sha1(folded.encode("utf-8")).hexdigest()[:16]

    @property
    def label(self) -> str:
        """A short human label: the title, else the opening words of the abstract."""
        if self.title:
            return self.title
        words = self.text.split()
        return " ".join(words[:12]) + (" ..." if len(words) > 12 else "")
