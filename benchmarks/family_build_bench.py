"""Benchmark `perrecbench build --task llmrec` and `--task recbench-plus` on synthetic data, next to a naive
in-memory pandas pass that computes the same selection.

Usage: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/family_build_bench.py [--total 2000000] [--repeat 2]
[--threads 2] [--write]``

Each family's build runs from scratch in a subprocess (no stage files), its whole process tree's peak RSS
sampled every 50 ms (`build_bench.run_measured`); the build is started through this script
(``--run-build``), which logs the plan and write steps' seconds and those of their Python parts, so one
run gives the profile (the DuckDB stage's steps are the build's own INFO lines). The naive passes
(:func:`naive_llmrec`, :func:`naive_recbench`) run in subprocesses too and must find the counts the builds
record (checked). Runs are repeated ``--repeat`` times in rotating order; tables show ranges (min-max).
Raw data (``perrecbench synth``, four domains of ``total / 4`` reviews, not timed) and builds live in a
temporary folder under ``--work`` (default /tmp) and are deleted afterwards. ``--write`` replaces the
``## Family builders`` section of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_bench import naive_reviews, run_measured, stage_seconds  # noqa: E402
from metric_bench import write_section  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SECTION = "## Family builders"
FAMILIES = ("llmrec", "recbench-plus")
DOMAINS = ("Books", "Clothing_Shoes_and_Jewelry", "Home_and_Kitchen", "Electronics")
# The Python parts of each family's plan and write steps, timed by --run-build: (module, function).
PARTS = {
    "llmrec": (
        ("dataset_builder.llmrec.stream", "catalogue"),  # the first pass: popularity counts, vocabulary
        ("dataset_builder.llmrec.stream", "_candidates"),  # each row's own generator: the draws
        ("dataset_builder.llmrec.stream", "_text_rows"),
        ("dataset_builder.llmrec.stream", "Sink._flush"),  # parquet writing
        ("dataset_builder.llmrec.stream", "write_domain"),
    ),
    "recbench-plus": (
        ("dataset_builder.recbench_plus.builder", "_domain_queries"),
        ("dataset_builder.recbench_plus.builder", "_parquet"),
    ),
}
logger = logging.getLogger("family_build_bench")


def _timed(name: str, fn, totals: dict[str, float]):
    @functools.wraps(fn)
    def run(*args, **kwargs):
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[name] = totals.get(name, 0.0) + time.perf_counter() - started

    return run


def run_build(family: str, argv: list[str]) -> None:
    """The CLI's build with the family's plan, write and their parts timed (one ``took`` line each)."""
    import importlib

    from dataset_builder import build as shared
    from perrec_eval import cli

    totals: dict[str, float] = {}
    for module, name in PARTS[family]:
        owner = importlib.import_module(module)
        *path, attribute = name.split(".")  # a method: "Class.method"
        for part in path:
            owner = getattr(owner, part)
        setattr(owner, attribute, _timed(name, getattr(owner, attribute), totals))
    original = shared.task_builder

    def task_builder(task: str):
        builder = original(task)
        return type(builder)(
            stage=builder.stage,
            plan=_timed("plan", builder.plan, totals),
            write=_timed("write", builder.write, totals),
            summary=builder.summary,
        )

    shared.task_builder = task_builder
    code = cli.main(["-v", "build", "--task", family, *argv])  # -v: the stages' times are debug lines
    for name, seconds in totals.items():
        print(f"x INFO dataset_builder.bench: {name} took {seconds:.2f} s", file=sys.stderr)
    sys.exit(code)


def _meta(source: Path, domain: str):
    import pandas as pd

    meta = pd.read_json(source / f"meta_{domain}.jsonl", lines=True, dtype={"parent_asin": str})
    return meta.sort_values("parent_asin").drop_duplicates("parent_asin")


def naive_llmrec(source: Path, out: Path, k: int = 5) -> dict:
    """`build --task llmrec` with its defaults done the obvious way, in memory: each domain's selection with
    pandas (duplicates, titled items, the iterated k-core, each user's order), then every row a Python dict
    made by the builder's own pure functions (`splits.user_rows`; `splits.candidates` from the pool of the
    user's unreviewed items with `splits.row_rng`: the same draws; `text.text_rows`), every domain's rows
    held until each config's split is written as one table (named by content, as the build names its
    files). Returns each domain's selection counts and the files and row counts per config and split."""
    import hashlib
    import io

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dataset_builder.llmrec import splits
    from dataset_builder.llmrec import text as extraction
    from dataset_builder.llmrec.builder import SCHEMAS, TASK_CONFIGS
    from dataset_builder.llmrec.config import P5_SEED

    rows: dict[str, dict[str, list]] = {}
    found = {}
    for domain in DOMAINS:
        reviews = naive_reviews(source, domain, texts=True)
        meta = _meta(source, domain)
        meta = meta.assign(item_title=meta.title.fillna("").str.strip())
        meta = meta.loc[meta.item_title != "", ["parent_asin", "item_title"]]
        inter = reviews.merge(meta, on="parent_asin")
        while True:
            users = inter.user_id.map(inter.user_id.value_counts())
            items = inter.parent_asin.map(inter.parent_asin.value_counts())
            keep = (users >= k) & (items >= k)
            if keep.all():
                break
            inter = inter[keep]
        inter = inter.sort_values(["user_id", "timestamp", "parent_asin"])
        catalogue = np.array(sorted(inter.parent_asin.unique()), dtype=object)
        titles = dict(zip(inter.parent_asin, inter.item_title, strict=True))
        made: dict[str, dict[str, list]] = {c: {s: [] for s in splits.SPLITS} for c in TASK_CONFIGS}
        made["items"] = {
            "train": [{"domain": domain, "parent_asin": a, "title": titles[a]} for a in catalogue]
        }
        made["interactions"] = {"train": []}
        for user, group in inter.groupby("user_id", sort=False):
            sequence = [
                splits.Interaction(a, t, float(r), int(ts))
                for a, t, r, ts in zip(
                    group.parent_asin, group.item_title, group.rating, group.timestamp, strict=True
                )
            ]
            made["interactions"]["train"] += [
                {"domain": domain, "user_id": user, "parent_asin": i.parent_asin, "rating": i.rating,
                 "timestamp": i.timestamp}
                for i in splits.train_items(sequence)
            ]  # fmt: skip
            pool = catalogue[~np.isin(catalogue, group.parent_asin.to_numpy())]
            for split, row in splits.user_rows(domain, user, sequence, 10):
                rating = row.pop("rating")
                made["rating"][split].append({**row, "rating": rating})
                listed, at = splits.candidates(
                    row["parent_asin"], pool, 99, splits.row_rng(P5_SEED, row["id"])
                )
                made["sequential"][split].append(dict(row))  # the catalogue cell's rows: no candidates
                made["direct"][split].append({**row, "candidates": listed, "target_position": at})
        texts = {
            (u, a): (None if title != title else title, None if body != body else body)  # NaN: missing
            for u, a, title, body in zip(
                inter.user_id, inter.parent_asin, inter.title, inter.text, strict=True
            )
        }
        train = [(r["user_id"], r["parent_asin"], r["timestamp"]) for r in made["interactions"]["train"]]
        made.update(extraction.text_rows(made["rating"], train, texts)[0])
        for name, by_split in made.items():
            for split, split_rows in by_split.items():
                rows.setdefault(name, {}).setdefault(split, []).extend(split_rows)
        found[domain] = {
            "users": int(inter.user_id.nunique()),
            "items": len(catalogue),
            "interactions": len(inter),
            "test": len(made["sequential"]["test"]),
        }
        del inter, reviews, made, texts
    files: dict[str, dict[str, str]] = {}
    counts: dict[str, dict[str, int]] = {}
    out.mkdir(parents=True, exist_ok=True)
    for name, by_split in rows.items():
        for split, split_rows in by_split.items():
            if not split_rows:
                continue
            sink = io.BytesIO()
            pq.write_table(pa.Table.from_pylist(split_rows, schema=SCHEMAS[name]), sink)
            data = sink.getvalue()
            path = f"{name}/{split}-{hashlib.sha256(data).hexdigest()[:12]}.parquet"
            (out / name).mkdir(exist_ok=True)
            (out / path).write_bytes(data)
            files.setdefault(name, {})[split] = path
            counts.setdefault(name, {})[split] = len(split_rows)
    return {"domains": found, "files": files, "counts": counts}


