"""Prompt templates live in prompts/*.txt (shipped in the wheel); each is checked for its variables on load."""

from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from rag_assistant.errors import PromptError

# The variables each prompt must use, exactly: a template missing one would silently drop context,
# an unknown one would fail at format time in the middle of an answer.
EXPECTED: dict[str, frozenset[str]] = {
    "answer_system": frozenset({"not_found", "example"}),
    "answer_user": frozenset({"question", "sources"}),
    "survey_system": frozenset({"example"}),
    "survey_user": frozenset({"question", "count", "sources"}),
    "condense": frozenset({"history", "question"}),
    "judge_support": frozenset({"sentence", "abstract"}),
    # eval-generate (evaluate/generate/asker.py) and eval --judge's answer metrics (evaluate/grading.py)
    "gen_known_item": frozenset({"title", "abstract"}),
    "gen_method": frozenset({"title", "abstract"}),
    "gen_result": frozenset({"title", "abstract"}),
    "gen_survey": frozenset({"papers"}),
    "gen_unanswerable": frozenset({"title", "abstract"}),
    "judge_answers": frozenset({"question", "abstract"}),
    "judge_criterion": frozenset({"criterion", "abstract"}),
    "judge_relevance": frozenset({"question", "answer"}),
}


@dataclass(frozen=True)
class Prompt:
    name: str
    template: str

    @property
    def version(self) -> str:
        return f"{self.name}@{hashlib.sha1(self.template.encode()).hexdigest()[:8]}"

    def format(self, **values: str) -> str:
        return self.template.format(**values)


def prompts_dir() -> Path:
    """Installed wheel: rag_assistant/prompts; source checkout: the repository's prompts/ folder."""
    packaged = Path(str(resources.files("rag_assistant"))) / "prompts"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "prompts"


def variables(template: str) -> set[str]:
    try:
        return {field for _, field, _, _ in string.Formatter().parse(template) if field is not None}
    except ValueError as exc:
        raise PromptError(f"prompt template is malformed: {exc}", "double literal braces as {{ and }}") from None


@cache
def load_prompt(name: str, directory: Path | None = None) -> Prompt:
    path = (directory or prompts_dir()) / f"{name}.txt"
    if not path.is_file():
        raise PromptError(f"prompt file missing: {path}", "reinstall rag-assistant or restore the file")
    template = path.read_text(encoding="utf-8")
    found = variables(template)
    expected = EXPECTED.get(name)
    if expected is not None and found != expected:
        missing, extra = sorted(expected - found), sorted(found - expected)
        raise PromptError(
            f"prompt {path.name} has the wrong variables (missing {missing}, unknown {extra})",
            f"it must use exactly {sorted(expected)}",
        )
    return Prompt(name, template)
