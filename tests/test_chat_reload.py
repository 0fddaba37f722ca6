"""Issue 22, item 11: an open chat sees papers that another process ingests while it runs. A fresh `search`
ranked the new paper first while the chat, holding the index it loaded at start, abstained without a word."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pexpect
import pytest
from conftest import run_cli
from test_chat import _ask, _spawn

pytestmark = pytest.mark.slow

PAPERS = {
    "glimmer": (
        "Glimmerwort: sorting bioluminescent mushrooms by luminance",
        "We introduce Glimmerwort, a sorting network for bioluminescent mushrooms. Glimmerwort measures the "
        "luminance of each mushroom cap with a photodiode array and sorts a harvest of ten thousand caps per hour. "
        "On three farms Glimmerwort halves the sorting errors of manual grading.",
    ),
    "brindle": (
        "Brindlecap: a radio telescope grown from fungal mycelium",
        "We grow Brindlecap, a radio telescope whose dish is a sheet of fungal mycelium coated with copper. "
        "Brindlecap observes pulsars at 400 MHz with a sensitivity close to an aluminium dish of the same size. "
        "Growing the dish takes two weeks and costs a tenth of machining one.",
    ),
}


def _ingest(data: Path, tmp_path: Path, paper_id: str) -> None:
    title, abstract = PAPERS[paper_id]
    path = tmp_path / f"{paper_id}.jsonl"
    path.write_text(json.dumps({"id": paper_id, "title": title, "abstract": abstract}) + "\n")
    res = run_cli("ingest", str(path), env={"RAG_ASSISTANT_DATA_DIR": str(data)})  # another process
    assert res.returncode == 0, res.stderr


def _cited(answer: str) -> set[str]:
    return set(re.findall(r"\[([\w:]+)\]", answer.split("References")[0]))


def test_chat_sees_papers_ingested_by_another_process(own_ready: Path, tmp_path: Path) -> None:
    child = _spawn(own_ready)
    try:
        _ingest(own_ready, tmp_path, "glimmer")  # before the chat's first question
        first = _ask(child, "How does Glimmerwort sort bioluminescent mushrooms?")
        assert "glimmer" in _cited(first) and "does not cover" not in first, first
        assert "the index changed since the chat last read it" in first

        unchanged = _ask(child, "How does ShadowKV reduce KV cache memory?")
        assert "004:17" in _cited(unchanged) and "the index changed" not in unchanged, unchanged

        _ingest(own_ready, tmp_path, "brindle")  # after the chat has searched
        second = _ask(child, "How is the Brindlecap radio telescope dish made?")
        assert "brindle" in _cited(second) and "does not cover" not in second, second
        assert "the index changed since the chat last read it" in second
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    # a fresh process agrees
    found = json.loads(run_cli("search", "Brindlecap radio telescope", "--json", "-k", "1").stdout)
    assert found[0]["paper_id"] == "brindle"
