"""Questions that name metadata (answer/named.py, answer/authors.py): "papers by X", "X's paper on Y", "in the
<track> track", "from 2024" become the same filters as the flags, shown to the reader; an author's papers are
listed from the metadata (every one); a name that is nobody's says so with the closest names; a method name
that looks like a person filters nothing; questions that name no metadata plan and answer as before."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import test_filters

from rag_assistant.answer.named import Names, detect
from rag_assistant.plan import plan_question

AUTHORS = ["Jürgen Schmidhuber", "Yann N. Dauphin", "Ada Lovelace", "Alan Turing", "Alberto Maria Metelli",
           "Hartwig Adam", "Yi Wang", "Hao Wang", "Guy Van den Broeck", "Bin Yang"]  # fmt: skip
TOPICS = ["Reinforcement Learning->Deep RL", "Reinforcement Learning", "Social Aspects->Fairness",
          "Deep Learning->Graph Neural Networks", "Deep Learning->Large Language Models"]  # fmt: skip
FIELDS = {"authors": Counter(AUTHORS), "topic": Counter(TOPICS), "year": Counter([2021, 2022, 2024, 2025])}
WORDS = {"adam", "transformer", "models", "large", "language", "optimizer", "attention"}


def _named(question: str) -> dict:
    found = detect(question, FIELDS, Names(FIELDS["authors"], WORDS), WORDS)
    return {**found.as_dict(), "listing": found.listing}


@pytest.mark.parametrize(
    ("question", "author"),
    [
        ("Which papers did Ada Lovelace co-author?", "Ada Lovelace"),
        ("List the papers by ada lovelace", "Ada Lovelace"),  # any case
        ("Papers by Jurgen Schmidhuber", "Jürgen Schmidhuber"),  # accents folded
        ("What has Yann Dauphin published?", "Yann N. Dauphin"),  # the middle initial left out
        ("papers by Yann N. Dauphin", "Yann N. Dauphin"),
        ("Papers by Alberto Metelli", "Alberto Maria Metelli"),  # the middle name left out
        ("Which papers did Lovelace, Ada write?", "Ada Lovelace"),  # Last, First
        ("Show me Metelli's papers.", "Alberto Maria Metelli"),  # a surname only one author has
        ("Papers by Guy Van den Broeck", "Guy Van den Broeck"),
        ("Show me Yi Wang's publications on graphs", "Yi Wang"),
        ("Which papers did Bin Yang co-author?", "Bin Yang"),  # "Bin" a given name, not the particle "bin"
        ("Papers by guy van den broeck", "Guy Van den Broeck"),
    ],
)
def test_authors_named_as_people_write_them(question: str, author: str) -> None:
    named = _named(question)
    assert named["authors"] == [author] and named["listing"], named


@pytest.mark.parametrize(
    "question",
    [
        "Papers by Adam",  # a surname, and the optimiser's name in the abstracts
        "How do models trained by Adam generalise?",
        "Which papers by Transformer models improve reasoning?",  # capitalised method words: not a person
        "How does ShadowKV's cache reduce memory?",
        "What did Alan say about computability?",  # a first name alone
        "How does attention work in large language models?",
    ],
)
def test_method_names_and_ambiguous_words_filter_nothing(question: str) -> None:
    assert _named(question) == {"listing": False}


@pytest.mark.parametrize(
    "question", ["Papers by Ada Lovelase", "Show me Ada Lovelase's papers", "Which papers did Ada Lovelase write?"]
)
def test_a_person_named_as_an_author_but_unknown_says_so_with_the_closest_names(question: str) -> None:
    named = _named(question)
    assert named["unknown_author"] == "Ada Lovelase" and named["closest_authors"][0] == "Ada Lovelace"
    assert "filtered" not in named


def test_a_surname_several_authors_share_names_them_and_filters_nothing() -> None:
    named = _named("Show me Wang's papers on graphs")
    assert named["several_authors"] == "Wang" and named["closest_authors"] == ["Hao Wang", "Yi Wang"]
    assert "filtered" not in named and "unknown_author" not in named


def test_a_shared_surname_is_answered_with_the_people_who_have_it() -> None:
    from rag_assistant.answer.authors import metadata_answer
    from rag_assistant.answer.models import Answer
    from rag_assistant.answer.named import Named

    answer = Answer(question="Papers by Wang")
    named = Named(unknown="Wang", closest=("Hao Wang", "Yi Wang"), several=True)
    assert metadata_answer(None, answer, named, answer.question) and answer.abstained  # type: ignore[arg-type]
    assert answer.answer == "Several authors of this index are named Wang: Hao Wang, Yi Wang. Ask with the whole name."


def test_one_paper_of_an_author_is_a_filtered_question_not_a_listing() -> None:
    named = _named("Alan Turing's paper on graph neural networks")
    assert named["filtered"] == "authors = Alan Turing" and not named["listing"]


@pytest.mark.parametrize(
    ("question", "filtered"),
    [
        ("Which papers in the fairness track study ranking?", "topic = Social Aspects->Fairness"),
        ("What do graph neural networks track papers say about molecules?", "topic = Deep Learning->Graph Neural"),
        ("Reinforcement learning papers on exploration", "topic = Reinforcement Learning or Reinforcement Learning->"),
        ("Which papers from 2024 study fairness?", "year = 2024"),
        ("Papers published after 2023 on graph networks", "year >= 2024"),
        ("Which papers before 2023 study optimisers?", "year <= 2022"),
        ("papers between 2021 and 2022 on reinforcement learning", "year 2021-2022"),
        ("papers from 2021 through 2022 on fairness", "year 2021-2022"),
        ("Which papers since 2023 or later study fairness?", "year >= 2023"),
        ("What was published in 2024 on fairness?", "year = 2024"),  # a year the index has
    ],
)
def test_tracks_and_years_named_in_questions(question: str, filtered: str) -> None:
    assert _named(question)["filtered"].startswith(filtered)


@pytest.mark.parametrize(
    "question",
    [
        "Which LLM papers keep track of state across turns?",  # "keep track", not a track
        "Efficient attention papers on long contexts",  # not a whole track name
        "What changed in 2023 for diffusion models?",  # "in <year>" only for a year the index has
        "Which papers study reinforcement learning?",
    ],
)
def test_no_track_or_year_where_none_is_named(question: str) -> None:
    assert "filtered" not in _named(question)


def test_a_track_or_year_no_paper_has_is_said() -> None:
    assert "no track of this index matches 'astronomy'" in _named("Papers in the astronomy track on stars")["no_papers"]
    assert "year = 2019" in _named("Which papers from 2019 study GANs?")["no_papers"]


def test_questions_that_name_no_metadata_plan_as_before() -> None:
    """eval/dev.jsonl's questions on an index with authors, tracks and years: none names metadata."""
    rows = [json.loads(line) for line in (Path(__file__).parents[1] / "eval" / "dev.jsonl").read_text().splitlines()]
    assert [r["question"] for r in rows if _named(r["question"]) != {"listing": False}] == []
    assert plan_question("How does ShadowKV work?", 5, 50).as_dict() == {"kind": "paper", "max_papers": 5}


