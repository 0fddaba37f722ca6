"""Support judges: does the cited abstract support the answer sentence?

offline: the answer chain's own support score (rag_assistant.answer.citations) against
         Settings.support_threshold -- free, deterministic, but lexical/embedding-based.
llm:     prompts/judge_support.txt sent to an OpenAI-compatible model, one call per (sentence, cited paper)
         and one more on all cited abstracts together when no single one suffices. SUPPORTED = 1.0,
         PARTIAL = 0.5, UNSUPPORTED (or an unreadable reply) = 0.0; a citation supports alone at 1.0.
         It also grades each answer on answer relevance and context precision (grading.py)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any, Protocol

from rag_assistant.answer.citations import strip_citations
from rag_assistant.answer.models import Answer
from rag_assistant.config import Settings
from rag_assistant.evaluate.grading import abstract_text
from rag_assistant.evaluate.metrics import Judged, Metrics

JUDGE_SYSTEM = "You verify claims against scientific paper abstracts. Reply with exactly one word."
_VERDICT = re.compile(r"\b(UNSUPPORTED|NOT\s+SUPPORTED|PARTIAL(?:LY)?|SUPPORTED)\b", re.IGNORECASE)
_THINK = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)


class Judge(Protocol):
    kind: str
    threshold: float

    def judge(self, answer: Answer) -> list[Judged]: ...

    def grade(self, question: str, answer: Answer, k: int) -> Metrics:
        """Reference-free answer metrics (grading.py); the offline judge has none."""
        ...

    def describe(self) -> dict[str, Any]: ...


def parse_verdict(reply: str) -> float | None:
    """SUPPORTED -> 1.0, PARTIAL -> 0.5, UNSUPPORTED / NOT SUPPORTED -> 0.0; None when no verdict is found."""
    match = _VERDICT.search(_THINK.sub(" ", reply))
    if match is None:
        return None
    word = match.group(1).upper()
    if word.startswith(("UN", "NOT")):
        return 0.0
    return 0.5 if word.startswith("PARTIAL") else 1.0


def _abstracts(answer: Answer) -> dict[str, str]:
    return {s.paper_id: abstract_text(s.paper) for s in answer.sources}


class OfflineJudge:
    """The chain's support scores (computed while answering) against the support threshold."""

    kind = "offline"

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold

    def judge(self, answer: Answer) -> list[Judged]:
        return [
            Judged(list(s.citations), dict(s.support), None, s.flags.count("invalid_citation_removed"))
            for s in answer.sentences
        ]

    def grade(self, question: str, answer: Answer, k: int) -> Metrics:
        return {}

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": f"offline support score >= {self.threshold:g}",
            "threshold": self.threshold,
            "measure": "0.5 * max cosine(sentence, abstract sentence) + 0.5 * content-word coverage",
        }


class LLMJudge:
    """prompts/judge_support.txt through an OpenAI-compatible chat model (the LLM client's retries and errors)."""

    kind = "llm"
    threshold = 1.0

    def __init__(self, settings: Settings, model: str, base_url: str | None = None) -> None:
        from rag_assistant.answer.llm_client import LLMClient
        from rag_assistant.answer.prompts import load_prompt
        from rag_assistant.evaluate.grading import Grader

        self.llm = LLMClient(
            settings, model=model, base_url=base_url or settings.llm_base_url, temperature=0.0, max_tokens=16
        )
        self.settings = self.llm.settings
        self.prompt = load_prompt("judge_support")
        self.calls = 0
        self.unparsed = 0
        self.usage: Counter[str] = Counter()
        self._cache: dict[tuple[str, str], float] = {}
        self.grader = Grader(self.llm, self.usage)

    def verdict(self, claim: str, abstract: str) -> float:
        key = (claim, abstract)
        if key not in self._cache:
            reply = self.llm.complete(JUDGE_SYSTEM, self.prompt.format(sentence=claim, abstract=abstract))
            self.calls += 1
            self.usage.update(reply.usage)
            score = parse_verdict(reply.text)
            if score is None:
                self.unparsed += 1
            self._cache[key] = score or 0.0
        return self._cache[key]

    def judge(self, answer: Answer) -> list[Judged]:
        abstracts: Mapping[str, str] = _abstracts(answer)
        known = set(abstracts)
        out = []
        for s in answer.sentences:
            claim = strip_citations(s.text, known)
            cites = [c for c in dict.fromkeys(s.citations) if c in abstracts]
            support = {c: self.verdict(claim, abstracts[c]) for c in cites}
            joint = None
            if len(cites) > 1 and max(support.values()) < self.threshold:
                together = "\n\n".join(f"[{c}] {abstracts[c]}" for c in cites)
                joint = self.verdict(claim, together) >= self.threshold
            out.append(Judged(cites, support, joint, s.flags.count("invalid_citation_removed")))
        return out

    def grade(self, question: str, answer: Answer, k: int) -> Metrics:
        return self.grader.grade(question, answer, k)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": f"LLM judge {self.settings.llm_model}",
            "model": self.settings.llm_model,
            "base_url": self.llm.where(),
            "prompt_version": self.prompt.version,
            "threshold": "SUPPORTED (PARTIAL = 0.5 counts only towards joint support)",
            "calls": self.calls + self.grader.calls,  # the answer metrics' calls too
            "unparsed_replies": self.unparsed,
            "usage": dict(self.usage),
            "answer_metrics": self.grader.describe(),
        }
