"""Extractive (offline) answers, abstention, prompts and the provenance log."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rag_assistant.answer.chain import AnswerChain
from rag_assistant.answer.prompts import EXPECTED, load_prompt
from rag_assistant.config import load_settings
from rag_assistant.errors import PromptError

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def chain(ready_data_dir: Path) -> AnswerChain:
    return AnswerChain(load_settings(data_dir=ready_data_dir), log=False)


def test_shadowkv_answer_cites_it_and_only_retrieved_papers(chain: AnswerChain) -> None:
    answer = chain.ask("How does ShadowKV reduce KV cache memory?")
    assert answer.mode == "extractive" and not answer.abstained
    assert "004:17" in answer.citations
    retrieved = {s.paper_id for s in answer.sources}
    assert set(answer.citations) <= retrieved
    assert all(s.citations for s in answer.sentences)
    assert all(max(s.support.values()) > 0.99 for s in answer.sentences)  # quoted sentences support themselves
    assert "low-rank key cache" in answer.answer
    assert [r.paper_id for r in answer.references] == answer.citations
    ref = answer.references[0]
    assert (ref.source, ref.position) == ("004_f08e38e0363d2af7.txt", 17)


def test_multi_paper_question_cites_several(chain: AnswerChain) -> None:
    answer = chain.ask("Which papers study jailbreak attacks on language models?")
    assert len(answer.citations) >= 2


@pytest.mark.parametrize("question", ["Who won the 2022 FIFA World Cup?", "How long should I knead bread dough?"])
def test_off_topic_abstains(chain: AnswerChain, question: str) -> None:
    answer = chain.ask(question)
    assert answer.abstained and answer.citations == [] and answer.sources


def test_extractive_is_deterministic(chain: AnswerChain) -> None:
    q = "What does Safe Delta do after fine-tuning?"
    assert chain.ask(q).answer == chain.ask(q).answer


def test_prompts_have_exactly_their_variables(tmp_path: Path) -> None:
    for name in EXPECTED:
        load_prompt(name)
    (tmp_path / "answer_user.txt").write_text("Question: {question}\nOops: {sourcez}")
    with pytest.raises(PromptError, match="missing \\['sources'\\], unknown \\['sourcez'\\]"):
        load_prompt("answer_user", tmp_path)
    (tmp_path / "condense.txt").write_text("{history} {question")
    with pytest.raises(PromptError, match="malformed"):
        load_prompt("condense", tmp_path)


@pytest.mark.slow
def test_wheel_ships_prompts_and_corpus(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
        check=True,
        capture_output=True,
    )
    wheel = next(tmp_path.glob("rag_assistant-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for name in EXPECTED:
        assert f"rag_assistant/prompts/{name}.txt" in names
    assert sum(n.startswith("rag_assistant/data/icml2025/") for n in names) == 2
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = (
        "from rag_assistant.answer.prompts import load_prompt, prompts_dir, EXPECTED;"
        "[load_prompt(n) for n in EXPECTED]; print(prompts_dir())"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().startswith(str(site))


@pytest.mark.slow
def test_cli_ask_offline_json_and_log(cli, ready: Path, tmp_path: Path) -> None:
    import shutil

    data = tmp_path / "own"
    shutil.copytree(ready, data)
    env = {"RAG_ASSISTANT_DATA_DIR": str(data)}
    res = cli("ask", "How does ShadowKV reduce KV cache memory?", "--json", env=env)
    assert res.returncode == 0, res.stderr
    answer = json.loads(res.stdout)
    assert "004:17" in answer["citations"] and answer["mode"] == "extractive"
    assert set(answer["citations"]) <= {s["paper_id"] for s in answer["sources"]}
    off = cli("ask", "Who won the 2022 FIFA World Cup?", env=env)
    assert off.returncode == 0 and "does not cover" in off.stdout and "mode: extractive" in off.stdout
    log = json.loads(cli("log", "--json", env=env).stdout)
    assert [row["abstained"] for row in log] == [True, False]
    assert log[1]["citations"] == answer["citations"] and log[1]["retrieved"][0]["paper_id"]
