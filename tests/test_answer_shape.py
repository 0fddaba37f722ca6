"""Answers shaped by the question: one paper's method and result for a question about one paper, one line per
paper for a topic question, sentence roles, and abstract markup made readable."""

from __future__ import annotations

import json

import pytest

from rag_assistant.answer.roles import BACKGROUND, METHOD, OTHER, RESULT, asks_for_topic, sentence_role
from rag_assistant.text import clean_markup


@pytest.mark.parametrize(
    ("sentence", "position", "role"),
    [
        ("Large language models are increasingly deployed in high-stakes settings.", 0, BACKGROUND),
        ("However, existing defenses remain brittle under adaptive attacks.", 1, BACKGROUND),
        ("We propose RobustX, a defense that filters adversarial suffixes with a small classifier.", 2, METHOD),
        ("Experiments on five benchmarks show that RobustX reduces attack success by 40%.", 4, RESULT),
        ("We prove that the estimator converges at a rate of 1/sqrt(n).", 3, RESULT),
        ("Code is available at https://github.com/example/robustx.", 5, OTHER),
    ],
)
def test_sentence_roles(sentence: str, position: int, role: str) -> None:
    assert sentence_role(sentence, position, 6) == role


@pytest.mark.parametrize(
    ("question", "topic"),
    [
        ("Which papers study jailbreak attacks on language models?", True),
        ("What approaches make long-context inference cheaper?", True),
        ("How are LLMs being used for theorem proving?", True),
        ("How does ShadowKV reduce KV cache memory?", False),
        ("the paper that offloads the value cache to the CPU", False),
        ("What methods does ShadowKV use to select KV pairs?", False),
        ("low-rank key cache offloading", None),
    ],
)
def test_question_intent(question: str, topic: bool | None) -> None:
    assert asks_for_topic(question) is topic


def test_markup_is_made_readable() -> None:
    assert clean_markup(r"up to 6$\times$ larger batches") == "up to 6× larger batches"
    assert clean_markup(r"$\mathrm{E}(3)$-equivariant \emph{1)} models") == "E(3)-equivariant 1) models"
    assert clean_markup("a *token* and **bold** word, 2 * 3 = 6") == "a token and bold word, 2 * 3 = 6"
    assert clean_markup("50% cheaper, costs \\$5, __init__") == "50% cheaper, costs \\$5, __init__"


def test_question_about_one_paper_is_answered_from_it_with_method_and_result(cli, own_ready) -> None:
    result = cli("ask", "How does ShadowKV reduce KV cache memory?", "--json")
    answer = json.loads(result.stdout)
    assert answer["citations"] == ["004:17"], answer["answer"]
    assert "6×" in answer["answer"] and "$" not in answer["answer"]  # the result sentence, markup cleaned
    assert "We present ShadowKV" in answer["answer"]  # the method sentence
    assert "With the widespread deployment" not in answer["answer"]  # not the motivation


def test_survey_question_gets_the_count_then_one_cited_line_per_paper(cli, own_ready) -> None:
    result = cli("ask", "Which papers study jailbreak attacks on language models?", "--json")
    answer = json.loads(result.stdout)
    assert answer["plan"]["kind"] == "survey"
    count, *lines = [line for line in answer["answer"].split("\n") if line.strip()]
    listed = answer["survey"]["papers"]
    more = len(answer["survey"]["possible"])
    tail = f"; {more} more {'is' if more == 1 else 'are'} possibly related (listed apart)." if more else "."
    assert count == f"{len(listed)} papers match this question{tail}" and len(listed) >= 2, answer["answer"]
    assert all(line.startswith("- ") for line in lines), answer["answer"]
    cited = [c for s in answer["sentences"] for c in s["citations"]]
    assert cited == listed and len(lines) == len(set(cited))  # one paper per line, each once, best first
    plain = cli("ask", "Which papers study jailbreak attacks on language models?")
    assert plain.stdout.count("\n- ") + plain.stdout.startswith("- ") == len(lines)  # whole lines in a pipe


def test_question_the_seeds_cannot_answer_abstains(cli, own_ready) -> None:
    result = cli("ask", "Which paper introduces a speech recognition model for low-resource languages?", "--json")
    assert json.loads(result.stdout)["abstained"] is True
