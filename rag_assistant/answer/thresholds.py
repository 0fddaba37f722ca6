"""The cut-offs that read question-to-sentence similarities, calibrated per kind of sentence vector.

An index's sentence vectors are of one kind (index/sentences.py `kind`): `pooled` from the chunk pass on the
onnx backends, or `standalone`, each sentence embedded alone, on torch and a remote embedding server. A pooled
sentence is read in its abstract's context and scores differently against a question, so a cut-off tuned on one
kind is not the other's: relevance (abstention), and the match models' probabilities (near misses, survey
lists), read those similarities. Each kind has its values here, calibrated on the dev splits
(docs/retrieval.md#calibrated-per-kind); the pooled ones are the Settings defaults. A value the user sets (a
flag, RAG_ASSISTANT_<NAME>, the TOML file) wins over both.
"""

from __future__ import annotations

from rag_assistant.config import Settings
from rag_assistant.index.sentences import kind

NAMES = ("abstain_threshold", "survey_abstain_threshold", "near_miss_threshold", "survey_include", "survey_possible")

CALIBRATED: dict[str, dict[str, float]] = {
    "pooled": {name: Settings.model_fields[name].default for name in NAMES},  # the defaults were tuned on it
    # standalone sentences score higher against a question (~0.02 near the cut-offs), answerable or not
    "standalone": {
        "abstain_threshold": 0.19,  # lowest answerable dev question 0.197, highest conference dev unanswerable 0.183
        "survey_abstain_threshold": 0.14,  # lowest answerable survey question 0.157 (pooled: 0.126 -> 0.11)
        "near_miss_threshold": 0.45,  # 0.45-0.5 decide every dev question alike
        "survey_include": 0.5,  # 0.45 trades one dev set for another (better survey.jsonl, worse dev.jsonl topics)
        "survey_possible": 0.2,  # kept: where "possibly related" starts is shown apart, no dev metric reads it
    },
}


def calibrated(settings: Settings) -> Settings:
    """The settings with the cut-offs of their kind of sentence vectors, but those the user set."""
    changed = {
        name: value
        for name, value in CALIBRATED[kind(settings)].items()
        if name not in settings.model_fields_set and getattr(settings, name) != value
    }
    return settings.model_copy(update=changed) if changed else settings
