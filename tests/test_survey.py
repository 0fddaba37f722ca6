"""Right-sized answers: a survey lists every paper the match model lets through, with the ones near the cut-off
apart; a near miss says what no paper here does and lists the closest papers as near misses. How many papers
pass is calibration (measured by `rag-assistant eval` on eval/survey.jsonl and eval/nearmiss.jsonl); these
tests pin the mechanisms, forcing the cut-offs through settings where they must."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
from fake_llm import FakeLLMServer

from rag_assistant.answer.analysis import PaperView
from rag_assistant.answer.survey import Survey, assemble, count_line, select
from rag_assistant.corpus.models import Paper
from rag_assistant.evaluate.metrics import citation_prf, survey_metrics
from rag_assistant.retrieve import Source

SURVEY_Q = "Which papers study jailbreak attacks on language models?"


def _view(pid: str, rank: int, vector: list[float], text: str = "A paper about things.") -> PaperView:
    paper = Paper(paper_id=pid, text=text, source="x.txt", position=rank)
    vectors = np.array([vector], dtype=np.float32)
    return PaperView(Source(paper, 1.0 - rank / 10, rank=rank + 1), [text], vectors, frozenset(), frozenset())


def test_select_lists_papers_above_the_cut_off_and_the_near_ones_apart() -> None:
    views = [_view(f"p{i}", i, [1.0, 0.0]) for i in range(6)]
    probability = np.array([0.9, 0.1, 0.7, 0.3, 0.45, 0.05])
    survey = select(views, probability, include=0.4, possible=0.2, cap=50)
    assert survey.papers == ["p0", "p2", "p4"]  # most likely first, not retrieval order
    assert survey.possible == ["p3"]
    assert survey.ranking == ["p0", "p2", "p4", "p3", "p1", "p5"] and not survey.capped
    capped = select(views, probability, include=0.4, possible=0.2, cap=2)
    assert capped.papers == ["p0", "p2"] and capped.capped and capped.possible == []
    assert count_line(capped).startswith("More than 2 papers match")
    assert count_line(survey) == "3 papers match this question; 1 more is possibly related (listed apart)."


def test_many_papers_are_grouped_and_the_groups_named() -> None:
    texts = ["Jailbreak prompts attack aligned chatbots.", "Protein folding with diffusion models."]
    views = [_view(f"p{i}", i, [1.0, 0.1 * i] if i < 6 else [0.1 * i, 1.0], texts[i >= 6]) for i in range(12)]
    survey = select(views, np.full(12, 0.9), include=0.4, possible=0.2, cap=50)
    assert len(survey.groups) == 2
    assert {frozenset(g.papers) for g in survey.groups} == {frozenset(f"p{i}" for i in range(6)),
                                                             frozenset(f"p{i}" for i in range(6, 12))}  # fmt: skip
    for g in survey.groups:  # named by words of its own papers
        own = texts[g.papers[0] in {f"p{i}" for i in range(6, 12)}]
        assert g.label and all(word in own for word in g.label.split(", ")), g.label
    text = assemble(survey, {p: f"- line [{p}]." for p in survey.papers})
    assert text.startswith("12 papers match this question.") and text.count("**") == 4


def test_survey_metrics_count_borderline_papers_neither_way() -> None:
    # cited: g1 (right), b1 (arguable), x (wrong); gold g1, g2
    got = citation_prf(["g1", "b1", "x"], ["g1", "g2"], {}, ["b1"])
    assert got["citation_precision"] == 0.5 and got["citation_recall"] == 0.5
    only_arguable = citation_prf(["b1"], ["g1"], {}, ["b1"])
    assert only_arguable["citation_precision"] is None and only_arguable["citation_recall"] == 0.0
    survey = {"ranking": ["x", "dup-of-g2", "g1"], "duplicates": {"dup-of-g2": ["g2"]}}
    m = survey_metrics(["g1"], survey, ["g1", "g2", "g3"], [])
    assert m["survey_recall@20"] == 2 / 3 and m["survey_cited"] == 1.0 and m["survey_precision"] == 1.0


def test_survey_answer_through_the_cli(cli, own_ready: Path) -> None:
    answer = json.loads(cli("ask", SURVEY_Q, "--json").stdout)
    survey = answer["survey"]
    assert answer["plan"] == {"kind": "survey", "max_papers": 50}
    assert answer["citations"] == survey["papers"]  # every listed paper cited, best first
    assert set(survey["papers"]).isdisjoint(survey["possible"])
    assert all(p not in answer["citations"] for p in survey["possible"])  # never mixed in
    assert [s["paper_id"] for s in answer["sources"]] == survey["papers"] + survey["possible"]
    # the near ones are shown apart in the terminal, with their key sentence
    forced = cli("ask", SURVEY_Q, env={"RAG_ASSISTANT_SURVEY_INCLUDE": "0.99", "RAG_ASSISTANT_SURVEY_POSSIBLE": "0"})
    assert forced.returncode == 0, forced.stderr


def test_survey_questions_abstain_by_their_own_threshold(cli, own_ready: Path) -> None:
    # relevance read over a survey's many candidates runs lower: a survey question has its own floor
    env = {"RAG_ASSISTANT_ABSTAIN_THRESHOLD": "0.99", "RAG_ASSISTANT_SURVEY_ABSTAIN_THRESHOLD": "0"}
    survey = json.loads(cli("ask", SURVEY_Q, "--json", env=env).stdout)
    assert survey["plan"]["kind"] == "survey" and not survey["abstained"]
    one = json.loads(cli("ask", "How does ShadowKV compress the KV cache?", "--json", env=env).stdout)
    assert one["plan"]["kind"] != "survey" and one["abstained"]
    strict = {"RAG_ASSISTANT_ABSTAIN_THRESHOLD": "0", "RAG_ASSISTANT_SURVEY_ABSTAIN_THRESHOLD": "0.99"}
    assert json.loads(cli("ask", SURVEY_Q, "--json", env=strict).stdout)["abstained"]


def test_near_miss_says_what_is_missing_and_lists_the_closest(cli, own_ready: Path) -> None:
    env = {"RAG_ASSISTANT_NEAR_MISS_THRESHOLD": "1.0"}  # no paper can reach it: always a near miss
    result = cli("ask", "How does ShadowKV compress the KV cache of diffusion language models?", "--json", env=env)
    answer = json.loads(result.stdout)
    miss = answer["near_miss"]
    assert miss and not answer["abstained"]
    assert answer["answer"].startswith("No paper here does what the question asks")
    assert miss["missing"] and all(w in answer["answer"] for w in miss["missing"])
    assert answer["citations"] == [p for p in miss["closest"] if p in answer["citations"]] and answer["citations"]
    assert "diffusion" in miss["missing"]  # ShadowKV's abstract says nothing of diffusion
    far = json.loads(cli("ask", "What is the best recipe for banana bread?", "--json", env=env).stdout)
    assert far["abstained"] and far["near_miss"] is None  # far-off questions are still abstained on


def _survey_model(req: dict[str, Any]) -> str:
    """Describes every other paper of the prompt, and invents one."""
    user = req["messages"][-1]["content"]
    labels = re.findall(r"^\[([^\]\n]+)\]", user, re.MULTILINE)
    lines = [f"- Paper {label} studies an attack on a chatbot [{label}]." for label in labels[::2]]
    return "\n".join([*lines, "- A paper that does not exist [FAKE-9]."])


def test_llm_survey_cites_every_listed_paper_or_names_it_left_out(cli, own_ready: Path) -> None:
    with FakeLLMServer(default=_survey_model) as srv:
        env = {"OPENAI_BASE_URL": srv.base_url, "OPENAI_API_KEY": "test", "RAG_ASSISTANT_SURVEY_INCLUDE": "0.05"}
        result = cli("ask", SURVEY_Q, "--json", env=env)
    answer = json.loads(result.stdout)
    listed = answer["survey"]["papers"]
    assert answer["mode"] == "llm" and len(listed) >= 2, result.stderr
    left_out = [p for p in listed if p not in answer["citations"]]
    assert left_out and set(answer["citations"]) <= set(listed)
    assert answer["answer"].splitlines()[-1] == "Also matching, not described: " + ", ".join(f"[{p}]" for p in left_out)
    assert any("not described by the model" in w for w in answer["warnings"])
    assert "FAKE-9" not in answer["answer"] and any("FAKE-9" in w for w in answer["warnings"])
    assert isinstance(Survey(papers=listed).as_dict(), dict)
