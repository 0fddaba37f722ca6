"""Fit the two match models (rag_assistant/answer/match.py) on the development splits of the judged sets (dev and
the spent first held-out split: `--split dev,heldout`), and report the cut-offs they give on the same questions
(the settings survey_include, survey_possible, near_miss_threshold).

- `survey`: which of a survey question's candidates (Retriever.survey, survey_candidates papers) to list.
  Pairs from eval/survey.jsonl: judged relevant 1, judged not relevant or never pooled 0, borderline left out.
- `near_miss`: whether a paper among a question's top k does what the question asks. Pairs from the top k of:
  near-topic questions (eval/nearmiss.jsonl, all 0: none meets the question), their answerable twins and the
  single-paper questions of eval/conference.jsonl (gold 1, others left out: their gold lists are not
  exhaustive), and survey questions (judged labels, as above).
Each is a logistic regression over standardised features (numpy, L2), written to match_model.json with its
provenance.

    python eval/fit_match.py --data-dir CONF --bundled-dir B --split dev,heldout [--write] [--cache FILE]
    python eval/fit_match.py --data-dir CONF --split heldout2      # the second held-out pair: look once
    python eval/fit_match.py --data-dir CONF --split dev,heldout --committed   # cut-offs of the committed models

CONF: the bundled 38 + ../shared/corpus/icml2025_full/papers.jsonl ingested (docs/retrieval.md); B: the bundled
38 alone. Without --write it only reports. A --split without dev (or --committed) scores that split with the
committed models. The features are those of the settings' kind of sentence vectors (index/sentences.py `kind`):
RAG_ASSISTANT_EMBEDDING_BACKEND=torch over an index with standalone rows scores the standalone kind.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from pathlib import Path

import numpy as np

EVAL = Path(__file__).resolve().parent
# over the conference index (--data-dir); survey2/nearmiss2 hold only heldout2 questions (measured once, at the end)
SETS = ("survey.jsonl", "nearmiss.jsonl", "conference.jsonl", "survey2.jsonl", "nearmiss2.jsonl")
BUNDLED_SETS = ("dev.jsonl",)  # over the bundled 38 (--bundled-dir): no split, all of it development data
SURVEY_FEATURES = (
    "max_sentence", "top2_sentence", "abstract", "term_share", "max_gap", "gap2", "feedback", "fused",
    "z_max_sentence", "z_top2_sentence", "z_abstract", "z_term_share", "z_max_gap", "z_gap2", "z_feedback",
    "z_fused",
)  # fmt: skip
NEAR_MISS_FEATURES = (
    "max_sentence", "top2_sentence", "abstract", "term_share", "max_gap", "gap2", "feedback", "fused",
    "rel_max_sentence", "rel_abstract", "rel_term_share",
    "best_max_sentence", "best_term_share", "best_max_gap", "best_abstract",
    "least_max_sentence", "least_term_share", "least_max_gap", "least_abstract",
)  # fmt: skip


def load(split: str, bundled: bool = False) -> list[dict]:
    """The questions of a split; `split` may be a comma list (dev,heldout: the old held-out split is spent, see
    eval/README.md#judged-sets, and serves as development data since heldout2 exists)."""
    splits = set(split.split(","))
    items = []
    for name in BUNDLED_SETS if bundled else SETS:
        path = EVAL / name
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                item = json.loads(line) if line.strip() else None
                if item and (splits & set(item.get("tags", [])) or (bundled and "dev" in splits)):
                    items.append({**item, "id": f"bundled:{item['id']}" if bundled else item["id"]})
    return items


def kind(item: dict) -> str:
    tags = item["tags"]
    if "survey" in tags or ("multi" in tags and item.get("criterion")):  # topic questions judged exhaustively
        return "survey"
    if not item["gold_papers"]:
        return "near-topic" if "near-topic" in tags else "off-corpus"
    return "twin" if "twin" in tags else ("single" if "single" in tags else "multi")


def candidates(data_dir: Path, items: list[dict], k: int, cache: Path | None) -> dict[str, dict]:
    """Per question, as the chain sees it: the survey's candidates (survey questions) and the top k (all),
    each with their ids (and other ids), features, and the question's relevance score."""
    stored = pickle.loads(cache.read_bytes()) if cache and cache.exists() else {}
    todo = [i for i in items if i["id"] not in stored]
    if todo:
        from rag_assistant.answer.analysis import analyse_papers, analyse_question
        from rag_assistant.answer.match import features
        from rag_assistant.answer.relevance import relevance
        from rag_assistant.config import load_settings
        from rag_assistant.retrieve import Retriever

        s = load_settings(data_dir=data_dir)
        r = Retriever(s)
        embed = r.embedder.embed_cached
        for n, item in enumerate(todo, start=1):
            q = item["question"]
            question = analyse_question(q, embed)
            found = {}
            top = r.search(q, k)
            runs = {"top": top}
            if kind(item) == "survey":
                runs["survey"] = r.survey(q, s.survey_candidates, s.survey_depth)
            views = {}
            for name, sources in runs.items():
                views[name] = analyse_papers(sources, r.sentence_vectors, embed)
                found[name] = {
                    "ids": [[x.paper_id, *x.duplicates] for x in sources],
                    "x": features(question, views[name], r.idf),
                }
            found["relevance"] = relevance(question, top, views["top"], r.idf)
            stored[item["id"]] = found
            if n % 25 == 0:
                print(f"  {n}/{len(todo)} questions", file=sys.stderr)
        if cache:
            cache.write_bytes(pickle.dumps(stored))
    return stored


def labels(item: dict, ids: list[list[str]]) -> list[float | None]:
    gold, border = set(item["gold_papers"]), set(item.get("borderline_papers", []))
    out: list[float | None] = []
    for names in ids:
        hit, arguable = bool(gold & set(names)), bool(border & set(names))
        if kind(item) == "survey":
            out.append(None if arguable else float(hit))
        elif not gold:
            out.append(0.0)
        else:
            out.append(1.0 if hit else None)
    return out


def fit(
    x: np.ndarray, y: np.ndarray, l2: float = 1.0, iters: int = 50
) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """Logistic regression by Newton's method on standardised features; the bias is not penalised."""
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], l2)
    penalty[-1] = 0.0
    for _ in range(iters):
        p = 1 / (1 + np.exp(-(z @ w)))
        step = np.linalg.solve((z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty), z.T @ (p - y) + penalty * w)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w[:-1], float(w[-1]), mean, scale