# the fielded corpus of tests/test_filters.py (authors, tracks, years, venues), ingested once per module
fielded = pytest.fixture(scope="module")(test_filters.fielded.__wrapped__)


def _ask(cli, data: Path, question: str, *args: str) -> dict:  # noqa: ANN001 - the cli fixture
    done = cli("--data-dir", str(data), "ask", question, "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_an_authors_papers_are_listed_from_the_metadata_every_one(cli, fielded: Path) -> None:  # noqa: ANN001
    """All three of Ada Lovelace's papers, though -k 1: each with its byline and one cited sentence."""
    answer = _ask(cli, fielded, "Which papers did ada lovelace co-author?", "-k", "1")
    assert answer["plan"]["kind"] == "authors" and answer["plan"]["filtered"] == "authors = Ada Lovelace"
    assert set(answer["citations"]) == {"rl2", "rl3", "op2"} and not answer["abstained"]
    assert answer["answer"].startswith("Ada Lovelace: 3 papers in this index")
    assert "- Lovelace · Reinforcement Learning->Deep RL · 2024: " in answer["answer"]
    assert {s["paper_id"] for s in answer["sources"]} == {"rl2", "rl3", "op2"}


@pytest.mark.slow
def test_an_author_with_no_paper_in_the_named_track_is_said(cli, fielded: Path) -> None:  # noqa: ANN001
    answer = _ask(cli, fielded, "Which papers did Ada Lovelace co-author in the fairness track?")
    assert answer["abstained"] and answer["citations"] == []
    assert answer["answer"] == "Ada Lovelace: no papers in this index (topic = Social Aspects->Fairness)."


@pytest.mark.slow
def test_the_terminal_shows_what_the_question_filtered(cli, fielded: Path) -> None:  # noqa: ANN001
    done = cli("--data-dir", str(fielded), "ask", "Papers by Jurgen Schmidhuber")
    assert done.returncode == 0, done.stderr
    assert "filtered: authors = Jürgen Schmidhuber" in done.stdout and "2 papers in this index" in done.stdout


@pytest.mark.slow
def test_an_unknown_author_is_said_with_the_closest_names(cli, fielded: Path) -> None:  # noqa: ANN001
    answer = _ask(cli, fielded, "List the papers by Ada Lovelase.")
    assert answer["abstained"] and answer["citations"] == []
    assert answer["answer"].startswith("No author named Ada Lovelase in this index; the closest names: Ada Lovelace")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("question", "subset"),
    [
        ("Which papers in the fairness track study ranking?", {"fa1", "fa2"}),
        ("Which reinforcement learning track papers from 2024 explore?", {"rl2"}),
        ("Which papers published after 2023 use deep learning?", {"rl1", "rl2", "fa1", "gr1", "op2"}),
    ],
)
def test_tracks_and_years_named_restrict_the_search(cli, fielded: Path, question: str, subset: set) -> None:  # noqa: ANN001
    answer = _ask(cli, fielded, question, "-k", "8")
    assert answer["plan"]["filtered"]
    assert answer["sources"] and {s["paper_id"] for s in answer["sources"]} <= subset


