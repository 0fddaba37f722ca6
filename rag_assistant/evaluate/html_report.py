"""report.html: one self-contained page (inline SVG charts drawn by matplotlib, no scripts, no external
files) with the summary, per-tag table, charts and the worst questions with their answers. All text from
the dataset, the corpus and the answers is HTML-escaped.

Laid out for a laptop window (checked in a headless browser at 1400 x 900, tests/test_report_browser.py): the
metric table has one row per metric and one column per tag, largest tags first; every table scrolls inside
its own box rather than widening the page, and charts shrink to the width they get. Charts show what
differs: the citation chart lists only the questions whose cited papers differ from their gold papers."""

from __future__ import annotations

import io
import re
from html import escape
from typing import Any

from rag_assistant.evaluate.metrics import main_metrics

WORST = 15
CURVE_TAGS = 6  # tags drawn in the recall@k chart besides the overall curve: the largest ones
CITATION_ROWS = 25  # questions in the citation chart at most (the worst ones)
_LIST_MARK = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,3}[.)])\s+")  # an answer's own Markdown list marker
_CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}
.scroll{overflow-x:auto;max-width:100%}table{border-collapse:collapse;margin:1em 0;font-size:13px}
td,th{border:1px solid #ccc;padding:4px 6px;vertical-align:top;text-align:left;overflow-wrap:break-word}
th{background:#f3f3f3}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.bad{color:#b00020}.ok{color:#1b7f3a}.muted{color:#777}.nowrap{white-space:nowrap}
.charts{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}.charts figure{margin:0;max-width:100%}
.charts svg{max-width:100%;height:auto}small{color:#555}code{font-size:12px}.wrap{overflow-wrap:anywhere}
td ol{margin:0;padding-left:1.4em}"""


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


def largest_tags(summary: dict[str, Any]) -> list[str]:
    """Tags by number of questions, largest first (ties by name)."""
    return sorted(summary["by_tag"], key=lambda tag: (-summary["by_tag"][tag]["n"], tag))


def _recall_chart(plt: Any, summary: dict[str, Any], results: list[dict[str, Any]]) -> tuple[str, str]:
    """recall@k curve, overall and for the largest tags that have answerable questions."""
    k = summary["run"]["k"]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    curve = summary["recall_curve"]
    xs = [int(x) for x in curve]
    ax.plot(xs, [curve[str(x)] or 0 for x in xs], marker="o", label="all answerable", linewidth=2.4, color="k")
    tags = [t for t in largest_tags(summary) if summary["by_tag"][t]["metrics"].get(f"recall@{k}") is not None]
    for tag in tags[:CURVE_TAGS]:
        rows = [r for r in results if tag in r["tags"] and r["metrics"].get("recall@1") is not None]
        ys = [sum(r["metrics"].get(f"recall@{x}", 0) for r in rows) / len(rows) for x in xs]
        ax.plot(xs, ys, linestyle="--", linewidth=1.2, marker=".", label=f"{tag} ({len(rows)})")
    ax.axvline(k, color="#999", linewidth=0.8)
    ax.set(xlabel="k (papers retrieved)", ylabel="recall@k", ylim=(0, 1.02), title="Retrieval recall@k")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    shown = min(len(tags), CURVE_TAGS)
    caption = (
        f"Recall@k: share of gold papers in the top k, over all answerable questions and the {shown} largest tags "
        "(answerable questions in brackets); vertical line: the k passed to the answerer"
    )
    return caption, _svg(fig, "c1")


def _citation_chart(plt: Any, results: list[dict[str, Any]]) -> tuple[str, str] | None:
    """Citation precision and recall of the questions whose cited papers differ from their gold papers (None:
    no question has them)."""
    scored = [r for r in results if r["metrics"].get("citation_precision") is not None]
    if not scored:
        return None
    off = [r for r in scored if (r["metrics"].get("citation_f1") or 0.0) < 1.0]
    if not off:
        return f"Citations: all {len(scored)} answered questions cite exactly their gold papers.", ""
    off.sort(key=lambda r: (r["metrics"].get("citation_f1") or 0.0, r["id"]))
    shown = off[:CITATION_ROWS]
    fig, ax = plt.subplots(figsize=(6.4, 0.8 + 0.26 * len(shown)))
    rows = range(len(shown))
    ax.barh([i - 0.2 for i in rows], [r["metrics"]["citation_precision"] for r in shown], 0.4, label="precision")
    ax.barh([i + 0.2 for i in rows], [r["metrics"]["citation_recall"] for r in shown], 0.4, label="recall")
    ax.set_yticks(list(rows), [r["id"] for r in shown], fontsize=8)
    ax.invert_yaxis()  # the worst question on top
    ax.set(xlim=(0, 1.0), title="Questions whose citations differ from the gold papers")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    worst = f"the {len(shown)} worst shown" if len(shown) < len(off) else "worst first"
    caption = (
        f"Citation precision and recall against the gold papers: {len(off)} of {len(scored)} answered questions "
        f"cite other papers than their gold ones ({worst}); the other {len(scored) - len(off)} cite exactly them"
    )
    return caption, _svg(fig, "c2")


def _score_chart(plt: Any, summary: dict[str, Any], results: list[dict[str, Any]]) -> tuple[str, str]:
    """Score distributions: the abstention signal by answerability, and sentence support."""
    run = summary["run"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(8.5, 3.2))
    for answerable, label in ((True, "answerable"), (False, "unanswerable")):
        signal = [_signal(r, run["k"]) for r in results if r["answerable"] == answerable]
        a1.hist(signal, bins=20, range=(0, 1), alpha=0.6, label=label)
    a1.axvline(run["settings"]["abstain_threshold"], color="k", linestyle=":", label="abstain threshold")
    a1.set(xlabel="retrieval relevance (abstain below the line)", ylabel="questions", title="Abstention signal")
    a1.legend(fontsize=7)
    support = [max(s["support"].values()) for r in results for s in r["sentences"] if s["support"]]
    a2.hist(support, bins=20, range=(0, 1), color="#6a5acd")
    threshold = run["judge"].get("threshold")
    if isinstance(threshold, float | int):
        a2.axvline(threshold, color="k", linestyle=":", label="support threshold")
        a2.legend(fontsize=7)
    a2.set(xlabel="best support of a cited sentence", ylabel="sentences")
    a2.set_title(f"Sentence support ({run['judge']['kind']} judge)")
    return "Score distributions", _svg(fig, "c3")


def _latency_chart(plt: Any, results: list[dict[str, Any]]) -> tuple[str, str] | None:
    latency = [r["metrics"]["latency_s"] for r in results if r["metrics"].get("latency_s") is not None]
    if not latency:
        return None
    fig, ax = plt.subplots(figsize=(4.5, 3.0))
    ax.hist(latency, bins=20, color="#2a9d8f")
    ax.set(xlabel="seconds per question", ylabel="questions", title="Answer latency")
    return "Latency per question (answer chain only, judge excluded)", _svg(fig, "c4")


def _charts(summary: dict[str, Any], results: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(caption, inline SVG or "" for a caption alone) of each chart that has data, drawn in this order (the
    SVG ids depend on it)."""
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


def _answer_cell(r: dict[str, Any]) -> str:
    """The answer as its checked sentences, numbered (an answer's own list markers dropped: "1. - ..."), with
    each sentence's support and flags."""
    sentences = []
    for s in r["sentences"]:
        support = ", ".join(f"{escape(c)}: {v:.2f}" for c, v in s["support"].items())
        flags = f' <span class="bad">{escape(", ".join(s["flags"]))}</span>' if s["flags"] else ""
        text = escape(_LIST_MARK.sub("", s["text"]))
        sentences.append(f"<li>{text} <small>({support or 'no citation'})</small>{flags}</li>")
    answer = f"<ol>{''.join(sentences)}</ol>" if sentences else escape(r["answer"] or "")
    if r["abstained"]:
        answer = f'<span class="muted">abstained:</span> {escape(r["answer"])}'
    if r["error"] or r["judge_error"]:
        answer += f'<div class="bad">error: {escape(r["error"] or r["judge_error"])}</div>'
    return answer


def _question_block(r: dict[str, Any], k: int) -> str:
    gold = set(r["gold_papers"])
    ranked = []
    for s in r["ranking"][:k]:
        hit = s["paper_id"] in gold or gold & set(s["duplicates"])
        cls = "ok" if hit else "muted"
        ranked.append(f'<span class="{cls}">[{escape(s["paper_id"])}]</span> {_fmt(s["dense_score"])}')
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
        f'</small></td><td class="nowrap"><small>{"<br>".join(ranked)}</small></td><td>{_answer_cell(r)}</td>'
        f'<td class="nowrap"><small>{metrics}</small></td></tr>'
    )


def _overall_table(summary: dict[str, Any]) -> str:
    """One row per metric: its mean over all questions, how many questions it is defined for, and its mean per
    tag (largest tags first). Fifteen metrics as columns did not fit a laptop window; tags as columns do."""
    names = [x for x in main_metrics(summary["run"]["k"]) if x in summary["overall"]]
    tags = largest_tags(summary)
    by_tag = summary["by_tag"]
    head = "".join(f'<th class="num">{escape(t)}<br><small>{by_tag[t]["n"]}</small></th>' for t in tags)
    rows = "".join(
        f'<tr><th>{escape(x)}</th><td class="num"><b>{_fmt(summary["overall"][x])}</b></td>'
        f'<td class="num muted">{summary["n"].get(x, "")}</td>'
        + "".join(f'<td class="num">{_fmt(by_tag[t]["metrics"].get(x))}</td>' for t in tags)
        + "</tr>"
        for x in names
    )
    return (
        f'<div class="scroll"><table><tr><th>metric</th><th class="num">all</th><th class="num muted">n</th>'
        f"{head}</tr>{rows}</table></div>"
    )


def render(summary: dict[str, Any], results: list[dict[str, Any]]) -> str:
    run, k = summary["run"], summary["run"]["k"]
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
        "<tr><th>id</th><th>question</th><th>retrieved<br>(top k, cosine)</th><th>answer</th><th>metrics</th></tr>"
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>rag-assistant eval: {escape(summary["dataset"])}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style></head><body>
<h1>rag-assistant evaluation</h1>
<p class="wrap">dataset <code>{escape(summary["dataset"])}</code> &middot; {escape(run["started"])} &middot;
{_fmt(run["duration_s"])} s &middot; rag-assistant {escape(summary["version"])}<br>
answer mode <b>{escape(run["mode"])}</b> (model {escape(run["model"] or "-")}), k = {k} &middot;
judge: <b>{escape(judge["name"])}</b><br><small>{counts}</small></p>
{f'<ul class="bad wrap">{warnings}</ul>' if warnings else ""}
<h2>Overall</h2>{_overall_table(summary)}
<p><small>Definitions: eval/README.md. "all": the mean over the questions where a metric is defined ("n" of
them); each tag column: the mean over the questions with that tag (how many under its name).</small></p>
<h2>Charts</h2><div class="charts">{charts}</div>
<h2>Worst {len(worst)} questions</h2><div class="scroll"><table>{table_head}{worst_rows}</table></div>
<details><summary>All {len(results)} questions</summary>
<div class="scroll"><table>{table_head}{all_rows}</table></div></details>
<p class="wrap"><small>settings: {escape(str(run["settings"]))}</small></p>
</body></html>
"""