def pairs(items: list[dict], found: dict, run: str, columns: list[int], use) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
    xs, ys = [], []
    for item in items:
        if not use(item) or run not in found[item["id"]]:
            continue
        f = found[item["id"]][run]
        for row, label in zip(f["x"], labels(item, f["ids"]), strict=True):
            if label is not None:
                xs.append(row[columns])
                ys.append(label)
    return np.array(xs), np.array(ys)


def model_of(name_features: tuple[str, ...], x: np.ndarray, y: np.ndarray, l2: float, note: str):  # noqa: ANN201
    from rag_assistant.answer.match import MatchModel

    w, b, mean, scale = fit(x, y, l2)
    return MatchModel(name_features, tuple(w.round(6)), round(b, 6), tuple(mean.round(6)), tuple(scale.round(6)),
                      f"{note}: {len(y)} pairs, {int(y.sum())} positive")  # fmt: skip


def listed_scores(
    ids: list[list[str]], probability: np.ndarray, cut: float, gold: set[str], border: set[str]
) -> tuple[float, float, int]:
    """Cited precision and recall of the candidates listed at `cut` (borderline papers counted neither way), and
    how many are listed."""
    chosen = [set(ids[i]) for i in range(len(probability)) if probability[i] >= cut]
    scored = [names for names in chosen if not names & border]
    right = sum(bool(names & gold) for names in scored)
    recall = len({g for names in scored for g in names & gold}) / len(gold)
    return (right / len(scored) if scored else 0.0), recall, len(chosen)


def _group(item: dict) -> str:
    if item["id"].startswith("bundled:"):
        return "dev.jsonl topic"
    return "survey.jsonl" if "survey" in item["tags"] else "conference.jsonl topic"


