"""The second round of sentence-role labels (issue 23): 200 more conference abstracts, none labelled before, cut
into sentences by today's splitter (`text.split_sentences`, the one answers use), in four batches that two readers
label blind (eval/sentences/ROLES.md is what they read). Its held-out split is fixed here, before any label
exists: an abstract is in `heldout2` when `int(sha1("roles2:" + id)[:8], 16) % 100 < 30`. The first round's
held-out split (split.py) was looked at twice and is now training data; `heldout2` is the one to look at once.

Sampling: papers of ../shared/corpus/icml2025_full/papers.jsonl, minus every abstract of the earlier role and
boundary sets and every gold paper of eval/conference.jsonl, then `random.Random(2612).sample(eligible, 200)`.

    python eval/sentences/sample2.py OUT_DIR     # writes OUT_DIR/batch{1..4}.jsonl, prints the counts
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from split import heldout2  # noqa: E402

CORPUS = HERE.parents[2] / "shared" / "corpus" / "icml2025_full" / "papers.jsonl"
N_ABSTRACTS, N_BATCHES = 200, 4


def _ids(path: Path, *keys: str) -> set[str]:
    out = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            out |= {row[k] for k in keys if k in row}
            out |= set(row.get("gold_papers", []))
    return out


def main() -> int:
    from rag_assistant.corpus.loader import load_corpus
    from rag_assistant.text import split_sentences

    out_dir = Path(sys.argv[1])
    taken = _ids(HERE / "roles.jsonl", "id") | _ids(HERE / "boundaries.jsonl", "id")
    taken |= _ids(HERE.parent / "sentence_roles.jsonl", "paper_id") | _ids(HERE.parent / "conference.jsonl")
    papers = [p for p in load_corpus([CORPUS]).papers if p.paper_id not in taken]
    chosen = random.Random(2612).sample(papers, N_ABSTRACTS)
    out_dir.mkdir(parents=True, exist_ok=True)
    for b in range(N_BATCHES):
        rows = []
        for paper in chosen[b::N_BATCHES]:
            sentences = split_sentences(paper.text)
            split = "heldout2" if heldout2(paper.paper_id) else "dev2"
            for i, s in enumerate(sentences):
                rows.append(
                    {"id": paper.paper_id, "position": i, "n_sentences": len(sentences), "sentence": s, "split": split}
                )
        (out_dir / f"batch{b + 1}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        held = sum(r["split"] == "heldout2" for r in rows)
        print(f"batch{b + 1}: {len({r['id'] for r in rows})} abstracts, {len(rows)} sentences ({held} heldout2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
