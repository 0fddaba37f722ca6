"""Hostile input, driven through the CLI as a user would: corpus files that try to hide ids or drive the
terminal, files with one bad record among good ones, megabyte 'abstracts', empty and huge questions."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

HOSTILE = Path(__file__).parent / "data" / "hostile"
# query -> the id it must find (the corpus ids are rewritten to be citable: '[z9]' -> 'z9', 'a[1]' -> 'a(1)')
FINDS = {
    "quantum sponge lattices": "w1",
    "glacier tokenizers frozen vocabularies": "abc123",
    "walrus attention tusks": "a(1)",
    "marmalade optimizer citrus momentum": "z9",
    "kestrel scheduler hawk preemption": "e5",
    "otter benchmark estuaries": "f0",
    "lighthouse protocol beacon clocks": "Bx",
    "pelican routing coastal flyways": "huge:0",
}
# bytes that let text drive a terminal: ESC, NUL, BEL, CR, right-to-left override, pop directional formatting
# a fresh prompt starts a line; prompt-toolkit also redraws "you>" mid-line while echoing input
PROMPT = r"\r\n(?:\x1b\[[0-9;?]*[A-Za-z])*you>"
TERMINAL_CONTROL = re.compile("[\x1b\x00\x07\r\u202e\u202c]")


@pytest.fixture(scope="module")
def hostile_data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    from conftest import run_cli

    data = tmp_path_factory.mktemp("hostile") / "data"
    result = run_cli("--data-dir", str(data), "ingest", "--skip-bad", str(HOSTILE))
    return data, result


def test_hostile_corpus_skip_bad_reports_each_bad_record_and_keeps_the_rest(hostile_data) -> None:
    _, result = hostile_data
    assert result.returncode == 1, result.stderr  # something was skipped: scripts must be able to tell
    assert "Ingested 8 papers" in result.stdout
    skipped = [line for line in result.stderr.splitlines() if line.startswith("skipped:")]
    assert len(skipped) == 3, result.stderr
    assert f"{HOSTILE / 'hostile.jsonl'}:5: malformed JSON" in result.stderr
    assert f"{HOSTILE / 'hostile.jsonl'}:9: record has no abstract" in result.stderr
    assert f"{HOSTILE / 'huge.txt'}:5: abstract is 1,000,007 characters, over the limit of 20,000" in result.stderr
    assert "RAG_ASSISTANT_MAX_ABSTRACT_CHARS" in result.stderr
    assert "'a[1]' -> 'a(1)'" in result.stderr


@pytest.mark.parametrize("query", sorted(FINDS))
def test_every_hostile_paper_is_found_and_its_id_prints_with_no_control_bytes(cli, hostile_data, query) -> None:
    data, _ = hostile_data
    result = cli("--data-dir", str(data), "search", query, "-k", "3")
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith(f"1. [{FINDS[query]}] score"), result.stdout
    assert not TERMINAL_CONTROL.search(result.stdout), repr(result.stdout)
    assert "[bold]" not in result.stdout or "[bold]loud[/bold]" in result.stdout  # markup shown, not obeyed


def test_markup_and_escapes_in_answers_are_shown_not_obeyed(cli, hostile_data) -> None:
    data, _ = hostile_data
    result = cli("--data-dir", str(data), "ask", "What does the kestrel scheduler predict?", "--sources")
    assert result.returncode == 0, result.stderr
    assert not TERMINAL_CONTROL.search(result.stdout), repr(result.stdout)
    assert "[e5]" in result.stdout and "\ufffd[31mRED" in result.stdout  # tampering stays visible
    markup = cli("--data-dir", str(data), "search", "glacier tokenizers", "-k", "1")
    assert "[link=http://evil.example]click here[/link]" in markup.stdout


def test_json_output_keeps_the_stored_text_exactly(cli, hostile_data) -> None:
    data, _ = hostile_data
    result = cli("--data-dir", str(data), "search", "kestrel scheduler", "-k", "1", "--json")
    text = json.loads(result.stdout)[0]["text"]
    assert "\x1b[31mRED\x1b[0m" in text and "\x1b]0;pwned\x07" in text
    otter = json.loads(cli("--data-dir", str(data), "search", "otter benchmark", "-k", "1", "--json").stdout)[0]
    assert "\x00" in otter["text"] and "\u202e" in otter["text"]


def test_ids_starting_with_letters_print_in_ask_references_and_sources(cli, hostile_data) -> None:
    data, _ = hostile_data
    result = cli("--data-dir", str(data), "ask", "How do sponge lattices store light?", "--sources")
    refs = result.stdout.split("References", 1)[1]
    assert "  [w1] hostile.jsonl #0" in refs
    assert re.search(r"^  1\. \[w1\] score", result.stdout, re.M), result.stdout


def test_one_malformed_line_skips_that_record_only(cli, tmp_path: Path) -> None:
    good = [json.dumps({"id": f"g{i}", "abstract": f"Good abstract number {i} about topic {i}."}) for i in range(5)]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(good[:3] + ['{"id": "bad", "abstract": '] + good[3:]) + "\n")
    strict = cli("ingest", str(path))
    assert strict.returncode == 2 and f"{path}:4: malformed JSON" in strict.stderr
    assert "--skip-bad" in strict.stderr
    result = cli("ingest", "--skip-bad", str(path))
    assert "Ingested 5 papers" in result.stdout, result.stdout + result.stderr
    assert f"skipped: {path}:4: malformed JSON" in result.stderr


def test_abstract_size_limit_is_a_setting(cli, tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps({"id": "long1", "abstract": "A sentence about long inputs. " * 1000}) + "\n")
    refused = cli("ingest", str(path))
    assert refused.returncode == 2
    assert f"{path}:1: abstract is 29,999 characters, over the limit of 20,000" in refused.stderr
    accepted = cli("ingest", str(path), env={"RAG_ASSISTANT_MAX_ABSTRACT_CHARS": "40000"})
    assert accepted.returncode == 0 and "Ingested 1 paper from 1 file:" in accepted.stdout, accepted.stderr


def test_duplicate_id_error_names_file_and_line_with_absolute_paths(cli, tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "a.jsonl").write_text(
        json.dumps({"id": "p1", "abstract": "First text."}) + "\n" + json.dumps({"id": "p1", "abstract": "Other."})
    )
    monkeypatch.chdir(tmp_path)
    result = cli("ingest", "a.jsonl")
    assert result.returncode == 2
    assert f"{tmp_path / 'a.jsonl'}:2: id 'p1' already used by {tmp_path / 'a.jsonl'}:1" in result.stderr
    missing = cli("ingest", "nope.jsonl")
    assert f"{tmp_path / 'nope.jsonl'}: no such file or folder" in missing.stderr


@pytest.mark.parametrize("question", ["", "   ", "?!...,;:"])
def test_empty_or_punctuation_question_is_a_usage_error_and_not_logged(cli, own_ready, question) -> None:
    result = cli("ask", question)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("error: the question is "), result.stderr
    assert len(result.stderr.strip().splitlines()) == 2  # what happened, and a hint
    assert result.stdout == ""
    logged = cli("log", "--json")
    assert logged.returncode == 0 and json.loads(logged.stdout) == [], logged.stdout + logged.stderr  # nothing


def test_overlong_question_is_cut_with_a_warning(cli, own_ready) -> None:
    question = "How does ShadowKV reduce KV cache memory? " + "padding words " * 1500  # ~21 KB
    result = cli("ask", question, "--json")
    answer = json.loads(result.stdout)
    assert result.returncode == 0 and len(answer["question"]) <= 2000
    assert any("question was cut to its first" in w for w in answer["warnings"])


def test_batch_fails_empty_rows_alone_and_names_markdown_headings_by_qid(cli, own_ready, tmp_path: Path) -> None:
    questions = tmp_path / "q.csv"
    questions.write_text("qid,question\nq-shadow,How does ShadowKV reduce KV cache memory?\nq-empty,?!\n")
    out = tmp_path / "answers.md"
    result = cli("batch", str(questions), "-o", str(out))
    assert result.returncode == 1, result.stdout + result.stderr  # one row failed
    text = out.read_text()
    assert "## q-shadow. How does ShadowKV" in text and "## q-empty. ?!" in text
    assert "**Failed:** the question is only punctuation" in text


@pytest.mark.slow
def test_chat_refuses_empty_questions_and_wraps_at_words(own_ready: Path) -> None:
    import pexpect

    data = own_ready
    env = {**os.environ, "RAG_ASSISTANT_DATA_DIR": str(data), "PROMPT_TOOLKIT_NO_CPR": "1", "NO_COLOR": "1"}
    exe = str(Path(sys.executable).with_name("rag-assistant"))
    child = pexpect.spawn(exe, ["chat"], env=env, encoding="utf-8", timeout=90, dimensions=(60, 70), use_poll=True)
    try:
        child.expect("session [0-9a-f]{8}")
        child.expect("you>")
        child.sendline("?!...")
        child.expect("the question is only punctuation")
        child.expect("you>")
        child.sendline("How does ShadowKV reduce KV cache memory?")
        child.expect(r"mode: extractive[^\n]*\ds")
        screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", child.before)
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    from conftest import run_cli

    logged = json.loads(run_cli("log", "--kind", "chat", "--json", env={"RAG_ASSISTANT_DATA_DIR": str(data)}).stdout)
    assert [row["question"] for row in logged] == ["How does ShadowKV reduce KV cache memory?"]
    words = set(re.findall(r"[A-Za-z0-9]+", logged[0]["answer"]))
    visible = [segment.split("\r")[-1].rstrip() for segment in screen.split("\r\n")]  # after redraws
    lines = [line for line in visible if line.strip() and not line.startswith("you>") and "thinking" not in line]
    assert len(lines) >= 5, visible
    assert "ShadowKV" in screen and all(len(line) <= 70 for line in lines), lines
    # word-wrapped: no line ends inside a word that the next line finishes
    for line, following in zip(lines, lines[1:], strict=False):
        tail, head = re.search(r"[A-Za-z0-9]*$", line).group(0), re.match(r"[A-Za-z0-9]*", following.lstrip()).group(0)
        assert not (tail and head and tail + head in words), (line, following)


@pytest.mark.slow
def test_chat_papers_and_show_print_hostile_ids(hostile_data) -> None:
    import pexpect

    data, _ = hostile_data
    env = {**os.environ, "RAG_ASSISTANT_DATA_DIR": str(data), "PROMPT_TOOLKIT_NO_CPR": "1", "NO_COLOR": "1"}
    exe = str(Path(sys.executable).with_name("rag-assistant"))
    child = pexpect.spawn(exe, ["chat"], env=env, encoding="utf-8", timeout=90, dimensions=(60, 200), use_poll=True)
    try:
        child.expect(PROMPT)
        child.sendline("What does the kestrel scheduler predict?")
        child.expect(r"mode: extractive[^\n]*\ds")
        child.expect(PROMPT)
        child.sendline("/papers")
        child.expect(PROMPT)
        papers = child.before
        child.sendline("/show e5")
        child.expect(PROMPT)
        shown = child.before
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert "[e5]" in papers and "[a(1)]" in papers and "[Bx]" in papers, papers
    assert "[e5]" in shown and "\ufffd[31mRED" in shown, shown
    assert "\x1b[31mRED" not in papers + shown  # the corpus's own escape never reaches the terminal


def test_chat_prompt_shows_a_filter_of_hostile_field_values_without_control_bytes(cli, tmp_path: Path) -> None:
    """The prompt names the active filter's resolved values, which come from the corpus (a track here)."""
    path = tmp_path / "hostile-track.jsonl"
    track = "Hostile\x1b]0;pwned\x07 Track\x1b[31mRED"
    row = {"id": "h1", "abstract": "Kestrel schedulers preempt hawks. We propose a new method.", "topic": track}
    path.write_text(json.dumps(row) + "\n")
    assert cli("ingest", str(path)).returncode == 0
    done = cli("chat", input="/filter topic=hostile\n/quit\n")
    assert done.returncode == 0, done.stderr
    assert "you [topic = Hostile" in done.stdout, done.stdout
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout, done.stdout
