"""Evaluation memory and time on large builds: `evaluate --engine baseline` against a naive pyarrow pass.

Usage:
  ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/scale_bench.py [--groups 3400,17000] [--models constant]
  [--repeat 2] [--baseline GIT_REF]``

Builds (once, kept in ``benchmarks/_work/scale_bench/``) a ``--preset large --with-interactions`` benchmark
from ``perrecbench synth --reviews-per-domain 500000`` for each ``--groups`` value (test groups per level:
3,400 → 10,200 test groups over easy/medium/hard, 17,000 → 51,000), then runs, side by side and in
rotating order, ``perrecbench evaluate --engine baseline --model M`` with this checkout (and with the
packages of ``--baseline``, as ``build_bench.py`` does) and :func:`naive_pass`. Each run is a subprocess:
wall seconds, CPU seconds and the peak RSS of its process tree sampled every 50 ms (``build_bench``'s
``run_measured``); the CF baselines' fit seconds come from their ``run.json``. Prints Markdown tables.

**The naive pass** computes what the constant baseline's run reports, the three pointwise PTC cells with
their 95% cluster-bootstrap intervals, the obvious way: ``pyarrow.parquet.read_table`` of the columns it
needs, Kendall tau-b of each group (relative ratings against ``4 - avg``) in numpy, per size of group, and
10,000 resamples of the query items. It checks its PTC against the run's ``scores.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
REPO = ROOT.parent
WORK = ROOT / "_work" / "scale_bench"
LEVELS = ("easy", "medium", "hard")
REVIEWS_PER_DOMAIN = 500_000
CONSTANT_RATING = 4.0  # baselines.CONSTANT_RATING
RESAMPLES = 10_000

sys.path.insert(0, str(ROOT))
from build_bench import code_of, run_measured  # noqa: E402 - the sibling benchmark's helpers


def cli() -> list[str]:
    return [sys.executable, "-m", "perrec_eval.cli", "--no-progress"]


def data_for(groups: int) -> Path:
    """A large-preset build with ``groups`` test groups per level (built once, then reused)."""
    raw, out = WORK / "raw", WORK / f"large-{groups}"
    if not raw.exists():
        subprocess.run(
            [*cli(), "synth", "--out", str(raw), "--reviews-per-domain", str(REVIEWS_PER_DOMAIN)],
            check=True,
            capture_output=True,
        )
    if not out.exists():
        subprocess.run(
            [*cli(), "build", "--source", str(raw), "--out", str(out), "--preset", "large"]
            + ["--test-groups", str(groups), "--with-interactions", "--threads", "2"],
            check=True,
            capture_output=True,
        )
    return out


def level_file(data: Path, level: str) -> Path:
    return data / json.loads((data / "manifest.json").read_text())["outputs"][level]["test"]


def _tau_b(x, y):  # noqa: ANN001, ANN202 - (groups, n) float arrays → tau-b per group (0 where undefined)
    import numpy as np

    n = x.shape[1]
    i, j = np.triu_indices(n, 1)
    dx, dy = np.sign(x[:, i] - x[:, j]), np.sign(y[:, i] - y[:, j])
    pairs = len(i)
    denominator = np.sqrt((pairs - (dx == 0).sum(1)) * (pairs - (dy == 0).sum(1)))
    return np.divide((dx * dy).sum(1), denominator, out=np.zeros(len(x)), where=denominator > 0)


def naive_pass(data: Path) -> dict[str, list[float]]:
    """Each level's constant-baseline PTC and its cluster-bootstrap interval, with pyarrow and numpy only."""
    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out = {}
    for level in LEVELS:
        columns = ["domain", "query.parent_asin"]
        columns += [f"users.list.element.{c}" for c in ("avg_rating", "relative_rating")]
        table = pq.ParquetFile(level_file(data, level)).read(columns=columns)
        users = table["users"].combine_chunks()
        sizes = pc.list_value_length(users).to_numpy()
        flat = users.flatten()
        avg = flat.field("avg_rating").to_numpy()
        rel = flat.field("relative_rating").to_numpy()
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        taus = np.zeros(len(sizes))
        for n in np.unique(sizes):
            rows = np.flatnonzero(sizes == n)
            at = starts[rows][:, None] + np.arange(n)
            taus[rows] = _tau_b(rel[at], CONSTANT_RATING - avg[at])
        asins = table["query"].combine_chunks().field("parent_asin")
        items = pc.binary_join_element_wise(table["domain"], asins, ":")
        _, cluster = np.unique(items.to_numpy(zero_copy_only=False), return_inverse=True)
        sums, counts = np.bincount(cluster, taus), np.bincount(cluster)
        rng = np.random.default_rng(0)
        means = np.empty(RESAMPLES)
        for start in range(0, RESAMPLES, 500):
            draw = rng.integers(0, len(sums), (min(500, RESAMPLES - start), len(sums)))
            means[start : start + len(draw)] = sums[draw].sum(1) / counts[draw].sum(1)
        out[level] = [float(taus.mean()), *np.percentile(means, [2.5, 97.5]).tolist()]
    return out


