"""What counts as a question: checked before anything is retrieved, generated or logged."""

from __future__ import annotations

from rag_assistant.answer.models import AnswerWarning, WarningKind
from rag_assistant.errors import QuestionError


def check_question(question: str, max_chars: int) -> tuple[str, list[AnswerWarning]]:
    """The question to answer (trimmed, cut at `max_chars`) and the warnings to show with its answer.

    A question without a single letter or digit ("", "   ", "?!...") is a usage error rather than a search
    for nothing: it would retrieve arbitrary papers and be logged as if answered."""
    text = question.strip()
    if not any(ch.isalnum() for ch in text):
        what = "empty" if not text else "only punctuation"
        raise QuestionError(
            f"the question is {what}", 'ask a question in words, e.g. "How is the KV cache compressed?"'
        )
    if len(text) <= max_chars:
        return text, []
    cut = text[:max_chars]
    if " " in cut[max_chars // 2 :]:  # end on a whole word when one is near
        cut = cut[: cut.rindex(" ")]
    note = (
        f"the question was cut to its first {len(cut):,} of {len(text):,} characters "
        "(max_question_chars, RAG_ASSISTANT_MAX_QUESTION_CHARS)"
    )
    return cut, [AnswerWarning(WarningKind.QUESTION, note)]