def naive_recbench(
    source: Path, min_items: int = 3, max_share: float = 0.2, min_history: int = 5, min_subset: int = 2
) -> dict[str, dict[str, int]]:
    """Each domain's RecBench+ graph and users with pandas, in memory: every titled reviewed item's relation
    values (`kg.item_facts`, the builder's normalization), the values held by ``min_items`` to ``max_share``
    of the items, the users with ``min_history`` titled items and those among them whose history holds a
    kept value shared by ``min_subset`` items (a query can be made)."""
    import pandas as pd

    from dataset_builder.recbench_plus import kg

    found = {}
    for domain in DOMAINS:
        reviews = naive_reviews(source, domain)
        meta = _meta(source, domain)
        meta = meta[meta.title.fillna("").str.strip() != ""]
        meta = meta[meta.parent_asin.isin(reviews.parent_asin)]
        keys = kg.detail_keys(domain)

        def facts(row, keys=keys) -> list[tuple[str, str]]:
            author, store = getattr(row, "author", None), getattr(row, "store", None)
            author = author.get("name") if isinstance(author, dict) else author
            categories = getattr(row, "categories", None)
            categories = categories if isinstance(categories, list) else None
            details = getattr(row, "details", None)
            details = details if isinstance(details, dict) else None
            return [f.key for f in kg.item_facts(author, store, categories, details, keys)]

        pairs = pd.DataFrame(
            [(row.parent_asin, key) for row in meta.itertuples() for key in facts(row)],
            columns=["parent_asin", "value"],
        )
        holders = pairs.groupby("value").parent_asin.nunique()
        kept = holders[(holders >= min_items) & (holders <= max_share * len(meta))].index
        pairs = pairs[pairs.value.isin(kept)]
        history = reviews[reviews.parent_asin.isin(meta.parent_asin)]
        sizes = history.groupby("user_id").size()
        eligible = history[history.user_id.isin(sizes[sizes >= min_history].index)]
        shared = eligible.merge(pairs, on="parent_asin").groupby(["user_id", "value"]).size()
        found[domain] = {
            "values_kept": len(kept),
            "eligible_users": int((sizes >= min_history).sum()),
            "users_with_subset": int(shared[shared >= min_subset].index.get_level_values(0).nunique()),
        }
    return found


