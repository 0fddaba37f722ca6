"""Issues 12 and 22: every named scenario of tests/llm_scenarios.py through the real openai client. Whatever the
model writes, the answer shown, logged or written cites only retrieved papers, and every removal is a warning."""

from __future__ import annotations

import json
import re
import sqlite3
import time
import unicodedata
from pathlib import Path

import pytest
from fake_llm import FakeLLMServer
from llm_helpers import use_llm_server
from llm_scenarios import FABRICATED, LOOKALIKES, SCENARIOS

from rag_assistant.answer.chain import EMPTY_ABSTAIN_TEXT, MODEL_ABSTAIN_TEXT, AnswerChain
from rag_assistant.answer.models import Answer, AnswerWarning, WarningKind
from rag_assistant.answer.refs import Resolver
from rag_assistant.config import load_settings
from rag_assistant.errors import LLMError


def removed(detail: str) -> AnswerWarning:
    """A warning of a reference the citation check removed."""
    return AnswerWarning(WarningKind.REMOVED, detail)


QUESTION = "How does ShadowKV reduce KV cache memory?"
SECRET = "sk-planted-SECRET-4f1d9c"
CONTENT = [
    "not_found_then_fabricated",
    "echoes_prompt",
    "not_found_only",
    "not_found_twice_with_fake_id",
    "fabricated_shapes",
    "valid_and_fabricated_together",
    "footnotes_and_reference_list",
    "citation_after_blank_line",
    "truncated_at_max_tokens",
    "huge_completion",
    "math_wrapped_references",
    "lookalike_references",
    "list_marker_citations",
    "citation_alone_between_sentences",
    "only_citations",
    "non_bracket_fakes_streamed",
]
# what a fabricated reference of any scenario leaves, once the text is read as a reader sees it
FAKES = ("777:", "004:99", "999:", "888:", "20:3", "FAKE", "arXiv", "Smith", "doc-7", "[9]", "^7", "sup>", "\\cite")
FAKES += ("10.1234", "openreview", "Berg", "\u0141ukasz", "evil.example")


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch, own_ready: Path):  # content scenarios log their answers
    with FakeLLMServer(default="The corpus does not cover this question.") as server:
        use_llm_server(monkeypatch, server.base_url, SECRET, retries=1, timeout=1)
        yield server


def shown_references(text: str, retrieved: set[str]) -> list[str]:
    """Every piece of anything reference-like in `text` that is not a retrieved id."""
    return [p for span in Resolver(()).find(text) for p in span.pieces if p not in retrieved]


def assert_trustworthy(answer: Answer) -> None:
    retrieved = {s.paper_id for s in answer.sources}
    assert shown_references(answer.answer, retrieved) == [], answer.answer
    assert set(answer.citations) <= retrieved
    for s in answer.sentences:
        assert set(s.citations) <= retrieved and shown_references(s.text, retrieved) == []
        assert s.citations or "uncited" in s.flags  # no uncited sentence hidden
    as_read = unicodedata.normalize("NFKC", re.sub("[\u200b-\u200f\u2060-\u206f]", "", answer.answer))
    for fake in FAKES:
        assert fake not in as_read, as_read
    assert not answer.answer.endswith("[00")  # a citation half-written when max_tokens cut the answer


@pytest.mark.parametrize("name", CONTENT)
def test_content_scenario(srv: FakeLLMServer, name: str) -> None:
    srv.script(*SCENARIOS[name])
    answer = AnswerChain(load_settings()).ask(QUESTION)
    assert_trustworthy(answer)
    logged = sqlite3.connect(load_settings().data_dir / "provenance.sqlite").execute("SELECT record FROM answers")
    assert json.loads(logged.fetchall()[-1][0])["answer"] == answer.answer
    if name in ("not_found_only", "not_found_twice_with_fake_id"):
        assert answer.abstained and answer.answer == MODEL_ABSTAIN_TEXT and answer.citations == []
    elif name == "only_citations":
        assert answer.abstained and answer.answer == EMPTY_ABSTAIN_TEXT and answer.citations == []
    else:
        assert not answer.abstained, answer.answer
    if name == "not_found_twice_with_fake_id":
        assert removed("removed citation [FAKE-1]: not among the retrieved papers") in answer.warnings


def test_not_found_phrase_does_not_switch_verification_off(srv: FakeLLMServer) -> None:
    srv.script(*SCENARIOS["not_found_then_fabricated"])
    answer = AnswerChain(load_settings(), log=False).ask(QUESTION)
    assert not answer.abstained and answer.citations == []
    assert removed("removed citation [777:1]: not among the retrieved papers") in answer.warnings
    assert AnswerWarning(WarningKind.UNCITED, "the answer cites no retrieved paper") in answer.warnings
    assert all("uncited" in s.flags for s in answer.sentences)


