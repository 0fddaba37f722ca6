"""An Answer stays typed until it is shown: its sources are the retrieved `Source`s with their papers, its
warnings (kind, detail) records; `as_dict` (--json, batch, eval, the log) renders them as users always saw them."""

from __future__ import annotations

import json
from pathlib import Path

from rag_assistant.answer.chain import AnswerChain
from rag_assistant.answer.models import Answer, AnswerWarning, WarningKind
from rag_assistant.chat import ChatSession
from rag_assistant.config import load_settings
from rag_assistant.corpus.models import Paper
from rag_assistant.retrieve import Source

QUESTION = "How does ShadowKV reduce KV cache memory?"


def test_as_dict_renders_sources_and_warnings_as_users_see_them() -> None:
    paper = Paper("p:1", "An abstract.", "papers.jsonl", 3, "A title", {"authors": ["A. Author"]})
    source = Source(paper, 0.71234567, dense_score=0.654321, keyword_score=None, rank=1, duplicates=["q:2"])
    warning = AnswerWarning(WarningKind.WEAK_SUPPORT, "weakly supported (score 0.30): 'x'")
    shown = Answer(question="q", sources=[source], warnings=[warning]).as_dict()
    assert shown["sources"] == [source.as_dict()] and shown["sources"][0]["score"] == 0.712346
    assert shown["warnings"] == ["weakly supported (score 0.30): 'x'"]
    assert list(shown) == list(Answer.__dataclass_fields__)  # the JSON's keys, in the order users know
    json.dumps(shown)  # plain data all the way down


def test_sources_keep_their_papers_through_chat(ready: Path) -> None:
    chain = AnswerChain(load_settings(mode="extractive"), log=False)
    session = ChatSession(chain)
    answer = session.ask(QUESTION)
    assert answer.sources and all(isinstance(s, Source) for s in answer.sources)
    indexed = chain.retriever.papers([s.paper_id for s in answer.sources])
    assert [s.paper for s in answer.sources] == [indexed[s.paper_id] for s in answer.sources]
    for source in answer.sources:  # chat remembers the retrieved papers themselves, not rebuilt copies
        assert session.memory.papers[source.paper_id] is source.paper


def test_eval_depth_ranks_deeper_than_the_answer_reads(ready: Path) -> None:
    chain = AnswerChain(load_settings(mode="extractive"), log=False)
    job = chain.prepare(QUESTION, k=3, depth=10)
    assert len(job.ranking) == 10 and len(job.answer.sources) == 3
    assert job.answer.sources == job.ranking[:3] == chain.retriever.search(QUESTION, 3)
    assert chain.prepare(QUESTION, k=3).answer.sources == job.answer.sources


def test_an_abstention_keeps_only_the_removed_reference_warnings(ready: Path) -> None:
    """A model that says only the not-found phrase and cites a paper it was not given: the answer abstains,
    and of the check's warnings keeps those of references it removed (chosen by kind, not by wording)."""
    from rag_assistant.answer.citations import NOT_FOUND
    from rag_assistant.answer.models import Draft

    chain = AnswerChain(load_settings(mode="extractive"), log=False)
    answer = Answer(question=QUESTION)
    chain.verify(answer, Draft(f"{NOT_FOUND} [999:1]", "m"), [])
    assert answer.abstained
    assert answer.warnings == [
        AnswerWarning(WarningKind.REMOVED, "removed citation [999:1]: not among the retrieved papers")
    ]
