"""What a question asks (rag_assistant/plan.py): its kind from its form alone, and the answer size."""

from __future__ import annotations

import pytest

from rag_assistant.plan import plan_question, question_kind


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("Which papers study jailbreak attacks on language models?", "survey"),
        ("What approaches make long-context inference cheaper?", "survey"),
        ("What approaches to protein design were proposed?", "survey"),
        ("papers on learned image compression", "survey"),
        ("Papers where several language models debate to reach an answer", "survey"),
        ("studies in which robots learn from videos of people", "survey"),
        ("List work on federated unlearning", "survey"),
        ("Are there studies of tokenizer fairness across languages?", "survey"),
        ("How are LLMs being used for theorem proving?", "survey"),
        ("What has been done on spiking transformers?", "survey"),
        ("Which papers compare DPO and PPO?", "survey"),
        ("How does ShadowKV reduce KV cache memory?", "paper"),
        ("the paper that offloads the value cache to the CPU", "paper"),
        ("the paper that compares two samplers", "paper"),
        ("Which paper introduces a benchmark for GUI agents?", "paper"),
        ("What methods does ShadowKV use to select KV pairs?", "paper"),
        ("How does GPTAQ's asymmetric calibration differ from GPTQ?", "comparison"),
        ("What is the difference between DPO and PPO?", "comparison"),
        ("ShadowKV vs. InfiniGen for long-context decoding", "comparison"),
        ("low-rank key cache offloading", "open"),
        ("Telling cause from effect by comparing description lengths", "open"),
    ],
)
def test_question_kind_from_its_form(question: str, kind: str) -> None:
    assert question_kind(question) == kind


def test_survey_plans_the_cap_others_top_k() -> None:
    assert plan_question("Which papers study jailbreaks?", top_k=5, survey_max=50).max_papers == 50
    plan = plan_question("How does ShadowKV work?", top_k=7, survey_max=50)
    assert (plan.kind, plan.max_papers, plan.survey) == ("paper", 7, False)
    assert plan.as_dict() == {"kind": "paper", "max_papers": 7}