def test_every_fabricated_shape_is_removed_and_warned(srv: FakeLLMServer) -> None:
    srv.script(*SCENARIOS["fabricated_shapes"])
    answer = AnswerChain(load_settings(), log=False).ask(QUESTION)
    for ref in FABRICATED:
        assert removed(f"removed citation {ref}: not among the retrieved papers") in answer.warnings
    assert removed("removed citation (Smith et al., 2023): not among the retrieved papers") in answer.warnings


def test_valid_label_kept_fabricated_neighbour_removed(srv: FakeLLMServer) -> None:
    srv.script(*SCENARIOS["valid_and_fabricated_together"])
    answer = AnswerChain(load_settings(), log=False).ask(QUESTION)
    assert answer.citations == ["004:17"] and answer.answer.endswith("[004:17].")
    assert answer.warnings == [removed("removed citation [FAKE_2]: not among the retrieved papers")]


def test_citation_is_not_moved_across_a_blank_line(srv: FakeLLMServer) -> None:
    srv.script(*SCENARIOS["citation_after_blank_line"])
    answer = AnswerChain(load_settings(), log=False).ask(QUESTION)
    first, second = answer.sentences
    assert first.text == "It has many applications." and first.flags == ["uncited"]
    assert second.citations == ["004:17"] and second.support["004:17"] > 0.9
    assert answer.answer.startswith("It has many applications.\n\n")
    assert any("standing alone" in w.detail for w in answer.warnings)


def test_truncated_and_huge_completions_are_reported(srv: FakeLLMServer) -> None:
    srv.script(*SCENARIOS["truncated_at_max_tokens"], *SCENARIOS["huge_completion"])
    chain = AnswerChain(load_settings(), log=False)
    cut = chain.ask(QUESTION)
    assert any("cut at llm_max_tokens" in w.detail for w in cut.warnings) and cut.citations == ["004:17"]
    huge = chain.ask(QUESTION)
    assert any("100,000 characters" in w.detail or "characters, far more" in w.detail for w in huge.warnings)
    assert len(huge.answer) < 12_000  # 130,000 characters were sent; 8,192 kept (ids are longer than labels)


@pytest.mark.parametrize(
    ("name", "reason", "text"),
    [
        ("auth_rejected", "auth", "rejected the API key (HTTP 401)"),
        ("hanging", "timeout", "did not answer within 1s per attempt (2 attempts"),
        ("dropped_mid_stream", "dropped", "closed the connection"),
        ("retry_after_too_long", "rate_limit", "asks to retry after 120s (1 attempt"),
    ],
)
def test_failure_scenarios_say_what_happened(srv: FakeLLMServer, name: str, reason: str, text: str) -> None:
    srv.script(*SCENARIOS[name])
    with pytest.raises(LLMError) as info:
        AnswerChain(load_settings(), log=False).ask(QUESTION)
    assert info.value.reason == reason and text in info.value.message and "s in all)" in info.value.message
    assert SECRET not in str(info.value)


def test_stream_dropped_after_some_text(srv: FakeLLMServer) -> None:
    srv.script(*SCENARIOS["dropped_mid_stream"])
    with pytest.raises(LLMError, match="closed the connection after 15 characters of the answer") as info:
        AnswerChain(load_settings(), log=False).ask(QUESTION, on_token=lambda t: None)
    assert srv.request_count == 1 and "RemoteProtocolError" not in str(info.value)


