"""Does a retrieved paper do what the question asks? A probability per paper, from a handful of features that
mean the same on any corpus (cosines, shares, gaps, and each one relative to the question's best candidate),
combined by a logistic model fitted on judged relevance data (eval/judged/, `python eval/fit_match.py`).

The survey answer lists the papers whose probability clears `survey_include` and shows those above
`survey_possible` apart as "possibly related"; the near-miss check asks whether any candidate clears it at all.
Per question, the relative features make the cut-off follow the score distribution (a question whose best
candidates are all weak keeps fewer), while the absolute ones keep a weak field from being listed at all."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from rag_assistant.answer.analysis import PaperView, QuestionView, gaps, term_share

Idf = Callable[[list[str]], dict[str, float]]
MODEL_FILE = Path(__file__).with_name("match_model.json")
_RAW = (
    "max_sentence",  # best cosine between the question and one sentence of the paper
    "top2_sentence",  # mean of its two best sentences
    "abstract",  # cosine with the paper's mean sentence vector (the abstract as a whole)
    "term_share",  # IDF-weighted share of the question's keyword terms in the paper
    "max_gap",  # the question's most central word that the paper does not say
    "gap2",  # mean of the two largest gaps
    "feedback",  # cosine with the centroid of the FEEDBACK best-retrieved abstracts (pseudo-relevance feedback)
    "fused",  # the retrieval score as a share of the leader's
)
FEEDBACK = 5
Z_FROM = 20  # candidates needed before each feature is also read against the others' spread (a z-score)
# Read over the whole set of papers judged together (the top k of a plain answer): the same for each of them, so
# that a paper's chance also depends on how well the best and the worst of its neighbours meet the question.
# Without them a near-topic question whose papers all share its topic looks like an answerable one paper by paper.
_AGGREGATED = ("max_sentence", "term_share", "max_gap", "abstract")
FEATURES = (
    *_RAW,
    *(f"rel_{name}" for name in _RAW[:4]),  # minus the best candidate's
    "rel_feedback",
    *(f"z_{name}" for name in _RAW),  # (x - mean) / sd over the candidates; 0 with fewer than Z_FROM
    *(f"best_{name}" for name in _AGGREGATED),  # the highest over the papers judged together
    *(f"least_{name}" for name in _AGGREGATED),  # the lowest
)


def _unit(v: np.ndarray) -> np.ndarray:
    return v / (float(np.linalg.norm(v)) or 1.0)


def features(question: QuestionView, papers: Sequence[PaperView], idf: Idf) -> np.ndarray:
    """len(papers) x len(FEATURES); papers in retrieval order (best first)."""
    if not papers:
        return np.zeros((0, len(FEATURES)))
    weights = idf(sorted(set(question.terms)))
    means = np.array([_unit(p.vectors.mean(axis=0)) if len(p.vectors) else 0 * question.vector for p in papers])
    centroid = _unit(means[:FEEDBACK].mean(axis=0))
    top_fused = max(p.source.score for p in papers) or 1.0
    rows = []
    for p, mean in zip(papers, means, strict=True):
        sims = np.sort(p.vectors @ question.vector)[::-1] if len(p.vectors) else np.zeros(1)
        g = np.sort(gaps(question, p))[::-1] if question.words else np.zeros(1)
        rows.append(
            [
                float(sims[0]),
                float(sims[:2].mean()),
                float(mean @ question.vector),
                term_share(question, p, weights),
                float(g[0]),
                float(g[:2].mean()),
                float(mean @ centroid),
                p.source.score / top_fused,
            ]
        )
    x = np.array(rows)
    relative = x[:, [0, 1, 2, 3, 6]] - x[:, [0, 1, 2, 3, 6]].max(axis=0)
    z = (x - x.mean(axis=0)) / (x.std(axis=0) + 1e-6) if len(x) >= Z_FROM else np.zeros_like(x)
    cols = [_RAW.index(name) for name in _AGGREGATED]
    together = [*x[:, cols].max(axis=0), *x[:, cols].min(axis=0)]
    return np.hstack([x, relative, z, np.tile(together, (len(x), 1))])


@dataclass(frozen=True)
class MatchModel:
    """A logistic model over some of the FEATURES, standardised: p = sigmoid(b + sum w_i (x_i - mu_i) / sd_i)."""

    features: tuple[str, ...]
    weights: tuple[float, ...]
    bias: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    fitted_on: str = ""

    def probability(self, x: np.ndarray) -> np.ndarray:
        """x: rows of every FEATURE (features()); the model reads its own columns."""
        if not len(x):
            return np.zeros(0)
        z = (x[:, [FEATURES.index(f) for f in self.features]] - np.array(self.mean)) / np.array(self.scale)
        return 1.0 / (1.0 + np.exp(-(z @ np.array(self.weights) + self.bias)))

    def as_dict(self) -> dict[str, object]:
        return {"features": self.features, "weights": self.weights, "bias": self.bias, "mean": self.mean,
                "scale": self.scale, "fitted_on": self.fitted_on}  # fmt: skip


@lru_cache(maxsize=4)
def load_model(kind: str = "survey", path: Path = MODEL_FILE) -> MatchModel:
    """The fitted model of one use: `survey` (which candidates a survey lists) or `near_miss` (whether any of
    a question's top papers does what it asks)."""
    data = json.loads(path.read_text(encoding="utf-8"))[kind]
    unknown = set(data["features"]) - set(FEATURES)
    if unknown:
        raise ValueError(f"{path} uses features this version does not compute ({sorted(unknown)}): refit it")
    return MatchModel(tuple(data["features"]), tuple(data["weights"]), data["bias"], tuple(data["mean"]),
                      tuple(data["scale"]), data.get("fitted_on", ""))  # fmt: skip


def match(question: QuestionView, papers: Sequence[PaperView], idf: Idf, kind: str = "survey") -> np.ndarray:
    """The probability that each paper does what the question asks, by the model of this use."""
    return load_model(kind).probability(features(question, papers, idf))
