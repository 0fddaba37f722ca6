"""What an answer's quoted lines are: the share that are background, filler ("other") or dangling-reference
sentences, over the answers of an eval run (`rag-assistant eval ... --out RUN`; issue 23's answer-level check).

    python benchmarks/answer_lines.py RUN_DIR [RUN_DIR ...] [--corpus FILE ...] [--show N] [--data-dir CONF]

Each answer is split into sentences (text.split_sentences, today's splitter for every run, so a run-on quote of
an older splitter counts as the sentences it holds); each sentence that cites a paper is matched to the sentence
of that paper's abstract it quotes (most shared words) and judged with the rule labeller (answer/roles.py) at
its position in the abstract (with --data-dir, by the fitted classifier on that index's sentence vectors, as
answers choose sentences): a line is bad when its role is background or other, or when it refers back
(roles.refers_back) and the answer does not quote the sentence before it in the abstract just before it. A line
quoted from inside its sentence (it starts with quotes.TRIM: "…we propose X") is judged on what it quotes.
`--show N` prints N bad lines, picked at random (seed 0), for reading.

Both judges above are the product's own labellers, and the classifier also chooses the lines. A reader's judgment
is the independent one: `--export FILE` writes each distinct quote of the runs' cited lines once, with its abstract
(cut as answers cut it), for readers to label by eval/sentences/ROLES.md (the role of the sentence, and whether
the quote as shown is dangling); `--readers FILE` (those rows with `role` and `dangling` added) scores one run by
them: a line is bad when its role is background or other, or when it is dangling and the answer did not quote the
sentence before it just before it.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from rag_assistant.answer.quotes import TRIM
from rag_assistant.answer.roles import BACKGROUND, OTHER, abstract_roles, refers_back
from rag_assistant.corpus import bundled_corpus_path, load_corpus
from rag_assistant.text import clean_markup, content_words, split_sentences

REPO = Path(__file__).resolve().parents[1]
_SHARED = "shared/corpus/icml2025_full/papers.jsonl"
# ../shared beside the checkout, or beside the directory of worktrees
CONFERENCE = next((d / _SHARED for d in REPO.parents[:2] if (d / _SHARED).is_file()), REPO.parent / _SHARED)
_CITED = re.compile(r"\[([0-9a-f]{6,}|\d{3}(?::\d+)?)[^\]]*\]")


def abstracts(paths: list[Path]) -> dict[str, list[str]]:
    papers = load_corpus(paths).papers
    return {p.paper_id: split_sentences(p.text) for p in papers}


def _match(line: str, sentences: list[str]) -> int | None:
    words = set(content_words(clean_markup(line)))
    if not words:
        return None
    overlap = [len(words & set(content_words(clean_markup(s)))) / len(words) for s in sentences]
    best = max(range(len(sentences)), key=lambda i: overlap[i], default=None)
    return best if best is not None and overlap[best] >= 0.5 else None


Roles = Callable[[str, list[str]], list[str]]


def rule_roles(paper_id: str, sentences: list[str]) -> list[str]:
    return abstract_roles(sentences)


def classifier_roles(data_dir: Path) -> Roles:
    """Roles by the classifier, on the sentence vectors the index at data_dir stores (as answers read them)."""
    from rag_assistant.config import load_settings
    from rag_assistant.retrieve import Retriever

    retriever = Retriever(load_settings(data_dir=data_dir))
    cache: dict[str, list[str]] = {}

    def roles(paper_id: str, sentences: list[str]) -> list[str]:
        if paper_id not in cache:
            papers = list(retriever.papers([paper_id]).values())
            vectors = retriever.sentence_vectors(papers).get(paper_id) if papers else None
            cache[paper_id] = abstract_roles(sentences, vectors)
        return cache[paper_id]

    return roles


def cited_lines(answer: str, by_id: dict[str, list[str]]) -> list[tuple[str, str, str, int | None]]:
    """(line, what it quotes, cited paper id, matched position in that paper's sentences) per cited sentence."""
    out: list[tuple[str, str, str, int | None]] = []
    for line in split_sentences(answer.replace("\n", " ")):
        ids = [m.group(1) for m in _CITED.finditer(line)]
        paper = next((by_id[i] for i in ids if i in by_id), None)
        if paper is None:
            continue
        pid = next(i for i in ids if i in by_id)
        quoted = _CITED.sub("", line).strip().lstrip("-*\u2022 ")  # a list item is judged without its marker
        out.append((line, quoted, pid, _match(quoted, paper)))
    return out


def judge(answer: str, by_id: dict[str, list[str]], roles_of: Roles = rule_roles) -> list[tuple[str, str]]:
    """(verdict, line) for each cited sentence: ok, background, other, dangling, or unmatched."""
    out: list[tuple[str, str]] = []
    last: tuple[str, int] | None = None
    for line, quoted, pid, pos in cited_lines(answer, by_id):
        paper = by_id[pid]
        if pos is None:
            out.append(("unmatched", line))
            continue
        role = roles_of(pid, paper)[pos]
        antecedent = last == (pid, pos - 1)
        if role in (BACKGROUND, OTHER):
            out.append((role, line))
        elif refers_back(quoted.removeprefix(TRIM) if quoted.startswith(TRIM) else paper[pos]) and not antecedent:
            out.append(("dangling", line))
        else:
            out.append(("ok", line))
        last = (pid, pos)
    return out


def _lines(run: Path, by_id: dict[str, list[str]]) -> list[tuple[str, str, int, bool]]:
    """(what it quotes, paper id, position, quoted just after the sentence before it) per matched cited line."""
    out = []
    for record in map(json.loads, (run / "results.jsonl").read_text().splitlines()):
        if record.get("abstained") or not record.get("answer"):
            continue
        last: tuple[str, int] | None = None
        for _, quoted, pid, pos in cited_lines(record["answer"], by_id):
            if pos is not None:
                out.append((quoted, pid, pos, last == (pid, pos - 1)))
                last = (pid, pos)
    return out


def export(runs: list[Path], by_id: dict[str, list[str]], out: Path) -> None:
    """Each distinct quote of the runs' cited lines once, with its abstract: what a reader needs to label it."""
    seen: dict[tuple[str, str, int], dict] = {}
    for run in runs:
        for quoted, pid, pos, _ in _lines(run, by_id):
            seen.setdefault(
                (quoted, pid, pos), {"quoted": quoted, "paper": pid, "position": pos, "abstract": by_id[pid]}
            )
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in seen.values()), encoding="utf-8")
    print(f"wrote {len(seen)} distinct quotes to {out}")


