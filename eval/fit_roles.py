"""Fit the sentence-role classifier (rag_assistant/answer/roles.py, `RoleModel`) on the training labels (every
split but `heldout2`) and write it to rag_assistant/answer/role_model.json. Multinomial logistic regression
(numpy, L2, the bias not penalised) over each sentence's vector as the index stores it plus the rules' cue features
(`roles.cue_features`); the L2 strength is chosen by 5-fold cross-validation over the training abstracts (whole
abstracts per fold). The held-out split is never read here: benchmarks/sentence_roles.py scores it.

Labels: eval/sentences/roles-adjudicated.jsonl, eval/sentence_roles.jsonl (the first round, whose held-out split
is spent) and eval/sentences/roles2-adjudicated.jsonl (the second round, split dev2 / heldout2;
eval/sentences/split.py). Vectors: the index's (`Retriever.sentence_vectors`) of the labelled papers: the
conference index (bundled 38 + ../shared/corpus/icml2025_full/papers.jsonl) has all but the full file's copies
of two bundled papers (kept under their bundled ids), whose sentences are left out.

    python eval/fit_roles.py --data-dir CONF [--write] [--cache FILE]
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from pathlib import Path

import numpy as np

EVAL = Path(__file__).resolve().parent
sys.path.insert(0, str(EVAL / "sentences"))
from split import split_of  # noqa: E402

LABELS = (
    EVAL / "sentences" / "roles-adjudicated.jsonl",
    EVAL / "sentence_roles.jsonl",
    EVAL / "sentences" / "roles2-adjudicated.jsonl",
)
L2_GRID = (3.0, 10.0, 30.0, 100.0, 300.0, 1000.0)
BACKGROUND_AT = (0.5, 0.45, 0.4, 0.35, 0.3)  # P(background) from which a sentence is background


def labelled(split: str, paths: tuple[Path, ...] = LABELS) -> list[dict]:
    """The labelled sentences of one split (`split_of`: "dev", "heldout", "dev2", "heldout2"), of "train" (all
    but heldout2) or of "all", each with `abstract` (its paper id)."""
    out = []
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line) if line.strip() else None
            if row is None:
                continue
            row["abstract"] = row.get("id") or row["paper_id"]
            own = split_of(row)
            if split == own or split == "all" or (split == "train" and own != "heldout2"):
                out.append(row)
    return out


def indexed(rows: list[dict], data_dir: Path) -> list[dict]:
    """The rows whose paper the index holds (the conference index skips the full file's copies of bundled papers,
    and two labelled abstracts name such a copy by its full-file id)."""
    from rag_assistant.config import load_settings
    from rag_assistant.retrieve import Retriever

    held = Retriever(load_settings(data_dir=data_dir)).papers(sorted({r["abstract"] for r in rows}))
    kept = [r for r in rows if r["abstract"] in held]
    if len(kept) < len(rows):
        print(f"left out {len(rows) - len(kept)} labelled sentences of papers not in {data_dir}", file=sys.stderr)
    return kept


def vectors(rows: list[dict], data_dir: Path, cache: Path | None = None) -> np.ndarray:
    """Each labelled sentence's vector as the product sees it: the index's vector of the same sentence of its
    paper (text.split_sentences), or, for the few labels cut by an older splitter, the sentence embedded alone."""
    stored = pickle.loads(cache.read_bytes()) if cache and cache.exists() else {}
    todo = [r for r in rows if (r["abstract"], r["sentence"]) not in stored]
    if todo:
        from rag_assistant.config import load_settings
        from rag_assistant.retrieve import Retriever
        from rag_assistant.text import split_sentences

        r = Retriever(load_settings(data_dir=data_dir))
        papers = r.papers(sorted({row["abstract"] for row in todo}))
        missing = {row["abstract"] for row in todo} - set(papers)
        if missing:
            raise SystemExit(f"{len(missing)} labelled papers are not in {data_dir}: ingest the conference corpus")
        per_paper = r.sentence_vectors(list(papers.values()))
        alone = []
        for row in todo:
            sentences = split_sentences(papers[row["abstract"]].text)
            if row["sentence"] in sentences:
                stored[row["abstract"], row["sentence"]] = per_paper[row["abstract"]][sentences.index(row["sentence"])]
            else:
                alone.append(row)
        if alone:
            embedded = r.embedder.embed([row["sentence"] for row in alone])
            for row, vec in zip(alone, embedded, strict=True):
                stored[row["abstract"], row["sentence"]] = vec
            print(f"  {len(alone)} labelled sentences not in today's split: embedded alone", file=sys.stderr)
        if cache:
            cache.write_bytes(pickle.dumps(stored))
    return np.array([stored[r["abstract"], r["sentence"]] for r in rows], dtype=np.float64)


def design(rows: list[dict], vecs: np.ndarray) -> np.ndarray:
    """`roles.role_features` of each row, computed per abstract as answers compute it (every abstract is
    labelled whole: its rows, by position, are its sentences)."""
    from rag_assistant.answer.roles import role_features

    x: list[np.ndarray | None] = [None] * len(rows)
    for idx in _abstracts(rows).values():
        for i, row in zip(idx, role_features([rows[i]["sentence"] for i in idx], vecs[idx]), strict=True):
            x[i] = row
    return np.array(x)


def classify(rows: list[dict], vecs: np.ndarray) -> list[str]:
    """Each row's role as answers label it: `roles.abstract_roles` over its whole abstract, with its vectors."""
    from rag_assistant.answer.roles import abstract_roles

    out = [""] * len(rows)
    for idx in _abstracts(rows).values():
        for i, role in zip(idx, abstract_roles([rows[i]["sentence"] for i in idx], vecs[idx]), strict=True):
            out[i] = role
    return out


