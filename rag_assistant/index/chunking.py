"""Sentence-aware chunks that fit the embedding model's window; nothing is silently truncated."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rag_assistant.corpus.models import Paper
from rag_assistant.text import split_sentences


@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    paper_id: str
    index: int
    text: str


def _split_long(sentence: str, count: Callable[[str], int], budget: int) -> list[str]:
    """A sentence over budget is cut at word boundaries into pieces that each fit."""
    pieces: list[str] = []
    current: list[str] = []
    for word in sentence.split():
        if current and count(" ".join([*current, word])) > budget:
            pieces.append(" ".join(current))
            current = []
        current.append(word)
    if current:
        pieces.append(" ".join(current))
    return pieces


def chunk_paper(paper: Paper, count: Callable[[str], int], budget: int, overlap: int = 1) -> list[Chunk]:
    """Greedy packing of whole sentences up to `budget` tokens, repeating `overlap` sentences between
    consecutive chunks. The title (if any) prefixes every chunk, and counts against the budget."""
    prefix = f"{paper.title}. " if paper.title else ""
    room = max(16, budget - (count(prefix) if prefix else 0))
    units: list[tuple[str, int]] = []
    for sentence in split_sentences(paper.text):
        n = count(sentence)
        if n <= room:
            units.append((sentence, n))
        else:
            units.extend((piece, count(piece)) for piece in _split_long(sentence, count, room))
    groups: list[list[tuple[str, int]]] = []
    current: list[tuple[str, int]] = []
    size = 0
    for unit in units:
        if current and size + unit[1] + 1 > room:
            groups.append(current)
            carry = current[-overlap:] if overlap else []
            # Overlap only if it leaves room for the new sentence.
            while carry and sum(n for _, n in carry) + unit[1] + 1 > room:
                carry = carry[1:]
            current, size = list(carry), sum(n + 1 for _, n in carry)
        current.append(unit)
        size += unit[1] + 1
    if current:
        groups.append(current)
    return [
        Chunk(f"{paper.paper_id}#{i}", paper.paper_id, i, prefix + " ".join(s for s, _ in group))
        for i, group in enumerate(groups)
    ]


def token_counter(tokenizer: object) -> Callable[[str], int]:
    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)  # type: ignore[attr-defined]

    return count
