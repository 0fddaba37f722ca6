"""Issue 22, item 16: the eval report read in a real browser. A real `eval` of eval/dev.jsonl on the bundled
index, its report.html loaded in headless Chromium at 1400 x 900 (tests/browser.py), a screenshot taken and
the layout checked: nothing wider than the window, every chart drawn and visible, the recall@k chart showing
the largest tags, the citation chart only the questions whose citations differ, answers without their own
list markers. The run's stderr holds no numba warning (numba compiles ranx's kernels on a new install)."""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from browser import Browser, find_chromium
from conftest import REPO, run_cli

pytestmark = pytest.mark.slow
WIDTH, HEIGHT = 1400, 900

LAYOUT = """JSON.stringify({
  width: window.innerWidth,
  scrollWidth: document.documentElement.scrollWidth,
  figures: [...document.querySelectorAll('.charts figure')].map(f => {
    const svg = f.querySelector('svg'), box = svg && svg.getBoundingClientRect();
    return {caption: f.querySelector('figcaption').textContent,
            box: box && {left: box.left, right: box.right, width: box.width, height: box.height},
            texts: svg ? [...svg.querySelectorAll('text')].map(t => t.textContent.trim()) : []};
  }),
  items: [...document.querySelectorAll('td ol li')].map(li => li.textContent),
})"""


@dataclass
class Run:
    out: Path
    stderr: str
    summary: dict[str, Any]
    results: list[dict[str, Any]]


@pytest.fixture(scope="module")
def report_run(ready_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One eval of the development set, as a user runs it on a new install: numba's cache starts empty."""
    tmp = tmp_path_factory.mktemp("report")
    env = {
        "RAG_ASSISTANT_DATA_DIR": str(ready_data_dir),
        "RAG_ASSISTANT_CONFIG": str(tmp / "no-config.toml"),
        "OPENAI_API_KEY": "",
        "OPENAI_BASE_URL": "",
        "HF_HUB_OFFLINE": "1",
        "NUMBA_CACHE_DIR": str(tmp / "numba"),
    }
    out = tmp / "run"
    dataset = str(REPO / "eval" / "dev.jsonl")
    res = run_cli("eval", dataset, "--mode", "extractive", "--out", str(out), env=env, timeout=900)
    assert res.returncode == 0, res.stderr
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return Run(out, res.stderr, json.loads((out / "summary.json").read_text()), results)


def test_eval_prints_no_numba_warning(report_run: Run) -> None:
    assert "Numba" not in report_run.stderr and "\x1b[" not in report_run.stderr, report_run.stderr[-2000:]


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_report_reads_in_a_laptop_window(report_run: Run, tmp_path: Path) -> None:
    exe = find_chromium()
    if exe is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium; .ci/run installs it)")
    shot = Path(os.environ.get("REPORT_SCREENSHOT", tmp_path / "report-1400x900.png"))
    with Browser(exe, tmp_path / "profile", WIDTH, HEIGHT) as browser:
        browser.open((report_run.out / "report.html").as_uri())
        layout = json.loads(browser.evaluate(LAYOUT))
        browser.screenshot(shot)
    assert _png_size(shot) == (WIDTH, HEIGHT)
    assert layout["width"] == WIDTH
    assert layout["scrollWidth"] <= WIDTH, f"the page is {layout['scrollWidth']} px wide in a {WIDTH} px window"

    drawn = [f for f in layout["figures"] if f["box"]]
    assert len(drawn) >= 4, [f["caption"] for f in layout["figures"]]  # recall, citations, scores, latency
    for figure in drawn:
        box = figure["box"]
        assert box["width"] > 250 and box["height"] > 150 and box["left"] >= 0 and box["right"] <= WIDTH, figure

    # recall@k: the overall curve and the largest tags, `single` (48 questions) first
    recall = next(f for f in drawn if f["caption"].startswith("Recall@k"))
    tags = report_run.summary["by_tag"]
    largest = sorted((t for t in tags if t != "unanswerable"), key=lambda t: (-tags[t]["n"], t))[:6]
    assert largest[0] == "single"
    assert [t for t in recall["texts"] if t.split(" (")[0] in tags] == [
        f"{t} ({sum(1 for r in report_run.results if t in r['tags'] and r['answerable'])})" for t in largest
    ]

    # citations: one row per question whose cited papers differ from its gold papers, no more
    citations = next(f for f in drawn if f["caption"].startswith("Citation precision"))
    differ = {r["id"] for r in report_run.results if (r["metrics"].get("citation_f1") or 1.0) < 1.0}
    assert differ and {t for t in citations["texts"] if t.startswith("q")} == differ

    # answers are numbered once: "1. - To address this ..." was a list marker inside the list
    assert layout["items"] and not [i for i in layout["items"] if i.lstrip()[:1] in "-*•"]
