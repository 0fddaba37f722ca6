"""Shared fixtures: an isolated data directory for every test, a ready index built once per session."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests import fake_llm and helpers directly

REPO = Path(__file__).resolve().parents[1]
SHARED_FULL = REPO.parent / "shared" / "corpus" / "icml2025_full" / "papers.jsonl"

_ISOLATE = ("OPENAI_API_KEY", "OPENAI_BASE_URL")


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


@pytest.fixture(scope="session")
def ready_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled corpus ingested once; tests must only read it."""
    from rag_assistant.config import Settings
    from rag_assistant.corpus import bundled_corpus_path, load_corpus
    from rag_assistant.index.ingest import ingest_papers

    d = tmp_path_factory.mktemp("ready") / "data"
    settings = Settings(data_dir=d)
    ingest_papers(load_corpus([bundled_corpus_path()]).papers, settings)
    return d


@pytest.fixture
def ready(ready_data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point this test at the shared, already-ingested data directory."""
    monkeypatch.setenv("RAG_ASSISTANT_DATA_DIR", str(ready_data_dir))
    return ready_data_dir


@pytest.fixture
def own_ready(ready_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of the ingested bundled corpus, for tests that write to it (answers are logged). The answer
    log is left behind: tests reading the shared index log their answers in it."""
    target = tmp_path / "own"
    shutil.copytree(ready_data_dir, target, ignore=shutil.ignore_patterns("provenance.sqlite*"))
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
