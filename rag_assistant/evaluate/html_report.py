"""report.html: one self-contained page (inline SVG charts drawn by matplotlib, no scripts, no external
files) with the summary, per-tag table, charts and the worst questions with their answers. All text from
the dataset, the corpus and the answers is HTML-escaped."""

from __future__ import annotations

import io
from html import escape
from typing import Any

from rag_assistant.evaluate.metrics import main_metrics

WORST = 15
_CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:13px}td,th{border:1px solid #ccc;padding:4px 6px;
vertical-align:top;text-align:left}th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
.bad{color:#b00020}.ok{color:#1b7f3a}.muted{color:#777}.charts{display:flex;flex-wrap:wrap;gap:12px}
.charts figure{margin:0}small{color:#555}code{font-size:12px}"""


def _fmt(value: Any) -> str:
    if value is None:
        return "&ndash;"
    if isinstance(value, float):
        return f"{value:.3f}"
    return escape(str(value))


def _svg(fig: Any, salt: str) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog and doctype


def _signal(r: dict[str, Any], k: int) -> float:
    """What abstention is decided on: the chain's relevance score, else the best cosine among the top k."""
    if r.get("relevance") is not None:
        return float(r["relevance"])
    return max((s["dense_score"] or 0.0 for s in r["ranking"][:k]), default=0.0)


def _recall_chart(plt: Any, summary: dict[str, Any], results: list[dict[str, Any]]) -> tuple[str, str]:
    """recall@k curve, overall and for the larger tags."""
    k = summary["run"]["k"]
    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    curve = summary["recall_curve"]
    xs = [int(x) for x in curve]
    ax.plot(xs, [curve[str(x)] or 0 for x in xs], marker="o", label="all answerable", linewidth=2)
    tags = [t for t, v in summary["by_tag"].items() if v["n"] >= 5 and v["metrics"].get(f"recall@{k}") is not None]
    for tag in tags[:6]:
        rows = [r for r in results if tag in r["tags"] and r["metrics"].get("recall@1") is not None]
        ys = [sum(r["metrics"].get(f"recall@{x}", 0) for r in rows) / len(rows) for x in xs]
        ax.plot(xs, ys, linestyle="--", linewidth=1, label=tag)
    ax.axvline(k, color="#999", linewidth=0.8)
    ax.set(xlabel="k (papers retrieved)", ylabel="recall@k", ylim=(0, 1.02), title="Retrieval recall@k")
    ax.legend(fontsize=7)
    return "Recall@k: share of gold papers in the top k (vertical line: the k passed to the answerer)", _svg(fig, "c1")


def _citation_chart(plt: Any, results: list[dict[str, Any]]) -> tuple[str, str] | None:
    """Per-question citation precision and recall (None: no question has them)."""
    scored = [r for r in results if r["metrics"].get("citation_precision") is not None]
    if not scored:
        return None
    scored.sort(key=lambda r: (r["metrics"]["citation_f1"], r["id"]))
    fig, ax = plt.subplots(figsize=(max(5.2, 0.13 * len(scored)), 3.4))
    idx = range(len(scored))
    ax.bar([i - 0.2 for i in idx], [r["metrics"]["citation_precision"] for r in scored], 0.4, label="precision")
    ax.bar([i + 0.2 for i in idx], [r["metrics"]["citation_recall"] for r in scored], 0.4, label="recall")
    ax.set_xticks(list(idx), [r["id"] for r in scored], rotation=90, fontsize=6)
    ax.set(ylim=(0, 1.05), title="Cited papers vs gold papers, per question (sorted by F1)")
    ax.legend(fontsize=7)
    return "Citation precision and recall against the gold papers", _svg(fig, "c2")


def _score_chart(plt: Any, summary: dict[str, Any], results: list[dict[str, Any]]) -> tuple[str, str]:
    """Score distributions: the abstention signal by answerability, and sentence support."""
    run = summary["run"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(8.5, 3.2))
    for answerable, label in ((True, "answerable"), (False, "unanswerable")):
        signal = [_signal(r, run["k"]) for r in results if r["answerable"] == answerable]
        a1.hist(signal, bins=20, range=(0, 1), alpha=0.6, label=label)
    a1.axvline(run["settings"]["abstain_threshold"], color="k", linestyle=":", label="abstain threshold")
    a1.set(xlabel="retrieval relevance (abstain below the line)", title="Abstention signal")
    a1.legend(fontsize=7)
    support = [max(s["support"].values()) for r in results for s in r["sentences"] if s["support"]]
    a2.hist(support, bins=20, range=(0, 1), color="#6a5acd")
    threshold = run["judge"].get("threshold")
    if isinstance(threshold, float | int):
        a2.axvline(threshold, color="k", linestyle=":", label="support threshold")
        a2.legend(fontsize=7)
    a2.set(xlabel="best support of a cited sentence", title=f"Sentence support ({run['judge']['kind']} judge)")
    return "Score distributions", _svg(fig, "c3")


def _latency_chart(plt: Any, results: list[dict[str, Any]]) -> tuple[str, str] | None:
    latency = [r["metrics"]["latency_s"] for r in results if r["metrics"].get("latency_s") is not None]
    if not latency:
        return None
    fig, ax = plt.subplots(figsize=(4.5, 3.0))
    ax.hist(latency, bins=20, color="#2a9d8f")
    ax.set(xlabel="seconds per question", title="Answer latency")
    return "Latency per question (answer chain only, judge excluded)", _svg(fig, "c4")


def _charts(summary: dict[str, Any], results: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(caption, inline SVG) of each chart that has data, drawn in this order (the SVG ids depend on it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    charts = [
        _recall_chart(plt, summary, results),
        _citation_chart(plt, results),
        _score_chart(plt, summary, results),
        _latency_chart(plt, results),
    ]
    return [c for c in charts if c is not None]


def badness(r: dict[str, Any]) -> float:
    """How badly a question went, 0..1: errors and wrong abstention decisions are worst."""
    mt = r["metrics"]
    if r["error"] or not mt:
        return 1.0
    if not r["answerable"]:
        return 0.0 if r["abstained"] else 1.0
    if r["abstained"]:
        return 1.0
    parts = [mt.get(x) for x in ("recall@1", "citation_f1", "support_recall")]
    defined = [p for p in parts if p is not None]
    return 1.0 - sum(defined) / len(defined) if defined else 1.0


def _question_block(r: dict[str, Any], k: int) -> str:
    gold = set(r["gold_papers"])
    ranked = []
    for s in r["ranking"][:k]:
        hit = s["paper_id"] in gold or gold & set(s["duplicates"])
        cls = "ok" if hit else "muted"
        ranked.append(f'<span class="{cls}">[{escape(s["paper_id"])}]</span> {_fmt(s["dense_score"])}')
    sentences = []
    for s in r["sentences"]:
        support = ", ".join(f"{escape(c)}: {v:.2f}" for c, v in s["support"].items())
        flags = f' <span class="bad">{escape(", ".join(s["flags"]))}</span>' if s["flags"] else ""
        sentences.append(f"<li>{escape(s['text'])} <small>({support or 'no citation'})</small>{flags}</li>")
    answer = f"<ol>{''.join(sentences)}</ol>" if sentences else escape(r["answer"] or "")
    if r["abstained"]:
        answer = f'<span class="muted">abstained:</span> {escape(r["answer"])}'
    if r["error"] or r["judge_error"]:
        answer += f'<div class="bad">error: {escape(r["error"] or r["judge_error"])}</div>'
    metrics = "<br>".join(
        f"{escape(name)} {_fmt(r['metrics'].get(name))}"
        for name in (f"recall@{k}", "mrr", "citation_precision", "citation_recall", "support_recall")
        if r["metrics"].get(name) is not None
    )
    if r.get("relevance") is not None:
        metrics += f"<br>relevance {_fmt(r['relevance'])}"
    return (
        f"<tr><td>{escape(r['id'])}<br><small>{escape(', '.join(r['tags']))}</small></td>"
        f"<td>{escape(r['question'])}<br><small>gold: {escape(' '.join(r['gold_papers']) or '(none: unanswerable)')}"
        f"</small></td><td><small>{'<br>'.join(ranked)}</small></td><td>{answer}</td>"
        f"<td><small>{metrics}</small></td></tr>"
    )


def render(summary: dict[str, Any], results: list[dict[str, Any]]) -> str:
    run, k = summary["run"], summary["run"]["k"]
    names = [x for x in main_metrics(k) if x in summary["overall"]]
    head = "".join(f"<th>{escape(x)}</th>" for x in names)
    overall = "".join(f'<td class="num">{_fmt(summary["overall"][x])}</td>' for x in names)
    n_row = "".join(f'<td class="num muted">{summary["n"].get(x, "")}</td>' for x in names)
    tag_rows = "".join(
        f"<tr><th>{escape(tag)} <small>({v['n']})</small></th>"
        + "".join(f'<td class="num">{_fmt(v["metrics"].get(x))}</td>' for x in names)
        + "</tr>"
        for tag, v in summary["by_tag"].items()
    )
    charts = "".join(
        f"<figure>{svg}<figcaption><small>{escape(cap)}</small></figcaption></figure>"
        for cap, svg in _charts(summary, results)
    )
    worst = sorted(results, key=lambda r: (-badness(r), r["id"]))[:WORST]
    worst_rows = "".join(_question_block(r, k) for r in worst)
    all_rows = "".join(_question_block(r, k) for r in results)
    judge = run["judge"]
    counts = ", ".join(f"{escape(key)}: {v}" for key, v in summary["counts"].items())
    warnings = "".join(f"<li>{escape(w)}</li>" for w in summary["warnings"])
    table_head = (
        "<tr><th>id</th><th>question</th><th>retrieved (top k, cosine)</th><th>answer</th><th>metrics</th></tr>"
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>rag-assistant eval: {escape(summary["dataset"])}</title>
<style>{_CSS}</style></head><body>
<h1>rag-assistant evaluation</h1>
<p>dataset <code>{escape(summary["dataset"])}</code> &middot; {escape(run["started"])} &middot;
{_fmt(run["duration_s"])} s &middot; rag-assistant {escape(summary["version"])}<br>
answer mode <b>{escape(run["mode"])}</b> (model {escape(run["model"] or "-")}), k = {k} &middot;
judge: <b>{escape(judge["name"])}</b><br><small>{counts}</small></p>
{f'<ul class="bad">{warnings}</ul>' if warnings else ""}
<h2>Overall</h2><table><tr><th></th>{head}</tr><tr><th>all</th>{overall}</tr>
<tr><th class="muted">questions scored</th>{n_row}</tr>{tag_rows}</table>
<p><small>Definitions: eval/README.md. Means over the questions where a metric is defined (row "questions
scored"); tag rows are means over the questions with that tag.</small></p>
<h2>Charts</h2><div class="charts">{charts}</div>
<h2>Worst {len(worst)} questions</h2><table>{table_head}{worst_rows}</table>
<details><summary>All {len(results)} questions</summary><table>{table_head}{all_rows}</table></details>
<p><small>settings: {escape(str(run["settings"]))}</small></p>
</body></html>
"""
