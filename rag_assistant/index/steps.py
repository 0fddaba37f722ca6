"""How ingest orders papers into write steps: whole papers per step, similar lengths together (index/ingest.py
embeds and stores a step at a time)."""

from __future__ import annotations

from rag_assistant.corpus.models import Paper
from rag_assistant.index.chunking import Chunk

SORT_WINDOW = 8192  # chunks whose papers are ordered by length together, so a step holds similar lengths


def write_steps(papers: list[tuple[Paper, list[Chunk]]], batch: int) -> list[list[tuple[Paper, Chunk, int]]]:
    """(paper, chunk, the paper's number of chunks) in write steps of at most `batch` chunks that hold whole
    papers, each paper's chunks in order (only a paper larger than a step is split, over consecutive steps).

    Within windows of SORT_WINDOW chunks, papers go by the length of their shortest chunk: most of the others
    are full windows, so a step's chunks fall into few length groups and the encoder's batches (sorted by length
    within the step) carry little padding. On the ICML file: 15.4% padding tokens, 16.4% when every chunk was
    sorted by length regardless of its paper, 17.4% with papers in file order."""
    windows: list[list[tuple[Paper, list[Chunk]]]] = [[]]
    size = 0
    for paper, pieces in papers:
        if size >= SORT_WINDOW:
            windows.append([])
            size = 0
        windows[-1].append((paper, pieces))
        size += len(pieces)
    steps: list[list[tuple[Paper, Chunk, int]]] = []
    current: list[tuple[Paper, Chunk, int]] = []
    for window in windows:
        for paper, pieces in sorted(window, key=lambda item: min((len(c.text) for c in item[1]), default=0)):
            items = [(paper, c, len(pieces)) for c in pieces]
            if len(current) + len(items) > batch >= len(items):  # a paper that fits a step is not split
                steps.append(current)
                current = []
            current += items
            while len(current) > batch:  # a paper larger than a step fills this one and the next ones
                steps.append(current[:batch])
                current = current[batch:]
    if current:
        steps.append(current)
    return steps