def by_readers(run: Path, by_id: dict[str, list[str]], labels: Path) -> None:
    label = {(r["quoted"], r["paper"], r["position"]): r for r in map(json.loads, labels.read_text().splitlines())}
    counts: Counter[str] = Counter()
    for quoted, pid, pos, after_antecedent in _lines(run, by_id):
        read = label.get((quoted, pid, pos))
        if read is None:
            raise SystemExit(f"no reader label for a line of {run}: export it with --export and label it")
        if read["role"] in (BACKGROUND, OTHER):
            counts[read["role"]] += 1
        elif read["dangling"] and not after_antecedent:
            counts["dangling"] += 1
        else:
            counts["ok"] += 1
    judged = sum(counts.values())
    parts = ", ".join(f"{v} {counts[v]}" for v in ("background", "other", "dangling"))
    print(f"{run}, by readers ({labels.name}): {judged} lines; bad {1 - counts['ok'] / judged:.3f} ({parts})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--corpus", action="append", type=Path, help="default: the conference file and bundled")
    parser.add_argument("--show", type=int, default=0)
    parser.add_argument("--data-dir", type=Path, help="judge roles with the classifier on this index's vectors")
    parser.add_argument("--export", type=Path, help="write the runs' distinct quotes here for readers to label")
    parser.add_argument("--readers", type=Path, help="score the run by these reader labels of --export's quotes")
    args = parser.parse_args()
    roles_of = classifier_roles(args.data_dir) if args.data_dir else rule_roles
    paths = args.corpus or [p for p in (CONFERENCE, bundled_corpus_path()) if p.exists()]
    by_id = abstracts(paths)
    if args.export:
        return export(args.runs, by_id, args.export)
    if args.readers:
        return by_readers(args.runs[0], by_id, args.readers)
    for run in args.runs:
        counts: Counter[str] = Counter()
        bad: list[tuple[str, str, str]] = []
        answers = 0
        for line in (run / "results.jsonl").read_text().splitlines():
            record = json.loads(line)
            if record.get("abstained") or not record.get("answer"):
                continue
            answers += 1
            for verdict, text in judge(record["answer"], by_id, roles_of):
                counts[verdict] += 1
                if verdict not in ("ok", "unmatched"):
                    bad.append((record["id"], verdict, text))
        judged = sum(n for v, n in counts.items() if v != "unmatched")
        share = (judged - counts["ok"]) / judged if judged else 0.0
        parts = ", ".join(f"{v} {counts[v]}" for v in ("background", "other", "dangling", "unmatched"))
        print(f"{run}: {answers} answers, {judged} cited lines judged; bad {share:.3f} ({parts})")
        for qid, verdict, text in random.Random(0).sample(bad, min(args.show, len(bad))):
            print(f"  {qid} {verdict}: {text[:160]}")


if __name__ == "__main__":
    main()
