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
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_bench import naive_reviews, run_measured, stage_seconds, with_moments  # noqa: E402
from metric_bench import write_section  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SECTION = "## Family builders"
FAMILIES = ("perrecbench", "llmrec", "recbench-plus")
SHAPES = ("dense", "long", "amazon")
# The long-history shape: the dense model with heavy users (users up to 1,500 reviews, a mean of ~15).
LONG = {"user_pareto_shape": 1.5, "user_pareto_scale": 8.0, "user_max_reviews": 1500}
DOMAINS = ("Books", "Clothing_Shoes_and_Jewelry", "Home_and_Kitchen", "Electronics")
# The Python parts of each family's plan and write steps, timed by --run-build: (module, function).
PARTS = {
    "perrecbench": (),
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


def _content_named(out: Path, name: str, table) -> str:
    """Write `table` as ``<name>-<sha12>.parquet`` under `out` (the builds' naming); return its path."""
    import hashlib
    import io

    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(table, sink)
    data = sink.getvalue()
    path = f"{name}-{hashlib.sha256(data).hexdigest()[:12]}.parquet"
    (out / path).parent.mkdir(parents=True, exist_ok=True)
    (out / path).write_bytes(data)
    return path


def naive_perrecbench(source: Path, out: Path, domains: tuple[str, ...] = DOMAINS) -> dict:
    """`build` (paper preset, its defaults) done the obvious way, in memory: each domain's reviews and
    metadata read whole with pandas, duplicates dropped, the running averages strictly before each review,
    the candidates of every titled item drawn by the builder's own `groups.find_group` (with its per-item
    random stream: the same groups), then every chosen user's history (every earlier review, oldest first,
    with its item's title and author) as Python records, and the groups written as one parquet file. No
    twins, split, levels or statistics: the build does those on top. Returns the groups and history rows."""
    import pyarrow as pa

    from dataset_builder.perrecbench.config import BuildConfig
    from dataset_builder.perrecbench.groups import Candidate, find_group, item_rng

    cfg = BuildConfig(source=str(source), out=out / "unused")
    rows: list[dict] = []
    found: dict[str, int] = {}
    for domain in domains:
        reviews = with_moments(naive_reviews(source, domain))
        meta = _meta(source, domain)
        meta["author_name"] = meta["author"].map(lambda a: a.get("name") if isinstance(a, dict) else a) if (
            "author" in meta) else None  # fmt: skip
        for column in ("title", "author_name"):  # missing: None, not NaN (a text column)
            meta[column] = meta[column].astype(object).where(meta[column].notna(), None)
        info = meta.set_index("parent_asin")
        cand = reviews[reviews.n_before > cfg.min_history].copy()
        cand["avg"] = cand.s_before / cand.n_before
        cand["rel"] = cand.rating - cand["avg"]
        titled = info.index[info.title.fillna("").str.strip() != ""]
        cand = cand[cand.parent_asin.isin(titled)].sort_values(["parent_asin", "timestamp", "user_id"])
        by_user = {
            user: group for user, group in reviews.sort_values(["user_id", "timestamp", "parent_asin"])
            .merge(meta[["parent_asin", "title", "author_name"]], on="parent_asin", how="left", sort=False)
            .groupby("user_id", sort=False)
        }  # fmt: skip
        found[domain] = 0
        for item, group in cand.groupby("parent_asin", sort=True):
            if len(group) < cfg.group_size:
                continue
            cands = [
                Candidate(r, t, u) for r, t, u in zip(group.rel, group.timestamp, group.user_id, strict=True)
            ]
            rng = item_rng(cfg.seed, domain, item)
            choice = find_group(
                cands, window_ms=cfg.window_ms, min_gap=cfg.min_gap, group_size=cfg.group_size, rng=rng
            )
            if choice is None:
                continue
            found[domain] += 1
            users = []
            for member in choice.members:
                mine = by_user[member.user_id]
                earlier = mine[mine.timestamp < member.timestamp]
                users.append({
                    "user_id": member.user_id, "timestamp": member.timestamp, "relative_rating": member.rel,
                    "history": [
                        {"parent_asin": a, "title": t if t == t else None, "author": w if w == w else None,
                         "rating": r, "timestamp": ts}
                        for a, t, w, r, ts in zip(earlier.parent_asin, earlier.title, earlier.author_name,
                                                  earlier.rating, earlier.timestamp, strict=True)
                    ],
                })  # fmt: skip
            query = info.loc[item]
            rows.append({"group_id": f"{domain}:{item}", "domain": domain,
                         "query": {"parent_asin": item, "title": query.title, "author": query.author_name},
                         "users": users})  # fmt: skip
        del reviews, meta, info, cand, by_user
    out.mkdir(parents=True, exist_ok=True)
    path = _content_named(out, "full/test", pa.Table.from_pylist(rows))
    history = sum(len(u["history"]) for row in rows for u in row["users"])
    return {"groups": found, "history_rows": history, "file": path}


def naive_recbench_queries(source: Path, out: Path, domains: tuple[str, ...] = DOMAINS) -> dict:
    """`build --task recbench-plus` (its defaults) done the obvious way, in memory: each domain's reviews
    and metadata read whole with pandas, duplicates dropped, the titled reviewed items (the catalogue, by
    id), every item's relation values with `kg.item_facts` (a Python record per item), the graph and the
    queries with the builder's own pure functions (`kg.build_graph`, `queries.candidates`, `choose`,
    `rows_of_user`: the same queries) over every user's history held as a Python list, and every file
    written from Python records. Returns the files (content-named, as the build names them) and counts."""
    import random

    import pyarrow as pa

    from dataset_builder.recbench_plus import kg, queries
    from dataset_builder.recbench_plus.builder import CONFIGS, SPLITS
    from dataset_builder.recbench_plus.config import BuildConfig

    cfg = BuildConfig(source=str(source), out=out / "unused")
    written: dict[str, dict[str, list[dict]]] = {c: {s: [] for s in SPLITS} for c in CONFIGS}
    catalogue_rows: list[dict] = []
    for domain in domains:
        reviews = naive_reviews(source, domain)
        meta = _meta(source, domain)
        meta = meta[meta.title.fillna("").astype(str).str.strip() != ""]
        popularity = reviews.parent_asin.value_counts()
        meta = meta[meta.parent_asin.isin(popularity.index)].sort_values("parent_asin")
        asins = meta.parent_asin.tolist()
        index = {a: i for i, a in enumerate(asins)}
        keys = kg.detail_keys(domain, cfg.details_keys)
        records = meta.to_dict("records")

        def name(author):
            return (
                author.get("name")
                if isinstance(author, dict)
                else author
                if isinstance(author, str)
                else None
            )

        facts = [
            kg.item_facts(name(r.get("author")), r.get("store") if isinstance(r.get("store"), str) else None,
                          r.get("categories") if isinstance(r.get("categories"), list) else None,
                          r.get("details") if isinstance(r.get("details"), dict) else None, keys)
            for r in records
        ]  # fmt: skip
        graph = kg.build_graph(facts, min_items=cfg.min_items, max_share=cfg.max_share)
        items = [
            queries.Item(a, str(r["title"]).strip(), int(popularity[a]))
            for a, r in zip(asins, records, strict=True)
        ]
        catalogue = queries.Catalogue.of(graph, items)
        history = reviews[reviews.parent_asin.isin(index)].sort_values(
            ["user_id", "timestamp", "parent_asin"]
        )
        histories: dict[str, list[int]] = {}
        for user, asin in zip(history.user_id, history.parent_asin, strict=True):
            histories.setdefault(user, []).append(index[asin])
        rng = random.Random(f"{cfg.seed}-{domain}")
        eligible = [u for u in sorted(histories) if len(histories[u]) >= cfg.min_history]
        rng.shuffle(eligible)
        counts: dict[str, int] = {}
        wanted, users = {"test": cfg.users, "train": cfg.train_users}, {"test": 0, "train": 0}
        for user in eligible:
            split = "test" if users["test"] < wanted["test"] else "train"
            if users[split] >= wanted[split]:
                break
            found = queries.candidates(
                histories[user], graph, min_subset=cfg.min_subset, max_subset=cfg.max_subset
            )
            chosen = queries.choose(found, cfg.queries_per_user, rng)
            if not chosen:
                continue
            users[split] += 1
            made = queries.rows_of_user(user, histories[user], chosen, catalogue, domain, counts)
            for config in queries.TYPES:
                written[config][split] += made[config]
        catalogue_rows += [
            {"parent_asin": a, "title": i.title, "domain": domain, "popularity": i.popularity,
             "relations": [f.to_json() for f in graph.item_facts(n)]}
            for n, (a, i) in enumerate(zip(asins, items, strict=True))
        ]  # fmt: skip
        del reviews, meta, records, facts, history, histories
    out.mkdir(parents=True, exist_ok=True)
    files = {
        config: {split: _content_named(out, f"{config}/{split}", pa.Table.from_pylist(rows))
                 for split, rows in by_split.items() if rows}
        for config, by_split in written.items()
    }  # fmt: skip
    files["catalogue"] = {
        "items": _content_named(out, "catalogue/items", pa.Table.from_pylist(catalogue_rows))
    }
    return {"files": {c: f for c, f in files.items() if f}}


def synth_long(out: Path, per_domain: int) -> None:
    """The long-history shape: `perrecbench synth`'s dense model with the heavy users of :data:`LONG`."""
    import dataclasses

    from dataset_builder.synth import model, writer

    model.generate = functools.partial(model.generate, signal=dataclasses.replace(model.SIGNAL, **LONG))
    writer.write_synthetic(out, reviews_per_domain=per_domain, seed=7)


def synth(raw: Path, shape: str, total: int) -> None:
    """Synthetic raw data of `total` reviews over the four domains in one of :data:`SHAPES`."""
    if shape == "long":
        command = [sys.executable, __file__, "--synth-long", str(raw), str(total // 4)]
    else:
        kind = "amazon" if shape == "amazon" else "dense"
        command = [sys.executable, "-m", "perrec_eval.cli", "synth", "--out", str(raw), "--no-progress",
                   "--reviews-per-domain", str(total // 4), "--shape", kind]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, cwd=REPO)


def build_run(family: str, raw: Path, out: Path, threads: int) -> dict:
    shutil.rmtree(out.with_name(out.name + ".stages"), ignore_errors=True)
    command = [sys.executable, __file__, "--run-build", family, "--", "--source", str(raw), "--out", str(out)]
    command += ["--overwrite", "--no-progress", "--threads", str(threads)]
    wall, peak, _, log, cpu = run_measured(command, cwd=REPO)
    recorded = json.loads((out / "manifest.json").read_text())
    return {"wall": wall, "cpu": cpu, "peak_rss": peak, "stages": stage_seconds(log), "manifest": recorded,
            "load": os.getloadavg()[0]}  # fmt: skip


def naive_run(family: str, raw: Path, out: Path) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, __file__, "--naive", family, str(raw), str(out)]
    wall, peak, found, _, cpu = run_measured(command, cwd=REPO)
    shutil.rmtree(out, ignore_errors=True)
    return {
        "wall": wall,
        "cpu": cpu,
        "peak_rss": peak,
        "found": json.loads(found),
        "load": os.getloadavg()[0],
    }


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
    if family == "perrecbench":
        built = {d: f["items_with_group"] for d, f in recorded["selection"].items()}
        if naive["found"]["groups"] != built:
            raise RuntimeError(f"perrecbench: naive groups {naive['found']['groups']} != the build's {built}")
        return {}
    if naive["found"]["files"] != recorded["outputs"]:
        raise RuntimeError(f"recbench-plus: naive files {naive['found']['files']} != {recorded['outputs']}")
    files = sum(len(v) for v in recorded["outputs"].values())
    return {"files": files, "identical": files}


def _range(values: list[float], fmt: str = "{:.1f}") -> str:
    low, high = min(values), max(values)
    return fmt.format(low) if fmt.format(low) == fmt.format(high) else f"{fmt.format(low)}-{fmt.format(high)}"


def table(
    total: int, threads: int, runs: dict[str, dict[str, list[dict]]], flat: list[dict], shape: str = "dense"
) -> str:
    families = [f for f in FAMILIES if runs[f]["build"]]
    rounds = len(runs[families[0]]["build"])
    lines = [
        f"`benchmarks/family_build_bench.py --total {total} --repeat {rounds} --threads {threads} "
        f"--families {','.join(families)} --shape {shape}"
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
    loads = [r["load"] for f in families for kind in ("build", "naive") for r in runs[f][kind]]
    lines += ["", f"Load average (1 min) at the end of each run: {min(loads):.1f}–{max(loads):.1f}.", ""]
    for family in families:
        pairs = list(zip(runs[family]["build"], runs[family]["naive"], strict=True))
        wall = ", ".join(f"{b['wall'] / n['wall']:.2f}" for b, n in pairs)
        cpu = ", ".join(f"{b['cpu'] / n['cpu']:.2f}" for b, n in pairs)
        peak = _range([b["peak_rss"] / n["peak_rss"] for b, n in pairs], "{:.2f}")
        lines.append(
            f"- {family}: build / naive pass in each round: wall {wall}×; CPU {cpu}×; peak RSS {peak}×."
        )
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
        passes = {
            "perrecbench": naive_perrecbench,
            "llmrec": naive_llmrec,
            "recbench-plus": naive_recbench_queries,
        }
        print(json.dumps(passes[family](source, out)))
        return
    if len(sys.argv) > 2 and sys.argv[1] == "--synth-long":
        synth_long(Path(sys.argv[2]), int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", type=int, default=2_000_000, help="reviews over the four domains")
    parser.add_argument("--repeat", type=int, default=2, help="rounds (rotating order)")
    parser.add_argument("--threads", type=int, default=2, help="DuckDB threads of the builds")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()), help="where data goes")
    parser.add_argument("--raw", type=Path, help="existing synth output to reuse (not deleted)")
    parser.add_argument("--families", default=",".join(FAMILIES), help="the families to measure")
    parser.add_argument("--shape", default="dense", choices=SHAPES, help="the synthetic data's shape")
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
            synth(raw, args.shape, args.total)
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
        body = table(args.total, args.threads, runs, flat, args.shape)
        print(body)
        if args.write:
            write_section(body, SECTION)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
