"""Clients of one Chroma server keep their keyword index as a cache brought up to date from the server's run log
(issue 21, item 2; index/runlog.py, index/keyword_cache.py): a client behind another client's ingest reads only
the chunks of the runs it has not applied, ranks as the ingesting client does, and never takes a killed ingest's
half-written run as final. Real `chroma run`, the CLI driven as a user would; the chunks a sync read are counted
from the record it leaves beside the cache (never timed)."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from rag_assistant.corpus import bundled_corpus_path

QUERIES = ["KV cache offloading for long-context inference", "fine-tuning safety", "graph neural networks"]


def _parts(folder: Path, n: int) -> list[Path]:
    """The bundled abstracts split into `n` JSON-lines files: disjoint ingests, one per client or run."""
    from rag_assistant.corpus import load_corpus

    papers = load_corpus([bundled_corpus_path()]).papers
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for i in range(n):
        records = [{"id": f"p{j}", "title": p.title, "abstract": p.text} for j, p in enumerate(papers) if j % n == i]
        files.append(folder / f"part{i}.jsonl")
        files[-1].write_text("".join(json.dumps(r) + "\n" for r in records))
    return files


def _last_sync(data_dir: Path) -> dict[str, Any]:
    (state,) = (data_dir / "keyword").glob("*.runs.json")
    return json.loads(state.read_text())


def _rankings(cli: Any, env: dict[str, str]) -> list[list[tuple[str, float]]]:
    found = [cli("search", q, "--json", "-k", "8", env=env) for q in QUERIES]
    assert all(res.returncode == 0 for res in found), [res.stderr for res in found]
    return [[(s["paper_id"], round(s["score"], 6)) for s in json.loads(res.stdout)] for res in found]


def _chunks(cli: Any, env: dict[str, str]) -> int:
    shown = cli("stats", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    return int(json.loads(shown.stdout)["chunks"])


@pytest.mark.slow
def test_a_client_behind_another_clients_ingest_reads_only_the_new_runs_chunks(cli: Any, tmp_path: Path) -> None:
    from chroma_server import ChromaServer

    first, second, third = _parts(tmp_path / "corpus", 3)
    with ChromaServer(tmp_path / "server") as server:
        env = {name: {"RAG_ASSISTANT_CHROMA_URL": server.url, "RAG_ASSISTANT_DATA_DIR": str(tmp_path / name)}
               for name in ("a", "b")}  # fmt: skip
        assert cli("ingest", str(first), env=env["a"]).returncode == 0
        # b never ingested: its first search builds its cache from every chunk, once
        assert _rankings(cli, env["b"]) == _rankings(cli, env["a"])
        synced = _last_sync(tmp_path / "b")
        assert synced["last_sync"] == {"chunks_read": _chunks(cli, env["b"]), "runs_applied": 0, "rebuilt": True}
        again = _rankings(cli, env["b"])  # up to date: nothing read, the cache is at the store's revision
        assert _last_sync(tmp_path / "b") == synced

        before = _chunks(cli, env["a"])
        assert cli("ingest", str(second), env=env["a"]).returncode == 0
        added = _chunks(cli, env["a"]) - before
        ranked = _rankings(cli, env["b"])
        assert _last_sync(tmp_path / "b")["last_sync"] == {"chunks_read": added, "runs_applied": 1, "rebuilt": False}
        assert ranked == _rankings(cli, env["a"]) != again

        # the other way round: b ingests, a catches up with b's run only
        before = _chunks(cli, env["b"])
        assert cli("ingest", str(third), env=env["b"]).returncode == 0
        added = _chunks(cli, env["b"]) - before
        ranked = _rankings(cli, env["a"])
        assert _last_sync(tmp_path / "a")["last_sync"] == {"chunks_read": added, "runs_applied": 1, "rebuilt": False}
        assert ranked == _rankings(cli, env["b"])
        # and a client that never ingested, built from every chunk, ranks the same
        fresh = {**env["a"], "RAG_ASSISTANT_DATA_DIR": str(tmp_path / "fresh")}
        assert _rankings(cli, fresh) == ranked
        parts = {int(pid.removeprefix("p")) % 3 for ranking in ranked for pid, _ in ranking}
        assert parts == {0, 1, 2}, parts  # every client's papers are found


@pytest.mark.slow
def test_a_killed_ingests_run_is_never_applied_and_its_completion_is(cli: Any, tmp_path: Path) -> None:
    from chroma_server import ChromaServer
    from kill_helpers import kill_at, start_ingest

    first, second = _parts(tmp_path / "corpus", 2)
    with ChromaServer(tmp_path / "server") as server:
        env = {name: {"RAG_ASSISTANT_CHROMA_URL": server.url, "RAG_ASSISTANT_DATA_DIR": str(tmp_path / name)}
               for name in ("a", "b")}  # fmt: skip
        assert cli("ingest", str(first), env=env["a"]).returncode == 0
        _rankings(cli, env["b"])
        applied = _last_sync(tmp_path / "b")["applied"]
        # a's second ingest is killed after its first written step (one chunk: a paper of several is half there)
        assert kill_at(start_ingest(second, 1, env["a"]), signal.SIGKILL, lambda done, total: done >= 1) == -9
        shown = cli("stats", env=env["b"]).stdout
        assert "1 pending (incomplete ingest)" in shown, shown
        half = _rankings(cli, env["b"])
        state = _last_sync(tmp_path / "b")
        assert state["applied"] == applied  # read (its papers are hidden by search), not recorded as applied
        assert state["last_sync"]["runs_applied"] == 1 and not state["last_sync"]["rebuilt"]
        assert _rankings(cli, env["a"]) == half
        # the rerun completes what the killed run half wrote and settles it: both runs are applied, once
        assert cli("ingest", str(second), env=env["a"]).returncode == 0
        ranked = _rankings(cli, env["b"])
        state = _last_sync(tmp_path / "b")
        assert len(state["applied"]) == len(applied) + 2 and state["last_sync"]["runs_applied"] == 2
        assert ranked == _rankings(cli, env["a"]) != half
        fresh = {**env["a"], "RAG_ASSISTANT_DATA_DIR": str(tmp_path / "fresh")}
        assert _rankings(cli, fresh) == ranked
        assert "pending" not in cli("stats", env=env["b"]).stdout


@pytest.mark.slow
def test_sentence_vectors_live_in_the_server_and_a_second_client_answers_as_the_ingesting_one(
    cli: Any, tmp_path: Path
) -> None:
    """Issue 21: with a Chroma server the sentence vectors an ingest computes are records of `<collection>.sentences`
    in the server, so a client that never ingested reads them (nothing stored or computed per process in its
    data dir) and its answers equal the ingesting client's. Before, they lived in the ingesting client's data
    dir only, and `stats` on any other client counted every paper as without them."""
    from chroma_server import ChromaServer

    (corpus,) = _parts(tmp_path / "corpus", 1)
    with ChromaServer(tmp_path / "server") as server:
        env = {name: {"RAG_ASSISTANT_CHROMA_URL": server.url, "RAG_ASSISTANT_DATA_DIR": str(tmp_path / name)}
               for name in ("a", "b")}  # fmt: skip
        assert cli("ingest", str(corpus), env=env["a"]).returncode == 0
        for name in ("a", "b"):
            shown = json.loads(cli("stats", "--json", env=env[name]).stdout)
            assert shown["papers"] == 38 and shown["papers_without_sentence_vectors"] == 0, (name, shown)
        for question in ("How does ShadowKV reduce KV cache memory?", "What makes fine-tuning unsafe?"):
            answers = [cli("ask", question, "--json", env=env[name]) for name in ("a", "b")]
            assert all(res.returncode == 0 for res in answers), [res.stderr for res in answers]
            a, b = (json.loads(res.stdout) for res in answers)
            assert (
                a["mode"] == "extractive"
                and a["citations"]
                and (a["answer"], a["citations"])
                == (
                    b["answer"],
                    b["citations"],
                )
            )
        assert not [*(tmp_path / "a").glob("sentences/*"), *(tmp_path / "b").glob("sentences/*")]  # no sidecar
