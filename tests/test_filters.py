"""Filters on paper fields (--author, --year, --topic, --where) on search and ask: applied before ranking to the
dense and the keyword side alike, so a filtered search returns the subset's papers and only them; unknown fields
and malformed values are a usage error (exit 2, one line, no traceback)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_assistant.index.filters import chroma_where, parse_filters, parse_years
from rag_assistant.index.keyword import FieldFilter

PAPERS = [
    (
        "rl1",
        "Critics for code generation trained with reinforcement learning improve pass rates.",
        ["Zhihui Xie", "Jürgen Schmidhuber"],
        "Deep Learning->Large Language Models",
        2025,
        "ICML",
    ),
    (
        "rl2",
        "Reinforcement learning agents explore sparse reward mazes with curiosity bonuses.",
        ["Ada Lovelace"],
        "Reinforcement Learning->Deep RL",
        2024,
        "ICML",
    ),
    (
        "rl3",
        "Offline reinforcement learning from logged data with conservative value estimates.",
        ["Alan Turing", "Ada Lovelace"],
        "Reinforcement Learning->Batch/Offline",
        2023,
        "NeurIPS",
    ),
    (
        "fa1",
        "Fair predictions under imperceptible feature perturbation are not guaranteed by existing methods.",
        ["Grace Hopper"],
        "Social Aspects->Fairness",
        2024,
        "ICML",
    ),
    (
        "fa2",
        "Group fairness constraints for ranking systems with provable guarantees.",
        ["Jurgen Schmidhuber"],
        "Social Aspects->Fairness",
        2022,
        "ICML",
    ),
    (
        "gr1",
        "Graph neural networks for molecule property prediction with message passing.",
        ["Grace Hopper", "Alan Turing"],
        "Deep Learning->Graph Neural Networks",
        2025,
        "ICLR",
    ),
    (
        "op1",
        "Adaptive step sizes for stochastic gradient descent converge on nonconvex objectives.",
        ["Yann N. Dauphin"],
        "Optimization->Stochastic",
        2021,
        "ICML",
    ),
    (
        "op2",
        "Second-order optimizers for deep learning at scale with curvature estimates.",
        ["Ada Lovelace", "Yann Dauphin"],
        "Optimization->Large Scale",
        2025,
        "ICML",
    ),
]


@pytest.fixture(scope="module")
def fielded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small fielded corpus ingested once through the CLI; tests only read it."""
    import os
    import subprocess

    from conftest import cli_command

    root = tmp_path_factory.mktemp("fielded")
    corpus = root / "papers.jsonl"
    rows = [
        {"id": i, "abstract": text, "authors": a, "topic": t, "year": y, "venue": v} for i, text, a, t, y, v in PAPERS
    ]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {**os.environ, "RAG_ASSISTANT_DATA_DIR": str(root / "data")}
    done = subprocess.run([*cli_command(), "ingest", str(corpus)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return root / "data"


def _search(cli, data: Path, *args: str) -> tuple[list[str], str]:  # noqa: ANN001 - the cli fixture
    done = cli("--data-dir", str(data), "search", "reinforcement learning", "-k", "20", "--json", *args)
    assert done.returncode == 0, done.stderr
    return [r["paper_id"] for r in json.loads(done.stdout)], done.stderr


def test_unfiltered_search_sees_every_paper(cli, fielded: Path) -> None:  # noqa: ANN001
    ids, _ = _search(cli, fielded)
    assert set(ids) == {p[0] for p in PAPERS}  # so what a filter leaves out, it leaves out


@pytest.mark.parametrize(
    ("args", "expected", "shown"),
    [
        (("--author", "jurgen SCHMIDHUBER"), {"rl1", "fa2"}, "authors = jurgen SCHMIDHUBER"),
        (("--author", "Yann Dauphin", "--author", "Grace Hopper"), {"op1", "op2", "fa1", "gr1"}, "or Grace Hopper"),
        (("--year", "2024-2025"), {"rl1", "rl2", "fa1", "gr1", "op2"}, "year 2024-2025"),
        (("--year", "-2022"), {"fa2", "op1"}, "year <= 2022"),
        (("--topic", "fairness"), {"fa1", "fa2"}, "topic = Social Aspects->Fairness"),
        (("--topic", "reinforcement", "--year", "2024"), {"rl2"}, "year = 2024"),
        (("--where", "venue=NeurIPS"), {"rl3"}, "venue = NeurIPS"),
        (("--where", "year=2025", "--author", "Ada Lovelace"), {"op2"}, "authors = Ada Lovelace"),
    ],
)
def test_a_filtered_search_returns_exactly_the_subset(cli, fielded: Path, args, expected, shown) -> None:  # noqa: ANN001
    """Every paper of the subset is found (k exceeds it), none outside it: the dense side is filtered too, or
    its neighbours outside the subset would be fused in."""
    ids, stderr = _search(cli, fielded, *args)
    assert set(ids) == expected
    assert "filtered:" in stderr and shown in stderr


def test_filters_apply_before_ranking_on_each_side(fielded: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dense and the keyword search each return the subset's best chunks, however far down the global
    ranking they are (fed one candidate each: a filter applied after ranking would leave nothing)."""
    from rag_assistant.config import Settings
    from rag_assistant.retrieve import Retriever

    monkeypatch.setenv("RAG_ASSISTANT_DATA_DIR", str(fielded))
    retriever = Retriever(Settings())
    retriever.restrict(parse_filters(authors=["Grace Hopper"]))
    vector = retriever.embedder.embed(["reinforcement learning agents"])[0].tolist()
    dense = retriever.reader.query(vector, 1, where=chroma_where(retriever.where))
    lexical = retriever.keyword.query("reinforcement learning agents", 1, where=retriever.where)
    assert [h.paper_id for h in dense][0] in {"fa1", "gr1"}
    assert lexical == [] or lexical[0][0].split("#")[0] in {"fa1", "gr1"}  # no shared term: no keyword hit
    assert [s.paper_id for s in retriever.search("graph molecules", 1)] == ["gr1"]


def test_ask_answers_from_the_subset(cli, fielded: Path) -> None:  # noqa: ANN001
    done = cli("--data-dir", str(fielded), "ask", "What about reinforcement learning?", "--json", "--topic", "fairness")
    assert done.returncode == 0, done.stderr
    assert "filtered: topic = Social Aspects->Fairness" in done.stderr
    cited = set(json.loads(done.stdout).get("citations") or [])
    assert cited <= {"fa1", "fa2"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--where", "colour=red"), "unknown field 'colour'"),
        (("--where", "venue"), "malformed filter 'venue'"),
        (("--year", "20x4"), "malformed year '20x4'"),
        (("--year", "2025-2020"), "empty year range"),
        (("--topic", "astronomy"), "no topic contains 'astronomy'"),
        (("--author", "Ada Lovelase"), "closest: Ada Lovelace"),
    ],
)
def test_bad_filters_are_usage_errors(cli, fielded: Path, args, message) -> None:  # noqa: ANN001
    command = ["ask", "anything?"] if "--author" in args else ["search", "anything"]  # both parse them alike
    done = cli("--data-dir", str(fielded), *command, *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_the_bundled_corpus_has_no_fields_to_filter(cli, ready: Path) -> None:  # noqa: ANN001
    done = cli("search", "graph neural networks", "--author", "Ada Lovelace")
    assert done.returncode == 2 and "unknown field 'authors'" in done.stderr  # its text files give only urls
    plain = cli("search", "graph neural networks", "--json")
    assert plain.returncode == 0 and "filtered" not in plain.stderr


def test_years_parse() -> None:
    assert parse_years("2024") == FieldFilter("year", low=2024, high=2024)
    assert parse_years("2023-") == FieldFilter("year", low=2023)
    assert parse_years(" -2024") == FieldFilter("year", high=2024)
    assert parse_years("2020..2022") == FieldFilter("year", low=2020, high=2022)


def test_first_authors_and_byline() -> None:
    from rag_assistant.corpus.fields import byline, first_authors

    six = ["Zhihui Xie", "Jie chen", "Liyu Chen", "Weichao Mao", "Jingjing Xu", "Lingpeng Kong"]
    assert first_authors(six) == "Xie, chen, ... (6 authors)"
    assert first_authors(["Ada Lovelace", "Alan Turing"]) == "Lovelace, Turing"
    assert byline({"authors": six, "topic": "Deep Learning->Large Language Models"}) == (
        "Xie, chen, ... (6 authors) · Deep Learning->Large Language Models"
    )
    assert byline({"urls": ["https://x.org"]}) == byline({}) == ""  # the caller shows file and position


def test_papers_lists_the_subset_with_its_fields(cli, fielded: Path) -> None:  # noqa: ANN001
    done = cli("--data-dir", str(fielded), "papers", "--json")
    assert done.returncode == 0, done.stderr
    rows = {r["paper_id"]: r for r in json.loads(done.stdout)}
    assert set(rows) == {p[0] for p in PAPERS}
    assert rows["op1"]["fields"] == {
        "authors": ["Yann N. Dauphin"],
        "year": 2021,
        "venue": "ICML",
        "topic": "Optimization->Stochastic",
    }
    done = cli("--data-dir", str(fielded), "papers", "--author", "ada lovelace", "--year", "2023-2024")
    assert done.returncode == 0, done.stderr
    listed = [line.split()[0] for line in done.stdout.splitlines() if line.strip()]
    assert sorted(listed) == ["[rl2]", "[rl3]"]
    assert "Turing, Lovelace · Reinforcement Learning->Batch/Offline · 2023" in done.stdout
    assert "filtered: authors = ada lovelace, year 2023-2024" in done.stderr and "2 papers" in done.stderr


def test_references_show_authors_topic_and_year(cli, fielded: Path) -> None:  # noqa: ANN001
    done = cli("--data-dir", str(fielded), "ask", "How are graph neural networks used for molecules?", "--json")
    assert done.returncode == 0, done.stderr
    refs = {r["paper_id"]: r for r in json.loads(done.stdout)["references"]}
    assert refs["gr1"]["byline"] == "Hopper, Turing · Deep Learning->Graph Neural Networks · 2025"
    text = cli("--data-dir", str(fielded), "ask", "How are graph neural networks used for molecules?")
    assert "Hopper, Turing · Deep Learning->Graph Neural Networks · 2025" in text.stdout
    assert "papers.jsonl #" not in text.stdout  # the file and position only when a paper has no fields


def test_references_of_papers_without_fields_show_file_and_position(cli, own_ready: Path) -> None:  # noqa: ANN001
    done = cli("ask", "How does ShadowKV reduce KV cache memory?", "--json")
    assert done.returncode == 0, done.stderr
    refs = json.loads(done.stdout)["references"]
    assert refs and all(r["byline"] == "" for r in refs)
    text = cli("ask", "How does ShadowKV reduce KV cache memory?")
    assert f"{refs[0]['source']} #{refs[0]['position']}" in text.stdout


def test_stats_shows_which_fields_the_index_holds(cli, fielded: Path) -> None:  # noqa: ANN001
    stats = cli("--data-dir", str(fielded), "stats", "--json")
    assert json.loads(stats.stdout)["fields"] == {"authors": 8, "year": 8, "venue": 8, "topic": 8}
    text = cli("--data-dir", str(fielded), "stats").stdout
    assert "fields (papers carrying each" in text and "authors (8), year (8), venue (8), topic (8)" in text


def test_filters_and_named_authors_share_one_read_of_the_papers(
    fielded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The catalogue of fields is read once per index state (reading every paper is ~1 s at conference scale):
    an `--author` filter and a question naming an author in one process read the papers once; an ingest that
    changes the index makes the next use read them again."""
    import shutil
    from dataclasses import replace

    from rag_assistant.answer.authors import named_in
    from rag_assistant.config import Settings
    from rag_assistant.index.ingest import ingest_papers
    from rag_assistant.index.store import ChromaStore
    from rag_assistant.retrieve import Retriever

    data = tmp_path / "data"
    shutil.copytree(fielded, data)
    monkeypatch.setenv("RAG_ASSISTANT_DATA_DIR", str(data))
    reads = []
    iter_papers = ChromaStore.iter_papers

    def counted(self: ChromaStore) -> object:
        reads.append(1)
        return iter_papers(self)

    monkeypatch.setattr(ChromaStore, "iter_papers", counted)
    retriever = Retriever(Settings())
    retriever.restrict(parse_filters(topics=["learning"]))
    named = named_in(retriever, "Which papers did Ada Lovelace write?")
    assert named.authors and len(reads) == 1
    retriever.restrict(parse_filters(authors=["Grace Hopper"]))
    assert len(reads) == 1
    papers = retriever.reader.stored_papers()
    ingest_papers([replace(papers[0], paper_id="copy1")], Settings())  # another chunk: the index changed
    before = len(reads)
    assert "copy1" in {p.paper_id for p in retriever.reader.stored_papers()} and len(reads) == before + 1
    assert retriever.reader.stored_fields().catalogue["authors"] and len(reads) == before + 1
