"""One build of a task family on a whole Amazon-shaped category (``perrecbench synth --shape amazon``, e.g.
Books at its real 29.5M reviews): wall, CPU, peak memory, temporary disk and the seconds of every stage.

Usage: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/books_bench.py --raw DIR --family perrecbench
[--threads 2] [--memory-limit 4GB] [--label full]`` (run from the repository root; DIR holds the category's
two files). The build runs in a subprocess through ``family_build_bench.py --run-build`` (its plan and
write steps and their Python parts timed), its whole process tree's resident memory sampled every 50 ms,
and the size of its stage folder (DuckDB's spill files and the stage files) and of the output folder every
second. The load average before and after is recorded beside the times: the machine is shared. One JSON
line per run is appended to ``benchmarks/_work/books_bench.jsonl``; the output and stages are deleted
afterwards (``--keep`` keeps them).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_bench import run_measured, stage_seconds  # noqa: E402

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "_work" / "books_bench.jsonl"


def folder_bytes(path: Path) -> int:
    """Bytes of the files under `path` (0 if it does not exist); files vanishing meanwhile are skipped."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(folder, name)).st_size
            except OSError:
                continue
    return total


class DiskSampler:
    """The total size of some folders and the resident memory of this process's children, every second
    while a command runs: ``samples`` of (time, disk bytes, RSS bytes)."""

    def __init__(self, *folders: Path) -> None:
        self.folders, self.samples, self._done = folders, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def peak(self) -> int:
        return max((disk for _, disk, _ in self.samples), default=0)

    def _run(self) -> None:
        me = psutil.Process()
        while not self._done.wait(1.0):
            rss = 0
            for child in me.children(recursive=True):
                try:
                    rss += child.memory_info().rss
                except psutil.NoSuchProcess:
                    continue
            self.samples.append((time.time(), sum(folder_bytes(f) for f in self.folders), rss))

    def __enter__(self) -> DiskSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (?:INFO|DEBUG) dataset_builder\.[\w.]+: "
    r"(?:[\w]+: )?(.+?) took ([\d.]+) s",
    re.MULTILINE,
)


def per_stage(log: str, samples: list[tuple[float, int, int]]) -> dict[str, dict[str, float]]:
    """Each logged stage's peak disk (GB) and resident memory (MB) among the samples taken while it ran
    (a stage's line, logged when it ends, says how long it took)."""
    out: dict[str, dict[str, float]] = {}
    for stamp, stage, seconds in _LINE.findall(log):
        end = time.mktime(time.strptime(stamp.split(",")[0], "%Y-%m-%d %H:%M:%S")) + int(stamp[-3:]) / 1000
        inside = [(d, r) for t, d, r in samples if end - float(seconds) - 1 <= t <= end + 1]
        if inside:
            seen = out.setdefault(stage, {"disk_gb": 0.0, "rss_mb": 0.0})
            seen["disk_gb"] = round(max(seen["disk_gb"], max(d for d, _ in inside) / 1e9), 2)
            seen["rss_mb"] = round(max(seen["rss_mb"], max(r for _, r in inside) / 2**20))
    return out


def run(family: str, raw: Path, work: Path, threads: int, memory_limit: str, domain: str) -> dict:
    out = work / f"out-{family}"
    stages = out.with_name(out.name + ".stages")
    shutil.rmtree(stages, ignore_errors=True)
    command = [sys.executable, str(ROOT / "family_build_bench.py"), "--run-build", family, "--", "--source",
               str(raw), "--out", str(out), "--domains", domain, "--threads", str(threads), "--memory-limit",
               memory_limit, "--overwrite", "--no-progress"]  # fmt: skip
    load_before = os.getloadavg()
    with DiskSampler(stages, out.parent) as disk:
        wall, peak, _, log, cpu = run_measured(command, cwd=ROOT.parent)
    return {
        "family": family,
        "threads": threads,
        "memory_limit": memory_limit,
        "wall": round(wall, 1),
        "cpu": round(cpu, 1),
        "peak_rss_mb": round(peak / 2**20),
        "peak_disk_gb": round(disk.peak / 1e9, 2),  # stages (spill included) and the work folder
        "output_gb": round(folder_bytes(out) / 1e9, 3),
        "stages": stage_seconds(log),
        "stage_peaks": per_stage(log, disk.samples),
        "load": [round(x, 1) for x in (*load_before, *os.getloadavg())],
        "manifest": json.loads((out / "manifest.json").read_text()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", type=Path, required=True, help="folder of the category's two files")
    parser.add_argument("--family", required=True, choices=("perrecbench", "llmrec", "recbench-plus"))
    parser.add_argument("--domain", default="Books")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--memory-limit", default="4GB")
    parser.add_argument("--label", default="", help="recorded with the run (e.g. full, quarter)")
    parser.add_argument("--work", type=Path, default=ROOT / "_work" / "books_bench")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    row = run(args.family, args.raw, args.work, args.threads, args.memory_limit, args.domain)
    reviews = sum(f.get("lines", 0) for f in row["manifest"].get("selection", {}).values())
    row = {"label": args.label, "started": started, "reviews": reviews, **row}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as handle:
        handle.write(json.dumps(row) + "\n")
    shown = {k: v for k, v in row.items() if k != "manifest"}
    print(json.dumps(shown, indent=1))
    if not args.keep:
        shutil.rmtree(args.work / f"out-{args.family}", ignore_errors=True)
        shutil.rmtree(args.work / f"out-{args.family}.stages", ignore_errors=True)


if __name__ == "__main__":
    main()
