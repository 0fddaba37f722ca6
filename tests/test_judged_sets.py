"""The judged survey and near-miss sets are what eval/build_sets.py builds from eval/judged/, and the second
held-out pair (eval/survey2.jsonl, eval/nearmiss2.jsonl) has the shape it was built to have."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EVAL = Path(__file__).resolve().parents[1] / "eval"


def rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (EVAL / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def test_committed_sets_are_what_the_judgments_build() -> None:
    done = subprocess.run(
        [sys.executable, str(EVAL / "build_sets.py"), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_second_held_out_survey_set_is_held_out_and_sized_as_built() -> None:
    survey = rows("survey2.jsonl")
    assert len(survey) >= 10
    for q in survey:
        assert "heldout2" in q["tags"] and "survey" in q["tags"]
        assert 5 <= len(q["gold_papers"]) <= 20, q["id"]
        assert not set(q["gold_papers"]) & set(q["borderline_papers"]), q["id"]
        assert q["criterion"]
    assert any("reworded" in q["tags"] for q in survey)
    old = {q["id"] for q in rows("survey.jsonl")}
    assert not old & {q["id"] for q in survey}


def test_second_held_out_near_miss_set_pairs_near_topic_questions_with_answerable_twins() -> None:
    items = rows("nearmiss2.jsonl")
    assert all("heldout2" in q["tags"] for q in items)
    near = [q for q in items if "near-topic" in q["tags"]]
    twins = [q for q in items if "twin" in q["tags"]]
    assert len(near) >= 20 and len(twins) >= 10
    assert all(q["gold_papers"] == [] for q in near)
    assert all(q["gold_papers"] for q in twins)
    judged = {q["id"]: q for q in rows("judged/nearmiss2.jsonl")}
    assert all(judged[q["id"]]["closest"] and judged[q["id"]]["why_none"] for q in near)
    twin_of = {t["twin_of"] for t in rows("judged/twins2.jsonl")}
    assert twin_of <= set(judged)