def evaluate_run(data: Path, model: str, code: Path, label: str) -> dict:
    out = WORK / "runs" / f"{data.name}-{model}-{label}"
    command = [*cli(), "evaluate", "--data", str(data), "--engine", "baseline", "--model", model]
    env = {**os.environ, "PYTHONPATH": str(code), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    wall, peak, _, _, cpu = run_measured([*command, "--out", str(out), "--overwrite"], cwd=code, env=env)
    info = json.loads((out / "run.json").read_text())
    scores = json.loads((out / "scores.json").read_text())
    return {
        "wall": wall,
        "cpu": cpu,
        "peak_rss": peak,
        "fit": (info.get("cf") or {}).get("fit_seconds"),
        "ptc": {c["level"]: c["ptc"] for c in scores["cells"]},
    }


def naive_run(data: Path) -> dict:
    wall, peak, stdout, _, cpu = run_measured([sys.executable, __file__, "--naive", str(data)])
    return {"wall": wall, "cpu": cpu, "peak_rss": peak, "ptc": json.loads(stdout)}


def _cell(values: list[float], scale: float = 1.0, digits: int = 1) -> str:
    values = [v / scale for v in values]
    return f"{statistics.median(values):,.{digits}f} ({min(values):,.{digits}f}–{max(values):,.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", default="3400,17000", help="test groups per level of each build")
    parser.add_argument("--models", default="constant", help="baselines to run (comma-separated)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--baseline", help="also run the packages of this git ref (before/after)")
    parser.add_argument("--naive", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.naive:
        print(json.dumps(naive_pass(args.naive)))
        return
    variants = {"this checkout": REPO}
    if args.baseline:
        variants = {f"@ {args.baseline}": code_of(args.baseline), **variants}
    print("| test groups | system | wall s | CPU s | peak RSS MB | fit s | wall / naive |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for groups in [int(g) for g in args.groups.split(",")]:
        data = data_for(groups)
        total = json.loads((data / "stats.json").read_text())["splits"]["test"]["all"]["groups"]
        runs: dict[str, list[dict]] = {}
        names = [(model, label) for model in args.models.split(",") for label in variants] + [("naive", "")]
        for round_ in range(args.repeat):
            for model, label in names[round_ % len(names) :] + names[: round_ % len(names)]:
                if model == "naive":
                    result = naive_run(data)
                else:
                    result = evaluate_run(data, model, variants[label], label.strip("@ ").replace(" ", "-"))
                runs.setdefault(f"{model} {label}".strip(), []).append(result)
                time.sleep(1)
        naive = runs["naive"]
        for name, results in runs.items():
            fits = [r["fit"] for r in results if r.get("fit") is not None]
            ratios = [r["wall"] / n["wall"] for r, n in zip(results, naive, strict=True)]
            walls, cpus = _cell([r["wall"] for r in results]), _cell([r["cpu"] for r in results])
            rss = _cell([r["peak_rss"] for r in results], 2**20, 0)
            print(
                f"| {total:,} | {name} | {walls} | {cpus} | {rss} | {_cell(fits) if fits else '–'} "
                f"| {_cell(ratios, digits=2)} |"
            )
        for name, results in runs.items():
            if name != "naive" and name.startswith("constant"):
                ours, theirs = results[0]["ptc"], naive[0]["ptc"]
                agree = all(abs(ours[lv] - theirs[lv][0]) < 5e-4 for lv in LEVELS)
                print(f"<!-- {groups}: {name} PTC {ours} naive {theirs} agree={agree} -->")


if __name__ == "__main__":
    main()
