"""Questions that name metadata, asked as plain questions (no flags) on the conference index (issue 20 item 3;
prints numbers, not a test).

1. eval/authors.jsonl (40 author questions, 1 to 8 papers each): recall of the author's papers among the papers
   the answer cites (an author question lists every paper, each cited), and precision (cited papers that are
   the author's).
2. eval/named.jsonl (31 questions naming tracks, years, authors, or only looking as if they did: method names
   that look like people, "keep track", years the index does not hold, unknown authors, a surname many
   authors share): what each question
   was planned to name against what it names (`expect`), and whether every retrieved and cited paper lies
   inside the named subset.

    python benchmarks/named_check.py DATA_DIR     # a copy of an index of the conference file with fields
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from rag_assistant.answer.chain import AnswerChain
from rag_assistant.answer.named import Named
from rag_assistant.config import Settings
from rag_assistant.corpus.fields import normalise
from rag_assistant.index.filters import matches
from rag_assistant.index.keyword_fields import FieldFilter

EVAL = Path(__file__).resolve().parents[1] / "eval"


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def authors(chain: AnswerChain) -> None:
    rows = _rows(EVAL / "authors.jsonl")
    recall = precision = 0.0
    listed = 0
    seconds = []
    for q in rows:
        t = time.perf_counter()
        answer = chain.ask(q["question"])
        seconds.append(time.perf_counter() - t)
        gold, cited = set(q["gold_papers"]), set(answer.citations)
        recall += len(gold & cited) / len(gold)
        precision += len(gold & cited) / len(cited) if cited else 0.0
        listed += answer.plan.get("kind") == "authors"
        if gold - cited or cited - gold:
            print(f"  {q['id']}: missed {len(gold - cited)}, extra {len(cited - gold)}: {q['question']}")
    n = len(rows)
    print(f"eval/authors.jsonl as plain questions: {n} questions, {listed} planned as author questions")
    print(f"  recall of the author's papers among cited {recall / n:.3f}, precision {precision / n:.3f}")
    print(f"  seconds per question: median {sorted(seconds)[n // 2]:.1f}, max {max(seconds):.1f}")


def _expected(expect: dict) -> list[FieldFilter]:
    out = []
    if "topic" in expect:
        out.append(FieldFilter("topic", tuple(expect["topic"])))
    if "authors" in expect:
        out.append(FieldFilter("authors", tuple(expect["authors"])))
    return out


def _same(plan: dict, named: Named, expect: dict) -> bool:
    """The plan names what `expect` says, and nothing else."""
    got = {f.field: set(f.values) for f in named.filters}
    want = {f.field: set(f.values) for f in _expected(expect)}
    person = expect.get("unknown_author") or expect.get("several_authors") or ""
    if got != want or named.unknown != person or named.several != ("several_authors" in expect):
        return False
    return bool(named.empty) == ("no_papers" in expect) and ("filtered" in plan) == bool(want)


def named_set(chain: AnswerChain) -> None:
    from rag_assistant.answer.authors import named_in

    rows = _rows(EVAL / "named.jsonl")
    right = inside = with_sources = 0
    for q in rows:
        named = named_in(chain.retriever, q["question"])
        answer = chain.ask(q["question"])
        ok = _same(answer.plan, named, q["expect"])
        right += ok
        subset = _expected(q["expect"])
        papers = chain.retriever.papers([s.paper_id for s in answer.sources])
        if subset and answer.sources:
            with_sources += 1
            inside += all(matches(p, subset) for p in papers.values())
        mark = "ok " if ok else "MISS"
        said = answer.plan.get("filtered") or named.unknown or named.empty or "-"
        print(f"  {mark} {q['id']} {q['question']!r} -> {said}")
    print(f"eval/named.jsonl: {right}/{len(rows)} planned as expected")
    print(f"  {inside}/{with_sources} filtered answers with every retrieved paper inside the named subset")


def main() -> None:
    settings = Settings(data_dir=Path(sys.argv[1]), mode="extractive")
    chain = AnswerChain(settings, log=False)
    papers = chain.retriever.reader.stored_papers()
    fields = sorted({f for p in papers for f in normalise(p.metadata)})
    print(f"index: {len(papers)} papers, fields {', '.join(fields)}")
    authors(chain)
    named_set(chain)


if __name__ == "__main__":
    main()
