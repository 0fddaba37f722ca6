"""One analysis of each retrieved paper per question (answer/analysis.py): relevance, the judge, the answerer and
the citation check read the same PaperView instead of splitting and tokenising the abstract again each."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rag_assistant import text
from rag_assistant.answer.chain import AnswerChain
from rag_assistant.config import load_settings

QUESTIONS = ["How does ShadowKV reduce KV cache memory?", "Which papers study jailbreak attacks on language models?"]


def _count(monkeypatch: pytest.MonkeyPatch, name: str, calls: Counter[str], key: Callable[[Any], list[str]]) -> None:
    """Count, per text, the calls of text.<name> from the answer layer (not retrieval's: a survey's feedback
    tokenises its top papers)."""
    original = getattr(text, name)

    def counting(arg: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
        calls.update(key(arg))
        return original(arg, *args, **kwargs)

    for module in [m for n, m in sys.modules.items() if n.startswith("rag_assistant.answer.")]:
        if getattr(module, name, None) is original:
            monkeypatch.setattr(module, name, counting)


@pytest.mark.parametrize("question", QUESTIONS)
def test_each_retrieved_paper_is_split_and_tokenised_once(
    ready: Path, monkeypatch: pytest.MonkeyPatch, question: str
) -> None:
    chain = AnswerChain(load_settings(mode="extractive"), log=False)
    chain.ask("What is reward hacking?")  # every module loaded before counting
    splits: Counter[str] = Counter()
    tokenised: Counter[str] = Counter()
    _count(monkeypatch, "split_sentences", splits, lambda t: [t])
    _count(monkeypatch, "tokenize", tokenised, list)
    answer = chain.ask(question)
    assert answer.citations and not answer.abstained, answer.answer
    for source in answer.sources:
        assert splits[source.paper.text] == 1, (source.paper_id, splits[source.paper.text])
        assert sum(n for t, n in tokenised.items() if source.paper.text in t) == 1, source.paper_id
