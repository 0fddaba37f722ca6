"""Filters on paper fields beyond search and ask: batch and eval take --author/--year/--topic/--where, a batch
row may carry its own `filter` object (a bad one fails that row only, the rest still runs), and chat has
/filter (shown in the prompt while active, /filter off). Malformed or unknown filters are one clear line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import test_filters

pytestmark = pytest.mark.slow

# the fielded corpus of tests/test_filters.py (authors, tracks, years, venues), ingested once per module
fielded = pytest.fixture(scope="module")(test_filters.fielded.__wrapped__)


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_batch_rows_carry_their_own_filters(cli, fielded: Path, tmp_path: Path) -> None:  # noqa: ANN001
    rows = [
        {"id": "hopper", "question": "What about reinforcement learning?", "filter": {"author": "Grace Hopper"}},
        {"id": "colour", "question": "What about reinforcement learning?", "filter": {"colour": "red"}},
        {"id": "badyear", "question": "What about reinforcement learning?", "where": {"year": "20x4"}},
        {"id": "flag", "question": "What about reinforcement learning?"},
        {"id": "both", "question": "What about ranking?", "filter": {"year": "2023-", "venue": "ICML"}},
    ]
    out = tmp_path / "answers.jsonl"
    done = cli("--data-dir", str(fielded), "batch", str(_write(tmp_path / "q.jsonl", rows)), "-o", str(out),
               "--topic", "fairness", "-k", "8")  # fmt: skip
    assert done.returncode == 1, done.stderr  # two rows failed; the others were answered
    got = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert list(got) == ["hopper", "colour", "badyear", "flag", "both"]
    ids = {k: {s["paper_id"] for s in r["sources"]} for k, r in got.items()}
    assert ids["hopper"] and ids["hopper"] <= {"fa1"}  # the row's author and the command's --topic
    assert got["colour"]["status"] == "failed" and "unknown field 'colour'" in got["colour"]["error"]
    assert got["badyear"]["status"] == "failed" and "malformed year '20x4'" in got["badyear"]["error"]
    assert ids["flag"] and ids["flag"] <= {"fa1", "fa2"}
    assert ids["both"] == {"fa1"}  # ICML, 2023 or later, fairness: fa1 only
    assert got["hopper"]["plan"]["filters"].startswith("topic = Social Aspects->Fairness, authors = Grace Hopper")


def test_batch_flags_that_name_an_unknown_field_are_a_usage_error(cli, fielded: Path, tmp_path: Path) -> None:  # noqa: ANN001
    questions = tmp_path / "q.txt"
    questions.write_text("What about reinforcement learning?\n")
    for args, message in [(("--where", "colour=red"), "unknown field 'colour'"), (("--year", "x"), "malformed year")]:
        done = cli("--data-dir", str(fielded), "batch", str(questions), "-o", str(tmp_path / "a.jsonl"), *args)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_eval_takes_the_filter_flags(cli, fielded: Path, tmp_path: Path) -> None:  # noqa: ANN001
    dataset = _write(
        tmp_path / "set.jsonl", [{"id": "q1", "question": "reinforcement learning", "gold_papers": ["rl2"]}]
    )
    done = cli("--data-dir", str(fielded), "eval", str(dataset), "--out", str(tmp_path / "run"), "--retrieval-only",
               "--year", "2023-2024")  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "run" / "results.jsonl").read_text().splitlines()[0])
    assert {r["paper_id"] for r in result["ranking"]} == {"rl2", "rl3", "fa1"}
    bad = cli("--data-dir", str(fielded), "eval", str(dataset), "--out", str(tmp_path / "r2"), "--where", "colour=red")
    assert bad.returncode == 2 and "unknown field 'colour'" in bad.stderr and "Traceback" not in bad.stderr


def test_chat_filter_is_shown_in_the_prompt_and_can_be_cleared(cli, fielded: Path) -> None:  # noqa: ANN001
    lines = [
        '/filter author="Ada Lovelace" year=2024-',
        "What about reinforcement learning?",
        "/filter colour=red",
        "/filter year",
        "/filter",
        "/filter off",
        "/quit",
    ]
    done = cli("--data-dir", str(fielded), "chat", input="\n".join(lines) + "\n")
    assert done.returncode == 0, done.stderr
    assert "filter: authors = Ada Lovelace, year >= 2024" in done.stdout
    assert "you [authors = Ada Lovelace, year >= 2024]> " in done.stdout
    answer = done.stdout.split("you [authors = Ada Lovelace, year >= 2024]> ")[1]
    assert "[rl2]" in answer and "[rl1]" not in answer and "[rl3]" not in answer  # rl2 and op2 only
    assert "unknown field 'colour'" in done.stderr and "malformed filter 'year'" in done.stderr
    assert "No filter: every paper is searched." in done.stdout and done.stdout.rstrip().endswith("you> bye")
