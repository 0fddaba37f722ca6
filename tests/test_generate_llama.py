"""eval-generate against a real tiny model (SmolLM2-135M-Instruct through llama.cpp) as an adversary: whatever
it writes or judges, the run finishes, reports what each filter removed, and keeps no question its gold
abstract does not answer."""

from __future__ import annotations

import json
from pathlib import Path

from fake_llm import FakeLLMServer
from gen_scenarios import responder
from llama_server import LlamaServer, llama_marks

from rag_assistant.evaluate.dataset import load_dataset

pytestmark = llama_marks()
FILTERS = {
    "malformed", "ill-formed", "copied", "not-answered-by-gold", "answered-by-other", "too-broad", "off-topic",
    "answerable",
}  # fmt: skip


def _env(base_url: str, model: str) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "local",
        "RAG_ASSISTANT_LLM_MODEL": model,
        "RAG_ASSISTANT_LLM_MAX_TOKENS": "200",
        "RAG_ASSISTANT_LLM_TIMEOUT": "900",
    }


def _candidates(out: Path) -> list[dict]:
    lines = out.with_name(f"{out.stem}.candidates.jsonl").read_text().splitlines()
    return [json.loads(x) for x in lines if '"slot"' in x]


def test_smollm2_writing_and_judging_never_crashes_the_run(cli, ready, tmp_path: Path) -> None:
    out = tmp_path / "set.jsonl"
    with LlamaServer() as server:
        args = ("-n", "3", "--kinds", "known-item,survey,unanswerable", "--attempts", "1", "--json")
        res = cli("eval-generate", "-o", str(out), *args, env=_env(server.base_url, server.model), timeout=3600)
    assert res.returncode in (0, 1) and "Traceback" not in res.stderr, res.stderr
    summary = json.loads(res.stdout)
    records = _candidates(out)
    assert len(records) == summary["candidates"] == 3 and summary["failed"] == 0
    assert set(summary["removed"]) <= FILTERS | {"near-duplicate"}
    assert sum(summary["removed"].values()) + sum(summary["kept"].values()) + summary["surplus"] == 3
    for record in records:
        assert record["removed_by"] in FILTERS | {None} and (record["why"] is None) == (record["removed_by"] is None)
        if record["removed_by"] is not None:
            continue
        verdicts = {c["role"]: [] for c in record["checks"]}
        for check in record["checks"]:
            verdicts[check["role"]].append((check["verdict"], check["verified"]))
        if record["kind"] == "survey":  # kept: at least two pooled papers meet its criterion
            assert sum(v == "RELEVANT" for v, _ in verdicts["pool"]) >= 2
        elif record["kind"] == "unanswerable":  # kept: none of the top papers answers it
            assert verdicts["top"] and all(v in ("NO", "PARTIAL") for v, _ in verdicts["top"])
        else:  # kept: its abstract answers it, with a quote found there
            assert verdicts["gold"] == [("YES", True)]
    if out.read_text():
        load_dataset(out)  # what was kept runs in eval


def test_a_smollm2_judge_lets_no_unanswered_question_through(cli, ready, tmp_path: Path) -> None:
    """The scripted writer asks what its seed abstract does not answer; SmolLM2 judges. None may be kept."""
    out = tmp_path / "set.jsonl"
    with LlamaServer() as judge, FakeLLMServer(responder("not-answered")) as writer:
        args = ("-n", "2", "--kinds", "known-item,result", "--attempts", "1", "--json")
        judged_by = ("--judge", judge.model, "--judge-base-url", judge.base_url)
        res = cli("eval-generate", "-o", str(out), *args, *judged_by, env=_env(writer.base_url, "writer"), timeout=3600)
    summary = json.loads(res.stdout)
    assert res.returncode == 1 and summary["kept"] == {"known-item": 0, "result": 0}, res.stderr
    assert set(summary["removed"]) <= {"not-answered-by-gold", "answered-by-other"}
    assert out.read_text() == ""
