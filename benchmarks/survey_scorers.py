"""Other scorers for a survey's candidates, against the shipped match model, by 5-fold cross-validation grouped by
question over the judged topic questions of the dev and spent heldout splits (eval/fit_match.py `kind` "survey").
For the survey questions it prints cited precision / recall at probability 0.5, recall@20 of the scorer's order,
and the oracle recall at precision >= 0.8 (benchmarks/survey_ceiling.py). Bounds and negative results for
docs/retrieval.md#what-bounds-them-2026-12-08; needs scikit-learn (installed with sentence-transformers), and
`pip install wordllama` for the WordLlama row (skipped without it).

    python benchmarks/survey_scorers.py --data-dir CONF
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import fit_match  # noqa: E402
from survey_ceiling import best_recall  # noqa: E402
from survey_rankings import recall  # noqa: E402


def gather(data_dir: Path) -> list[dict]:
    from rag_assistant.answer.analysis import analyse_papers, analyse_question
    from rag_assistant.answer.match import features
    from rag_assistant.config import load_settings
    from rag_assistant.retrieve import Retriever

    s = load_settings(data_dir=data_dir)
    r = Retriever(s)
    out = []
    for item in (i for i in fit_match.load("dev,heldout") if fit_match.kind(i) == "survey"):
        question = analyse_question(item["question"], r.embedder.embed_cached)
        views = analyse_papers(r.survey(item["question"], s.survey_candidates, s.survey_depth), r.sentence_vectors,
                               r.embedder.embed_cached)  # fmt: skip
        ids = [[v.paper_id, *v.source.duplicates] for v in views]
        means = np.array([v.vectors.mean(0) / np.linalg.norm(v.vectors.mean(0)) for v in views])
        sims = [v.vectors @ question.vector for v in views]
        out.append({"item": item, "x": features(question, views, r.idf), "ids": ids, "q": question.vector,
                    "means": means, "sims": sims, "roles": [v.roles for v in views],
                    "texts": [v.source.paper.text for v in views], "labels": fit_match.labels(item, ids)})  # fmt: skip
    return out


def _own(row: dict) -> np.ndarray:
    feats = []
    for sims, roles in zip(row["sims"], row["roles"], strict=True):
        own = np.array([s for s, r in zip(sims, roles, strict=True) if r in ("method", "result")] or [sims.min()])
        background = max((s for s, r in zip(sims, roles, strict=True) if r == "background"), default=sims.min())
        feats.append([own.max(), np.sort(own)[::-1][:2].mean(), background, own.max() - background])
    return np.array(feats)


def _wordllama(rows: list[dict]) -> bool:
    try:
        from wordllama import WordLlama
    except ImportError:
        return False
    wl = WordLlama.load(disable_download=True)
    for row in rows:
        q = wl.embed([row["item"]["question"]], norm=True)[0]
        row["wl"] = (wl.embed(row["texts"], norm=True) @ q)[:, None]
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, required=True)
    args = ap.parse_args()

    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression

    from rag_assistant.answer.match import FEATURES

    rows = gather(args.data_dir)
    shipped = [FEATURES.index(n) for n in fit_match.SURVEY_FEATURES]
    lr = lambda c: LogisticRegression(C=c, max_iter=2000)  # noqa: E731
    gbm = lambda: HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05, max_leaf_nodes=15,  # noqa: E731
                                                 l2_regularization=1.0)  # fmt: skip
    scorers = {
        "shipped features, logistic": (lambda r: r["x"][:, shipped], lambda: lr(1.0)),
        "all match.py features, logistic": (lambda r: r["x"], lambda: lr(1.0)),
        "all match.py features, boosted trees": (lambda r: r["x"], gbm),
        "+ question x paper vector products": (
            lambda r: np.hstack([r["x"][:, shipped], r["means"] * r["q"]]),
            lambda: lr(0.01),
        ),  # fmt: skip
        "+ own vs background sentences": (lambda r: np.hstack([r["x"][:, shipped], _own(r)]), lambda: lr(1.0)),
    }
    if _wordllama(rows):
        scorers["+ WordLlama cosine"] = (lambda r: np.hstack([r["x"][:, shipped], r["wl"]]), lambda: lr(1.0))
    order = list(range(len(rows)))
    random.Random(0).shuffle(order)
    fold = {q: n % 5 for n, q in enumerate(order)}
    surveys = [n for n, r in enumerate(rows) if "survey" in r["item"]["tags"]]
    print(f"{len(rows)} judged topic questions, {len(surveys)} of them survey questions")
    for name, (feats, make) in scorers.items():
        prob: dict[int, np.ndarray] = {}
        for k in range(5):
            train = [n for n in range(len(rows)) if fold[n] != k]
            x = np.vstack(
                [feats(rows[n])[[i for i, y in enumerate(rows[n]["labels"]) if y is not None]] for n in train]
            )
            y = np.array([y for n in train for y in rows[n]["labels"] if y is not None])
            mu, sd = x.mean(0), x.std(0) + 1e-9
            model = make().fit((x - mu) / sd, y)
            for n in range(len(rows)):
                if fold[n] == k:
                    prob[n] = model.predict_proba((feats(rows[n]) - mu) / sd)[:, 1]
        p_, r_, r20, best = [], [], [], []
        for n in surveys:
            row, p = rows[n], prob[n]
            gold, border = set(row["item"]["gold_papers"]), set(row["item"].get("borderline_papers", []))
            ranked = list(np.argsort(-p, kind="stable"))
            precision, cited_recall, _ = fit_match.listed_scores(row["ids"], p, 0.5, gold, border)
            p_.append(precision)
            r_.append(cited_recall)
            r20.append(recall([row["ids"][i] for i in ranked], gold, 20))
            best.append(best_recall(row["ids"], ranked, gold, border, 0.8))
        print(f"  {name}: P {np.mean(p_):.3f} R {np.mean(r_):.3f} recall@20 {np.mean(r20):.3f} "
              f"oracle recall at P>=0.8 {np.mean(best):.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