def build_run(family: str, raw: Path, out: Path, threads: int) -> dict:
    shutil.rmtree(out.with_name(out.name + ".stages"), ignore_errors=True)
    command = [sys.executable, __file__, "--run-build", family, "--", "--source", str(raw), "--out", str(out)]
    command += ["--overwrite", "--no-progress", "--threads", str(threads)]
    wall, peak, _, log, cpu = run_measured(command, cwd=REPO)
    recorded = json.loads((out / "manifest.json").read_text())
    return {"wall": wall, "cpu": cpu, "peak_rss": peak, "stages": stage_seconds(log), "manifest": recorded}


def naive_run(family: str, raw: Path, out: Path) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, __file__, "--naive", family, str(raw), str(out)]
    wall, peak, found, _, cpu = run_measured(command, cwd=REPO)
    shutil.rmtree(out, ignore_errors=True)
    return {"wall": wall, "cpu": cpu, "peak_rss": peak, "found": json.loads(found)}


def check(family: str, build: dict, naive: dict) -> dict[str, int]:
    """The naive pass must find what the build recorded (LLMRec: each domain's k-core interactions, and
    every config's rows per split; RecBench+: each domain's kept values and eligible users). Returns, for
    LLMRec, how many of the files are byte-identical (every file of at most `stream.ROW_GROUP` rows must be:
    the naive pass writes each as one table, as the build did before it streamed)."""
    recorded = build["manifest"]
    if family == "llmrec":
        for domain, found in naive["found"]["domains"].items():
            if found["interactions"] != recorded["selection"][domain]["kcore"]:
                raise RuntimeError(f"llmrec {domain}: naive k-core {found} != the build's")
        if naive["found"]["counts"] != recorded["counts"]:
            raise RuntimeError(f"llmrec: naive rows {naive['found']['counts']} != build {recorded['counts']}")
        from dataset_builder.llmrec.stream import ROW_GROUP

        same = small = 0
        for name, by_split in recorded["outputs"].items():
            for split, path in by_split.items():
                small += recorded["counts"][name][split] <= ROW_GROUP
                same += naive["found"]["files"][name][split] == path
        if same < small:
            raise RuntimeError(f"llmrec: {same} files byte-identical, fewer than the {small} small ones")
        return {"files": sum(len(v) for v in recorded["outputs"].values()), "identical": same}
    for domain, found in naive["found"].items():
        pairs = [(key, recorded["graph"][domain][key]) for key in ("values_kept", "eligible_users")]
        for key, value in pairs:
            if found[key] != value:
                raise RuntimeError(
                    f"{family} {domain}: the naive pass finds {key} {found[key]}, the build {value}"
                )
    return {}


