"""Shared fixtures: an isolated data directory for every test, a ready index built once per session."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests import fake_llm and helpers directly

REPO = Path(__file__).resolve().parents[1]
SHARED_FULL = REPO.parent / "shared" / "corpus" / "icml2025_full" / "papers.jsonl"

# pytest-xdist's workers set COLUMNS=80 and LINES=24; a CLI started with them renders at 80 columns even in a
# pseudo-terminal of another size, so tests see the environment a user's shell gives.
_ISOLATE = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "COLUMNS", "LINES")


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own data directory and no user config or API keys from the environment."""
    d = tmp_path / "data"
    monkeypatch.setenv("RAG_ASSISTANT_DATA_DIR", str(d))
    monkeypatch.setenv("RAG_ASSISTANT_CONFIG", str(tmp_path / "no-config.toml"))
    for name in list(os.environ):
        if name.startswith("RAG_ASSISTANT_") and name not in ("RAG_ASSISTANT_DATA_DIR", "RAG_ASSISTANT_CONFIG"):
            monkeypatch.delenv(name)
    for name in _ISOLATE:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return d


def data_fingerprint(data_dir: Path) -> dict[str, object]:
    """What a test could change in a data dir: every file's bytes; for Chroma, the tables of its SQLite file,
    where every write lands (a client rewrites a row of `acquire_write` and the vector segments' length.bin
    whenever it opens the index, even to read, so those are left out)."""
    out: dict[str, object] = {}
    for path in sorted(p for p in data_dir.rglob("*") if p.is_file()):
        name = str(path.relative_to(data_dir))
        if path.name == "chroma.sqlite3":
            out[name] = _sqlite_tables(path)
        elif path.parent.parent.name != "chroma":  # not a vector segment (chroma/<segment id>/*.bin)
            out[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _sqlite_tables(path: Path) -> dict[str, str]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        rows = {n: sorted(map(repr, con.execute(f'SELECT * FROM "{n}"'))) for n in tables if n != "acquire_write"}
    finally:
        con.close()
    return {n: hashlib.sha256(repr(r).encode()).hexdigest() for n, r in rows.items()}


def _changed(data_dir: Path, want: dict[str, object]) -> list[str]:
    got = data_fingerprint(data_dir)
    return sorted(n for n in want.keys() | got.keys() if want.get(n) != got.get(n))


@pytest.fixture(scope="session")
def ready_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, object]]]:
    """The bundled corpus ingested once, and its fingerprint; tests must only read it. At the end of the session
    it must be unchanged (also by tests that use `ready_data_dir` directly)."""
    from rag_assistant.config import Settings
    from rag_assistant.corpus import bundled_corpus_path, load_corpus
    from rag_assistant.index.ingest import ingest_papers

    d = tmp_path_factory.mktemp("ready") / "data"
    settings = Settings(data_dir=d)
    ingest_papers(load_corpus([bundled_corpus_path()]).papers, settings)
    fingerprint = data_fingerprint(d)
    yield d, fingerprint
    assert not (changed := _changed(d, fingerprint)), f"a test wrote into the shared read-only index: {changed}"


@pytest.fixture(scope="session")
def ready_data_dir(ready_index: tuple[Path, dict[str, object]]) -> Path:
    """The shared, already-ingested data directory: read it only (tests that write use `own_ready`)."""
    return ready_index[0]


@pytest.fixture
def ready(ready_index: tuple[Path, dict[str, object]], monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point this test at the shared, already-ingested data directory, and check it left it unchanged: a test
    that logs answers (ask, chat, batch) or ingests must use `own_ready`."""
    d, fingerprint = ready_index
    monkeypatch.setenv("RAG_ASSISTANT_DATA_DIR", str(d))
    yield d
    assert not (changed := _changed(d, fingerprint)), f"this test wrote into the shared read-only index: {changed}"


@pytest.fixture
def own_ready(ready_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of the ingested bundled corpus, for tests that write to it (answers are logged, files
    ingested)."""
    target = tmp_path / "own"
    shutil.copytree(ready_data_dir, target)
    monkeypatch.setenv("RAG_ASSISTANT_DATA_DIR", str(target))
    return target


def cli_command() -> list[str]:
    """The installed console script (or the module where it is not installed)."""
    exe = Path(sys.executable).with_name("rag-assistant")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "rag_assistant"]


def run_cli(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    input: str | None = None,
    cwd: Path | None = None,
    prefix: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """Run the installed console script exactly as a user would (`prefix`: a command that runs it, e.g. in a
    mount namespace)."""
    return subprocess.run(
        [*prefix, *cli_command(), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        input=input,
        cwd=cwd,
    )


@pytest.fixture
def cli() -> Iterator:
    yield run_cli
