"""Near misses: the retrieved papers share the question's topic, yet none does what it asks (a constraint of the
question -- a modality, a model family, a setting -- that no paper meets). Such a question is not abstained on
(the papers are close, and a reader wants to know what is there), nor answered as if they met it: the answer
says that no paper here does it, names what is missing, and lists the closest papers as near misses.

Decided by the match model (match.py): no candidate's probability reaches `near_miss_threshold`, while the
question's relevance is above `abstain_threshold` (far-off questions are still abstained on). What is missing
is read from the concept gaps (analysis.py) the closest papers share: the question words they leave unsaid."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from rag_assistant.answer.analysis import PaperView, QuestionView, gaps

CLOSEST = 3  # near misses shown


@dataclass
class NearMiss:
    missing: list[str]  # the question's words no close paper says, in question order
    closest: list[str]  # paper ids, closest first
    probabilities: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def near_miss(question: QuestionView, views: Sequence[PaperView], probability: np.ndarray) -> NearMiss:
    order = sorted(range(len(views)), key=lambda i: (-probability[i], views[i].source.rank))[:CLOSEST]
    closest = [views[i] for i in order]
    missing: list[str] = []
    if question.words and closest:
        g = np.mean([gaps(question, v) for v in closest], axis=0)
        top = float(g.max())
        missing = [w for w, value in zip(question.words, g, strict=True) if top > 0 and value >= 0.6 * top][:3]
    return NearMiss(
        missing,
        [v.paper_id for v in closest],
        {v.paper_id: round(float(probability[i]), 4) for v, i in zip(closest, order, strict=True)},
    )


def lead_text(miss: NearMiss) -> str:
    """The answer's first paragraph: what no paper here does."""
    if miss.missing:
        what = " / ".join(f"“{w}”" for w in miss.missing)
        return (
            f"No paper here does what the question asks: the closest papers do not address {what}. "
            "They are near misses, listed for what they do instead."
        )
    return "No paper here does what the question asks. The closest papers are near misses, listed for what they do."
