"""Benchmark `perrecbench build` on synthetic raw data of growing size: wall time, peak RSS, reviews/s.

Usage: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/build_bench.py [--totals 1000000,4000000,8000000]``

For each total size the four domains get ``total / 4`` reviews each (``perrecbench synth``, not timed); then
``perrecbench build`` runs in a subprocess from scratch (no stage files) and the peak resident memory of its
whole process tree is sampled every 50 ms. Data lives in ``benchmarks/_work/build_bench/`` and is deleted
afterwards (``--keep`` keeps it; existing raw data of the same size is reused).
Results are printed as a Markdown table (paste into ``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent
# Its own folder under benchmarks/_work (other benchmarks share _work: only this folder is deleted).
WORK = ROOT / "_work" / "build_bench"
PAPER_REVIEWS = 207_000_000  # Books + Clothing + Home + Electronics (PROTOCOL §1)
PAPER_BYTES = (102 + 50) * 10**9  # review + metadata JSONL


def _tree_rss(process: psutil.Process) -> int:
    total = 0
    for proc in [process, *process.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total


def run_measured(command: list[str]) -> tuple[float, int, str, str]:
    """Run ``command``; return wall seconds, peak RSS of its process tree, its stdout and its stderr."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    handle = psutil.Process(proc.pid)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            try:
                peak = max(peak, _tree_rss(handle))
            except psutil.NoSuchProcess:
                return
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    done.set()
    sampler.join()
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({proc.returncode}):\n{err[-3000:]}")
    return wall, peak, out, err


_TOOK = re.compile(r"INFO dataset_builder\.build: (?:[\w]+: )?(.+?) took ([\d.]+) s")


def stage_seconds(log: str) -> dict[str, float]:
    """Seconds per build stage, summed over domains, from the build's INFO log lines.

    >>> stage_seconds("x INFO dataset_builder.build: Books: search took 1.5 s\\n"
    ...               "x INFO dataset_builder.build: Electronics: search took 0.5 s")
    {'search': 2.0}
    """
    out: dict[str, float] = {}
    for stage, seconds in _TOOK.findall(log):
        out[stage] = round(out.get(stage, 0.0) + float(seconds), 1)
    return out


def bench(total: int, threads: int, memory_limit: str) -> dict:
    per_domain = total // 4
    raw = WORK / f"raw-{total}"
    out = WORK / f"bench-{total}"
    exe = Path(sys.executable).parent / "perrecbench"
    if not raw.exists():
        subprocess.run(
            [str(exe), "synth", "--out", str(raw), "--reviews-per-domain", str(per_domain)],
            check=True,
            capture_output=True,
        )
    shutil.rmtree(out.with_name(out.name + ".stages"), ignore_errors=True)
    command = [
        str(exe),
        "build",
        "--source",
        str(raw),
        "--out",
        str(out),
        "--overwrite",
        "--no-progress",
        "--threads",
        str(threads),
        "--memory-limit",
        memory_limit,
    ]
    wall, peak, _, log = run_measured(command)
    # unchanged inputs: stage files are reused once the inputs' content hashes are checked
    resumed_wall, resumed_peak, _, _ = run_measured(command)
    stats = json.loads((out / "stats.json").read_text())
    groups = sum(s["all"]["groups"] for s in stats["splits"].values())
    history = sum(s["all"]["rating_history"] for s in stats["splits"].values())
    input_bytes = sum(p.stat().st_size for p in raw.glob("*.jsonl"))
    return {
        "total": total,
        "wall": wall,
        "resumed_wall": resumed_wall,
        "peak_rss": peak,
        "resumed_peak_rss": resumed_peak,
        "memory_limit": memory_limit,
        "stages": stage_seconds(log),
        "groups": groups,
        "history_rows": history,
        "input_bytes": input_bytes,
        "reviews_per_s": total / wall,
        "bytes_per_s": input_bytes / wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--totals", default="1000000,4000000,8000000")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--memory-limit", default="2GB")
    parser.add_argument("--keep", action="store_true", help="keep benchmarks/_work/build_bench")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    WORK.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for total in (int(x) for x in args.totals.split(",")):
            row = bench(total, args.threads, args.memory_limit)
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(WORK, ignore_errors=True)
    print(f"\n--threads {args.threads} --memory-limit {args.memory_limit}\n")
    print(
        "| reviews (4 domains) | input MB | groups | history rows | wall s | resumed s | peak RSS MB "
        "(resumed) | reviews/s | MB/s | 207M reviews at this rate | 152 GB at this rate |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['total']:,} | {r['input_bytes'] / 1e6:,.0f} | {r['groups']:,} | {r['history_rows']:,} | "
            f"{r['wall']:.1f} | {r['resumed_wall']:.1f} | {r['peak_rss'] / 2**20:,.0f} "
            f"({r['resumed_peak_rss'] / 2**20:,.0f}) | "
            f"{r['reviews_per_s']:,.0f} | {r['bytes_per_s'] / 1e6:.1f} | "
            f"{PAPER_REVIEWS / r['reviews_per_s'] / 3600:.2f} h | "
            f"{PAPER_BYTES / r['bytes_per_s'] / 3600:.2f} h |"
        )
    print("\nseconds per stage (summed over domains):")
    for r in rows:
        print(f"  {r['total']:,}: " + ", ".join(f"{k} {v}" for k, v in r["stages"].items()))


if __name__ == "__main__":
    main()