def _range(values: list[float], fmt: str = "{:.1f}") -> str:
    low, high = min(values), max(values)
    return fmt.format(low) if fmt.format(low) == fmt.format(high) else f"{fmt.format(low)}-{fmt.format(high)}"


def table(total: int, threads: int, runs: dict[str, dict[str, list[dict]]], flat: list[dict]) -> str:
    families = [f for f in FAMILIES if runs[f]["build"]]
    rounds = len(runs[families[0]]["build"])
    lines = [
        f"`benchmarks/family_build_bench.py --total {total} --repeat {rounds} --threads {threads} "
        f"--families {','.join(families)}"
        + (f" --flat {flat[0]['total']}`" if flat else "`")
        + f" ({platform.python_version()}, {platform.machine()}; 2 CPU cores shared with other work: ranges "
        "over the rounds, build and naive pass alternating in each round under the same load; fresh builds, "
        "no stage files; peak RSS of the whole process tree). Synthetic data: four domains of "
        f"{total // 4:,} reviews (`perrecbench synth`). The naive passes find the same counts (checked).",
        "",
        "| family | run | wall s | CPU s | peak RSS MB |",
        "|---|---|---|---|---|",
    ]
    for family in families:
        for kind in ("build", "naive"):
            rs = runs[family][kind]
            name = f"`build --task {family} --threads {threads}`" if kind == "build" else "naive pandas pass"
            lines.append(
                f"| {family} | {name} | {_range([r['wall'] for r in rs])} | {_range([r['cpu'] for r in rs])} "
                f"| {_range([r['peak_rss'] / 2**20 for r in rs], '{:,.0f}')} |"
            )
    lines.append("")
    for family in families:
        pairs = list(zip(runs[family]["build"], runs[family]["naive"], strict=True))
        wall = _range([b["wall"] / n["wall"] for b, n in pairs], "{:.2f}")
        peak = _range([b["peak_rss"] / n["peak_rss"] for b, n in pairs], "{:.2f}")
        lines.append(f"- {family}: build / naive pass in each round: wall {wall}×, peak RSS {peak}×.")
    for family in families:
        rs = runs[family]["build"]
        if family == "llmrec" and rs:
            rows = sum(n for splits in rs[0]["manifest"]["counts"].values() for n in splits.values())
            lines.append(f"- llmrec on {total:,} reviews: {rows:,} rows written.")
    for run in flat:
        lines.append(
            f"- llmrec on {run['total']:,} reviews ({run['total'] / total:.2g}× the data, one build): "
            f"{run['wall']:.1f} s wall, {run['cpu']:.1f} s CPU, peak RSS {run['peak_rss'] / 2**20:,.0f} MB; "
            f"{run['rows']:,} rows written."
        )
    lines += [
        "",
        "Build stages, seconds (summed over domains; plan and write are the family's Python steps):",
        "",
    ]
    for family in families:
        rs = runs[family]["build"]
        names = list(rs[0]["stages"])
        cells = ", ".join(f"{n} {_range([r['stages'].get(n, 0.0) for r in rs])}" for n in names)
        lines.append(f"- {family}: {cells}.")
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--run-build":
        run_build(sys.argv[2], sys.argv[4:])
        return
    if len(sys.argv) > 2 and sys.argv[1] == "--naive":
        family, source, out = sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
        print(json.dumps(naive_llmrec(source, out) if family == "llmrec" else naive_recbench(source)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", type=int, default=2_000_000, help="reviews over the four domains")
    parser.add_argument("--repeat", type=int, default=2, help="rounds (rotating order)")
    parser.add_argument("--threads", type=int, default=2, help="DuckDB threads of the builds")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()), help="where data goes")
    parser.add_argument("--raw", type=Path, help="existing synth output to reuse (not deleted)")
    parser.add_argument("--families", default=",".join(FAMILIES), help="the families to measure")
    parser.add_argument(
        "--flat", type=int, default=0, help="then build LLMRec once on this many reviews (memory flat?)"
    )
    parser.add_argument("--write", action="store_true", help=f"replace '{SECTION}' in RESULTS.md")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    work = Path(tempfile.mkdtemp(prefix="family_build_bench-", dir=args.work))
    try:
        raw = args.raw or work / "raw"
        if args.raw is None:
            subprocess.run(
                [sys.executable, "-m", "perrec_eval.cli", "synth", "--out", str(raw), "--no-progress",
                 "--reviews-per-domain", str(args.total // 4)],
                check=True, capture_output=True, cwd=REPO,
            )  # fmt: skip
        families = [f for f in FAMILIES if f in args.families.split(",")]
        runs: dict[str, dict[str, list[dict]]] = {f: {"build": [], "naive": []} for f in FAMILIES}
        for round_ in range(args.repeat):
            for family in families:
                order = ("build", "naive") if round_ % 2 == 0 else ("naive", "build")
                for kind in order:
                    if kind == "build":
                        run = build_run(family, raw, work / f"out-{family}", args.threads)
                    else:
                        run = naive_run(family, raw, work / f"naive-{family}")
                    runs[family][kind].append(run)
                    if kind == "build":  # content-hashed names: equal names, equal bytes
                        logger.info("%s outputs: %s", family, json.dumps(run["manifest"]["outputs"]))
                    logger.info("%s %s: %.1f s, %.0f MB", family, kind, run["wall"], run["peak_rss"] / 2**20)
                same = check(family, runs[family]["build"][-1], runs[family]["naive"][-1])
                if same:
                    logger.info("%s: %d of %d files byte-identical to the naive pass's", family,
                                same["identical"], same["files"])  # fmt: skip
        flat = []
        if args.flat:
            shutil.rmtree(raw if args.raw is None else work / "none", ignore_errors=True)
            other = work / "raw-flat"
            subprocess.run(
                [sys.executable, "-m", "perrec_eval.cli", "synth", "--out", str(other), "--no-progress",
                 "--reviews-per-domain", str(args.flat // 4)],
                check=True, capture_output=True, cwd=REPO,
            )  # fmt: skip
            run = build_run("llmrec", other, work / "out-flat", args.threads)
            rows = sum(n for splits in run["manifest"]["counts"].values() for n in splits.values())
            flat.append({**run, "total": args.flat, "rows": rows})
            logger.info(
                "llmrec on %d reviews: %.1f s, %.0f MB", args.flat, run["wall"], run["peak_rss"] / 2**20
            )
        body = table(args.total, args.threads, runs, flat)
        print(body)
        if args.write:
            write_section(body, SECTION)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
