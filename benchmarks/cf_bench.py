"""Benchmark the collaborative-filtering baselines: the interactions export and mf / item-knn fit + predict.

Usage:
  ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/cf_bench.py [--totals 240000,2000000] [--keep]``

For each total number of synthetic reviews (four domains, ``total / 4`` each; ``perrecbench synth``, not
timed):

1. **Build cost**: a fresh ``perrecbench build`` without and with ``--with-interactions`` (subprocesses,
   best of ``--repeat``): wall seconds, peak RSS of the process tree, and the interactions' rows and bytes.
2. **Fit and predict**: in a subprocess each, loading the interactions (seconds, peak RSS), one ``mf``
   model on a whole domain's ratings (seconds per model; the evaluation fits up to ``cuts`` per domain and
   grid point), and ``cf.predict_groups`` on every test group of the ``full`` config with the default
   parameters (seconds, models fitted, cold query items).
3. On the smallest total (the demo's size), ``perrecbench evaluate --engine baseline --model all`` on both
   builds: the seconds the two CF rows add to the demo, and each baseline's PTC with its 95% CI.

Data lives in ``benchmarks/_work/cf_bench/`` and is deleted afterwards (``--keep`` keeps it). Results are
printed as Markdown tables (paste into ``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent
REPO = ROOT.parent
WORK = ROOT / "_work" / "cf_bench"
PAPER_REVIEWS = 207_000_000  # PROTOCOL §1: the four domains together
CLI = [sys.executable, "-m", "perrec_eval"]


def _tree_rss(process: psutil.Process) -> int:
    total = 0
    try:
        children = process.children(recursive=True)
    except psutil.NoSuchProcess:  # it just ended
        return 0
    for proc in [process, *children]:
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total


def timed(args: list[str]) -> tuple[float, int, str]:
    """Run a command; its wall seconds, the peak RSS of its process tree (sampled every 50 ms), its stdout."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    watched, peak, done = psutil.Process(proc.pid), [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _tree_rss(watched))
            done.wait(0.05)

    thread = threading.Thread(target=sample)
    thread.start()
    out, _ = proc.communicate()
    done.set()
    thread.join()
    if proc.returncode:
        raise SystemExit(f"{' '.join(args)} failed with exit code {proc.returncode}")
    return time.perf_counter() - started, peak[0], out


