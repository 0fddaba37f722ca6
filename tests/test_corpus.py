"""Parsers, including every kind of bad input the foundation issue names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_assistant.corpus import bundled_corpus_path, load_corpus
from rag_assistant.corpus.fields import normalise
from rag_assistant.errors import CorpusError


def test_bundled_text_format_ids_positions_and_metadata() -> None:
    loaded = load_corpus([bundled_corpus_path()])
    assert len(loaded.papers) == 38
    assert not loaded.warnings and not loaded.errors
    by_id = {p.paper_id: p for p in loaded.papers}
    shadow = by_id["004:17"]
    assert shadow.text.startswith("With the widespread deployment of long-context")
    assert "ShadowKV" in shadow.text
    assert shadow.source == "004_f08e38e0363d2af7.txt" and shadow.position == 17
    assert by_id["000:0"].position == 0 and "Safe Delta" in by_id["000:0"].text
    assert not any(p.text.startswith("ICML 2025 Papers") for p in loaded.papers)
    with_urls = [p for p in loaded.papers if p.metadata.get("urls")]
    assert with_urls and all(u.startswith("http") for p in with_urls for u in p.metadata["urls"])


def test_ids_are_stable_across_loads() -> None:
    a = [(p.paper_id, p.content_hash) for p in load_corpus([bundled_corpus_path()]).papers]
    b = [(p.paper_id, p.content_hash) for p in load_corpus([bundled_corpus_path()]).papers]
    assert a == b


def test_jsonl_json_csv_keep_fields(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(
        json.dumps({"id": "p1", "title": "T1", "abstract": "First abstract. It works.", "topic": "ML"})
        + "\n\n"
        + json.dumps({"abstract": "No id here.", "authors": ["A", "B"]})
        + "\n"
    )
    (tmp_path / "b.json").write_text(json.dumps([{"id": "j1", "abstract": "From JSON.", "year": 2025}]))
    (tmp_path / "c.csv").write_text('id,title,abstract,venue\nc1,"A, title",Some text here.,ICML\n')
    loaded = load_corpus([tmp_path])
    by_id = {p.paper_id: p for p in loaded.papers}
    assert by_id["p1"].title == "T1" and by_id["p1"].metadata == {"topic": "ML"}
    assert by_id["a:1"].metadata["authors"] == ["A", "B"] and by_id["a:1"].position == 1
    assert by_id["j1"].metadata == {"year": 2025} and by_id["j1"].source == "b.json"
    assert by_id["c1"].title == "A, title" and by_id["c1"].metadata == {"venue": "ICML"}


def _fails(path: Path, *expected: str) -> CorpusError:
    with pytest.raises(CorpusError) as info:
        load_corpus([path])
    text = str(info.value)
    for piece in expected:
        assert piece in text, text
    return info.value


def test_empty_file(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("  \n\n")
    _fails(tmp_path / "empty.txt", "empty.txt", "empty file")


def test_binary_file(tmp_path: Path) -> None:
    (tmp_path / "blob.txt").write_bytes(b"\x89PNG\x00\x00\x01\x02")
    _fails(tmp_path / "blob.txt", "blob.txt", "binary")


def test_non_utf8_file_names_line(tmp_path: Path) -> None:
    (tmp_path / "latin.txt").write_bytes("Header\n\nfine line\nna\xefve caf\xe9\n".encode("latin-1"))
    _fails(tmp_path / "latin.txt", "latin.txt:4", "UTF-8")


def test_malformed_jsonl_names_line(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text('{"id": "1", "abstract": "ok"}\n{"id": "2", "abstract": \n')
    _fails(tmp_path / "bad.jsonl", "bad.jsonl:2", "malformed JSON")


def test_record_without_abstract(tmp_path: Path) -> None:
    (tmp_path / "noabs.jsonl").write_text('{"id": "1", "abstract": "ok"}\n{"id": "2", "title": "x"}\n')
    _fails(tmp_path / "noabs.jsonl", "noabs.jsonl:2", "no abstract")


def test_csv_without_abstract_column(tmp_path: Path) -> None:
    (tmp_path / "x.csv").write_text("id,title\n1,t\n")
    _fails(tmp_path / "x.csv", "x.csv", "abstract")


def test_missing_path_and_unsupported_type(tmp_path: Path) -> None:
    _fails(tmp_path / "nope.txt", "nope.txt", "no such file")
    (tmp_path / "doc.pdf").write_bytes(b"%PDF")
    _fails(tmp_path / "doc.pdf", "doc.pdf", "unsupported")


def test_duplicates_are_warned_and_skipped(tmp_path: Path) -> None:
    rec = {"id": "d1", "abstract": "Same text."}
    (tmp_path / "dup.jsonl").write_text(
        json.dumps(rec) + "\n" + json.dumps(rec) + "\n" + json.dumps({"id": "d2", "abstract": "Same   text."}) + "\n"
    )
    loaded = load_corpus([tmp_path / "dup.jsonl"])
    assert [p.paper_id for p in loaded.papers] == ["d1"]
    assert len(loaded.warnings) == 2 and "dup.jsonl" in loaded.warnings[0]


def test_a_skipped_copy_of_an_abstract_gives_the_kept_paper_what_only_it_knows(tmp_path: Path) -> None:
    """The bundled text files and the conference's JSON Lines hold the same abstracts; the text copy comes first
    and has no authors, so the JSON copy's fields must not be dropped with it."""
    (tmp_path / "a.txt").write_text("Papers\n\nRouting tokens to sparse experts saves compute.\n")
    (tmp_path / "b.jsonl").write_text(
        json.dumps(
            {
                "id": "j1",
                "abstract": "Routing tokens to  sparse experts saves compute.",
                "title": "SparseRoute",
                "authors": ["Ada Lovelace"],
                "topic": "Deep Learning",
            }
        )
        + "\n"
    )
    loaded = load_corpus([tmp_path / "a.txt", tmp_path / "b.jsonl"])
    (paper,) = loaded.papers
    assert paper.paper_id == "a:0" and paper.title == "SparseRoute"
    assert paper.metadata == {"authors": ["Ada Lovelace"], "topic": "Deep Learning", "duplicate_ids": ["j1"]}
    assert "same abstract as a:0, skipped (its id, title and fields kept with it)" in loaded.warnings[0]
    assert "duplicate_ids" not in normalise(paper.metadata)  # ids, not a field to filter by
    (tmp_path / "c.jsonl").write_text(
        json.dumps({"id": "c1", "abstract": "Routing tokens to sparse experts saves compute.", "topic": "Theory"})
        + "\n"
    )
    (kept,) = load_corpus([tmp_path / "b.jsonl", tmp_path / "c.jsonl"]).papers
    assert kept.paper_id == "j1" and kept.metadata["topic"] == "Deep Learning"  # the kept paper's own values win


