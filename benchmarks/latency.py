"""Speed targets of issue #13 as numbers: one-off `ask` wall time, LLM mode's own overhead, warm extractive
answer p50/p95 at k=5 and k=10, a 338-question batch at k=10, ingest throughput against a raw encode of the
same chunk texts, ingest peak RSS and an unchanged re-ingest. A script that prints, not a test.

    python benchmarks/latency.py --data-dir DIR            # DIR: an index of the 3,339-paper conference
    python benchmarks/latency.py --data-dir DIR --only oneoff,llm,warm,batch
    python benchmarks/latency.py --only ingest             # ingests the full ICML file into a scratch dir

DIR is copied to a scratch directory first (answers are logged to the data dir), so it is never written.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _util as U  # noqa: E402

SECTIONS = ("oneoff", "llm", "warm", "batch", "ingest")
QUESTION = "fast piecewise regression with a fixed number of segments and low error"
BATCH_QUESTIONS = 338


def cli() -> list[str]:
    exe = Path(sys.executable).parent / "rag-assistant"
    return [str(exe)] if exe.exists() else [shutil.which("rag-assistant") or "rag-assistant"]


def timed_wait(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MiB, stdout) of one command, which must succeed. The child is reaped with
    wait4, so the RSS is its own (ru_maxrss of RUSAGE_CHILDREN would be the largest child's so far)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as errs:
        proc = subprocess.Popen(cmd, stdout=out, stderr=errs, text=True, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        errs.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {errs.read()[-2000:]}")
        return seconds, usage.ru_maxrss / 1024, out.read()


def conference_questions() -> list[str]:
    path = U.REPO / "eval" / "conference.jsonl"
    return [json.loads(line)["question"] for line in path.read_text().splitlines() if line.strip()]


def batch_file(target: Path) -> Path:
    """BATCH_QUESTIONS questions from eval/*.jsonl (each file's questions in order, repeated if too few)."""
    found: list[str] = []
    for path in sorted((U.REPO / "eval").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip() and "question" in (row := json.loads(line)):
                found.append(str(row["question"]))
    questions = (found * (BATCH_QUESTIONS // max(1, len(found)) + 1))[:BATCH_QUESTIONS]
    target.write_text("".join(json.dumps({"id": f"q{i:03d}", "question": q}) + "\n" for i, q in enumerate(questions)))
    return target


# -- sections ---------------------------------------------------------------------------------------------------


def bench_oneoff(args: argparse.Namespace, data: Path) -> dict[str, Any]:
    base = [*cli(), "--data-dir", str(data)]
    timed_wait([*base, "ask", QUESTION, "--mode", "extractive"])  # fills the OS cache (the target is a warm disk cache)
    asks = [timed_wait([*base, "ask", QUESTION, "--mode", "extractive"])[0] for _ in range(args.runs)]
    searches = [timed_wait([*base, "search", QUESTION])[0] for _ in range(args.runs)]
    helps = [timed_wait([*cli(), "--help"])[0] for _ in range(args.runs)]
    return {"ask_s": asks, "search_s": searches, "help_s": helps}


def bench_llm(args: argparse.Namespace, data: Path) -> dict[str, Any]:
    """`ask --mode llm` against the scripted server (answers at once) next to the extractive `ask`, alternated."""
    sys.path.insert(0, str(U.REPO / "tests"))
    from fake_llm import FakeLLMServer

    env = {**os.environ, "OPENAI_API_KEY": "sk-bench"}
    base = [*cli(), "--data-dir", str(data), "ask", QUESTION]
    llm_s, extractive_s, server_s = [], [], []
    with FakeLLMServer(default="The method fits a piecewise function with few segments [1].") as server:
        llm = [*base, "--mode", "llm", "--llm-base-url", server.base_url, "--llm-model", "fake"]
        timed_wait(llm, env)
        for _ in range(args.runs):
            llm_s.append(timed_wait(llm, env)[0])
            extractive_s.append(timed_wait([*base, "--mode", "extractive"], env)[0])
        server_s = [0.0]  # the scripted server replies as soon as it has parsed the request
    overhead = U.median(llm_s) - U.median(server_s) - U.median(extractive_s)
    return {"llm_s": llm_s, "extractive_s": extractive_s, "server_s": server_s, "overhead_s": overhead}


def bench_warm(args: argparse.Namespace, data: Path) -> dict[str, Any]:
    """The answer chain in this process, warmed by one question, then every conference question at k=5, 10."""
    from rag_assistant.answer.chain import AnswerChain
    from rag_assistant.config import Settings

    questions = conference_questions()[: args.questions or None]
    out: dict[str, Any] = {"questions": len(questions)}
    for k in (5, 10):
        chain = AnswerChain(Settings(data_dir=data, mode="extractive", top_k=k), log=False)
        chain.ask(questions[0])
        times = []
        for q in questions:
            start = time.perf_counter()
            chain.ask(q)
            times.append((time.perf_counter() - start) * 1000)
        out[f"k{k}"] = {"p50_ms": U.percentile(times, 0.5), "p95_ms": U.percentile(times, 0.95), "ms": times}
    return out


def bench_batch(args: argparse.Namespace, data: Path, work: Path) -> dict[str, Any]:
    questions = batch_file(work / "questions.jsonl")
    cmd = [*cli(), "--data-dir", str(data), "batch", str(questions), "-o", str(work / "answers.jsonl")]
    seconds, rss, _ = timed_wait([*cmd, "-k", "10", "--mode", "extractive", "--fresh"])
    return {"questions": BATCH_QUESTIONS, "seconds": seconds, "peak_rss_mb": rss}


def bench_ingest(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The CLI ingests the corpus into a new dir (its peak RSS read by wait4), then again (unchanged); a separate
    process encodes the same chunk texts with the shipped backend (model load excluded)."""
    data = work / "ingest"
    base = [*cli(), "--data-dir", str(data), "ingest", str(args.corpus), "--json"]
    wall, rss, out = timed_wait(base)
    report = json.loads(out)
    again_wall, again_rss, again = timed_wait(base)
    raw = json.loads(timed_wait([sys.executable, __file__, "--raw-encode", str(args.corpus)])[2])
    return {
        "papers": report["papers"],
        "chunks": report["chunks_added"],
        "ingest_s": report["seconds"],
        "ingest_wall_s": wall,
        "peak_rss_mb": rss,
        "raw_encode_s": raw["seconds"],
        "ours_over_raw": raw["seconds"] / report["seconds"],
        "reingest_s": json.loads(again)["seconds"],
        "reingest_wall_s": again_wall,
        "reingest_peak_rss_mb": again_rss,
    }


def raw_encode(corpus: Path) -> None:
    """Prints {"seconds": ...}: the chunk texts an ingest of `corpus` embeds, encoded by the shipped embedder."""
    from rag_assistant.config import Settings
    from rag_assistant.corpus import load_corpus
    from rag_assistant.index.embedding import get_embedder

    settings = Settings(data_dir=Path(tempfile.mkdtemp()))
    texts = U.chunk_texts(load_corpus([corpus]).papers, settings)
    s = settings
    embedder = get_embedder(s.embedding_model, s.embedding_backend, s.embed_batch_size, s.remote_embedding)
    embedder.embed(texts[:8])  # loads the model
    seconds, _ = U.timed(lambda: embedder.embed(texts))
    print(json.dumps({"seconds": seconds, "texts": len(texts), "peak_rss_mb": U.peak_rss_mb()}))


# -- main -------------------------------------------------------------------------------------------------------


def rows_of(data: dict[str, Any]) -> list[tuple[str, str, Any, str]]:
    rows: list[tuple[str, str, Any, str]] = []
    if "oneoff" in data:
        d = data["oneoff"]
        rows += [
            ("oneoff", "ask (extractive), median", U.median(d["ask_s"]), f"s, {len(d['ask_s'])} new processes"),
            ("oneoff", "search, median", U.median(d["search_s"]), "s, new processes"),
            ("oneoff", "--help, median", U.median(d["help_s"]), "s"),
        ]
    if "llm" in data:
        d = data["llm"]
        rows += [
            ("llm", "ask --mode llm, median", U.median(d["llm_s"]), "s, scripted server answering at once"),
            ("llm", "ask --mode extractive, median", U.median(d["extractive_s"]), "s, alternated with the above"),
            ("llm", "llm overhead over server + extractive", d["overhead_s"], "s (target <= 0.5)"),
        ]
    if "warm" in data:
        d = data["warm"]
        for k in (5, 10):
            rows.append(
                ("warm", f"answer k={k} p50 / p95", d[f"k{k}"]["p50_ms"], f"ms; p95 {d[f'k{k}']['p95_ms']:.0f}")
            )
    if "batch" in data:
        d = data["batch"]
        rows.append(("batch", f"{d['questions']} questions, k=10", d["seconds"], f"s; peak {d['peak_rss_mb']:.0f} MB"))
    if "ingest" in data:
        d = data["ingest"]
        rows += [
            ("ingest", f"{d['papers']} papers: ours / raw encode", d["ours_over_raw"], f"{d['chunks']} chunks"),
            ("ingest", "ingest s (report) / raw encode s", d["ingest_s"], f"raw {d['raw_encode_s']:.1f}s"),
            ("ingest", "peak RSS of the ingest command", d["peak_rss_mb"], "MB (VmHWM via wait4)"),
            (
                "ingest",
                "re-ingest unchanged, whole command",
                d["reingest_wall_s"],
                f"s; {d['reingest_s']:.2f}s in process",
            ),
        ]
    return rows


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, help="an existing index (copied first); needed but for ingest")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated: {', '.join(SECTIONS)}")
    parser.add_argument("--runs", type=int, default=5, help="new processes per one-off measure")
    parser.add_argument("--questions", type=int, default=0, help="warm: first N conference questions (0: all)")
    parser.add_argument("--corpus", type=Path, default=U.LARGE_CORPUS, help="ingest: the corpus file")
    parser.add_argument("--raw-encode", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    args = parse()
    U.isolate_env()
    if args.raw_encode:
        raw_encode(args.raw_encode)
        return
    only = [s for s in args.only.split(",") if s]
    unknown = set(only) - set(SECTIONS)
    if unknown or (set(only) - {"ingest"} and not args.data_dir):
        sys.exit(f"unknown sections {sorted(unknown)}" if unknown else "--data-dir is needed for " + ",".join(only))
    data: dict[str, Any] = {"environment": U.environment(), "started_load_avg": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="rag-latency-") as scratch:
        work = Path(scratch)
        copy = work / "data"
        if args.data_dir:
            shutil.copytree(args.data_dir, copy)
        for section in only:
            if section == "ingest":
                data[section] = bench_ingest(args, work)
            elif section == "batch":
                data[section] = bench_batch(args, copy, work)
            else:
                data[section] = globals()[f"bench_{section}"](args, copy)
            data[f"{section}_load_avg"] = os.getloadavg()
    data["ended_load_avg"] = os.getloadavg()
    U.print_table(
        f"latency (load avg at start {data['started_load_avg'][0]:.1f}, end {data['ended_load_avg'][0]:.1f})",
        rows_of(data),
    )
    print(f"results: {U.write_results({'latency': data})}")


if __name__ == "__main__":
    main()