def child(bench: str, what: str) -> None:
    """One measurement in this process (``--child``): prints JSON with seconds and figures."""
    import resource

    from perrec_eval.tasks.perrecbench import cf, context

    files = cf.load_interactions(bench)
    result: dict = {}
    started = time.perf_counter()
    if what == "load":
        result["ratings"] = sum(len(files[d].values) for d in files)  # every domain read (and dropped)
    elif what == "mf-model":
        listed = json.loads((Path(bench) / "manifest.json").read_text())["interactions"]
        ratings = files[max(listed, key=lambda d: listed[d]["rows"])]
        result["load_seconds"] = time.perf_counter() - started
        started = time.perf_counter()
        cf.MFModel.fit(ratings, len(ratings.values), cf.MFParams())
        result["ratings"] = len(ratings.values)
    else:  # the evaluation's path: one domain in memory at a time, the first grid point (no train groups)
        groups = context.load_groups(bench, "full", "test")
        started = time.perf_counter()
        outcomes, info = cf.run(what, files, {"full": groups}, [])
        result |= {
            "groups": len(groups),
            "models": info["models"],
            "cold": sum(o.cold for o in outcomes["full"]),
        }
    result["seconds"] = time.perf_counter() - started
    result["max_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(result))


def _build(raw: Path, out: Path, extra: list[str], repeat: int) -> tuple[float, int]:
    best = (float("inf"), 0)
    for _ in range(repeat):
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(out.with_name(out.name + ".stages"), ignore_errors=True)
        command = [*CLI, "build", "--source", str(raw), "--out", str(out), "--test-groups", "200"]
        seconds, rss, _ = timed([*command, "--no-progress", *extra])
        best = min(best, (seconds, rss))
    return best


def _mib(n: float) -> str:
    return f"{n / 2**20:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--totals", default="240000,2000000")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--fit-only", action="store_true", help="build once with interactions; no cost table")
    parser.add_argument("--child", nargs=2, metavar=("BENCH", "WHAT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    totals = [int(t) for t in args.totals.split(",")]
    demo_rows: list[str] = []
    WORK.mkdir(parents=True, exist_ok=True)
    build_rows, fit_rows = [], []
    try:
        for total in totals:
            raw = WORK / f"raw-{total}"
            if not raw.exists():
                timed(
                    [*CLI, "synth", "--out", str(raw), "--reviews-per-domain", str(total // 4), "--seed", "0"]
                )
            plain, rich = WORK / f"plain-{total}", WORK / f"rich-{total}"
            if args.fit_only:
                _build(raw, rich, ["--with-interactions"], 1)
            else:
                seconds, rss = _build(raw, plain, [], args.repeat)
                seconds_i, rss_i = _build(raw, rich, ["--with-interactions"], args.repeat)
            listed = json.loads((rich / "manifest.json").read_text())["interactions"]
            rows, size = sum(i["rows"] for i in listed.values()), sum(i["bytes"] for i in listed.values())
            if not args.fit_only:
                build_rows.append(
                    f"| {total:,} | {seconds:.1f} | {seconds_i:.1f} (+{seconds_i - seconds:.1f}) | "
                    f"{_mib(rss)} / {_mib(rss_i)} | {rows:,} | {size / 2**20:.1f} | {size / rows:.1f} | "
                    f"{size / rows * PAPER_REVIEWS / 1e9:.1f} GB, "
                    f"+{(seconds_i - seconds) / total * PAPER_REVIEWS / 60:.0f} min |"
                )
            for what in ("load", "mf-model", "mf", "item-knn"):
                _, rss_c, out = timed([sys.executable, __file__, "--child", str(rich), what])
                got = json.loads(out.strip().splitlines()[-1])
                if what == "load":
                    detail = f"read all {got['ratings']:,} ratings, one domain at a time"
                elif what == "mf-model":
                    detail = f"one model on the largest domain's {got['ratings']:,} ratings"
                else:
                    detail = f"{got['groups']} groups, {got['models']} models, {got['cold']} cold"
                fit_rows.append(
                    f"| {total:,} | {what} | {got['seconds']:.2f} | {detail} | {_mib(got['max_rss'])} |"
                )
            if total == totals[0] and not args.fit_only:
                demo_rows = _demo(plain, rich)
    finally:
        if not args.keep:
            shutil.rmtree(WORK, ignore_errors=True)
    print("| reviews | build s | with interactions s | peak RSS MiB | ratings | MiB | bytes/rating | 207M |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(build_rows))
    print("\n| reviews | what | seconds | detail | peak RSS MiB |\n|---|---|---|---|---|")
    print("\n".join(fit_rows))
    print("\n" + "\n".join(demo_rows))


def _demo(plain: Path, rich: Path) -> list[str]:
    """``evaluate --model all`` on both builds: seconds, and every baseline's PTC cells with CIs."""
    rows = []
    for label, bench in (("without interactions", plain), ("with interactions", rich)):
        out = bench.parent / f"runs-{bench.name}"
        shutil.rmtree(out, ignore_errors=True)
        command = [*CLI, "evaluate", "--data", str(bench), "--engine", "baseline", "--model", "all"]
        seconds, rss, _ = timed([*command, "--out", str(out), "--no-progress"])
        rows.append(f"evaluate --model all {label}: {seconds:.1f} s, peak RSS {_mib(rss)} MiB")
    rows += ["", "| baseline | easy | medium | hard |", "|---|---|---|---|"]
    for run in sorted((rich.parent / f"runs-{rich.name}").iterdir()):
        if not (run / "scores.json").is_file():
            continue
        cells = {c["level"]: c for c in json.loads((run / "scores.json").read_text())["cells"]}
        shown = [
            f"{cells[lv]['ptc']:.2f} [{cells[lv]['ptc_ci_low']:.2f}, {cells[lv]['ptc_ci_high']:.2f}]"
            for lv in ("easy", "medium", "hard")
        ]
        rows.append(f"| {run.name} | " + " | ".join(shown) + " |")
    return rows


if __name__ == "__main__":
    main()
