"""The parts of eval-generate that need no model: reply and verdict parsing, the form and copy checks, the
evidence check, stratified sampling, selection with near-duplicates, and the candidates file after a kill."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from rag_assistant.corpus.models import Paper
from rag_assistant.errors import OutputError
from rag_assistant.evaluate.generate.checks import (
    ANSWERS,
    CRITERION,
    evidence_found,
    form_problem,
    overlap,
    parse_reply,
    parse_verdict,
    split_of,
)
from rag_assistant.evaluate.generate.journal import Candidates
from rag_assistant.evaluate.generate.sampling import quotas, stratified_order
from rag_assistant.evaluate.generate.selection import select

ABSTRACT = (
    "We propose ShadowKV, a long-context inference system that stores a low-rank key cache and offloads the "
    "value cache to reduce memory. It reconstructs sparse KV pairs on the fly. ShadowKV supports up to 6x "
    "larger batch sizes and boosts throughput by up to 3.04x on an A100 GPU."
)


@pytest.mark.parametrize(
    ("reply", "allowed", "verdict", "evidence"),
    [
        (
            "YES: It reconstructs sparse KV pairs on the fly.",
            ANSWERS,
            "YES",
            "It reconstructs sparse KV pairs on the fly.",
        ),
        ("**No**", ANSWERS, "NO", ""),
        ("Answer: Partially - it says x", ANSWERS, "PARTIAL", "it says x"),
        ("I think the answer is YES", ANSWERS, "YES", ""),
        ("nothing to say", ANSWERS, None, ""),
        ("<think>YES or NO?</think> NO", ANSWERS, "NO", ""),
        ("Not relevant", CRITERION, "NOT", "relevant"),
        ('"RELEVANT"', CRITERION, "RELEVANT", ""),
        ("relevant, I would say", ANSWERS, None, ""),
    ],
)
def test_verdicts_are_read_from_the_first_word(reply: str, allowed, verdict, evidence) -> None:
    assert parse_verdict(reply, allowed) == (verdict, evidence)


def test_the_first_json_object_with_the_fields_is_the_reply() -> None:
    fenced = 'Sure!\n```json\n{"question": "How  does X\\nwork?", "answer": "By Y."}\n```'
    assert parse_reply(fenced, ("question", "answer")) == {"question": "How does X work?", "answer": "By Y."}
    assert (
        parse_reply('{"question": "Q?"} then {"question": "R?", "answer": "A"}', ("question", "answer"))["question"]
        == "R?"
    )
    for bad in ("no json", '{"question": ""}', '{"question": 3, "answer": "a"}', '["question"]', '{"question": "Q?"'):
        assert parse_reply(bad, ("question", "answer")) is None


@pytest.mark.parametrize(
    ("question", "kind", "problem"),
    [
        ("Which paper stores a low-rank key cache to serve long contexts?", "known-item", None),
        ("How does ShadowKV cut the memory of long-context inference?", "method", None),
        ("Which papers study memory savings for long-context inference?", "survey", None),
        ("Which papers study memory savings for long-context inference?", "method", "a list of papers"),
        ("How does ShadowKV cut the memory of long-context inference?", "survey", "not a list of papers"),
        ("What does this paper propose to save memory?", "method", "points at its source text"),
        ("What do the authors find about memory in inference?", "result", "points at its source text"),
        ("How do we reduce the memory of inference?", "method", "points at its source text"),
        ("Which paper stores a low-rank key cache", "known-item", "not one question"),
        ("Which paper stores keys? And which one values?", "known-item", "not one question"),
        ("Which paper?", "known-item", "words: a question has"),
        ("Which paper proposes <method name> for memory?", "known-item", "placeholder"),
        ("Which paper proposes ... for memory reduction?", "known-item", "placeholder"),
    ],
)
def test_form(question: str, kind: str, problem: str | None) -> None:
    found = form_problem(question, kind)
    assert found is None if problem is None else problem in (found or "")


def test_overlap_counts_copied_word_trigrams() -> None:
    assert overlap("Which system offloads values and keeps keys small?", ABSTRACT) == 0.0
    copied = "Which paper stores a low-rank key cache and offloads the value cache?"
    assert overlap(copied, ABSTRACT) == pytest.approx(8 / 10)  # all but "which paper stores" and "paper stores a"
    assert overlap("Too short?", ABSTRACT) == 0.0


def test_evidence_must_be_in_the_abstract_and_on_the_question() -> None:
    question = "How does ShadowKV rebuild the keys it needs while decoding?"
    assert evidence_found("It reconstructs sparse KV pairs on the fly.", ABSTRACT, "Which KV pairs are reconstructed?")
    assert not evidence_found("it reconstructs sparse KV pairs on-the-fly", ABSTRACT, question)  # 2 of 5 trigrams off
    assert not evidence_found("ShadowKV proves that every model is a graviton.", ABSTRACT, question)
    assert not evidence_found("ShadowKV supports", ABSTRACT, question)  # too short to show anything
    on_another_subject = "It reconstructs sparse KV pairs on the fly."
    assert not evidence_found(on_another_subject, ABSTRACT, "Which paper measures graviton scattering in wormholes?")


def test_split_is_a_function_of_the_id_alone() -> None:
    splits = Counter(split_of(f"gen-method-{i:04d}") for i in range(1000))
    assert set(splits) == {"dev", "heldout"} and 350 < splits["heldout"] < 450
    assert split_of("gen-method-0001") == split_of("gen-method-0001")


def _papers(sizes: dict[str, int]) -> list[Paper]:
    return [
        Paper(f"{topic}:{i}", f"text {topic} {i}", "corpus.jsonl", i, metadata={"topic": topic})
        for topic, n in sizes.items()
        for i in range(n)
    ]


def test_every_prefix_of_the_order_samples_each_topic_in_proportion() -> None:
    papers = _papers({"vision": 60, "nlp": 30, "theory": 10})
    order = stratified_order(papers, seed=3, salt="method")
    assert sorted(order) == sorted(p.paper_id for p in papers)
    for n in (10, 20, 50):
        counts = Counter(pid.split(":")[0] for pid in order[:n])
        for topic, share in (("vision", 0.6), ("nlp", 0.3), ("theory", 0.1)):
            assert abs(counts[topic] - share * n) <= 1, (n, counts)
    assert order == stratified_order(list(reversed(papers)), seed=3, salt="method")  # input order is irrelevant
    assert order != stratified_order(papers, seed=4, salt="method")
    assert order != stratified_order(papers, seed=3, salt="survey")


def test_without_a_topic_the_files_are_the_strata() -> None:
    papers = [Paper(f"{f}:{i}", "t", f"{f}.txt", i) for f, n in (("a", 30), ("b", 10)) for i in range(n)]
    assert Counter(p.split(":")[0] for p in stratified_order(papers, 0, "x")[:8]) == {"a": 6, "b": 2}


def test_quotas_share_n_evenly() -> None:
    assert quotas(50, ["a", "b", "c", "d", "e"]) == dict.fromkeys("abcde", 10)
    assert quotas(7, ["a", "b", "c"]) == {"a": 3, "b": 2, "c": 2}


def _record(slot: str, kind: str, index: int, question: str, removed: str | None = None) -> dict:
    return {"slot": slot, "kind": kind, "index": index, "status": "ok", "question": question, "removed_by": removed}


def test_selection_walks_slot_order_removes_near_duplicates_and_keeps_quotas() -> None:
    vectors = {"a?": [1.0, 0.0], "a2?": [0.99, 0.141], "b?": [0.0, 1.0], "c?": [0.6, 0.8], "d?": [0.8, -0.6]}

    def embed(texts: list[str]) -> np.ndarray:
        return np.array([vectors[t] for t in texts])

    records = [
        _record("method-0001", "method", 1, "a2?"),  # the same question as method-0000 in other words
        _record("method-0000", "method", 0, "a?"),
        _record("survey-0000", "survey", 0, "b?"),
        _record("method-0002", "method", 2, "c?"),
        _record("method-0003", "method", 3, "d?"),
        _record("survey-0001", "survey", 1, "x?", removed="too-broad"),
        {**_record("survey-0002", "survey", 2, "d?"), "status": "failed"},
    ]
    chosen = select(records, ["method", "survey"], {"method": 2, "survey": 2}, embed)
    assert [r["slot"] for r in chosen.kept] == ["method-0000", "survey-0000", "method-0002"]
    assert chosen.duplicates == {"method-0001": "method-0000"}
    assert chosen.surplus == ["method-0003"]


def test_a_line_cut_by_a_kill_is_dropped_and_other_settings_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "set.candidates.jsonl"
    journal = Candidates(path)
    journal.load({"seed": 1})
    journal.append({"slot": "method-0000", "status": "ok"})
    journal.close()
    with path.open("ab") as f:
        f.write(b'{"slot": "method-0001", "sta')  # killed mid-line
    again = Candidates(path)
    again.load({"seed": 1})
    assert list(again.records) == ["method-0000"]
    assert path.read_bytes().endswith(b'"ok"}\n')
    again.append({"slot": "method-0001", "status": "ok"})
    again.close()
    assert [json.loads(x).get("slot") for x in path.read_text().splitlines()] == [None, "method-0000", "method-0001"]
    with pytest.raises(OutputError, match="seed"):
        Candidates(path).load({"seed": 2})
    (tmp_path / "other.jsonl").write_text('{"id": "q1"}\n')
    with pytest.raises(OutputError, match="not a candidates file"):
        Candidates(tmp_path / "other.jsonl").load({"seed": 1})
    cut = tmp_path / "cut.candidates.jsonl"
    cut.write_bytes(b'{"header": {"se')  # killed while writing the header
    Candidates(cut).load({"seed": 1})
    assert json.loads(cut.read_text()) == {"header": {"seed": 1}}
