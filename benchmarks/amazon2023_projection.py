"""The whole of Amazon Reviews 2023 (34 categories, 571M reviews) projected from measured runs on one
Amazon-shaped category (`books_bench.py`): hours, peak memory and disk per task family, on this 2-core
machine and on a 16-core one.

Usage: ``.venv/bin/python benchmarks/amazon2023_projection.py [--runs FILE]``; by default the runs of
``benchmarks/books_runs.jsonl`` (those in RESULTS.md; ``books_bench.py`` appends new ones to
``benchmarks/_work/books_bench.jsonl``).

Each stage of a family's measured run (``label`` ``full``: the whole category at ``--threads 2``) is scaled
to every category by what drives it: the review file's bytes (reading reviews, their texts), the metadata
file's bytes (reading metadata), the number of reviews (deduplication, k-cores, searches, rows written), the
number of items (the knowledge graph, the catalogue) or nothing (RecBench+'s queries: a fixed sample of
users per category); bytes are the release's tokens at 4 characters each plus each line's fixed part, as
`perrecbench synth --shape amazon` writes them. The rest of the wall time (start, imports, hashing) scales
with the reviews. The wall times were measured on shared cores (the load is in each run's record), so the
projected hours are upper bounds; "of it CPU" is the same projection times the run's CPU over wall time, the
work itself. Categories are built one after the other on 2 cores; on 16 cores, eight builds of two
threads run at once (one category each), so the wall time is the larger of the sum over eight and the
largest category. ``label`` ``quarter`` runs at ``--threads 1`` and ``2`` give each stage's speed-up from a
second thread. Every figure is an estimate from measured rates on synthetic data of the real shape, not a
measurement on the real files (none is reachable here).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from dataset_builder.synth.amazon import CATEGORY_STATS  # noqa: E402

RUNS = Path(__file__).resolve().parent / "books_runs.jsonl"  # the runs RESULTS.md reports (manifests cut)
REVIEW_LINE, META_LINE, CHARS = 240, 700, 4.0  # the fixed part of a line, characters per token (synth)
# Each family's stages (their log names) and what each scales with.
DRIVERS = {
    "perrecbench": {
        "read reviews": "review_bytes", "deduplicate": "reviews", "user history": "reviews",
        "read metadata": "meta_bytes", "candidates": "reviews", "search": "reviews", "histories": "reviews",
        "split": "reviews", "write configs": "reviews", "statistics": "reviews", "card": "none",
    },
    "llmrec": {
        "read reviews": "review_bytes", "deduplicate": "reviews", "read metadata": "meta_bytes",
        "k-core": "reviews", "review texts": "review_bytes", "write sorted": "reviews", "write": "reviews",
    },
    "recbench-plus": {
        "read reviews": "review_bytes", "deduplicate": "reviews", "read metadata": "meta_bytes",
        "knowledge graph": "items", "eligible users": "reviews", "queries": "none", "catalogue rows": "items",
        "write": "items",
    },
}  # fmt: skip
PARALLEL = 8  # builds at once on 16 cores (two threads each)


def drivers(name: str) -> dict[str, float]:
    """A category's size by each driver (the release's table; bytes as `synth --shape amazon` writes)."""
    s = CATEGORY_STATS[name]
    return {
        "reviews": s.ratings,
        "items": s.items,
        "review_bytes": s.ratings * REVIEW_LINE + CHARS * s.review_tokens,
        "meta_bytes": s.items * META_LINE + CHARS * s.meta_tokens,
        "none": 1.0,
    }


def project(run: dict, family: str, measured_on: str = "Books") -> dict[str, float]:
    """Seconds (and CPU seconds) per category from one measured run."""
    base = drivers(measured_on)
    stages = {k: v for k, v in run["stages"].items() if k in DRIVERS[family]}
    other = max(0.0, run["wall"] - sum(stages.values()))
    cpu_share = run["cpu"] / run["wall"]
    out = {}
    for name in CATEGORY_STATS:
        size = drivers(name)
        seconds = sum(t * size[DRIVERS[family][k]] / base[DRIVERS[family][k]] for k, t in stages.items())
        seconds += other * size["reviews"] / base["reviews"]
        out[name] = seconds
    out["_cpu_share"] = cpu_share
    return out


def speedups(runs: list[dict], family: str) -> dict[str, float]:
    """Each stage's time at one thread over its time at two (the ``quarter`` runs)."""
    one = next(
        (r for r in runs if r["family"] == family and r["label"] == "quarter" and r["threads"] == 1), None
    )
    two = next(
        (r for r in runs if r["family"] == family and r["label"] == "quarter" and r["threads"] == 2), None
    )
    if one is None or two is None:
        return {}
    keys = [k for k in DRIVERS[family] if k in one["stages"] and k in two["stages"] and two["stages"][k] > 0]
    out = {k: one["stages"][k] / two["stages"][k] for k in keys}
    out["wall"] = one["wall"] / two["wall"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=RUNS)
    args = parser.parse_args()
    runs = [json.loads(line) for line in args.runs.read_text().splitlines() if line.strip()]
    largest = max(CATEGORY_STATS, key=lambda c: CATEGORY_STATS[c].ratings)
    raw = sum(drivers(c)["review_bytes"] + drivers(c)["meta_bytes"] for c in CATEGORY_STATS)
    print(f"raw files of the 34 categories: ≈ {raw / 1e9:,.0f} GB (reviews and metadata, JSONL)\n")
    print("| family | measured on Books (29.5M reviews) | all 34 categories, 2 cores | of it CPU | 16 cores "
          "(8 builds × 2 threads) | peak memory | temporary disk (largest category) |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|")
    for family in DRIVERS:
        full = [r for r in runs if r["family"] == family and r["label"] == "full" and r["threads"] == 2]
        if not full:
            continue
        run = full[-1]
        per = project(run, family)
        total = sum(v for k, v in per.items() if not k.startswith("_"))
        wide = max(total / PARALLEL, per[largest])
        disk = run["peak_disk_gb"] * drivers(largest)["review_bytes"] / drivers("Books")["review_bytes"]
        print(
            f"| {family} | {run['wall'] / 60:.0f} min wall, {run['cpu'] / 60:.0f} min CPU, "
            f"{run['peak_rss_mb'] / 1024:.1f} GB, {run['peak_disk_gb']:.0f} GB disk | {total / 3600:.1f} h "
            f"| {total * per['_cpu_share'] / 3600:.1f} core-h "
            f"| {wide / 3600:.1f} h | {run['peak_rss_mb'] / 1024:.1f} GB (×{PARALLEL} on 16 cores) "
            f"| ≈ {disk:.0f} GB ({largest}) |"
        )
        gains = speedups(runs, family)
        if gains:
            print(
                "  threads 1 → 2 (quarter of Books): " + ", ".join(f"{k} {v:.2f}×" for k, v in gains.items())
            )


if __name__ == "__main__":
    main()
