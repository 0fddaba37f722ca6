"""The model calls of question generation, all through LLMClient: the writer (prompts/gen_*.txt, one call per
candidate question) and the judge (prompts/judge_answers.txt: does this abstract answer the question?;
prompts/judge_criterion.txt: does this paper meet the survey's criterion?). The judge may be another model.

A verdict is parsed from the reply's first word (checks.parse_verdict); a YES must quote the sentence of the
abstract that shows it, and the quote is checked against the abstract and the question (`verified`).
Identical judgments are made once per run; the writer and the judge are shared by the worker threads."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from rag_assistant.config import Settings
from rag_assistant.corpus.models import Paper
from rag_assistant.evaluate.generate.checks import ANSWERS, CRITERION, evidence_found, parse_verdict

WRITER_SYSTEM = (
    "You write evaluation questions for a search engine over scientific paper abstracts. "
    "Reply with one JSON object and nothing else."
)
JUDGE_SYSTEM = "You check questions against scientific paper abstracts. Start your reply with the verdict word."
WRITER_PROMPTS = {kind: f"gen_{kind.replace('-', '_')}" for kind in ("known-item", "method", "result", "survey")}
WRITER_PROMPTS["unanswerable"] = "gen_unanswerable"
JUDGE_PROMPTS = ("judge_answers", "judge_criterion")
JUDGE_MAX_TOKENS = 160  # a verdict and one quoted sentence


@dataclass(frozen=True)
class Verdict:
    """One judgment of one paper: the verdict word (None: unreadable), the quoted evidence and whether the
    quote is in the abstract."""

    paper: str
    role: str  # gold, other, pool, top
    verdict: str | None
    evidence: str = ""
    verified: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def paper_text(paper: Paper) -> str:
    return f"{paper.title}. {paper.text}" if paper.title else paper.text


class Stopped(Exception):  # noqa: N818 - a signal to the worker threads, not an error
    """The run was interrupted: a worker thread makes no further model call."""


class Asker:
    """The writer and the judge. `judge_model` / `judge_base_url` default to the writer's. Once `stop` is set
    (Ctrl-C), every further call raises Stopped: a worker finishes at most the call it is in."""

    def __init__(self, settings: Settings, judge_model: str | None = None, judge_base_url: str | None = None) -> None:
        from rag_assistant.answer.llm_client import LLMClient
        from rag_assistant.answer.prompts import load_prompt

        self.writer = LLMClient(settings)
        self.judge = LLMClient(
            settings,
            model=judge_model,
            base_url=judge_base_url,
            temperature=0.0,
            max_tokens=min(settings.llm_max_tokens, JUDGE_MAX_TOKENS),
        )
        self.prompts = {name: load_prompt(name) for name in [*WRITER_PROMPTS.values(), *JUDGE_PROMPTS]}
        self.calls: Counter[str] = Counter()
        self.usage: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str, str], tuple[str | None, str]] = {}
        self.stop = threading.Event()

    def describe(self) -> dict[str, Any]:
        """What made the questions, for each record's provenance and the run's header."""
        return {
            "model": self.writer.model,
            "judge": self.judge.model,
            "temperature": self.writer.settings.llm_temperature,
            "prompts": sorted(p.version for p in self.prompts.values()),
        }

    def _go_on(self) -> None:
        if self.stop.is_set():
            raise Stopped

    def _count(self, role: str, usage: dict[str, int]) -> None:
        with self._lock:
            self.calls[role] += 1
            self.usage.update(usage)

    def write(self, kind: str, **values: str) -> str:
        """One candidate's raw reply from the writer."""
        prompt = self.prompts[WRITER_PROMPTS[kind]]
        self._go_on()
        reply = self.writer.complete(WRITER_SYSTEM, prompt.format(**values))
        self._count("writer", reply.usage)
        return reply.text

    def _judge(self, prompt_name: str, allowed: tuple[str, ...], **values: str) -> tuple[str | None, str]:
        key = (prompt_name, *values.values())
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        self._go_on()
        reply = self.judge.complete(JUDGE_SYSTEM, self.prompts[prompt_name].format(**values))
        self._count("judge", reply.usage)
        parsed = parse_verdict(reply.text, allowed)
        with self._lock:
            self._cache[key] = parsed
        return parsed

    def answers(self, question: str, paper: Paper, role: str) -> Verdict:
        """Does the paper's abstract answer the question (YES, PARTIAL, NO), with the quote that shows it."""
        verdict, evidence = self._judge("judge_answers", ANSWERS, question=question, abstract=paper_text(paper))
        found = verdict in ("YES", "PARTIAL") and evidence_found(evidence, paper_text(paper), question)
        return Verdict(paper.paper_id, role, verdict, evidence[:600], found)

    def meets(self, criterion: str, paper: Paper, role: str) -> Verdict:
        """Does the paper meet a survey question's criterion (RELEVANT, BORDERLINE, NOT)."""
        verdict, _ = self._judge("judge_criterion", CRITERION, criterion=criterion, abstract=paper_text(paper))
        return Verdict(paper.paper_id, role, verdict)
