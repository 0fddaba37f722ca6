from __future__ import annotations

from rag_assistant.corpus import Paper, bundled_corpus_path, load_corpus
from rag_assistant.index.chunking import chunk_paper, token_counter
from rag_assistant.index.embedding import get_tokenizer
from rag_assistant.text import split_sentences

WINDOW = 256  # all-MiniLM-L6-v2's max_seq_length, including [CLS] and [SEP]


def test_sentence_splitter_keeps_abbreviations_decimals_and_latex() -> None:
    text = "We use e.g. GPT-4 and gain 3.5% (see Fig. 2). Next, $\\mathrm{E}(3)$ holds! *Token* merging works."
    assert split_sentences(text) == [
        "We use e.g. GPT-4 and gain 3.5% (see Fig. 2).",
        "Next, $\\mathrm{E}(3)$ holds!",
        "*Token* merging works.",
    ]


def test_every_bundled_chunk_fits_the_window_and_covers_the_abstract() -> None:
    tok = get_tokenizer()
    count = token_counter(tok)
    for paper in load_corpus([bundled_corpus_path()]).papers:
        chunks = chunk_paper(paper, count, 200, overlap=1)
        assert chunks
        for c in chunks:
            assert len(tok.encode(c.text).ids) <= WINDOW  # with special tokens
        covered = " ".join(c.text for c in chunks)
        for sentence in split_sentences(paper.text):
            assert sentence in covered


def test_overlong_abstract_is_split_not_truncated() -> None:
    words = [f"token{i}" for i in range(900)]
    paper = Paper("long:0", " ".join(words[:400]) + ". " + " ".join(words[400:]) + ".", "long.txt", 0, "A title")
    count = token_counter(get_tokenizer())
    chunks = chunk_paper(paper, count, 200, overlap=1)
    assert len(chunks) >= 4
    assert all(count(c.text) <= 200 for c in chunks)
    assert all(c.text.startswith("A title. ") for c in chunks)
    seen = set(" ".join(c.text for c in chunks).replace(".", " ").split())
    assert set(words) <= seen
    assert [c.chunk_id for c in chunks] == [f"long:0#{i}" for i in range(len(chunks))]