def _abstracts(rows: list[dict]) -> dict[str, list[int]]:
    """Row indices per abstract, by position; every abstract must be labelled whole."""
    by_abstract: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_abstract.setdefault(r["abstract"], []).append(i)
    for idx in by_abstract.values():
        idx.sort(key=lambda i: rows[i]["position"])
        if [rows[i]["position"] for i in idx] != list(range(rows[idx[0]]["n_sentences"])):
            raise SystemExit(f"abstract {rows[idx[0]]['abstract']} is not labelled whole")
    return by_abstract


def fit(x: np.ndarray, y: np.ndarray, l2: float, iters: int = 3000) -> dict[str, np.ndarray]:
    """Multinomial logistic regression on standardised features by Nesterov gradient descent (convex: the
    step 1/L converges); the mean loss plus l2/2n ||W||^2."""
    from rag_assistant.answer.roles import ROLES

    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale < 1e-4] = 1.0  # a constant feature (MiniLM has near-constant dimensions): nothing to scale
    z = (x - mean) / scale
    onehot = np.eye(len(ROLES))[y]
    n, d = z.shape
    lipschitz = 0.5 * np.linalg.norm(z, 2) ** 2 / n + l2 / n
    w, b = np.zeros((d, len(ROLES))), np.zeros(len(ROLES))
    w_prev, b_prev = w, b
    for t in range(1, iters + 1):
        mw, mb = w + (t - 2) / (t + 1) * (w - w_prev), b + (t - 2) / (t + 1) * (b - b_prev)
        logits = z @ mw + mb
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        grad = (p - onehot) / n
        w_prev, b_prev = w, b
        w = mw - (z.T @ grad + l2 / n * mw) / lipschitz
        b = mb - grad.sum(axis=0) / lipschitz
    return {"weights": w, "bias": b, "mean": mean, "scale": scale}


def predict(model: dict[str, np.ndarray], x: np.ndarray, background_at: float = 0.5) -> np.ndarray:
    """Role indices as `RoleModel.predict` picks them."""
    from rag_assistant.answer.roles import pick_roles, role_probabilities

    return pick_roles(role_probabilities(x, **model), background_at)


def out_of_fold(rows: list[dict], x: np.ndarray, y: np.ndarray, l2: float, folds: int = 5) -> np.ndarray:
    """Each row's role probabilities from a model fitted on the other folds, whole abstracts per fold (sentences of
    one abstract share its wording)."""
    from rag_assistant.answer.roles import ROLES, role_probabilities

    abstracts = sorted({r["abstract"] for r in rows})
    fold_of = {a: i % folds for i, a in enumerate(abstracts)}
    fold = np.array([fold_of[r["abstract"]] for r in rows])
    p = np.zeros((len(y), len(ROLES)))
    for f in range(folds):
        p[fold == f] = role_probabilities(x[fold == f], **fit(x[fold != f], y[fold != f], l2))
    return p


def cross_validate(rows: list[dict], x: np.ndarray, y: np.ndarray, l2: float) -> dict[float, float]:
    """5-fold accuracy over the training labels per background cut (BACKGROUND_AT)."""
    from rag_assistant.answer.roles import pick_roles

    p = out_of_fold(rows, x, y, l2)
    return {cut: float(np.mean(pick_roles(p, cut) == y)) for cut in BACKGROUND_AT}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--cache", type=Path, help="keep the labelled sentences' vectors here between runs")
    ap.add_argument("--write", action="store_true", help="write rag_assistant/answer/role_model.json")
    args = ap.parse_args()
    from rag_assistant.answer.roles import MODEL_FILE, ROLES, sentence_role

    rows = indexed(labelled("train"), args.data_dir)
    vecs = vectors(rows, args.data_dir, args.cache)
    x = design(rows, vecs)
    y = np.array([ROLES.index(r["role"]) for r in rows])
    rules = np.mean([sentence_role(r["sentence"], r["position"], r["n_sentences"]) == r["role"] for r in rows])
    print(f"train: {len(rows)} sentences of {len({r['abstract'] for r in rows})} abstracts; rules accuracy {rules:.3f}")
    scores = {(l2, cut): acc for l2 in L2_GRID for cut, acc in cross_validate(rows, x, y, l2).items()}
    for l2 in L2_GRID:
        print(f"  l2 {l2:>6}: 5-fold accuracy " + ", ".join(f"{scores[l2, c]:.3f} (cut {c})" for c in BACKGROUND_AT))
    best = max(scores, key=lambda k: (scores[k], k))  # ties: the stronger penalty, the higher cut
    l2, cut = best
    model = fit(x, y, l2)
    print(f"chosen l2 {l2}, background cut {cut}; training accuracy {np.mean(predict(model, x, cut) == y):.3f}")
    if args.write:
        out = {
            "dim": int(vecs.shape[1]),
            "roles": list(ROLES),
            **{
                k: [float(f"{x:.6g}") for x in np.ravel(v)]
                if v.ndim == 1
                else [[float(f"{x:.6g}") for x in r] for r in v]
                for k, v in model.items()
            },
            "l2": l2,
            "background_at": cut,
            "note": f"eval/fit_roles.py: {len(rows)} training sentences, 5-fold accuracy {scores[best]:.3f}",
        }
        MODEL_FILE.write_text(json.dumps(out) + "\n", encoding="utf-8")
        print(f"wrote {MODEL_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
