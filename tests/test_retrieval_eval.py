"""Retrieval-only evaluation (`eval --retrieval-only`) and question selection by tag (`eval --tag`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_assistant.config import Settings
from rag_assistant.evaluate.dataset import DatasetError, EvalItem, load_dataset
from rag_assistant.evaluate.retrieval_run import run_retrieval, select_tags

REPO = Path(__file__).resolve().parents[1]


def _items() -> list[EvalItem]:
    return [
        EvalItem("a", "qa", ("p1",), tags=("dev", "single")),
        EvalItem("b", "qb", ("p1", "p2"), tags=("dev", "multi")),
        EvalItem("c", "qc", (), tags=("heldout", "unanswerable")),
        EvalItem("d", "qd", ("p3",), tags=("heldout", "single")),
    ]


def test_select_tags_comma_is_any_repeat_is_all() -> None:
    items = _items()
    assert [i.id for i in select_tags(items, ["dev"])] == ["a", "b"]
    assert [i.id for i in select_tags(items, ["single,multi"])] == ["a", "b", "d"]
    assert [i.id for i in select_tags(items, ["heldout", "single, multi"])] == ["d"]
    assert select_tags(items, []) == items
    with pytest.raises(DatasetError, match="dev and unanswerable") as exc:
        select_tags(items, ["dev", "unanswerable"])
    assert "heldout" in (exc.value.hint or "")


def test_retrieval_only_run_scores_like_the_full_run(ready: Path, tmp_path: Path) -> None:
    from rag_assistant.evaluate.report import summarize, write_run

    rows = [json.loads(line) for line in (REPO / "eval" / "dev.jsonl").read_text().splitlines() if line.strip()]
    dataset = tmp_path / "some.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows[:12] + rows[-2:]))
    items = load_dataset(dataset)
    run = run_retrieval(items, Settings(), k=5)
    summary = summarize(run, dataset)
    paths = write_run(tmp_path / "run", run, summary)
    assert all(p.is_file() for p in paths.values())
    assert summary["run"]["mode"] == "retrieval-only" and summary["counts"]["questions"] == 14
    results = run.results
    assert all(r["answer"] == "" and r["citations"] == [] and len(r["ranking"]) == 10 for r in results)

    def recall(r: dict) -> float:  # by hand: gold ids (or their duplicates) among the first 5
        found = {g for s in r["ranking"][:5] for g in r["gold_papers"] if g in [s["paper_id"], *s["duplicates"]]}
        return len(found) / len(r["gold_papers"])

    answerable = [r for r in results if r["gold_papers"]]
    assert summary["overall"]["recall@5"] == pytest.approx(sum(map(recall, answerable)) / len(answerable), abs=1e-6)
    assert "recall@5" not in results[-1]["metrics"]  # unanswerable: no retrieval metrics
    assert summary["overall"]["latency_p50"] > 0 and "citation_precision" not in summary["overall"]


def test_eval_cli_retrieval_only_with_tags(cli, ready: Path, tmp_path: Path) -> None:
    rows = [json.loads(line) for line in (REPO / "eval" / "dev.jsonl").read_text().splitlines() if line.strip()]
    dataset = tmp_path / "tagged.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    multi = [r["id"] for r in rows if "multi" in r.get("tags", [])]
    res = cli("eval", str(dataset), "--retrieval-only", "--tag", "multi", "--out", str(tmp_path / "r"), "--json")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["counts"]["questions"] == len(multi) and summary["run"]["mode"] == "retrieval-only"
    assert 0 < summary["overall"]["recall@5"] <= 1 and summary["by_tag"]["multi"]["n"] == len(multi)
    res = cli("eval", str(dataset), "--retrieval-only", "--tag", "no-such-tag", "--out", str(tmp_path / "s"))
    assert res.returncode == 2 and "no question carries the tags no-such-tag" in res.stderr
