"""Does a change leave what users see alone? Runs two checkouts on copies of the same indexes and compares
(prints; not a test): `eval eval/dev.jsonl` (bundled index) and `eval eval/conference.jsonl` (conference index),
each full and retrieval-only, and a `batch` of 50 questions drawn from the conference, survey and near-miss sets.
Metrics, per-question records and batch rows are compared with timings left out (they differ between any two
runs); the batch file's raw bytes are compared too.

    python benchmarks/same_output.py --before /path/to/old-checkout --after . \\
        --conference CONF_DATA_DIR --bundled BUNDLED_DATA_DIR --out /tmp/same-output

Each checkout runs with its own `rag_assistant` (`python -m rag_assistant` from inside it) and this venv's
packages; the eval sets and the batch questions are this checkout's, so both versions answer the same questions.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RUNS = ("dev-full", "dev-ret", "conf-full", "conf-ret")


def timing(key: str) -> bool:
    return key in ("timings", "started", "phases_s") or key.startswith("latency") or key.endswith("_s")


def strip(x: Any) -> Any:  # noqa: ANN401 - JSON
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if not timing(k) or k == "answer_sentences"}
    return [strip(v) for v in x] if isinstance(x, list) else x


def run_all(checkout: Path, out: Path, conference: Path, bundled: Path) -> None:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    conf, small = out / "conf", out / "bundled"
    shutil.copytree(conference, conf)
    shutil.copytree(bundled, small)
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    dev, conf_set = str(REPO / "eval" / "dev.jsonl"), str(REPO / "eval" / "conference.jsonl")
    jobs = [
        (small, ["eval", dev, "--out", str(out / "dev-full")]),
        (small, ["eval", dev, "--retrieval-only", "--out", str(out / "dev-ret")]),
        (conf, ["eval", conf_set, "--out", str(out / "conf-full")]),
        (conf, ["eval", conf_set, "--retrieval-only", "--out", str(out / "conf-ret")]),
        (conf, ["batch", str(questions(out)), "-o", str(out / "batch50.jsonl")]),
    ]
    for data_dir, args in jobs:
        cmd = [sys.executable, "-m", "rag_assistant", "--data-dir", str(data_dir), *args]
        subprocess.run(cmd, cwd=checkout, env=env, check=True, capture_output=True)
    shutil.rmtree(conf)
    shutil.rmtree(small)


def questions(out: Path) -> Path:
    sets = ("conference.jsonl", "survey.jsonl", "nearmiss.jsonl")
    pool = [json.loads(line)["question"] for name in sets for line in (REPO / "eval" / name).read_text().splitlines()]
    path = out / "questions.txt"
    path.write_text("\n".join(random.Random(50).sample(pool, 50)) + "\n")
    return path


def compare(before: Path, after: Path) -> None:
    for run in RUNS:
        sb, sa = (json.loads((d / run / "summary.json").read_text())["overall"] for d in (before, after))
        ob, oa = strip(sb), strip(sa)
        differ = {k: (ob.get(k), oa.get(k)) for k in sorted(set(ob) | set(oa)) if ob.get(k) != oa.get(k)}
        rb, ra = (
            [strip(json.loads(x)) for x in (d / run / "results.jsonl").read_text().splitlines()]
            for d in (before, after)
        )
        same = sum(x == y for x, y in zip(rb, ra, strict=False))
        print(f"{run}: metrics differing: {differ or 'none'}; records identical {same}/{len(rb)} (after: {len(ra)})")
    bb, ba = ((d / "batch50.jsonl").read_text() for d in (before, after))
    rows = sum(
        strip(json.loads(x)) == strip(json.loads(y)) for x, y in zip(bb.splitlines(), ba.splitlines(), strict=False)
    )
    print(
        f"batch of 50: rows identical with timings left out {rows}/{len(bb.splitlines())};",
        f"raw bytes identical: {bb == ba}",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="checkout of the version before")
    parser.add_argument("--after", type=Path, default=REPO, help="checkout of the version after (default: this one)")
    parser.add_argument("--conference", type=Path, required=True, help="data dir of the conference index")
    parser.add_argument("--bundled", type=Path, required=True, help="data dir of the bundled 38-paper index")
    parser.add_argument("--out", type=Path, default=Path("/tmp/same-output"))
    args = parser.parse_args()
    for name in ("before", "after"):
        run_all(getattr(args, name).resolve(), args.out / name, args.conference, args.bundled)
    compare(args.out / "before", args.out / "after")


if __name__ == "__main__":
    main()
