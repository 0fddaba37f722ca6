"""Paper fields: normalised from the names real exports use, stored as filterable Chroma metadata of the chunks,
upgraded by a re-ingest of an index written before them; a paper without metadata is stored as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_assistant.config import Settings
from rag_assistant.corpus import bundled_corpus_path, load_corpus
from rag_assistant.corpus.fields import name_key, normalise, split_authors
from rag_assistant.corpus.models import Paper
from rag_assistant.errors import FilterError
from rag_assistant.index.filters import parse_filters
from rag_assistant.index.ingest import ingest_papers
from rag_assistant.index.store import open_store
from rag_assistant.retrieve import Retriever


@pytest.mark.parametrize(
    ("value", "names"),
    [
        (["Zhihui Xie", " Jie  chen "], ["Zhihui Xie", "Jie chen"]),
        ("Ada Lovelace, Alan Turing and Grace Hopper", ["Ada Lovelace", "Alan Turing", "Grace Hopper"]),
        ("Lovelace, Ada and Turing, Alan", ["Ada Lovelace", "Alan Turing"]),  # BibTeX
        ("Ada Lovelace; Turing, Alan", ["Ada Lovelace", "Alan Turing"]),
        ([{"authorId": "1", "name": "Ada Lovelace"}, {"name": "Alan Turing"}], ["Ada Lovelace", "Alan Turing"]),
        ([["Lovelace", "Ada", ""], ["Turing", "Alan M.", "Jr"]], ["Ada Lovelace", "Alan M. Turing Jr"]),  # arXiv
        ([{"given": "Ada", "family": "Lovelace"}], ["Ada Lovelace"]),
        ("Ada Lovelace and others", ["Ada Lovelace"]),
        (42, []),
    ],
)
def test_authors_are_split_in_order(value: object, names: list[str]) -> None:
    assert split_authors(value) == names


def test_common_source_names_map_to_one_set_of_fields() -> None:
    arxiv = {
        "authors": "A. Author, B. Writer",
        "authors_parsed": [["Author", "A.", ""], ["Writer", "B.", ""]],
        "categories": "cs.LG stat.ML",
        "journal-ref": "ICML 2024",
        "doi": "https://doi.org/10.1000/XYZ",
        "versions": [{"version": "v1", "created": "Mon, 2 Apr 2007 19:18:42 GMT"}],
        "update_date": "2008-11-13",
        "comments": "12 pages",
    }
    assert normalise(arxiv) == {
        "authors": ["A. Author", "B. Writer"],
        "year": 2007,
        "venue": "ICML 2024",
        "categories": ["cs.LG", "stat.ML"],
        "doi": "10.1000/xyz",
        "update_date": "2008-11-13",  # not the year (v1's date is), but kept like any other scalar field
        "comments": "12 pages",
    }
    openreview = {
        "authors": {"value": ["Ada Lovelace"]},
        "venue": {"value": "ICML 2025 poster"},
        "primary_area": {"value": "deep_learning"},
        "cdate": 1738368000000,
        "keywords": {"value": ["llm", "rl"]},
    }
    assert normalise(openreview) == {
        "authors": ["Ada Lovelace"],
        "year": 2025,
        "venue": "ICML 2025 poster",
        "topic": "deep_learning",
        "categories": ["llm", "rl"],
    }
    s2 = {
        "authors": [{"name": "Ada Lovelace"}],
        "externalIds": {"DOI": "10.5/ABC", "ArXiv": "1234.5678"},
        "publicationDate": "2023-06-01",
        "fieldsOfStudy": ["Computer Science"],
        "url": "https://example.org/p",
        "citationCount": 7,
    }
    assert normalise(s2) == {
        "authors": ["Ada Lovelace"],
        "year": 2023,
        "categories": ["Computer Science"],
        "doi": "10.5/abc",
        "url": "https://example.org/p",
        "citationcount": 7,
    }
    csv_row = {"Author": "Lovelace, Ada and Turing, Alan", "Year": "2021", "Track": "Theory", "booktitle": "NeurIPS"}
    assert normalise(csv_row) == {
        "authors": ["Ada Lovelace", "Alan Turing"],
        "year": 2021,
        "venue": "NeurIPS",
        "topic": "Theory",
    }
    assert normalise({}) == {}


def test_name_keys_fold_case_accents_and_initials() -> None:
    assert name_key("Jürgen  Schmidhuber") == name_key("jurgen schmidhuber") == "jurgen schmidhuber"
    assert name_key("Yann N. Dauphin") == "yann dauphin"
    assert name_key("Bjørn Łukasz") == "bjorn lukasz"


RECORDS = [
    {
        "id": "p1",
        "title": "Critic training by reinforcement learning",
        "abstract": "We train critics for code generation with reinforcement learning. " * 40,
        "authors": ["Zhihui Xie", "Jürgen Schmidhuber"],
        "topic": "Deep Learning->Large Language Models",
        "year": "2025",
    },
    {
        "id": "p2",
        "abstract": "Fair predictions under imperceptible feature perturbation are not guaranteed. " * 3,
        "authors": "Ada Lovelace and Alan Turing",
        "topic": "Social Aspects->Fairness",
        "year": 2024,
    },
]


def _collection(settings: Settings):  # noqa: ANN202 - chromadb's Collection
    return open_store(settings).collection


def test_fields_are_chroma_metadata_of_the_chunks_authors_of_the_first(tmp_path: Path) -> None:
    path = tmp_path / "papers.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    settings = Settings()
    ingest_papers(load_corpus([path]).papers, settings)
    col = _collection(settings)

    def ids(where: dict) -> set[str]:
        return {m["paper_id"] for m in col.get(where=where, include=["metadatas"])["metadatas"]}

    assert ids({"ak": {"$contains": "jurgen schmidhuber"}}) == {"p1"}
    assert ids({"f_year": {"$gte": 2025}}) == {"p1"}
    assert ids({"f_year": {"$lte": 2024}}) == {"p2"}
    assert ids({"f_topic": "Social Aspects->Fairness"}) == {"p2"}
    rows = col.get(include=["metadatas"])["metadatas"]
    firsts = [m for m in rows if m["chunk_index"] == 0]
    assert len(firsts) == 2 and all(m["f_year"] in (2024, 2025) and m["ak"] for m in firsts)
    assert all("f_year" in m for m in rows)  # short fields on every chunk, authors once per paper (records.py)
    assert not any("ak" in m for m in rows if m["chunk_index"])
    # the abstract is stored once per paper, on its first chunk only
    assert sum("paper_z" in m for m in rows) == 2 < len(rows)


def _old_hash(p: Paper) -> str:
    """Paper.content_hash before fields existed."""
    import hashlib

    payload = json.dumps([p.title, p.text, p.metadata], sort_keys=True, ensure_ascii=False)
    return hashlib.sha1(payload.encode("utf-8")).hexdigest()[:16]


def test_a_paper_without_metadata_is_stored_as_before(data_dir: Path) -> None:
    """Same content hash (an existing index of such papers is not rewritten) and no field metadata."""
    settings = Settings()
    bare = [p for p in load_corpus([bundled_corpus_path()]).papers if not p.metadata][:3]
    assert len(bare) == 3 and all(p.content_hash == _old_hash(p) for p in bare)
    ingest_papers(bare, settings)
    rows = _collection(settings).get(include=["metadatas"])["metadatas"]
    assert rows and not any(k.startswith("f_") for m in rows for k in m)


def test_reingest_upgrades_papers_stored_before_fields(tmp_path: Path) -> None:
    """An index written before fields existed (same records, chunks without f_ metadata and the older content
    hash) is rewritten by the next ingest of the same file, which says how many papers it changed."""
    import rag_assistant.index.records as records_mod
    import rag_assistant.index.store as store_mod

    path = tmp_path / "papers.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    settings = Settings()
    papers = load_corpus([path]).papers

    real = store_mod.paper_to_metadata
    with pytest.MonkeyPatch.context() as mp:  # what the previous version stored
        mp.setattr(records_mod, "field_metadata", lambda p: {})
        mp.setattr(
            "rag_assistant.index.ingest.paper_to_metadata",
            lambda p, i, n: {**real(p, i, n), "paper_hash": _old_hash(p)},
        )
        mp.setattr(Paper, "content_hash", property(_old_hash))
        ingest_papers(papers, settings)
    assert not _collection(settings).get(where={"f_year": 2024})["ids"]
    with pytest.raises(FilterError, match="written before paper fields"):  # not a silently keyword-only search
        Retriever(settings).restrict(parse_filters(years="2024"))

    report = ingest_papers(load_corpus([path]).papers, settings)
    assert (report.changed, report.chunks_added > 0, report.chunks_embedded) == (2, True, 0)  # vectors reused
    assert {
        m["paper_id"] for m in _collection(settings).get(where={"f_year": 2024}, include=["metadatas"])["metadatas"]
    } == {"p2"}
    assert [f.field for f in Retriever(settings).restrict(parse_filters(years="2024"))] == ["year"]


def test_openreview_wrapped_records_load(tmp_path: Path) -> None:
    """OpenReview's API v2 export wraps every content field as {"value": ...}: title and abstract included."""
    record = {
        "id": "abc",
        "title": {"value": "A wrapped title"},
        "abstract": {"value": "An abstract in a wrapper."},
        "authors": {"value": ["Ada Lovelace"]},
        "venue": {"value": "ICML 2025"},
    }
    path = tmp_path / "openreview.jsonl"
    path.write_text(json.dumps(record) + "\n")
    (paper,) = load_corpus([path]).papers
    assert (paper.title, paper.text) == ("A wrapped title", "An abstract in a wrapper.")
    assert normalise(paper.metadata) == {"authors": ["Ada Lovelace"], "venue": "ICML 2025"}