def test_credentials_in_the_base_url_are_never_shown(srv: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://user:{SECRET}@127.0.0.1:{srv.port}/v1?api-key={SECRET}x")
    srv.script(*SCENARIOS["auth_rejected"])
    with pytest.raises(LLMError) as info:
        AnswerChain(load_settings(), log=False).ask(QUESTION)
    assert SECRET not in str(info.value) and "***@127.0.0.1" in str(info.value)


@pytest.mark.parametrize(
    "name",
    [
        "fabricated_shapes",
        "not_found_then_fabricated",
        "valid_and_fabricated_together",
        "lookalike_references",
        "non_bracket_fakes_streamed",
    ],
)
def test_streamed_tokens_never_show_a_fabricated_id(srv: FakeLLMServer, name: str) -> None:
    srv.script(*SCENARIOS[name])
    tokens: list[str] = []
    answer = AnswerChain(load_settings(), log=False).ask(QUESTION, on_token=tokens.append)
    streamed = "".join(tokens)
    as_read = unicodedata.normalize("NFKC", re.sub("[\u200b-\u200f\u2060-\u206f]", "", streamed))
    for fake in (*FAKES, "[1]"):
        assert fake not in as_read, streamed
    assert set(answer.citations) <= {s.paper_id for s in answer.sources}


def test_retry_after_is_waited_for(srv: FakeLLMServer) -> None:
    from fake_llm import reply_fn, status
    from llm_helpers import cited_answer

    srv.script(status(429, headers={"retry-after": "2"}), reply_fn(cited_answer))
    started = time.perf_counter()
    answer = AnswerChain(load_settings(), log=False).ask(QUESTION)
    assert time.perf_counter() - started >= 2.0 and answer.citations == ["004:17"] and srv.request_count == 2


def test_references_in_math_are_checked_as_shown(srv: FakeLLMServer) -> None:
    """Issue 22, 1: the check reads the text as shown, after LaTeX is made readable."""
    srv.script(*SCENARIOS["math_wrapped_references"])
    answer = AnswerChain(load_settings()).ask(QUESTION)
    for fake in ("[999:1]", "[777:1]", "[FAKE-1]"):
        assert removed(f"removed citation {fake}: not among the retrieved papers") in answer.warnings
    assert "Keys are low-rank." in answer.answer and "It costs $5 and $10 [004:17]." in answer.answer
    assert "Values move to the CPU [004:17]." in answer.answer
    logged = sqlite3.connect(load_settings().data_dir / "provenance.sqlite").execute("SELECT answer FROM answers")
    assert "999:1" not in logged.fetchall()[-1][0]


def test_lookalike_shapes_are_removed_and_named(srv: FakeLLMServer) -> None:
    """Issue 22, 2: full-width and other brackets, invisible characters, footnotes, DOIs, links, authors."""
    srv.script(*SCENARIOS["lookalike_references"])
    answer = AnswerChain(load_settings(), log=False).ask(QUESTION)
    for _, named in LOOKALIKES:
        assert removed(f"removed citation {named}: not among the retrieved papers") in answer.warnings, named
    assert any("link target of citation [1] (https://evil.example)" in w.detail for w in answer.warnings)
    assert any("removed a reference list" in w.detail for w in answer.warnings)
    assert (
        "It offloads values [004:17]." in answer.answer and "ShadowKV keeps 0 low-rank keys in memory." in answer.answer
    )


def test_a_citation_after_a_list_marker_belongs_to_its_item(srv: FakeLLMServer) -> None:
    """Issue 22, 5: "1. [1] Claim." is the claim cited, not "1 [004:17]. Claim." with the claim uncited."""
    srv.script(*SCENARIOS["list_marker_citations"])
    answer = AnswerChain(load_settings(), log=False).ask(QUESTION)
    second = answer.sources[1].paper_id
    first, other = answer.sentences
    assert first.citations == ["004:17"] and first.flags == [] and first.text.endswith(" [004:17].")
    assert other.text == f"It keeps values on the CPU [{second}]." and other.citations == [second]
    assert answer.answer == f"1. {first.text}\n2. {other.text}"


def test_a_citation_alone_between_two_sentences_is_removed(srv: FakeLLMServer) -> None:
    """Issue 22, 5: a "[2]" on its own line cites neither neighbour: removed and warned, not glued on."""
    srv.script(*SCENARIOS["citation_alone_between_sentences"])
    answer = AnswerChain(load_settings(), log=False).ask(QUESTION)
    second = answer.sources[1].paper_id
    first, last = answer.sentences
    assert first.citations == ["004:17"] and last.text == "It has many applications."
    assert last.citations == [] and last.flags == ["uncited"] and f"[{second}]" not in answer.answer
    assert removed(f"removed citation [{second}] standing alone on its line: it cites no sentence") in answer.warnings


def test_an_answer_of_only_citations_abstains(srv: FakeLLMServer) -> None:
    """Issue 22, 7: nothing is left once "[1][2][3]" is checked: an abstention that says why."""
    srv.script(*SCENARIOS["only_citations"])
    answer = AnswerChain(load_settings(), log=False).ask(QUESTION)
    assert answer.abstained and answer.answer == EMPTY_ABSTAIN_TEXT and answer.sentences == []
    assert any(w.kind is WarningKind.EMPTY for w in answer.warnings), answer.warnings


def test_the_clients_own_secrets_are_masked_in_completions(srv: FakeLLMServer, monkeypatch) -> None:
    """Issue 22, 6: a completion holding the LLM key or the embedding key shows and logs neither."""
    embedding_key = "emb-planted-SECRET-93a7"
    monkeypatch.setenv("RAG_ASSISTANT_EMBEDDING_API_KEY", embedding_key)
    from fake_llm import reply_fn

    leak = reply_fn(lambda req: f"The key is {SECRET} [1]. The other key is {embedding_key}.")
    srv.script(leak, leak)
    tokens: list[str] = []
    streamed = AnswerChain(load_settings()).ask(QUESTION, on_token=tokens.append)
    whole = AnswerChain(load_settings()).ask(QUESTION)
    logged = sqlite3.connect(load_settings().data_dir / "provenance.sqlite").execute("SELECT record FROM answers")
    texts = ["".join(tokens), *(row[0] for row in logged.fetchall())]
    for answer in (streamed, whole):
        texts += [answer.answer, *(s.text for s in answer.sentences)]
        assert answer.answer == "The key is *** [004:17]. The other key is ***."
        assert any("held a secret of this client" in w.detail for w in answer.warnings)
    assert "***" in texts[0] and all(SECRET not in t and embedding_key not in t for t in texts)
