"""The data dir as a user's file system sees it (issue 22, items 9 and 10): commands set private modes only on
what they create, an empty data dir setting is a usage error, reading commands create nothing, and an index on
read-only storage can be searched, asked (the answer is not logged, with a warning), inspected and evaluated."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

DEV = Path(__file__).resolve().parents[1] / "eval" / "dev.jsonl"
QUESTION = "How does ShadowKV reduce KV cache memory?"


def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in [root, *root.rglob("*")]}


def _loosen(root: Path) -> None:
    """What a user's umask 022 makes: folders 0755, files 0644."""
    for p in [root, *root.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)


@pytest.mark.slow
def test_commands_leave_modes_of_what_they_did_not_create(cli, own_ready: Path, tmp_path: Path) -> None:
    (own_ready / "notes.txt").write_text("the user's own file")
    (own_ready / "mine").mkdir()
    (own_ready / "mine" / "draft.md").write_text("also the user's")
    _loosen(own_ready)
    before = _modes(own_ready)
    for args in (
        ("stats",),
        ("search", "KV cache offloading"),
        ("ask", QUESTION, "--mode", "extractive"),
        ("ingest",),  # the bundled corpus again: nothing changes in the index
    ):
        res = cli(*args)
        assert res.returncode == 0, (args, res.stderr)
    after = _modes(own_ready)
    assert {path: after[path] for path in before} == before
    created = {path: mode for path, mode in after.items() if path not in before}
    assert created == {"provenance.sqlite": 0o600}  # the answer log (its WAL files are gone once closed)


@pytest.mark.slow
def test_what_the_tool_creates_is_private(cli, tmp_path: Path) -> None:
    """A new data dir and everything rag-assistant writes in it or as output, under a permissive umask and a
    0755 parent: folders 0700, files 0600; Chroma's own files sit in a 0700 folder made before chromadb runs."""
    umask = os.umask(0o022)  # what the subprocesses inherit; no command may rely on a stricter one
    try:
        _create_everything(cli, tmp_path)
    finally:
        os.umask(umask)
    parent = tmp_path / "home"
    modes = _modes(parent)
    assert modes.pop(".") == 0o755  # the user's folder is left alone
    chroma = modes.pop("new/data/chroma")
    ours = {path: mode for path, mode in modes.items() if not path.startswith("new/data/chroma/")}
    assert chroma == 0o700 and "new/data/provenance.sqlite" in ours and "run/report.html" in ours
    wrong = {p: oct(m) for p, m in ours.items() if m != (0o700 if (parent / p).is_dir() else 0o600)}
    assert wrong == {}


def _create_everything(cli, tmp_path: Path) -> None:  # noqa: ANN001
    """ingest into a new data dir under a 0755 folder, ask, batch and eval into new outputs there."""
    parent = tmp_path / "home"
    parent.mkdir(mode=0o755)
    data = parent / "new" / "data"
    papers = tmp_path / "p.jsonl"
    papers.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "abstract": f"Paper {i} compresses the KV cache of language models {i}."}) + "\n"
            for i in range(3)
        )
    )
    questions = tmp_path / "q.txt"
    questions.write_text("How is the KV cache compressed?\n")
    env = {"RAG_ASSISTANT_DATA_DIR": str(data)}
    runs = [
        cli("ingest", str(papers), env=env),
        cli("ask", "How is the KV cache compressed?", "--mode", "extractive", env=env),
        cli("batch", str(questions), "-o", str(parent / "out" / "answers.jsonl"), "--mode", "extractive", env=env),
        cli("eval", str(DEV), "--retrieval-only", "--limit", "2", "--out", str(parent / "run"), env=env),
    ]
    assert [r.returncode for r in runs] == [0, 0, 0, 0], [r.stderr[-400:] for r in runs]


