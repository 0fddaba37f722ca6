"""The cut-offs that read sentence-vector similarities are those of the index's kind of sentence vectors (issue 25,
item 6): the pooled kind (onnx) keeps the Settings defaults, the standalone kind (torch, a remote embedding
server) reads its own calibrated values, and a value the user sets (flag, variable, TOML file) wins over both."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_assistant.answer.chain import AnswerChain
from rag_assistant.answer.thresholds import CALIBRATED, calibrated
from rag_assistant.config import Settings, load_settings

NAMES = tuple(CALIBRATED["pooled"])


def values(settings: Settings) -> dict[str, float]:
    return {name: getattr(settings, name) for name in NAMES}


def test_both_kinds_calibrate_the_same_settings_and_pooled_ones_are_the_defaults() -> None:
    assert set(CALIBRATED) == {"pooled", "standalone"}
    assert set(CALIBRATED["standalone"]) == set(NAMES)
    assert CALIBRATED["pooled"] == {name: Settings.model_fields[name].default for name in NAMES}


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_the_pooled_kind_reads_its_old_values(monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    monkeypatch.setenv("RAG_ASSISTANT_EMBEDDING_BACKEND", backend)
    settings = load_settings()
    assert calibrated(settings) is settings  # nothing changes: the default onnx behaviour is the old one
    assert values(calibrated(settings)) == CALIBRATED["pooled"]


def test_the_standalone_kind_reads_its_calibrated_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_ASSISTANT_EMBEDDING_BACKEND", "torch")
    assert values(calibrated(load_settings())) == CALIBRATED["standalone"]
    monkeypatch.setenv("RAG_ASSISTANT_EMBEDDING_BACKEND", "onnx")
    remote = load_settings(embedding_base_url="http://localhost:9/v1")  # a server embeds sentences alone too
    assert values(calibrated(remote)) == CALIBRATED["standalone"]


@pytest.mark.parametrize("backend", ["onnx", "torch"])
def test_a_value_the_user_sets_wins_over_both_kinds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, backend: str
) -> None:
    monkeypatch.setenv("RAG_ASSISTANT_EMBEDDING_BACKEND", backend)
    monkeypatch.setenv("RAG_ASSISTANT_ABSTAIN_THRESHOLD", "0.31")
    config = tmp_path / "config.toml"
    config.write_text("near_miss_threshold = 0.62\nsurvey_include = 0.5\n")  # the pooled default, set on purpose
    settings = calibrated(load_settings(config, survey_possible=0.05))  # a flag
    kind = "pooled" if backend == "onnx" else "standalone"
    assert values(settings) == {
        **CALIBRATED[kind],
        "abstain_threshold": 0.31,
        "near_miss_threshold": 0.62,
        "survey_include": 0.5,
        "survey_possible": 0.05,
    }


def test_the_answer_chain_decides_by_its_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_ASSISTANT_EMBEDDING_BACKEND", "torch")
    chain = AnswerChain(load_settings(), retriever=object(), generator=object(), log=False)  # type: ignore[arg-type]
    assert values(chain.settings) == CALIBRATED["standalone"]
    assert calibrated(chain.settings) == chain.settings  # applied once: a chain built from it keeps it