@pytest.mark.slow
def test_explicit_flags_win_over_the_question(cli, fielded: Path) -> None:  # noqa: ANN001
    answer = _ask(cli, fielded, "Which papers did Grace Hopper co-author on graphs?", "--author", "Alan Turing")
    assert "filtered" not in answer["plan"] and answer["plan"]["kind"] != "authors"
    assert {s["paper_id"] for s in answer["sources"]} <= {"rl3", "gr1"}


@pytest.mark.slow
def test_the_bundled_corpus_names_no_metadata(cli, own_ready: Path) -> None:  # noqa: ANN001
    answer = _ask(cli, own_ready, "Which papers did Ada Lovelace co-author on graphs?")
    assert "filtered" not in answer["plan"] and answer["plan"]["kind"] != "authors"


@pytest.mark.slow
def test_in_llm_mode_an_author_question_is_listed_without_asking_the_model(
    fielded: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listing is the metadata's, whatever the mode: the model is not asked, and the answer says so; a
    question that names nothing still goes to the model."""
    from fake_llm import FakeLLMServer
    from llm_helpers import cited_answer, use_llm_server

    from rag_assistant.answer.authors import LISTED_FROM_METADATA
    from rag_assistant.answer.chain import AnswerChain
    from rag_assistant.config import load_settings

    monkeypatch.setenv("RAG_ASSISTANT_DATA_DIR", str(fielded))
    with FakeLLMServer(default=cited_answer) as server:
        use_llm_server(monkeypatch, server.base_url, "sk-test", retries=0, timeout=5)
        chain = AnswerChain(load_settings(), log=False)
        listed = chain.ask("Papers by Grace Hopper")
        assert server.requests == [] and listed.mode == "extractive" and LISTED_FROM_METADATA in listed.warnings
        assert set(listed.citations) == {"fa1", "gr1"} and listed.plan["kind"] == "authors"
        plain = chain.ask("How do graph neural networks predict molecule properties?")
        assert len(server.requests) == 1 and plain.mode == "llm" and "filtered" not in plain.plan


def test_a_batch_rows_filter_from_jsonl_and_csv(tmp_path: Path) -> None:
    """A JSONL `filter`/`where` object or a CSV `filter` column (the object as JSON) becomes the row's filters;
    a malformed one makes that row a failed row, the others are read."""
    from rag_assistant.batch.inputs import read_input
    from rag_assistant.index.keyword_fields import FieldFilter

    lines = [
        {"question": "a?", "filter": {"author": ["Ada Lovelace", "Alan Turing"], "year": 2024, "track": "rl"}},
        {"question": "b?", "where": {"venue": "ICML"}},
        {"question": "c?", "filter": {"year": "20x4"}},
        {"question": "d?", "filter": ["not", "an", "object"]},
        {"question": "e?", "filter": {"venue": {"nested": 1}}},
    ]
    jsonl = tmp_path / "q.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in lines))
    a, b, c, d, e = read_input(jsonl)
    assert a.filters == [
        FieldFilter("authors", ("Ada Lovelace", "Alan Turing")),
        FieldFilter("year", low=2024, high=2024),
        FieldFilter("topic", contains=("rl",)),
    ]
    assert b.filters == [FieldFilter("venue", ("ICML",))] and not b.error
    assert "malformed year '20x4'" in (c.error or "") and "malformed filter" in (d.error or "")
    assert "malformed filter value venue" in (e.error or "")
    csv_file = tmp_path / "q.csv"
    csv_file.write_text('question,filter\nx?,"{""topic"": ""fairness""}"\ny?,\nz?,author=Ada\n')
    x, y, z = read_input(csv_file)
    assert x.filters == [FieldFilter("topic", contains=("fairness",))] and y.filters == [] and not y.error
    assert z.error == "q.csv:4: malformed filter 'author=Ada' (write it as a JSON object)"
