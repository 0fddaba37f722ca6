"""The sentence-role classifier (answer/roles.py `RoleModel`, fitted by eval/fit_roles.py on the training labels):
answers read it from the sentence vectors the index stores, it falls back to the cue-phrase rules when there are
no vectors of its kind, and on the held-out labels it beats the rules."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from rag_assistant.answer.roles import ROLES, abstract_roles, role_features, role_model, sentence_role

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "eval"))
from fit_roles import classify, labelled, vectors  # noqa: E402

SENTENCES = [
    "Graph neural networks are widely used for molecular property prediction.",
    "However, they struggle to capture long-range interactions between distant atoms.",
    "We propose RingNet, which adds ring-level message passing to a standard graph network.",
    "RingNet reduces the mean absolute error by 15% on QM9 compared with the strongest baseline.",
    "Our code is publicly available on GitHub.",
]


def test_the_model_file_fits_the_features_answers_compute() -> None:
    model = role_model()
    assert model is not None
    width = role_features(SENTENCES, np.zeros((len(SENTENCES), model.dim))).shape[1]
    assert model.weights.shape == (width, len(ROLES))
    assert model.mean.shape == model.scale.shape == (width,) and model.bias.shape == (len(ROLES),)


def test_roles_come_from_the_classifier_only_with_vectors_of_its_kind() -> None:
    model = role_model()
    assert model is not None
    rules = [sentence_role(s, i, len(SENTENCES)) for i, s in enumerate(SENTENCES)]
    rng = np.random.default_rng(0)
    unit = rng.normal(size=(len(SENTENCES), model.dim))
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    assert abstract_roles(SENTENCES, unit) == model.roles(SENTENCES, unit)
    assert abstract_roles(SENTENCES) == rules  # no vectors: the rules
    assert abstract_roles(SENTENCES, unit[:, :100]) == rules  # another model's vectors: the rules
    assert abstract_roles(SENTENCES, unit[:3]) == rules  # vectors of another split: the rules


@pytest.mark.slow
def test_the_classifier_beats_the_rules_on_held_out_labels(cli, tmp_path: Path) -> None:
    """The heldout2 abstracts (labelled whole, so their sentences are their text) ingested like any corpus; each
    sentence classified from the vector the index stores for it."""
    rows = labelled("heldout2")
    by_abstract: dict[str, list[dict]] = {}
    for r in rows:
        by_abstract.setdefault(r["abstract"], []).append(r)
    path = tmp_path / "heldout.jsonl"
    records = [
        {"id": a, "abstract": " ".join(r["sentence"] for r in sorted(rs, key=lambda r: r["position"]))}
        for a, rs in by_abstract.items()
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert cli("ingest", str(path)).returncode == 0
    from rag_assistant.config import load_settings

    guessed = classify(rows, vectors(rows, load_settings().data_dir))
    classifier = np.mean([g == r["role"] for g, r in zip(guessed, rows, strict=True)])
    rules = np.mean([sentence_role(r["sentence"], r["position"], r["n_sentences"]) == r["role"] for r in rows])
    assert classifier > rules, (classifier, rules)


def _fake_embed(texts: list[str]) -> np.ndarray:
    """Fixed unit vectors per text (the test needs vectors of the model's kind, not their meaning)."""
    out = np.array([np.random.default_rng(sum(map(ord, t))).normal(size=384) for t in texts])
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_answers_choose_sentences_by_the_classifiers_roles() -> None:
    """The survey's per-paper analysis and the extractive answerer both label a paper's sentences from their
    vectors, so both see the classifier's roles, not the rules'."""
    from rag_assistant.answer.analysis import analyse_papers
    from rag_assistant.answer.extractive import _candidates
    from rag_assistant.corpus.models import Paper
    from rag_assistant.retrieve import Source

    model = role_model()
    assert model is not None
    sentences = [
        SENTENCES[0],
        "Despite their empirical success, our theoretical understanding of such models remains very limited.",
        *SENTENCES[1:],
    ]
    paper = Paper("ring1", " ".join(sentences), "papers.jsonl", 0)
    vecs = _fake_embed(sentences)
    want = model.roles(sentences, vecs)
    assert want != [sentence_role(s, i, len(sentences)) for i, s in enumerate(sentences)]  # they differ here
    (view,) = analyse_papers([Source(paper, 1.0)], None, _fake_embed)
    assert view.roles == want
    assert [c.role for c in _candidates([view])] == want


def test_closing_slogans_are_filler_whatever_the_classifier_says() -> None:
    """Slogans the 40-answer reading found quoted (eval/answers-reading.jsonl): never an answer's line."""
    slogans = [
        "These findings highlight the importance of advanced red-teaming strategies in ensuring reliability.",
        "Our findings highlight the need for IR-specific enhancements in LLM design.",
        "These capabilities mark a significant step toward realizing virtual cell modeling for biomedical research.",
        "We believe that new avenues to LSO will be opened by the score's ability to identify unrealistic areas.",
    ]
    sentences = [*SENTENCES[:4], *slogans]
    assert [sentence_role(s, 4 + i, len(sentences)) for i, s in enumerate(slogans)] == ["other"] * 4
    assert abstract_roles(sentences, _fake_embed(sentences))[4:] == ["other"] * 4


def test_an_antecedent_that_refers_back_comes_with_its_own() -> None:
    """'To achieve this, ...' quoted as what 'These exchanges' refers to needs the sentence 'this' is."""
    from rag_assistant.answer.extractive import _Candidate, _with_antecedents

    texts = [
        "Many-shot jailbreaking circumvents safety alignment by exploiting long inputs.",
        "To achieve this, the prompt is prefixed with hundreds of fabricated exchanges.",
        "These exchanges are sampled from a pool of unsafe question-answer pairs.",
        "We present PANDAS, which modifies the fabricated dialogues with positive affirmations.",
    ]
    candidates = [_Candidate(0, i, "p", t, "method", i in (1, 2)) for i, t in enumerate(texts)]
    assert sorted(_with_antecedents([2, 3], candidates, 4)) == [0, 1, 2, 3]
    assert _with_antecedents([2, 3], candidates, 2) == [3]  # the chain does not fit: another sentence instead


def test_a_trimmed_quote_is_quoted_whole_right_after_the_sentence_it_points_back_to() -> None:
    from rag_assistant.answer.extractive import _Candidate, _shown

    full = "To make routing cheap, we propose SparseRoute, a sparse router."  # not trimmed: its own purpose
    back = "To address this, we propose SparseRoute, a sparse router."
    candidates = [
        _Candidate(0, 0, "p", "We find that dense routers waste compute on easy tokens.", "result", False),
        _Candidate(0, 1, "p", "\u2026we propose SparseRoute, a sparse router.", "method", False, back),
        _Candidate(0, 2, "p", full, "method", False),
    ]
    assert _shown(1, [0, 1], candidates) == back  # "this" is the finding just quoted
    assert _shown(1, [1, 2], candidates) == "\u2026we propose SparseRoute, a sparse router."
    assert _shown(2, [1, 2], candidates) == full


def test_a_paper_is_quoted_by_sentences_that_read_alone_before_its_motivation() -> None:
    """A claim that refers back to background ("Despite this, ...") is quoted only with that background; a paper
    with claims that read alone is quoted by those, its contribution sentence excepted (the method slot)."""
    from rag_assistant.answer.extractive import ExtractiveGenerator, _Candidate

    rows = [  # (text, role, refers back)
        ("Forecasters struggle with multi-scale dynamics.", "background", False),
        ("To alleviate this, we propose NestCast, a nested graph network.", "method", True),
        ("NestCast couples coarse and fine meshes.", "method", False),
        ("NestCast reduces the forecast error by 12% on ERA5.", "result", False),
        ("Extreme events remain rare in reanalysis data.", "background", False),
        ("Despite this, the errors on extremes fall by 20% with NestCast.", "result", True),
    ]
    candidates = [_Candidate(0, i, "p", t, role, back) for i, (t, role, back) in enumerate(rows)]
    relevance = np.array([0.5, 0.8, 0.6, 0.55, 0.5, 0.9])  # the claim leaning on background scores best
    generator = ExtractiveGenerator(max_sentences=4)
    chosen = generator._one_paper(candidates, relevance, np.eye(len(rows)), "p")
    assert chosen == [0, 1, 2, 3], chosen  # the contribution with its motivation, then claims that read alone
