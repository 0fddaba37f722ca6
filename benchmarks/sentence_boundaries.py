"""Sentence splitters against the hand-split abstracts of eval/sentences/boundaries.jsonl, and on the whole
conference file: boundary precision, recall and F1 (dev and held-out splits, eval/sentences/split.py), the
conference abstracts that still keep a joined pair of sentences ("grown substantially.LLM unlearning ..."), and
the time per abstract.

    python benchmarks/sentence_boundaries.py [--split dev|heldout|both] [--candidates rag-assistant,regex-a6b5c7c,...]

Candidates: `rag-assistant` (text.split_sentences: syntok plus its repairs), `syntok`, `pysbd`, `spacy` (a
blank English pipeline with the rule-based sentencizer), `nupunkt`, `blingfire`, and `regex-a6b5c7c` (the
hand-written regex before issue 23, kept here as the baseline). A library that is not installed is skipped with
a note; `--extra-path DIR` adds a directory of them (`pip install --target DIR pysbd spacy ...`) at the END of
sys.path, so that the project's own packages win.

A boundary is where a sentence starts, counted in non-whitespace characters from the abstract's start: splitters
that normalise spacing are compared fairly. Boundary F1 is micro-averaged over the abstracts' boundaries.
A join is a site matching JOIN below (a sentence-ending mark glued to a capitalised word: 1,346 sites in 542 of
the 3,339 abstracts; on the labelled abstracts it finds 154 of the 157 glued boundaries, and 2 more sites at a
bold heading); a join is kept when the splitter has no boundary between the mark and the capital.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "eval" / "sentences"))
from split import boundaries, heldout  # noqa: E402

# ../shared beside the checkout, or beside the directory of worktrees
CORPUS = next(
    (p for p in (d / "shared/corpus/icml2025_full/papers.jsonl" for d in REPO.parents[:2]) if p.is_file()),
    REPO.parent / "shared/corpus/icml2025_full/papers.jsonl",
)
JOIN = re.compile(r"(?<=[^\s.])[.!?](?:\*\*|\*|\)|\")?(?=\*{0,2}[A-Z][A-Za-z])")
Splitter = Callable[[str], list[str]]


def regex_a6b5c7c() -> Splitter:
    """text.split_sentences as it was before issue 23."""
    abbrev = r"(?:e\.g|i\.e|et al|etc|vs|cf|Fig|Figs|Eq|Eqs|Sec|No|resp|approx|Dr|Mr|Ms|Prof|al)"
    protect = re.compile(rf"\b{abbrev}\.", re.IGNORECASE)
    boundary = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[\"'(\[]?(?:[\ue000\ue002]|[A-Z0-9$\\*]))")

    def split(text: str) -> list[str]:
        text = " ".join(text.split())
        guarded = protect.sub(lambda m: m.group(0)[:-1] + "\u2063", text)
        return [s for s in (p.replace("\u2063", ".").strip() for p in boundary.split(guarded)) if s]

    return split


def candidates() -> dict[str, Callable[[], Splitter]]:
    def ours() -> Splitter:
        from rag_assistant.text import split_sentences

        return split_sentences

    def syntok() -> Splitter:
        from syntok.segmenter import analyze

        def split(text: str) -> list[str]:
            starts = [s[0].offset for p in analyze(text) for s in p if s] + [len(text)]
            return [text[a:b].strip() for a, b in zip(starts, starts[1:], strict=False)]

        return split

    def pysbd() -> Splitter:
        import pysbd

        return pysbd.Segmenter(language="en", clean=False).segment

    def spacy() -> Splitter:
        import spacy

        nlp = spacy.blank("en")
        nlp.add_pipe("sentencizer")
        return lambda text: [s.text for s in nlp(text).sents]

    def nupunkt() -> Splitter:
        import nupunkt

        return nupunkt.sent_tokenize

    def blingfire() -> Splitter:
        import blingfire

        return lambda text: blingfire.text_to_sentences(text).split("\n")

    return {
        "rag-assistant": ours,
        "regex-a6b5c7c": regex_a6b5c7c,
        "syntok": syntok,
        "pysbd": pysbd,
        "spacy": spacy,
        "nupunkt": nupunkt,
        "blingfire": blingfire,
    }


def joins_kept(text: str, sentences: list[str]) -> int:
    starts, _ = boundaries(sentences)
    kept = 0
    for m in JOIN.finditer(text):
        low = len("".join(text[: m.start() + 1].split()))
        high = len("".join(text[: m.end()].split())) + 2  # before the capital, past an opening "**"
        kept += not any(low <= s <= high for s in starts)
    return kept


def score(split: Splitter, rows: list[dict], texts: dict[str, str]) -> dict[str, float]:
    tp = fp = fn = lost = 0
    for row in rows:
        text = texts[row["id"]]
        gold, n_gold = boundaries(row["sentences"])
        got, n_got = boundaries(split(text))
        lost += n_gold != n_got  # the splitter dropped or changed characters
        tp, fp, fn = tp + len(gold & got), fp + len(got - gold), fn + len(gold - got)
    precision, recall = tp / ((tp + fp) or 1), tp / ((tp + fn) or 1)
    f1 = 2 * precision * recall / ((precision + recall) or 1)
    return {"precision": precision, "recall": recall, "f1": f1, "fp": fp, "fn": fn, "altered": lost}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=("dev", "heldout", "both"), default="dev")
    parser.add_argument("--candidates", default=",".join(candidates()))
    parser.add_argument("--extra-path", action="append", default=[])
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="the conference file (papers.jsonl)")
    parser.add_argument("--no-conference", action="store_true", help="skip the joins count and timing")
    args = parser.parse_args()
    sys.path.extend(args.extra_path)
    texts = {}
    for line in args.corpus.read_text().splitlines():
        record = json.loads(line)
        texts[record["id"]] = " ".join(record["abstract"].split())  # as the corpus loader keeps it
    labelled = [json.loads(line) for line in (REPO / "eval/sentences/boundaries.jsonl").read_text().splitlines()]
    splits = ("dev", "heldout") if args.split == "both" else (args.split,)
    by_split = {s: [r for r in labelled if heldout(r["id"]) == (s == "heldout")] for s in splits}
    header = "".join(f"{s + ' F1 (P/R)':>24}" for s in splits)
    print(f"{'splitter':<15}{header}{'joined abstracts kept':>23}{'ms/abstract':>13}")
    every = candidates()
    for name in args.candidates.split(","):
        try:
            split = every[name]()
        except ImportError as e:
            print(f"{name:<15} not installed ({e.name})")
            continue
        cells = ""
        for s in splits:
            m = score(split, by_split[s], texts)
            cells += f"{m['f1']:>10.4f} ({m['precision']:.3f}/{m['recall']:.3f})"
        kept = ms = ""
        if not args.no_conference:
            if name == "rag-assistant":  # time it uncached, as a process meets each abstract the first time
                from rag_assistant import text as text_module

                text_module._split.cache_clear()  # noqa: SLF001
            start = time.perf_counter()
            parts = {pid: split(text) for pid, text in texts.items()}
            ms = f"{(time.perf_counter() - start) / len(texts) * 1000:.2f}"
            kept = str(sum(joins_kept(texts[pid], p) > 0 for pid, p in parts.items()))
        print(f"{name:<15}{cells}{kept:>23}{ms:>13}")
    joined = sum(1 for text in texts.values() if JOIN.search(text))
    print(f"({len(texts)} conference abstracts, {joined} with a join; labelled: {[len(v) for v in by_split.values()]})")


if __name__ == "__main__":
    main()