def report_survey(items: list[dict], found: dict, model) -> None:  # noqa: ANN001
    """Cited precision/recall (borderline neither way) and papers listed, per cut-off and set."""
    rows = [i for i in items if kind(i) == "survey"]
    for cut in (0.2, 0.3, 0.4, 0.5, 0.6):
        scores: dict[str, list[tuple[float, float, int]]] = {}
        for item in rows:
            f = found[item["id"]]["survey"]
            p = model.probability(f["x"])
            gold, border = set(item["gold_papers"]), set(item.get("borderline_papers", []))
            scores.setdefault(_group(item), []).append(listed_scores(f["ids"], p, cut, gold, border))
        means = {g: np.mean(np.array(v), axis=0) for g, v in sorted(scores.items())}
        shown = "; ".join(f"{g} P {m[0]:.3f} R {m[1]:.3f} n {m[2]:.1f}" for g, m in means.items())
        print(f"  survey >= {cut}: {shown}")


def report_near_miss(items: list[dict], found: dict, model, abstain: float) -> None:  # noqa: ANN001
    """Near-topic questions refused (abstained or near miss) and answerable ones wrongly refused, per cut-off."""
    for cut in (0.2, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55):
        refused: dict[str, list[bool]] = {}
        for item in items:
            f = found[item["id"]]
            best = float(model.probability(f["top"]["x"]).max()) if len(f["top"]["x"]) else 0.0
            kind_ = kind(item)
            group = kind_ if kind_ in ("near-topic", "off-corpus") else "answerable"
            refused.setdefault(group, []).append(f["relevance"] < abstain or best < cut)
        print(f"  near miss < {cut}: " + ", ".join(f"{g} refused {np.mean(v):.3f} (n={len(v)})"
                                                   for g, v in sorted(refused.items())))  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--bundled-dir", type=Path, help="an index of the bundled 38 alone, for eval/dev.jsonl")
    ap.add_argument("--split", default="dev")
    ap.add_argument("-k", type=int, default=5)
    ap.add_argument("--cache", type=Path, help="a pickle of the features, reused while tuning")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--l2", type=float, default=1.0)
    ap.add_argument("--committed", action="store_true", help="score the committed models, never refit (cut-offs)")
    args = ap.parse_args()

    from rag_assistant.answer.match import FEATURES, MODEL_FILE, load_model
    from rag_assistant.answer.thresholds import calibrated
    from rag_assistant.config import load_settings

    items = load(args.split)
    found = candidates(args.data_dir, items, args.k, args.cache)
    if args.bundled_dir:
        more = load(args.split, bundled=True)
        cache = args.cache.with_name(args.cache.name + ".bundled") if args.cache else None
        found.update(candidates(args.bundled_dir, more, args.k, cache))
        items += more
    cols = lambda names: [FEATURES.index(n) for n in names]  # noqa: E731
    fitting = "dev" in args.split.split(",") and not args.committed  # never fitted on a held-out split alone
    if fitting:
        used = ", ".join(SETS[:3] + (BUNDLED_SETS if args.bundled_dir else ()))
        xs, ys = pairs(items, found, "survey", cols(SURVEY_FEATURES), lambda i: kind(i) == "survey")
        survey = model_of(SURVEY_FEATURES, xs, ys, args.l2, f"{args.split} of {used}: survey questions' candidates")
        xn, yn = pairs(items, found, "top", cols(NEAR_MISS_FEATURES), lambda i: kind(i) != "off-corpus")
        near = model_of(NEAR_MISS_FEATURES, xn, yn, args.l2, f"{args.split} of {used}, top {args.k}")
    else:
        survey, near = load_model("survey"), load_model("near_miss")
    print(f"{args.split}: {len(items)} questions")
    report_survey(items, found, survey)
    # the abstain threshold of this index's kind of sentence vectors (answer/thresholds.py), as the chain reads it
    report_near_miss(items, found, near, calibrated(load_settings(data_dir=args.data_dir)).abstain_threshold)
    if args.write and fitting:
        MODEL_FILE.write_text(json.dumps({"survey": survey.as_dict(), "near_miss": near.as_dict()}, indent=1) + "\n")
        print(f"wrote {MODEL_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
