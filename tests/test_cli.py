"""The CLI as a user runs it: a real subprocess of the installed console script."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_startup import HEAVY

MODEL = {"onnxruntime", "torch", "sentence_transformers", "transformers", "tokenizers"}  # loading the embedder


def _imported(stderr: str) -> set[str]:
    """Top-level modules a run imported, from Python's import profile (PYTHONPROFILEIMPORTTIME=1)."""
    names = {line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}
    return {name.split(".")[0] for name in names}


def _store_state(data_dir: Path) -> tuple[object, ...]:
    """Everything the index holds (chunks, vectors, info) and every file of ours beside it, with its size and
    mtime. Chroma's own files are left out: it rewrites them whenever it opens a collection, even to read."""
    from rag_assistant.config import Settings
    from rag_assistant.index.store import open_store

    store = open_store(Settings(data_dir=data_dir))
    try:
        held = store.collection.get(include=["documents", "metadatas", "embeddings"])
        chunks = (held["ids"], held["documents"], held["metadatas"], held["embeddings"].tolist(), store.get_info())
    finally:
        store.close()  # a client kept open would not see what the next command writes
    files = [p for p in data_dir.rglob("*") if p.is_file() and "chroma" not in p.relative_to(data_dir).parts]
    return chunks, sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files)


def test_help_lists_commands_and_imports_nothing_heavy(cli) -> None:
    res = cli("--help", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert res.returncode == 0
    for command in ("ingest", "search", "stats"):
        assert command in res.stdout
    imported = _imported(res.stderr)
    assert "rag_assistant" in imported and not imported & set(HEAVY), imported & set(HEAVY)


@pytest.mark.slow
def test_ingest_search_stats_end_to_end(cli, data_dir: Path) -> None:
    first = cli("ingest", "--json")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["new"] == 38 and report["chunks_added"] > 38

    # Ingesting again is a no-op: no model loaded, nothing embedded, nothing written.
    before = _store_state(data_dir)
    second = cli("ingest", "--json", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert second.returncode == 0, second.stderr
    again = json.loads(second.stdout)
    assert again["unchanged"] == 38 and again["new"] == again["changed"] == again["removed"] == 0
    assert again["chunks_added"] == again["chunks_embedded"] == again["chunks_deleted"] == 0
    assert again["sentence_papers"] == 0 and not again["keyword_rebuilt"]
    imported = _imported(second.stderr)
    assert "chromadb" in imported and not imported & MODEL, imported & MODEL
    assert _store_state(data_dir) == before

    res = cli("search", "KV cache offloading for long-context inference", "--json", "-k", "4")
    assert res.returncode == 0, res.stderr
    results = json.loads(res.stdout)
    assert len(results) == 4 and results[0]["paper_id"] == "004:17"
    for item in results:
        assert {"paper_id", "score", "source", "position", "title", "text"} <= item.keys()
    assert results[0]["source"] == "004_f08e38e0363d2af7.txt" and results[0]["position"] == 17
    assert results[0]["title"] is None

    human = cli("search", "jailbreak attacks on aligned language models")
    assert human.returncode == 0 and "[" in human.stdout

    stats = json.loads(cli("stats", "--json").stdout)
    assert stats["papers"] == 38 and stats["chunks"] == report["chunks_added"]
    assert stats["keyword_index"] == "current"


def test_search_before_ingest_says_what_to_do(cli) -> None:
    res = cli("search", "anything")
    assert res.returncode != 0
    assert "rag-assistant ingest" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("empty.txt", b"", "empty file"),
        ("blob.txt", b"\x00\x01\x02binary", "binary"),
        ("latin.txt", "caf\xe9\n".encode("latin-1"), "UTF-8"),
        ("bad.jsonl", b'{"id": "a", "abstract": "ok"}\n{broken\n', "bad.jsonl:2"),
        ("noabs.jsonl", b'{"id": "a", "title": "no abstract"}\n', "no abstract"),
    ],
)
def test_bad_input_one_clear_line_nonzero_exit(cli, tmp_path: Path, name: str, content: bytes, expected: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    res = cli("ingest", str(path))
    assert res.returncode != 0
    assert expected in res.stderr and name in res.stderr
    assert "Traceback" not in res.stderr


def test_missing_path(cli, tmp_path: Path) -> None:
    res = cli("ingest", str(tmp_path / "missing.jsonl"))
    assert res.returncode != 0 and "no such file" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.slow
def test_bad_input_leaves_existing_index_intact(cli, tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text('{"id": "g1", "abstract": "Graph neural networks for protein folding."}\n')
    assert cli("ingest", str(good)).returncode == 0
    bad = tmp_path / "good2.jsonl"
    bad.write_text('{"id": "g2", "abstract": "Fine."}\n{"id": "g3"}\n')
    res = cli("ingest", str(bad))
    assert res.returncode != 0 and "good2.jsonl:2" in res.stderr
    stats = json.loads(cli("stats", "--json").stdout)
    assert stats["papers"] == 1 and stats["sources"] == {"good.jsonl": 1}


def test_duplicates_warn_but_succeed(cli, tmp_path: Path) -> None:
    path = tmp_path / "dups.jsonl"
    rec = json.dumps({"id": "d", "abstract": "Duplicate abstract text."})
    path.write_text(rec + "\n" + rec + "\n")
    res = cli("ingest", str(path), "--json")
    assert res.returncode == 0, res.stderr
    assert "duplicate" in res.stderr and json.loads(res.stdout)["new"] == 1


def test_invalid_setting_is_one_line(cli) -> None:
    res = cli("search", "x", env={"RAG_ASSISTANT_TOP_K": "many"})
    assert res.returncode == 2 and "top_k" in res.stderr and "Traceback" not in res.stderr
