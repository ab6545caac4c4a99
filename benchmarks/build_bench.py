"""Benchmark `perrecbench build` on synthetic data: stage breakdown next to a naive pandas pass; scaling.

Usage:
  ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/build_bench.py [--total 1500000] [--repeat 2]
  [--baseline GIT_REF]``: a fresh build's seconds per stage, peak RSS and the input side's reviews/s, next
  to a naive in-memory pandas pass that only *finds* the groups (:func:`naive_pass`), run side by side and
  repeated in rotating order. ``--baseline`` also builds with the code of an older commit (``git archive``
  into the work folder; the same interpreter and packages), for before/after tables taken in one run.

  ``... benchmarks/build_bench.py --totals 1000000,4000000,8000000``: wall time, peak RSS and reviews/s of
  fresh and resumed builds of growing size.

Each total size gives the four domains ``total / 4`` reviews each (``perrecbench synth``, not timed).
Every build runs in a subprocess from scratch (no stage files); the peak resident memory of its whole process
tree is sampled every 50 ms. Data lives in ``benchmarks/_work/build_bench/`` and is deleted afterwards
(``--keep`` keeps it; existing raw data of the same size is reused). Results are printed as Markdown tables
(paste into ``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent
REPO = ROOT.parent
# Its own folder under benchmarks/_work (other benchmarks share _work: only this folder is deleted).
WORK = ROOT / "_work" / "build_bench"
PAPER_REVIEWS = 207_000_000  # Books + Clothing + Home + Electronics (PROTOCOL §1)
PAPER_BYTES = (102 + 50) * 10**9  # review + metadata JSONL
DOMAINS = ("Books", "Clothing_Shoes_and_Jewelry", "Home_and_Kitchen", "Electronics")
# The build's stages (its INFO log), grouped as in RESULTS.md: the input side reads and filters the raw
# files; the output side assembles, writes and measures what was selected.
INPUT_STAGES = ("read reviews", "deduplicate", "user history", "read metadata", "candidates")
OUTPUT_STAGES = ("histories", "write configs", "statistics")
# Logged only by newer builds (older ones count them in "other": wall time outside the logged stages).
EXTRA_STAGES = ("split", "card")
GAP_TOLERANCE = 1e-9  # dataset_builder.perrecbench.config.GAP_TOLERANCE: the builder's slack on gaps


def _tree_rss(process: psutil.Process) -> int:
    total = 0
    for proc in [process, *process.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_measured(
    command: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[float, int, str, str, float]:
    """Run ``command``; return wall seconds, peak RSS of its process tree, its stdout, its stderr and its
    CPU seconds (user + system of it and its waited-for children)."""
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env
    )
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
    return wall, peak, out, err, _children_cpu() - cpu


_TOOK = re.compile(r"(?:INFO|DEBUG) dataset_builder\.[\w.]+: (?:[\w]+: )?(.+?) took ([\d.]+) s")


def stage_seconds(log: str) -> dict[str, float]:
    """Seconds per build stage, summed over domains, from the build's INFO log lines.

    >>> stage_seconds("x INFO dataset_builder.build: Books: search took 1.5 s\\n"
    ...               "x INFO dataset_builder.build: Electronics: search took 0.52 s")
    {'search': 2.02}
    """
    out: dict[str, float] = {}
    for stage, seconds in _TOOK.findall(log):
        out[stage] = round(out.get(stage, 0.0) + float(seconds), 2)
    return out


def synth(total: int) -> Path:
    """Raw data of ``total`` reviews over the four domains (reused when present)."""
    raw = WORK / f"raw-{total}"
    if not raw.exists():
        subprocess.run(
            [str(Path(sys.executable).parent / "perrecbench"), "synth", "--out", str(raw), "--no-progress"]
            + ["--reviews-per-domain", str(total // 4)],
            check=True,
            capture_output=True,
        )
    return raw


def build_command(raw: Path, out: Path, threads: int, memory_limit: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "perrec_eval.cli",
        "build",
        "--source",
        str(raw),
        "--out",
        str(out),
        "--overwrite",
        "--no-progress",
        "-v",  # the stages' times are debug lines
        "--threads",
        str(threads),
        "--memory-limit",
        memory_limit,
    ]


def code_of(ref: str) -> Path:
    """The packages of commit ``ref`` (``git archive``: nothing in the checkout or ``.git`` changes)."""
    sha = subprocess.run(
        ["git", "rev-parse", "--short=12", ref], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.strip()
    folder = WORK / f"code-{sha}"
    if not folder.exists():
        folder.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "archive", sha, "dataset_builder", "perrec_eval"],
            cwd=REPO,
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
        # Older builds log stage times to 0.1 s: two decimals, so that sums over domains compare.
        build_py = folder / "dataset_builder" / "build.py"
        build_py.write_text(build_py.read_text().replace("took %.1f s", "took %.2f s"))
    return folder


def fresh_build(raw: Path, code: Path, threads: int, memory_limit: str) -> dict:
    """One build from scratch with the packages in ``code`` (imported first: they shadow the checkout)."""
    out = WORK / f"out-{code.name}"
    shutil.rmtree(out.with_name(out.name + ".stages"), ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(code)}
    wall, peak, _, log, cpu = run_measured(build_command(raw, out, threads, memory_limit), cwd=code, env=env)
    stats = json.loads((out / "stats.json").read_text())
    stages = stage_seconds(log)
    reviews = sum(funnel["lines"] for funnel in stats["selection"].values())
    input_s = sum(stages.get(s, 0.0) for s in INPUT_STAGES)
    return {
        "wall": wall,
        "cpu": cpu,
        "peak_rss": peak,
        "stages": stages,
        "input_s": input_s,
        "output_s": sum(stages.get(s, 0.0) for s in OUTPUT_STAGES),
        "input_reviews_per_s": reviews / input_s,
        "groups": {d: f["items_with_group"] for d, f in stats["selection"].items()},
    }


def naive_reviews(source: Path, domain: str, texts: bool = False):
    """A domain's reviews read whole with pandas, one per (user, item): the earliest, ties by rating then
    asin (the builder's rule), for the naive passes the builders are measured against (with `texts`, each
    review's ``title`` and ``text`` too)."""
    import pandas as pd

    reviews = pd.read_json(
        source / f"{domain}.jsonl",
        lines=True,
        dtype={"user_id": str, "parent_asin": str, "asin": str, "title": str, "text": str},
        convert_dates=False,
    )[["user_id", "parent_asin", "asin", "rating", "timestamp", *(["title", "text"] if texts else [])]]
    reviews = reviews.sort_values(["user_id", "parent_asin", "timestamp", "rating", "asin"])
    return reviews.drop_duplicates(["user_id", "parent_asin"], keep="first")


def with_moments(reviews):
    """The reviews with ``n_before`` and ``s_before``: the count and sum of the user's ratings strictly
    before each review (equal timestamps excluded), the obvious way with pandas."""
    moments = reviews.groupby(["user_id", "timestamp"]).rating.agg(["count", "sum"]).reset_index()
    per_user = moments.groupby("user_id", sort=False)
    moments["n_before"] = per_user["count"].cumsum() - moments["count"]
    moments["s_before"] = per_user["sum"].cumsum() - moments["sum"]
    return reviews.merge(moments.drop(columns=["count", "sum"]), on=["user_id", "timestamp"])


def naive_pass(
    source: Path, domains: tuple[str, ...], window_ms: int, min_history: int, min_gap: float, k: int
) -> dict[str, int]:
    """Find (not write) each domain's items with a group, the obvious way with pandas, in memory.

    The builder's rules: earliest review per (user, item), ties by (rating, asin); average over the
    reviews strictly before (equal timestamps excluded); more than ``min_history`` of them; query items
    need a metadata title; a group is ``k`` candidates inside one closed window ``[t, t + Δ]`` whose
    relative ratings pairwise differ by more than ``min_gap`` (a greedy scan over the sorted values decides
    it, window starts tried in time order).

    Returns:
        Items with a group per domain (must equal the build's ``items_with_group``).
    """
    import numpy as np
    import pandas as pd

    found = {}
    for domain in domains:
        reviews = with_moments(naive_reviews(source, domain))
        cand = reviews[reviews.n_before > min_history].copy()
        cand["rel"] = cand.rating - cand.s_before / cand.n_before
        meta = pd.read_json(source / f"meta_{domain}.jsonl", lines=True, dtype={"parent_asin": str})
        titles = meta.groupby("parent_asin").title.min()
        cand = cand[cand.parent_asin.isin(titles[titles.fillna("") != ""].index)]
        found[domain] = 0
        for _, item in cand.groupby("parent_asin", sort=False):
            if len(item) < k:
                continue
            ts, rels = item.timestamp.to_numpy(), item.rel.to_numpy()
            for start in np.unique(ts):
                inside = np.sort(rels[(ts >= start) & (ts <= start + window_ms)])
                taken, last = 1, inside[0]
                for value in inside[1:]:
                    if value - last > min_gap + GAP_TOLERANCE:
                        taken, last = taken + 1, value
                if taken >= k:
                    found[domain] += 1
                    break
    return found


def naive_run(raw: Path) -> dict:
    """:func:`naive_pass` in a subprocess with the build's default parameters: wall, peak RSS, groups."""
    command = [sys.executable, __file__, "--naive-source", str(raw)]
    wall, peak, out, _, cpu = run_measured(command)
    return {"wall": wall, "cpu": cpu, "peak_rss": peak, "groups": json.loads(out)}


def compare(total: int, repeat: int, baselines: list[str], threads: int, memory_limit: str) -> None:
    """Fresh builds (current code and each baseline) and the naive pass, ``repeat`` rounds, rotating order."""
    raw = synth(total)
    variants = {f"build @ {ref}": code_of(ref) for ref in baselines}
    variants["build (this checkout)"] = REPO
    names = [*variants, "naive pandas pass"]
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for round_ in range(repeat):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for name in order:
            if name in variants:
                row = fresh_build(raw, variants[name], threads, memory_limit)
            else:
                row = naive_run(raw)
            runs[name].append(row)
            print(json.dumps({"variant": name, "round": round_, **row}), flush=True)
    expected = runs["naive pandas pass"][0]["groups"]
    for name in variants:
        if any(r["groups"] != expected for r in runs[name]):
            raise RuntimeError(f"{name} found other groups than the naive pass: {runs[name][0]['groups']}")
    groups = sum(expected.values())
    print(f"\n{total:,} reviews, {groups:,} groups; --threads {threads} --memory-limit {memory_limit}")
    print_stage_table(runs, variants)
    compression_table(WORK / f"out-{REPO.name}.stages")


def print_stage_table(runs: dict[str, list[dict]], variants: dict[str, Path]) -> None:
    naive = runs["naive pandas pass"]
    stages = [*INPUT_STAGES, "search", *OUTPUT_STAGES, *EXTRA_STAGES]
    print("\nSeconds per stage, one column per run (summed over domains; other = wall − stages: start-up,")
    print("imports, waiting for hashes):\n")
    columns = [(name, i, r) for name in variants for i, r in enumerate(runs[name])]
    print("| stage | " + " | ".join(f"{name} #{i + 1}" for name, i, _ in columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for stage in stages:
        print(
            f"| {stage} | " + " | ".join(f"{r['stages'].get(stage, 0.0):.2f}" for _, _, r in columns) + " |"
        )
    rows = {
        "input side": lambda r: f"{r['input_s']:.2f}",
        "output side": lambda r: f"{r['output_s']:.2f}",
        "other": lambda r: f"{r['wall'] - sum(r['stages'].values()):.2f}",
        "**wall**": lambda r: f"**{r['wall']:.2f}**",
        "CPU s (user + system)": lambda r: f"{r['cpu']:.2f}",
        "peak RSS MB": lambda r: f"{r['peak_rss'] / 2**20:,.0f}",
        "input reviews/s": lambda r: f"{r['input_reviews_per_s']:,.0f}",
    }
    for label, cell in rows.items():
        print(f"| {label} | " + " | ".join(cell(r) for _, _, r in columns) + " |")
    walls = [r["wall"] for r in naive]
    print(
        f"\nnaive pandas pass: {', '.join(f'{w:.2f}' for w in walls)} s (CPU "
        f"{', '.join(f'{cpu:.2f}' for cpu in (r['cpu'] for r in naive))} s), peak RSS "
        f"{max(r['peak_rss'] for r in naive) / 2**20:,.0f} MB"
    )
    for name in variants:
        ratios = [r["wall"] / statistics.median(walls) for r in runs[name]]
        print(f"{name}: wall / naive median = {', '.join(f'{x:.2f}' for x in ratios)}")


# (format, codec, level). LZ4 parquet is written but not read back: after reading one, pyarrow 26.0.1 aborted
# at interpreter exit in about half the runs ("terminate called without an active exception").
CODECS = (
    ("parquet", "zstd", 1),
    ("parquet", "zstd", 3),
    ("parquet", "lz4", None),
    ("parquet", "snappy", None),
    ("parquet", "none", None),
    ("arrow ipc", None, None),
)


def compression_table(stages: Path) -> None:
    """Write every group's ``full`` row (the stage files) in each format: parquet with each codec (row groups
    of 256 groups, as the builder writes) and uncompressed Arrow IPC; best-of-5 write and read seconds, and
    size. The builder writes zstd level 1 parquet for the published files and Arrow IPC for its stages."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.concat_tables(pa.ipc.open_file(path).read_all() for path in sorted(stages.glob("*/*.arrow")))
    print(f"\nFormats on {table.num_rows:,} full rows ({table.nbytes / 1e6:,.0f} MB in Arrow):\n")
    print("| format | write s | read s | MB |")
    print("|---|---:|---:|---:|")
    for kind, codec, level in CODECS:
        writes, reads = [], []
        for _ in range(5):
            buffer = io.BytesIO()
            start = time.perf_counter()
            if kind == "parquet":
                with pq.ParquetWriter(
                    buffer, table.schema, compression=codec, compression_level=level
                ) as out:
                    for offset in range(0, table.num_rows, 256):
                        out.write_table(table.slice(offset, 256), row_group_size=256)
            else:
                with pa.ipc.new_file(buffer, table.schema) as out:
                    out.write_table(table)
            writes.append(time.perf_counter() - start)
            if codec == "lz4":
                continue
            start = time.perf_counter()
            if kind == "parquet":
                pq.read_table(io.BytesIO(buffer.getvalue()))
            else:
                pa.ipc.open_file(pa.BufferReader(buffer.getvalue())).read_all()
            reads.append(time.perf_counter() - start)
        name = " ".join(str(part) for part in (kind, codec, level) if part is not None)
        read = f"{min(reads):.3f}" if reads else "not read"
        print(f"| {name} | {min(writes):.3f} | {read} | {len(buffer.getvalue()) / 1e6:.1f} |")


def scaling(total: int, threads: int, memory_limit: str) -> dict:
    raw = synth(total)
    out = WORK / f"bench-{total}"
    shutil.rmtree(out.with_name(out.name + ".stages"), ignore_errors=True)
    command = build_command(raw, out, threads, memory_limit)
    wall, peak, _, log, _ = run_measured(command)
    # unchanged inputs: stage files are reused once the inputs' content hashes are checked
    resumed_wall, resumed_peak, *_ = run_measured(command)
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


def print_scaling(rows: list[dict], threads: int, memory_limit: str) -> None:
    print(f"\n--threads {threads} --memory-limit {memory_limit}\n")
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", type=int, default=1_500_000, help="reviews of the stage comparison")
    parser.add_argument("--repeat", type=int, default=2, help="rounds of the stage comparison")
    parser.add_argument(
        "--baseline", action="append", default=[], metavar="GIT_REF", help="also build with a commit's code"
    )
    parser.add_argument("--totals", help="comma-separated sizes: the scaling table instead")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--memory-limit", default="2GB")
    parser.add_argument("--keep", action="store_true", help="keep benchmarks/_work/build_bench")
    parser.add_argument("--naive-source", type=Path, help=argparse.SUPPRESS)  # the naive pass's subprocess
    args = parser.parse_args()
    if args.naive_source:
        print(json.dumps(naive_pass(args.naive_source, DOMAINS, 30 * 86_400_000, 20, 0.6, 5)))
        return
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    WORK.mkdir(parents=True, exist_ok=True)
    try:
        if args.totals:
            rows = []
            for total in (int(x) for x in args.totals.split(",")):
                rows.append(scaling(total, args.threads, args.memory_limit))
                print(json.dumps(rows[-1]), flush=True)
            print_scaling(rows, args.threads, args.memory_limit)
        else:
            compare(args.total, args.repeat, args.baseline, args.threads, args.memory_limit)
    finally:
        if not args.keep:
            shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
