"""A real `rag-assistant ingest` that a test can kill at an exact point: after each written step it prints its
`embedded done/total chunks` line and waits for a line on stdin, so a signal sent then lands between two steps
whatever the machine's speed (the index holds exactly the steps written so far). Only the write step is made
smaller; the rest is the shipped CLI. Also: the store's listings of papers stored whole, and those the chunks
justify (what a listing may claim whatever killed an ingest)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from rag_assistant.index.records import LISTED, listing
from rag_assistant.index.store import ChromaStore, paper_of

_LOCKSTEP = """
import sys
import rag_assistant.index.ingest as m
m.EMBED_BATCH = int(sys.argv.pop(1))
real = m.ingest_paths
def ingest_paths(settings, paths=None, skip_bad=False, progress=None, on_loaded=None):
    def step(done, total):
        progress(done, total)
        sys.stdin.readline()  # the test answers a line to go on, or sends a signal while this waits
    return real(settings, paths, skip_bad, progress=step, on_loaded=on_loaded)
m.ingest_paths = ingest_paths
from rag_assistant.cli import main
main()
"""


def records(store: ChromaStore) -> dict[str, int]:
    """The store's listings (index/store.py), by paper id."""
    res = store.collection.get(where={LISTED: {"$gte": -(2**63)}}, include=["metadatas"])
    return {paper_of(cid): meta[LISTED] for cid, meta in zip(res["ids"], res["metadatas"], strict=True)}


def true_records(store: ChromaStore, ids: list[str]) -> dict[str, int]:
    """The listings the chunks themselves justify: every paper stored whole, read from every chunk's metadata."""
    return {
        pid: listing(pid, s.content_hash, len(s.chunk_ids), s.source)
        for pid, s in store.paper_states(ids).items()
        if s.complete
    }


def start_ingest(corpus: Path, step: int, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """The CLI ingest of `corpus` in steps of `step` chunks, paused after each written step (see above)."""
    return subprocess.Popen(
        [sys.executable, "-c", _LOCKSTEP, str(step), "ingest", str(corpus)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        # Ctrl-C must raise KeyboardInterrupt even if the runner started the tests with SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def kill_at(proc: subprocess.Popen[str], sig: signal.Signals, when: Callable[[int, int], bool]) -> int:
    """Let the paused ingest go on step by step until `when(done, total)` holds for a written step, then send
    `sig` while it waits there (or let it finish if that never holds). Returns the exit code."""
    assert proc.stdin is not None and proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("embedded "):
            done, total = map(int, line.split()[1].split("/"))
            if when(done, total):
                proc.send_signal(sig)
                break
            proc.stdin.write("\n")
            proc.stdin.flush()
    code = proc.wait(120)  # stdin stays open until then: the signal, not an end of input, ends the wait
    proc.stdin.close()
    proc.stderr.read()
    return code
