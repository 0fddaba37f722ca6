"""The smaller usability holes of issue 22, item 15, through the CLI as a user drives it: unknown settings, hints
that name only files that exist, `search ""`, `log --kind`, eval answers and the log, `--skip-bad` with a missing
path, and --help that shows readable metavars, --mode's choices and -k's default."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rag_assistant.config import Settings

DEV = Path(__file__).resolve().parents[1] / "eval" / "dev.jsonl"
# how typer 0.29 shows a parameter's Python type: <str>, <int range>, <list[Path]>, <path>, <a|b>
TYPE_METAVAR = r"<(?:str|int|float|bool|path|file|int range|float range|list\[\w+\]|\w+(?:\|\w+)+)>"
COMMANDS = ("ingest", "search", "stats", "papers", "ask", "log", "chat", "batch", "eval", "eval-compare")


def test_an_unknown_key_in_the_config_file_is_an_error_naming_the_closest(cli, tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("tpo_k = 8\n")
    res = cli("--config", str(config), "stats")
    assert res.returncode == 2, res.stdout
    lines = res.stderr.splitlines()
    assert lines[0] == f"error: unknown setting tpo_k in {config}" and "did you mean top_k?" in lines[1]


def test_an_unknown_variable_is_a_warning_naming_the_closest(cli) -> None:
    res = cli("stats", "--json", env={"RAG_ASSISTANT_TPO_K": "8"})
    assert res.returncode == 0, res.stderr
    assert "warning: RAG_ASSISTANT_TPO_K is not a setting and is ignored (did you mean RAG_ASSISTANT_TOP_K?)" in (
        res.stderr
    )
    assert json.loads(res.stdout)["chunks"] == 0


def test_hints_name_the_config_file_only_when_it_holds_the_value(cli, tmp_path: Path) -> None:
    missing_config = tmp_path / "no-config.toml"  # where conftest points RAG_ASSISTANT_CONFIG: not created
    from_env = cli("stats", env={"RAG_ASSISTANT_TOP_K": "many"})
    assert from_env.returncode == 2 and "hint: fix the RAG_ASSISTANT_TOP_K environment variable" in from_env.stderr
    assert str(missing_config) not in from_env.stderr
    from_flag = cli("ask", "What is new?", "--mode", "offline")
    assert from_flag.returncode == 2 and "hint: fix the --mode option" in from_flag.stderr
    assert str(missing_config) not in from_flag.stderr
    missing_config.write_text('mode = "offline"\n')
    from_file = cli("stats")
    assert from_file.returncode == 2 and f"hint: fix it in {missing_config}" in from_file.stderr


@pytest.mark.slow
def test_an_empty_search_is_refused_like_an_empty_question(cli, ready: Path) -> None:
    for query in ("", "   ", "?!"):
        searched, asked = cli("search", query), cli("ask", query, "--mode", "extractive")
        assert searched.returncode == asked.returncode == 2, (query, searched.stdout)
        assert searched.stderr.splitlines()[0] == asked.stderr.splitlines()[0]
        assert searched.stdout == "" and "Traceback" not in searched.stderr


def test_log_kind_is_checked_and_its_kinds_listed(cli) -> None:
    res = cli("log", "--kind", "bogus")
    assert res.returncode == 2 and "No answers logged" not in res.stderr
    assert "'bogus' is not one of ask, chat, batch" in res.stderr
    assert "[ask|chat|batch]" in cli("log", "--help").stdout


@pytest.mark.slow
def test_eval_answers_are_not_logged_as_the_docs_say(cli, own_ready: Path, tmp_path: Path) -> None:
    """The decision: eval runs keep their answers in results.jsonl, not in the provenance log; the log's help,
    the provenance module, the README and eval/README.md say so, and `--kind eval` is no kind."""
    res = cli("eval", str(DEV), "--limit", "2", "--mode", "extractive", "--out", str(tmp_path / "run"), timeout=600)
    assert res.returncode == 0, res.stderr
    assert len((tmp_path / "run" / "results.jsonl").read_text().splitlines()) == 2
    assert json.loads(cli("log", "--json").stdout) == []
    assert cli("log", "--kind", "eval").returncode == 2
    repo = Path(__file__).resolve().parents[1]
    provenance = (repo / "rag_assistant" / "answer" / "provenance.py").read_text()
    help_text = " ".join(cli("log", "--help").stdout.split())
    assert "ask, chat and batch" in help_text and "Eval runs keep their answers in their own results.jsonl" in help_text
    assert "every answer of ask, chat and batch" in provenance and "Eval\nanswers are not logged" in provenance
    assert (
        "not logged" in (repo / "eval" / "README.md").read_text()
        or "not written" in (repo / "eval" / "README.md").read_text()
    )


@pytest.mark.slow
def test_skip_bad_skips_a_missing_path_like_any_bad_input(cli, tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"id": "g1", "abstract": "Graph neural networks for protein folding."}) + "\n")
    missing = tmp_path / "missing.jsonl"
    res = cli("ingest", "--skip-bad", str(missing), str(good), "--json")
    assert res.returncode == 1, res.stderr
    assert f"skipped: {missing}: no such file or folder" in res.stderr and "Traceback" not in res.stderr
    assert json.loads(res.stdout)["new"] == 1
    assert json.loads(cli("stats", "--json").stdout)["sources"] == {"good.jsonl": 1}
    (tmp_path / "notes.pdf").write_bytes(b"%PDF-1.7")
    without = cli("ingest", str(missing), str(tmp_path / "notes.pdf"))
    assert without.returncode == 2 and "2 problems in the corpus" in without.stderr  # both, in one go
    assert f"{missing}: no such file or folder" in without.stderr and "unsupported file type '.pdf'" in without.stderr


def test_help_shows_readable_metavars_choices_and_defaults(cli) -> None:
    pages = {name: cli(name, "--help") for name in COMMANDS} | {"": cli("--help")}
    for name, page in pages.items():
        assert page.returncode == 0, (name, page.stderr)
        usage_and_params = page.stdout
        assert not re.search(TYPE_METAVAR, usage_and_params), (name, usage_and_params)
        assert "{" not in usage_and_params, (name, usage_and_params)  # {query}
    assert "Usage: rag-assistant ingest [OPTIONS] [PATH...]" in pages["ingest"].stdout
    assert "Usage: rag-assistant ask [OPTIONS] QUESTION" in pages["ask"].stdout
    assert "Usage: rag-assistant search [OPTIONS] QUERY" in pages["search"].stdout
    for name in ("ask", "chat", "batch", "eval"):
        flat = " ".join(pages[name].stdout.split())
        assert "--mode [auto|extractive|llm]" in flat and "-k, --top-k N" in flat, (name, flat)
        default = Settings.model_fields["top_k"].default
        assert f"[default: (the top_k setting, {default}); 1<=x<=50]" in flat, (name, flat)
    assert "--data-dir PATH" in pages[""].stdout and "--chroma-url URL" in pages[""].stdout
