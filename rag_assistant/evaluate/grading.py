"""Reference-free answer metrics of the LLM judge (`eval --judge MODEL`), the ones RAGAS and similar tools
report, beside the citation-aware ones (definitions in eval/README.md):

- groundedness is `support_recall`: the share of answer sentences whose citations support them (judge.py);
- `answer_relevance`: does the answer address the question? prompts/judge_relevance.txt, YES = 1,
  PARTIAL = 0.5, NO or an unreadable reply = 0;
- `context_precision`: RAGAS's context precision of the k papers the answer was written from, each relevant
  when the judge finds in its abstract an answer to the question, whole or in part (prompts/judge_answers.txt,
  YES or PARTIAL): the mean over the relevant ranks r of precision@r, 0 when none is relevant.

Both are defined on the answers that did not decline (neither abstained nor answered with a near miss), as
support is. Identical judgments are made once per run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rag_assistant.answer.llm_client import LLMClient
    from rag_assistant.answer.models import Answer
    from rag_assistant.corpus.models import Paper
    from rag_assistant.evaluate.metrics import Metrics

SYSTEM = "You grade answers and search results about scientific papers. Start your reply with the verdict word."
_SCORE = {"YES": 1.0, "PARTIAL": 0.5, "NO": 0.0}


def context_precision(relevant: Sequence[bool]) -> float:
    """RAGAS context precision: sum over ranks r of precision@r x relevant(r), over the relevant papers."""
    hits, total = 0, 0.0
    for rank, is_relevant in enumerate(relevant, start=1):
        if is_relevant:
            hits += 1
            total += hits / rank
    return total / hits if hits else 0.0


class Grader:
    """The answer metrics through one judge client; `usage` is shared with the support judge's."""

    def __init__(self, llm: LLMClient, usage: Counter[str]) -> None:
        from rag_assistant.answer.prompts import load_prompt

        self.llm = llm
        self.usage = usage
        self.prompts = {name: load_prompt(name) for name in ("judge_relevance", "judge_answers")}
        self.calls = 0
        self.unparsed = 0
        self._cache: dict[tuple[str, ...], str | None] = {}

    def _verdict(self, prompt: str, **values: str) -> str | None:
        from rag_assistant.evaluate.generate.checks import ANSWERS, parse_verdict

        key = (prompt, *values.values())
        if key not in self._cache:
            reply = self.llm.complete(SYSTEM, self.prompts[prompt].format(**values))
            self.calls += 1
            self.usage.update(reply.usage)
            verdict, _ = parse_verdict(reply.text, ANSWERS)
            self.unparsed += verdict is None
            self._cache[key] = verdict
        return self._cache[key]

    def grade(self, question: str, answer: Answer, k: int) -> Metrics:
        """answer_relevance and context_precision of one answer (the first k of its sources)."""
        verdict = self._verdict("judge_relevance", question=question, answer=answer.answer)
        relevant = []
        for source in answer.sources[:k]:
            text = abstract_text(source.paper)
            relevant.append(self._verdict("judge_answers", question=question, abstract=text) in ("YES", "PARTIAL"))
        return {
            "answer_relevance": _SCORE.get(verdict or "NO", 0.0),
            "context_precision": context_precision(relevant) if relevant else None,
        }

    def describe(self) -> dict[str, Any]:
        return {
            "prompt_versions": sorted(p.version for p in self.prompts.values()),
            "calls": self.calls,
            "unparsed_replies": self.unparsed,
        }


def abstract_text(paper: Paper) -> str:
    """A paper as a judge reads it: "Title. Abstract", or the abstract alone."""
    return f"{paper.title}. {paper.text}" if paper.title else paper.text