@pytest.mark.parametrize("how", ["env", "flag", "config"])
def test_an_empty_data_dir_setting_is_a_usage_error(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """An empty value would mean the current directory: a usage error naming where it was set."""
    cwd = tmp_path / "cwd"
    cwd.mkdir(mode=0o755)
    (cwd / "keep.txt").write_text("x")
    (cwd / "keep.txt").chmod(0o644)
    config = tmp_path / "c.toml"
    config.write_text('data_dir = ""\n')
    if how == "env":
        res = cli("stats", env={"RAG_ASSISTANT_DATA_DIR": ""}, cwd=cwd)
    elif how == "flag":
        res = cli("--data-dir", "", "stats", cwd=cwd)
    else:
        monkeypatch.delenv("RAG_ASSISTANT_DATA_DIR")
        res = cli("--config", str(config), "stats", cwd=cwd)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.splitlines()
    assert lines[0].startswith("error: invalid setting data_dir: it is empty") and len(lines) == 2, lines
    assert {"env": "RAG_ASSISTANT_DATA_DIR", "flag": "--data-dir", "config": str(config)}[how] in lines[1]
    assert _modes(cwd) == {".": 0o755, "keep.txt": 0o644} and "Traceback" not in res.stderr


@pytest.mark.slow
def test_reading_commands_on_a_missing_data_dir_create_nothing(cli, tmp_path: Path) -> None:
    data = tmp_path / "nothing-here"
    stats = cli("stats", "--json", env={"RAG_ASSISTANT_DATA_DIR": str(data)})
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["chunks"] == 0
    search = cli("search", "anything", env={"RAG_ASSISTANT_DATA_DIR": str(data)})
    assert search.returncode == 1 and "rag-assistant ingest" in search.stderr
    log = cli("log", env={"RAG_ASSISTANT_DATA_DIR": str(data)})
    assert log.returncode == 0 and "No answers logged yet" in log.stderr
    assert not data.exists()


def test_loading_settings_has_no_side_effects(tmp_path: Path) -> None:
    """Library users, the LlamaIndex integration and tests inherit nothing from loading settings: no variable
    exported, no umask, no folder created or chmodded (issue 25, item 4)."""
    from rag_assistant.config import load_settings

    config = tmp_path / "c.toml"
    config.write_text("top_k = 7\n")
    data = tmp_path / "data"
    environ = dict(os.environ)
    umask = os.umask(0o022)
    try:
        settings = load_settings(config, data_dir=str(data))
        assert os.umask(0o022) == 0o022
    finally:
        os.umask(umask)
    assert settings.top_k == 7 and settings.data_dir == data
    assert dict(os.environ) == environ and not data.exists()
    assert load_settings().top_k == 5  # the --config file was for that call only


# -- read-only storage (item 10): a real read-only bind mount in a private mount namespace

_RO = 'd=$1; shift; mount --bind "$d" "$d" && mount -o remount,bind,ro "$d" || exit 97; exec "$@"'


def _read_only(data: Path) -> tuple[str, ...]:
    """The command prefix that runs a program with `data` mounted read-only; skips the test where this
    machine cannot make such a mount (no unshare, no user namespaces)."""
    prefix = ("unshare", "-Urm", "sh", "-c", _RO, "sh", str(data))
    if shutil.which("unshare") is None:
        pytest.skip("unshare(1) is not installed: cannot mount the index read-only")
    probe = subprocess.run([*prefix, "touch", str(data / "probe")], capture_output=True, text=True)
    if probe.returncode in (97, 1) and "Read-only file system" not in probe.stderr:
        pytest.skip(f"cannot make a read-only mount here: {probe.stderr.strip()[:200]}")
    assert probe.returncode != 0 and not (data / "probe").exists(), "the mount was not read-only"
    return prefix


@pytest.mark.slow
def test_an_index_on_read_only_storage_can_be_read(cli, own_ready: Path, tmp_path: Path) -> None:
    assert cli("ask", QUESTION, "--mode", "extractive").returncode == 0  # one logged answer, WAL closed
    prefix = _read_only(own_ready)
    before = {p: p.read_bytes() for p in own_ready.rglob("*") if p.is_file()}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return cli(*args, prefix=prefix, timeout=300)

    search = run("search", "KV cache offloading for long-context inference", "--json", "-k", "3")
    assert search.returncode == 0, search.stderr
    assert json.loads(search.stdout)[0]["paper_id"] == "004:17"
    ask = run("ask", QUESTION, "--mode", "extractive", "--json")
    assert ask.returncode == 0, ask.stderr
    answer = json.loads(ask.stdout)
    assert "004:17" in answer["citations"]
    assert any(w.startswith("not logged: cannot write") and "Read-only file system" in w for w in answer["warnings"])
    stats = run("stats", "--json")
    assert stats.returncode == 0 and json.loads(stats.stdout)["papers"] == 38, stats.stderr
    log = run("log", "--json")
    assert log.returncode == 0 and [row["question"] for row in json.loads(log.stdout)] == [QUESTION], log.stderr
    evaluated = run("eval", str(DEV), "--retrieval-only", "--limit", "3", "--out", str(tmp_path / "run"))
    assert evaluated.returncode == 0 and (tmp_path / "run" / "summary.json").is_file(), evaluated.stderr
    ingest = run("ingest")  # writing cannot work there: one line saying so
    assert ingest.returncode == 1 and "readonly database" in ingest.stderr and "Traceback" not in ingest.stderr
    assert {p: p.read_bytes() for p in own_ready.rglob("*") if p.is_file()} == before
