"""What a question asks, decided once before anything is retrieved: its kind and the answer size it expects.
Retrieval (how deep to look), the generators (which layout), chat, batch and eval all read this plan instead
of each guessing from the words.

Kinds:
- `paper`: about one paper ("How does ShadowKV ...?", "the paper that ...", "Which paper proposes ...?").
- `survey`: after every paper that meets it ("Which papers ...?", "What approaches to X were proposed?",
  "papers on X", "List work on X", "Are there studies of X?"): answered with all of them, up to a cap.
- `comparison`: how methods or papers differ ("How does X compare to Y?", "X vs Y").
- `open`: the words do not say (a keyword query); the ranking decides: a clear leader means one paper,
  several close ones a short topic answer.
- `authors`: an author's papers ("papers by X", "which papers did X co-author?"), listed from the metadata; set
  by `with_metadata` when the question names an author of the index (answer/named.py finds what it names).
Rules on the question's form, not its topic: they read "which papers" vs "which paper", never what the
papers are about, so they hold for any corpus."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["paper", "survey", "comparison", "open", "authors"]

_WORKS = (
    r"papers|works|studies|approaches|methods|techniques|algorithms|systems|models|frameworks|articles|"
    r"publications|ways|strategies|solutions|benchmarks|datasets|research|literature|efforts|attempts|"
    r"contributions|proposals|lines of work|directions"
)
_SURVEY = re.compile(
    rf"^\s*(which|what|list|name|find|show( me)?|are there|is there any|survey|give me|enumerate|collect|gather)\b"
    rf"[^?]{{0,80}}?\b({_WORKS})\b"
    rf"|^\s*(papers|works?|studies|research|literature|publications)\s+(on|about|that|which|proposing|studying|"
    rf"using|addressing|applying|where|in which|whose)\b"
    rf"|^\s*(list|enumerate|survey|overview of)\b"
    rf"|^\s*(what|which) (has|have) (been|researchers|people|papers|authors)\b"
    rf"|^\s*how (are|have|do|did)\b[^?]{{0,60}}\b(being|been|papers|researchers|works|studies|authors)\b"
    rf"|\b(all|every|any) (the )?({_WORKS})\b"
    rf"|^\s*are there\b",
    re.I,
)
_ONE = re.compile(
    r"\b(the|a|one|this|that|which) (paper|work|study|article|method|approach|model|framework|system|algorithm)\b"
    r"(?! (that|which) (are|propose|study))",
    re.I,
)
_ABOUT_ONE = re.compile(r"^\s*(how|why|what) (does|did|is|was)\b", re.I)
_COMPARISON = re.compile(
    r"^\s*(compare|contrast)\b|\bhow (does|do|did|would) .{1,80}\b(compare|differ)\b|\bdifferences? between\b"
    r"|\b(vs\.?|versus)\s|\b(better|worse|faster|slower) than (the |a )?\w+\?\s*$",
    re.I,
)
_THE_PAPER = re.compile(r"^\s*(the|a|one) (paper|work|study|article)\b", re.I)


@dataclass(frozen=True)
class Plan:
    """What a question asks. `max_papers`: papers an answer may list (survey: the cap; others: top_k)."""

    kind: Kind
    max_papers: int
    named: Mapping[str, Any] = field(default_factory=dict)  # metadata the question names, as filters (answer/named.py)

    @property
    def survey(self) -> bool:
        return self.kind == "survey"

    def as_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "max_papers": self.max_papers, **self.named}


def question_kind(question: str) -> Kind:
    """The kind of question from its form alone (module docstring)."""
    if _THE_PAPER.match(question):
        return "paper"
    if _COMPARISON.search(question) and not _SURVEY.search(question):
        return "comparison"
    if _SURVEY.search(question):
        # "what methods does X use" and "which method does X propose" are about X
        if re.search(r"\b(does|did)\b", question, re.I) or re.search(r"\bwhich (paper|work|study)\b", question, re.I):
            return "paper"
        return "survey"
    if _ONE.search(question) or _ABOUT_ONE.match(question):
        return "paper"
    return "open"


def plan_question(question: str, top_k: int, survey_max: int) -> Plan:
    kind = question_kind(question)
    return Plan(kind, survey_max if kind == "survey" else top_k)


def with_metadata(plan: Plan, named: Mapping[str, Any], listed: int | None) -> Plan:
    """The plan of a question that names metadata (`named`: what it names, e.g. {"filtered": "authors = X"}):
    an author's papers when `listed` (how many there are: every one is listed), else the same kind of question
    within the filters."""
    if listed is not None:
        return Plan("authors", listed, dict(named))
    return Plan(plan.kind, plan.max_papers, dict(named))