def test_same_id_different_text_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "clash.jsonl").write_text('{"id": "x", "abstract": "One."}\n{"id": "x", "abstract": "Two."}\n')
    _fails(tmp_path / "clash.jsonl", "clash.jsonl", "already used")


def test_skip_bad_keeps_good_files_and_reports_all_errors(tmp_path: Path) -> None:
    (tmp_path / "good.jsonl").write_text('{"id": "g", "abstract": "Good."}\n')
    (tmp_path / "bad1.jsonl").write_text("{oops\n")
    (tmp_path / "bad2.txt").write_bytes(b"\xff\xfe\x00")
    err = _fails(tmp_path, "2 problems")
    assert len(err.details) == 2
    loaded = load_corpus([tmp_path], skip_bad=True)
    assert [p.paper_id for p in loaded.papers] == ["g"] and len(loaded.errors) == 2


def test_colliding_short_prefixes_fall_back_to_full_stem(tmp_path: Path) -> None:
    (tmp_path / "001_a.txt").write_text("Alpha abstract.\n")
    (tmp_path / "001_b.txt").write_text("Beta abstract.\n")
    ids = sorted(p.paper_id for p in load_corpus([tmp_path]).papers)
    assert ids == ["001_a:0", "001_b:0"]


def test_same_abstract_with_other_spacing_is_one_text() -> None:
    from rag_assistant.corpus import Paper

    a = Paper("a", "Layers are quantised. Unlike GPTQ, we match outputs.", "a.txt", 0)
    b = Paper("b", "Layers are quantised.Unlike  GPTQ,\nwe match outputs.", "b.jsonl", 3)  # as in the ICML JSONL
    c = Paper("c", "Layers are quantised. Unlike GPTQ, we match inputs.", "c.txt", 0)
    assert a.text_hash == b.text_hash != c.text_hash
