"""A conversation over the answer chain: follow-ups are condensed into standalone questions, and papers
cited earlier stay addressable by id ("tell me more about [004:17]") or by position ("the second one").

Condensing, extractive mode (no LLM), a documented rule:
1. Paper ids the user writes (with or without brackets) that the conversation has seen are pinned: the
   answer comes from those abstracts only.
2. Else an ordinal ("the first/second/third/last one/paper") picks that citation of the previous answer,
   and a bare reference ("it", "this paper", "that method", "they"...) picks the previous answer's
   papers (all of them for plural words, the first for singular ones: "it", "this method"); pinned too.
3. Else a short or elliptic follow-up ("and for vision?", "what about privacy?") is searched together with
   the previous standalone question's content words.
LLM mode: prompts/condense.txt rewrites the question with the recent turns; ids it keeps are pinned by rule 1."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field

from rag_assistant.answer.chain import AnswerChain
from rag_assistant.answer.models import Answer
from rag_assistant.answer.question import check_question
from rag_assistant.corpus.models import Paper
from rag_assistant.text import content_words

ORDINALS = {
    "first": 0,
    "1st": 0,
    "second": 1,
    "2nd": 1,
    "third": 2,
    "3rd": 2,
    "fourth": 3,
    "4th": 3,
    "fifth": 4,
    "5th": 4,
    "last": -1,
}
_ORDINAL = re.compile(
    rf"\b(?:the\s+)?({'|'.join(ORDINALS)})\s+(?:one|paper|work|study|method|approach|result)s?\b", re.I
)
_SINGULAR = re.compile(
    r"\b(it|its|(?:this|that|the) (?:one|paper|method|approach|model|work|system|framework|technique|study))\b", re.I
)
_PLURAL = re.compile(r"\b(they|them|their|these|those|both|the (?:papers|methods|approaches|works))\b", re.I)
_ELLIPTIC = re.compile(r"^\s*(and|what about|how about|also|or|but)\b", re.I)
_BRACKET = re.compile(r"\[([^\[\]\s]{1,80})\]")
_ID_SHAPE = re.compile(r"(?<![\w:])[\w.-]+:\d+(?![\w:])")
HISTORY_TURNS = 3


@dataclass
class Turn:
    question: str
    answer: Answer


@dataclass
class Condensed:
    query: str
    pinned: list[str] = field(default_factory=list)


class ChatSession:
    def __init__(self, chain: AnswerChain) -> None:
        self.chain = chain
        self.id = uuid.uuid4().hex[:8]
        self.turns: list[Turn] = []
        self.papers: dict[str, Paper] = {}  # every paper retrieved or cited so far, by id

    def reset(self) -> None:
        self.turns.clear()
        self.papers.clear()
        self.id = uuid.uuid4().hex[:8]

    @property
    def last(self) -> Answer | None:
        return self.turns[-1].answer if self.turns else None

    def mentioned_ids(self, text: str) -> list[str]:
        """Ids of indexed papers that the text names (seen in this conversation, bracketed, or id-shaped)."""
        seen = [pid for pid in self.papers if re.search(rf"(?<![\w:]){re.escape(pid)}(?![\w:])", text)]
        shaped = [m.strip() for m in _BRACKET.findall(text)] + _ID_SHAPE.findall(text)
        candidates = list(dict.fromkeys(seen + [c for c in shaped if c not in self.papers]))
        if len(candidates) > len(seen):
            found = self.chain.retriever.store.papers(candidates)
            self.papers.update(found)
            candidates = [c for c in candidates if c in found]
        return sorted(candidates, key=text.find)

    def condense(self, question: str) -> Condensed:
        if ids := self.mentioned_ids(question):
            return Condensed(self._with_labels(question, ids), ids)
        last = self.last
        if last is None:
            return Condensed(question)
        if self.chain.mode == "llm":
            return self._condense_llm(question)
        cited = last.citations
        if cited and (m := _ORDINAL.search(question)):
            index = ORDINALS[m.group(1).lower()]
            if -len(cited) <= index < len(cited):
                return Condensed(self._with_labels(question, [cited[index]]), [cited[index]])
        if cited and _PLURAL.search(question):
            return Condensed(self._with_labels(question, cited), list(cited))
        if cited and _SINGULAR.search(question):
            return Condensed(self._with_labels(question, cited[:1]), cited[:1])
        if _ELLIPTIC.search(question) or len(content_words(question)) <= 1:
            previous = self.turns[-1].answer.condensed_question or self.turns[-1].question
            return Condensed(f"{question} {' '.join(dict.fromkeys(content_words(previous)))}")
        return Condensed(question)

    def _with_labels(self, question: str, ids: list[str]) -> str:
        """The question plus the pinned ids, so that the log and /save show what 'it' resolved to."""
        missing = [p for p in ids if f"[{p}]" not in question]
        return f"{question} [{']['.join(missing)}]" if missing else question

    def _condense_llm(self, question: str) -> Condensed:
        from rag_assistant.answer.llm import LLMGenerator
        from rag_assistant.answer.prompts import load_prompt

        generator = self.chain.generator
        assert isinstance(generator, LLMGenerator)
        history = "\n".join(f"User: {t.question}\nAssistant: {t.answer.answer}" for t in self.turns[-HISTORY_TURNS:])
        prompt = load_prompt("condense").format(history=history, question=question)
        text, _ = generator.complete("You rewrite follow-up questions.", prompt)
        standalone = text.strip().splitlines()[0].strip() if text.strip() else question
        return Condensed(standalone, self.mentioned_ids(standalone))

    def ask(self, question: str, on_token=None) -> Answer:  # noqa: ANN001 - Callable[[str], None] | None
        # checked before condensing, which may call the LLM: an empty question costs nothing and is not logged
        question, notes = check_question(question, self.chain.settings.max_question_chars)
        condensed = self.condense(question)
        answer = self.chain.ask(
            question,
            on_token=on_token,
            kind="chat",
            session=self.id,
            retrieval_query=condensed.query,
            pinned=condensed.pinned or None,
        )
        for source in answer.sources:
            self.papers.setdefault(source["paper_id"], _paper(source))
        answer.warnings[:0] = notes
        self.turns.append(Turn(question, answer))
        return answer

    def to_markdown(self) -> str:
        lines = [f"# rag-assistant conversation {self.id}", ""]
        for i, turn in enumerate(self.turns, start=1):
            a = turn.answer
            lines += [f"## {i}. {turn.question}", ""]
            if a.condensed_question:
                lines += [f"*Searched for: {a.condensed_question}*", ""]
            lines += [a.answer, ""]
            if a.references:
                lines += ["**References**", ""]
                lines += [
                    f"- [{r.paper_id}] {r.source} #{r.position}: {r.title + '. ' if r.title else ''}{r.snippet}"
                    for r in a.references
                ]
                lines.append("")
            if a.warnings:
                lines += [f"> warning: {w}" for w in a.warnings] + [""]
            lines += [f"*{a.mode} · {a.model}*", ""]
        return "\n".join(lines)


def _paper(source: dict) -> Paper:
    return Paper(
        source["paper_id"],
        source["text"],
        source["source"],
        source["position"],
        source.get("title"),
        source.get("metadata") or {},
    )
