"""Issue 10, item 5: chat follow-ups that follow. A new question that names no earlier paper and does not
refer back is a fresh retrieval; "the second one" is the second paper the user saw. Driven through
`rag-assistant chat` in a pty, one chat per module with /reset between conversations."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest
from fake_llm import FakeLLMServer
from llm_helpers import cited_answer, user_text
from test_chat import _ask, _slash, _spawn

pytestmark = pytest.mark.slow
_ID = r"\[(\d{3}:\d+)\]"


def _cited(text: str) -> set[str]:
    """Ids cited in the answer body (above its References, below the "searched for" line)."""
    body = re.sub(r"searched for:[^\n]*", "", text.split("References")[0])
    return set(re.findall(_ID, body))


def _references(text: str) -> list[str]:
    return re.findall(r"^\s+" + _ID, text.split("References")[1], re.M) if "References" in text else []


@pytest.fixture(scope="module")
def chat(ready_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[pexpect.spawn]:
    target = tmp_path_factory.mktemp("followups") / "data"
    shutil.copytree(ready_data_dir, target)
    # module scope runs before the per-test isolation: keep the user's config and LLM settings out explicitly
    env = {"RAG_ASSISTANT_CONFIG": str(target / "no-config.toml"), "OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""}
    child = _spawn(target, {**env, "HF_HUB_OFFLINE": "1", "RAG_ASSISTANT_MODE": "extractive"})
    yield child
    child.sendline("/quit")
    child.expect(pexpect.EOF)


@pytest.fixture
def fresh(chat: pexpect.spawn) -> pexpect.spawn:
    assert "Conversation cleared" in _slash(chat, "/reset")
    return chat


def test_question_with_own_topic_is_not_pinned_to_the_previous_paper(fresh: pexpect.spawn) -> None:
    first = _ask(fresh, "What is Safe Delta?")
    assert _cited(first) == {"000:0"}, first
    # "their" points at "papers" earlier in the same question, not at Safe Delta
    follow = _ask(fresh, "Which papers propose new attention mechanisms and what are their benefits?")
    assert "searched for" not in follow and "000:0" not in _cited(follow), follow
    assert _cited(follow) & {"000:1", "000:15"}, follow  # WAVE attention, Star Attention


def test_follow_ups_stay_pinned_and_a_topic_shift_is_a_fresh_retrieval(fresh: pexpect.spawn) -> None:
    first = _ask(fresh, "Which papers study jailbreak attacks on language models?")
    refs = _references(first)
    assert len(refs) >= 2 and "004:4" in refs, first  # 004:4: adversarial training at scale, sample efficiency
    they = _ask(fresh, "What attacks do they use?")
    assert f"searched for: What attacks do they use? [{']['.join(refs)}]" in they, they
    method = _ask(fresh, "How does that method work?")
    assert f"searched for: How does that method work? [{_references(they)[0]}]" in method, method
    # "their" has its antecedent in the question; a retrieval for it alone finds none of the jailbreak papers
    follow = _ask(fresh, "How do reinforcement learning methods improve their sample efficiency?")
    assert "searched for" not in follow and not _cited(follow) & set(refs), follow
    assert _cited(follow) & {"004:11", "000:14"}, follow  # the RL papers


def test_second_one_after_a_single_cited_paper(fresh: pexpect.spawn) -> None:
    first = _ask(fresh, "What is Safe Delta?")
    assert _references(first) == ["000:0"], first
    follow = _ask(fresh, "Tell me more about the second one")
    assert "does not cover" not in follow, follow
    picked = re.search(r'"the second one" is taken to be \[(\d{3}:\d+)\], the next paper retrieved', follow)
    assert picked and picked.group(1) != "000:0", follow
    assert f"searched for: Tell me more about the second one [{picked.group(1)}]" in follow
    assert _cited(follow) == {picked.group(1)}, follow


def test_ordinal_counts_in_the_list_the_user_saw_last(fresh: pexpect.spawn) -> None:
    _ask(fresh, "What is Safe Delta?")
    listed = re.findall(r"^\s+\d+\. " + _ID, _slash(fresh, "/sources"), re.M)
    assert len(listed) >= 3, listed
    follow = _ask(fresh, "What does the third one propose?")
    assert f"searched for: What does the third one propose? [{listed[2]}]" in follow, follow
    assert "taken to be" not in follow  # the user saw that list: no warning


def _bad_condenser(req: dict) -> str:
    """A model that always rewrites to the previous answer's ids plus one the user never saw."""
    text = user_text(req)
    if "Standalone question:" in text:
        ids = re.findall(r"\[([^\]\s]+:\d+)\]", text.split("Last message:")[0].split("Assistant:")[-1])
        return f"What does the paper [{ids[-1]}] propose, compared with [004:12]?"
    return cited_answer(req)


def test_llm_mode_fresh_question_is_not_condensed_and_rewrites_pin_only_seen_papers(
    ready_data_dir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "llm"
    shutil.copytree(ready_data_dir, data)
    with FakeLLMServer(default=_bad_condenser) as srv:
        env = {"OPENAI_BASE_URL": srv.base_url, "OPENAI_API_KEY": "test", "RAG_ASSISTANT_LLM_MODEL": "fake"}
        child = _spawn(data, env)
        first = _ask(child, "Which papers study jailbreak attacks on language models?")
        assert "mode: llm" in first
        seen = set(re.findall(_ID, first))
        assert "004:12" not in seen
        before = len(srv.requests)
        follow = _ask(child, "Which papers propose new attention mechanisms and what are their benefits?")
        assert not any("Standalone question:" in user_text(r) for r in srv.requests[before:])
        assert "searched for" not in follow and _cited(follow) & {"000:1", "000:15"}, follow
        second = _ask(child, "What does the second one propose?")
        assert "searched for: What does the paper" in second, second
        # the rewrite kept [004:12], a paper this conversation never showed: only the referred-to one is pinned
        assert _cited(second) and _cited(second) <= _cited(follow) and "004:12" not in _cited(second), second
        child.sendline("/quit")
        child.expect(pexpect.EOF)
