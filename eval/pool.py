"""Pool candidate papers for judged evaluation questions, the way TREC test collections are built.

For each topic (a question, a second phrasing in other words, a regex over the topic's core terms and a
written inclusion criterion) the candidates are the union of several independent rankings to --depth:

  bm25        BM25 (bm25s, English stop words, Snowball stems) over the abstracts, on the question
  bm25-alt    the same on the second phrasing
  dense       all-MiniLM-L6-v2 over the indexed chunks (the index in --data-dir), on the question, dense only
  dense-alt   the same on the second phrasing
  hybrid      rag-assistant's default ranking (dense + keyword, fused, feedback), on the question
  regex       every abstract the regex matches, most matches first (capped at 2 x depth)

Each pooled paper is written out with its abstract for a judge to read, in one Markdown file per topic, with
the runs and ranks that found it, so that every one can be judged against the criterion. Judgments go into a
separate file (eval/survey_judgments.jsonl) and `eval/build_survey.py` turns them into a dataset.

    python eval/pool.py eval/survey_topics.jsonl --data-dir CONF --out /tmp/pools [--depth 40] [--only s01,s02]

CONF is an index holding ../shared/corpus/icml2025_full/papers.jsonl (the bundled 38 may be in it too; their
ids are mapped to the conference file's ids). Topics file rows:
  {"id": "s01", "question": "...", "rephrase": "...", "regex": "...", "criterion": "..."}
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFERENCE = REPO.parent / "shared" / "corpus" / "icml2025_full" / "papers.jsonl"


def load_conference(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]


class Bm25:
    """BM25 over the conference file's abstracts, independent of rag-assistant's own keyword index."""

    def __init__(self, papers: list[dict]) -> None:
        import bm25s
        import Stemmer

        self.papers, self.stemmer, self.bm25s = papers, Stemmer.Stemmer("english"), bm25s
        tokens = bm25s.tokenize(
            [p["abstract"] for p in papers], stopwords="en", stemmer=self.stemmer, show_progress=False
        )
        self.retriever = bm25s.BM25()
        self.retriever.index(tokens, show_progress=False)

    def runs(self, queries: dict[str, str], depth: int) -> dict[str, list[str]]:
        bm25s, papers, retriever, stemmer = self.bm25s, self.papers, self.retriever, self.stemmer
        out = {}
        for name, query in queries.items():
            tokens = bm25s.tokenize([query], stopwords="en", stemmer=stemmer, show_progress=False)
            docs, scores = retriever.retrieve(tokens, k=depth, show_progress=False)
            out[name] = [papers[int(i)]["id"] for i, s in zip(docs[0], scores[0], strict=True) if s > 0]
        return out


_RETRIEVERS: dict = {}


def index_runs(data_dir: Path, queries: dict[str, str], depth: int, ids: set[str], by_text: dict[str, str]) -> dict:
    """Dense-only and default-hybrid rankings from the index; ids outside the conference file are mapped to it
    through their duplicates or their text."""
    from rag_assistant.config import load_settings
    from rag_assistant.retrieve import Retriever

    def conference_id(source) -> str | None:  # noqa: ANN001
        for pid in (source.paper_id, *source.duplicates):
            if pid in ids:
                return pid
        return by_text.get(norm(source.paper.text))

    out: dict[str, list[str]] = {}
    if not _RETRIEVERS:
        dense = Retriever(load_settings(data_dir=data_dir, dense_weight=1.0, feedback_papers=0))
        _RETRIEVERS["dense"] = dense
        _RETRIEVERS["hybrid"] = Retriever(
            load_settings(data_dir=data_dir), reader=dense.reader, embedder=dense.embedder
        )
    dense, hybrid = _RETRIEVERS["dense"], _RETRIEVERS["hybrid"]
    for name, query in queries.items():
        for run, retriever in (("dense", dense), ("hybrid", hybrid)):
            if run == "hybrid" and name.endswith("-alt"):
                continue
            key = run + ("-alt" if name.endswith("-alt") else "")
            ranked = [conference_id(s) for s in retriever.search(query, depth)]
            out[key] = [p for p in dict.fromkeys(ranked) if p]
    return out


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def regex_run(papers: list[dict], pattern: str, cap: int) -> list[str]:
    rx = re.compile(pattern, re.I)
    hits = [(len(rx.findall(p["abstract"])), p["id"]) for p in papers]
    return [pid for n, pid in sorted((h for h in hits if h[0]), key=lambda h: (-h[0], h[1]))[:cap]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("topics", type=Path)
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--corpus", type=Path, default=CONFERENCE)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--depth", type=int, default=40)
    ap.add_argument("--only", default="", help="comma list of topic ids")
    args = ap.parse_args()

    papers = load_conference(args.corpus)
    by_id = {p["id"]: p for p in papers}
    by_text = {norm(p["abstract"]): p["id"] for p in papers}
    topics = [json.loads(line) for line in args.topics.open(encoding="utf-8") if line.strip()]
    only = set(filter(None, args.only.split(",")))
    topics = [t for t in topics if not only or t["id"] in only]
    args.out.mkdir(parents=True, exist_ok=True)
    bm25 = Bm25(papers)
    for t in topics:
        queries = {"q": t["question"]}
        if t.get("rephrase"):
            queries["q-alt"] = t["rephrase"]
        runs: dict[str, list[str]] = {}
        lexical = bm25.runs(queries, args.depth)
        runs["bm25"] = lexical["q"]
        if "q-alt" in lexical:
            runs["bm25-alt"] = lexical["q-alt"]
        runs.update(index_runs(args.data_dir, queries, args.depth, set(by_id), by_text))
        if t.get("regex"):
            runs["regex"] = regex_run(papers, t["regex"], 2 * args.depth)
        found: dict[str, dict[str, int]] = {}
        for run, ranked in runs.items():
            for rank, pid in enumerate(ranked, start=1):
                found.setdefault(pid, {})[run] = rank
        order = sorted(found, key=lambda p: (min(found[p].values()), -len(found[p]), p))
        write_pool(args.out, t, order, found, by_id, runs)
        print(f"{t['id']}: {len(order)} pooled papers from {', '.join(f'{r} {len(v)}' for r, v in runs.items())}")
    return 0


def write_pool(out: Path, t: dict, order: list[str], found: dict, by_id: dict, runs: dict) -> None:
    lines = [f"# {t['id']}: {t['question']}", "", f"Criterion: {t.get('criterion', '')}", ""]
    if t.get("rephrase"):
        lines += [f"Second phrasing: {t['rephrase']}", ""]
    if t.get("regex"):
        lines += [f"Regex: `{t['regex']}`", ""]
    for n, pid in enumerate(order, start=1):
        p = by_id[pid]
        where = ", ".join(f"{r}@{k}" for r, k in sorted(found[pid].items(), key=lambda x: x[1]))
        lines += [f"## {n}. {pid}  ({where})", f"track: {p.get('topic', '')}", "", p["abstract"], ""]
    (out / f"{t['id']}.md").write_text("\n".join(lines), encoding="utf-8")
    pool = {"id": t["id"], "pool": order, "runs": runs}
    (out / f"{t['id']}.json").write_text(json.dumps(pool), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
