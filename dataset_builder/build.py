"""``perrecbench build``: raw Amazon Reviews 2023 files → the benchmark folder (parquet + card + stats).

Per domain, :mod:`dataset_builder.selection` selects the groups (DuckDB + a small Python search that draws
each item's group uniformly, seeded) and :mod:`dataset_builder.assembly` writes them with their histories;
the result is kept as a stage keyed by the **content hashes** of the input files and the selection
parameters, so a second run on unchanged inputs skips finished domains (and a file rewritten in place, even
with its size and mtime restored, is selected again). Then :mod:`dataset_builder.splits` draws the test
split (stratified by domain) and applies the train rule, the levels are drawn, and everything is written to
a temp folder next to ``out`` that is renamed into place when complete. With ``--preset large`` the stage
already holds each level's own groups (:func:`dataset_builder.selection.item_groups`); the split is drawn per
level (:func:`split_levels`) and :func:`large_level_tables` replaces the level draw.

Output: each group's nested row is assembled once, into its domain's stage file (uncompressed Arrow IPC:
no encoding to write or decode to read). The stage files are read once, in Arrow batches of
``_WRITE_BATCH`` groups; each batch is cut into the levels with Arrow ``take`` and handed to a thread pool
that encodes the eight config × split files (zstd parquet in row groups of 256 groups: the only compression
of the build) and counts the statistics on the same ``full`` rows
(:class:`dataset_builder.stats.SplitFigures`), so no written file is read back.

Memory: group rows never become Python objects. What Python holds per group is its index row (id, user ids
and times, window summary: a few hundred bytes) and, for the statistics, its users' ids; histories stay in
Arrow buffers (two batches at a time).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import random
import shutil
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataset_builder import stats as stats_mod
from dataset_builder.assembly import RowGroupWriter, read_stage
from dataset_builder.card import build_card
from dataset_builder.config import ALL_DOMAINS, SYNTH_MARKER, BuildConfig, BuildError, portable_name
from dataset_builder.interactions import write_interactions
from dataset_builder.schema import ARROW_SCHEMA, CONFIGS
from dataset_builder.selection import INDEX_SCHEMA, STAGES, DomainResult, run_domain
from dataset_builder.sources import InputFile, Source
from dataset_builder.splits import GroupMembers, Split, split_groups
from perrec_eval.fileio import (
    atomic_open,
    pid_alive,
    read_json,
    remove_stale,
    swap_in,
    write_json,
    write_text,
)

logger = logging.getLogger(__name__)

# Bump when the stage content changes for the same inputs and parameters (invalidates old stage files).
STAGE_VERSION = 6
_WRITE_BATCH = 256  # groups per Arrow batch when deriving the levels
_PACKAGES = ("perrecbench", "duckdb", "datasets", "pyarrow", "huggingface_hub", "fsspec")


@dataclass(frozen=True, slots=True)
class DomainInputs:
    """A domain's two raw files and what its stage is keyed on."""

    domain: str
    reviews: InputFile
    meta: InputFile

    def selection(self, cfg: BuildConfig) -> dict[str, Any]:
        """What a stage depends on besides the files' bytes (a cheap pre-check before hashing finishes)."""
        selection = {
            "version": STAGE_VERSION,
            "params": cfg.selection_params(),
            "files": [[portable_name(f.uri), f.size] for f in (self.reviews, self.meta)],
        }
        if cfg.with_interactions:  # only then: stages of builds without it keep their keys
            selection["interactions"] = True
        return selection

    def stage_key(self, cfg: BuildConfig, content_hashes: list[str]) -> str:
        """The stage's name: the selection plus the content hashes of the two files."""
        payload = {**self.selection(cfg), "hashes": content_hashes}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def build(config: BuildConfig) -> Path:
    """Build the benchmark folder.

    Args:
        config: the validated parameters.

    Returns:
        The output folder (``config.out``), complete.

    Raises:
        BuildError: bad input (file, line and fix in the message), an existing output without
            ``overwrite``, or no group found.
    """
    out = config.out
    check_out(config)
    source = Source.open(config.source)
    config = resolve_domains(config, source)
    inputs = [DomainInputs(d, source.find(d, "reviews"), source.find(d, "meta")) for d in config.domains]
    results = {item.domain: _domain(source, item, config) for item in inputs}

    funnel = {d: r["funnel"] for d, r in results.items()}
    split_started = time.perf_counter()
    index = _group_index(results, config.domains)
    if not index.num_rows:
        raise BuildError(
            "no valid group found. Candidates kept by each criterion:\n"
            + stats_mod.funnel_message(funnel)
            + "\nUse more input, or relax --min-history, --window-days or --min-gap."
        )
    level_splits = split_levels(index, config, funnel)
    split = merge_splits(level_splits)
    if split.dropped:
        total = len(split.dropped) + len(split.train)
        logger.info(
            "--split-rule %s dropped %d of %d train groups", config.split_rule, len(split.dropped), total
        )
    _took("split", split_started)
    kind = source_kind(source, results)
    remove_stale(out)  # the .NAME.tmp-PID / .old-PID folders of builds that were killed
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        _write(tmp, config, level_splits, results, funnel, inputs, index, kind)
        swap_in(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    logger.info("wrote %s", out)
    if config.push_to_hub:
        push_to_hub(out, config.push_to_hub, synthetic=kind["source_kind"] != "raw")
    return out


def check_out(config: BuildConfig) -> None:
    """Refuse an ``--out`` whose replacement would delete something that is not an earlier build.

    ``--overwrite`` replaces the whole folder, so ``--out`` may neither be nor contain a local ``--source``,
    and an existing non-empty ``--out`` must be a perrecbench build (its ``manifest.json`` says so).

    Raises:
        BuildError: an existing ``--out`` without ``--overwrite``, an ``--out`` holding the source, or a
            folder that is not a build.
    """
    out = config.out
    if not config.source.startswith("hf://"):
        source = Path(config.source).expanduser().resolve()
        target = out.expanduser().resolve()
        if target == source or target in source.parents:
            relation = "is" if target == source else "contains"
            raise BuildError(
                f"--out {out} {relation} --source {config.source}, which the build would delete; "
                "choose an --out outside the source folder"
            )
    if not out.exists():
        return
    if not is_build(out):
        raise BuildError(
            f"--out {out} is a non-empty folder that is not a perrecbench build (no build manifest.json); "
            "--overwrite replaces only an earlier build: choose another --out"
        )
    if not config.overwrite:
        raise BuildError(f"{out} already exists; pass --overwrite to replace it or choose another --out")


def is_build(folder: Path) -> bool:
    """Whether `folder` is empty or holds a perrecbench build (a ``manifest.json`` with its keys)."""
    if not folder.is_dir():
        return False
    if not any(folder.iterdir()):
        return True
    try:
        manifest = read_json(folder / "manifest.json")
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and {"parameters", "outputs", "versions"} <= manifest.keys()


def resolve_domains(config: BuildConfig, source: Source) -> BuildConfig:
    """``--domains all`` → every Amazon Reviews 2023 category with a review file in the source."""
    if config.domains != (ALL_DOMAINS,):
        return config
    present = source.categories()
    if not present:
        shown = ", ".join(source.listing()[:8])
        raise BuildError(
            f"--domains all: {config.source} holds no review file of an Amazon Reviews 2023 category "
            f"(found: {shown}); name the files <Category>.jsonl[.gz] with a category of the release"
        )
    return replace(config, domains=tuple(present))


def source_kind(source: Source, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Whether the inputs were written by ``perrecbench synth``: their content hashes against its marker.

    Returns:
        ``{"source_kind": "synthetic" | "mixed" | "raw", "synthetic_files": [names]}``; ``raw`` means that no
        input matches the marker (the files did not come from ``perrecbench synth``).
    """
    marker = source.synth_marker() or {}
    made = {"sha256:" + entry["sha256"] for entry in marker.get("files", {}).values()}
    files = [entry for result in results.values() for entry in result["files"]]
    synthetic = [entry["file"] for entry in files if entry["hash"] in made]
    if marker and not synthetic:
        logger.warning(
            "%s is present but matches none of the input files: not a synthetic build", SYNTH_MARKER
        )
    kind = "raw" if not synthetic else "synthetic" if len(synthetic) == len(files) else "mixed"
    return {"source_kind": kind, "synthetic_files": synthetic}


# --------------------------------------------------------------------------------------------- stages


def _domain(source: Source, item: DomainInputs, cfg: BuildConfig) -> dict[str, Any]:
    """The domain's groups and accounting, from its stage when the inputs' bytes are unchanged.

    The content hashes are computed in a thread. When a stage with the same parameters and file sizes
    exists, the build waits for them to decide whether it can be reused; otherwise the selection runs while
    they are computed (hashlib releases the GIL) and the new stage is keyed by them.
    """
    stage_dir = cfg.stage_root / item.domain
    with ThreadPoolExecutor(max_workers=1) as pool:
        futures = [pool.submit(source.content_hash, f) for f in (item.reviews, item.meta)]
        if any(read_json(p).get("selection") == item.selection(cfg) for p in stage_dir.glob("*.json")):
            key = item.stage_key(cfg, [f.result() for f in futures])
            if (stage_dir / f"{key}.json").exists():
                logger.info("%s: inputs unchanged since the last run, reusing stage %s", item.domain, key)
                return _load_stage(stage_dir, key)
            logger.info(
                "%s: an input changed since the last run (content hash), selecting again", item.domain
            )
        info = _select(source, item, cfg, stage_dir, futures)
    return _load_stage(stage_dir, info["key"])


def _select(
    source: Source, item: DomainInputs, cfg: BuildConfig, stage_dir: Path, hashes: list[Future[str]]
) -> dict[str, Any]:
    """Run the domain's selection into a work folder and save it as a stage; return the stage's JSON."""
    from tqdm.auto import tqdm

    for stale in stage_dir.glob("work-*"):  # the work folders of builds that were killed
        pid = stale.name.removeprefix("work-")
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    work = stage_dir / f"work-{os.getpid()}"
    bar = tqdm(total=len(STAGES), desc=item.domain, unit="stage", disable=not cfg.progress)
    started: list[tuple[str, float]] = []

    def tick(stage: str) -> None:
        now = time.perf_counter()
        if started:
            bar.update(1)
            _took(f"{item.domain}: {started[-1][0]}", started[-1][1], now)
        started.append((stage, now))
        bar.set_postfix_str(stage)

    try:
        groups_tmp, index_tmp = work / "groups.arrow", work / "index.parquet"
        interactions_tmp = work / "interactions.parquet" if cfg.with_interactions else None
        result: DomainResult = run_domain(
            source,
            item.reviews,
            item.meta,
            cfg,
            work,
            groups_tmp,
            index_tmp,
            tick=tick,
            interactions_file=interactions_tmp,
        )
        tick("done")
        content = [h.result() for h in hashes]
        key = item.stage_key(cfg, content)
        info = {
            "domain": item.domain,
            "key": key,
            "selection": item.selection(cfg),
            "funnel": result.funnel,
            "bad_lines": result.bad_lines,
            "files": [_file_entry(f, h) for f, h in zip((item.reviews, item.meta), content, strict=True)],
            "groups": result.groups,
        }
        _save_stage(stage_dir, key, groups_tmp, index_tmp, info, interactions_tmp)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        bar.update(bar.total - bar.n)
        bar.close()
    return info


def _load_stage(stage_dir: Path, key: str) -> dict[str, Any]:
    info = read_json(stage_dir / f"{key}.json")
    info["groups_path"] = stage_dir / f"{key}.arrow"
    info["index_path"] = stage_dir / f"{key}.index.parquet"
    info["interactions_path"] = stage_dir / f"{key}.interactions.parquet"
    return info


def _group_index(results: dict[str, dict[str, Any]], domains: tuple[str, ...]) -> pa.Table:
    """Every domain's index rows (:data:`selection.INDEX_SCHEMA`), one table in ``group_id`` order."""
    tables = [pq.read_table(results[d]["index_path"]) for d in domains if results[d]["groups"]]
    if not tables:
        return INDEX_SCHEMA.empty_table()
    return pa.concat_tables(tables).sort_by("group_id")


def split_levels(index: pa.Table, cfg: BuildConfig, funnel: dict[str, dict[str, int]]) -> dict[str, Split]:
    """The split of each group set: ``{"full": split}`` for the paper preset (levels share its groups), or
    one split per level for the large preset (:mod:`dataset_builder.splits`)."""
    if cfg.preset == "paper":
        sets = {"full": index}
    else:
        sets = {level: index.filter(pc.equal(index["level"], level)) for level in cfg.level_sizes()}
    out = {}
    for name, rows in sets.items():
        if cfg.train_fraction is None and rows.num_rows < cfg.test_groups:
            logger.warning(
                "only %d %sgroups (< --test-groups %d): all go to test, no train split. Funnel:\n%s",
                rows.num_rows,
                "" if name == "full" else f"{name} ",
                cfg.test_groups,
                stats_mod.funnel_message(funnel),
            )
        out[name] = split_groups(
            group_members(rows),
            cfg.test_groups,
            cfg.seed,
            cfg.split_rule,
            cfg.avg_scope,
            train_fraction=cfg.train_fraction,
            salt="" if name == "full" else name,
        )
    return out


def merge_splits(splits: dict[str, Split]) -> Split:
    """The union of the levels' splits (group ids are unique across levels)."""
    if len(splits) == 1:
        return next(iter(splits.values()))
    parts = list(splits.values())
    return Split(
        sorted(g for s in parts for g in s.test),
        sorted(g for s in parts for g in s.train),
        sorted(g for s in parts for g in s.dropped),
    )


def group_members(index: pa.Table) -> list[GroupMembers]:
    """The split's view of each group: id, domain, and (user, query time) pairs."""
    columns = index.select(["group_id", "domain", "user_ids", "timestamps"]).to_pydict()
    return [
        GroupMembers(gid, domain, tuple(zip(users, times, strict=True)))
        for gid, domain, users, times in zip(*columns.values(), strict=True)
    ]


def _file_entry(file: InputFile, content_hash: str) -> dict[str, Any]:
    return {
        "domain": file.domain,
        "kind": file.kind,
        "file": portable_name(file.uri),
        "size": file.size,
        "hash": content_hash,
    }


def _save_stage(
    stage_dir: Path,
    key: str,
    groups: Path,
    index: Path,
    info: dict[str, Any],
    interactions: Path | None = None,
) -> None:
    """Move the groups, index (and interactions) files in, then write the JSON (the completion marker); drop
    older stages."""
    stage_dir.mkdir(parents=True, exist_ok=True)
    for old in stage_dir.glob("*.json"):
        old.unlink()
    for pattern in ("*.arrow", "*.parquet"):
        for old in stage_dir.glob(pattern):
            old.unlink()
    if info["groups"]:
        groups.replace(stage_dir / f"{key}.arrow")
        index.replace(stage_dir / f"{key}.index.parquet")
    else:  # no group: empty files with the schemas, so every stage has its files
        with atomic_open(stage_dir / f"{key}.arrow", "wb") as handle, pa.ipc.new_file(handle, ARROW_SCHEMA):
            pass
        with atomic_open(stage_dir / f"{key}.index.parquet", "wb") as handle:
            pq.write_table(INDEX_SCHEMA.empty_table(), handle)
    if interactions is not None:
        interactions.replace(stage_dir / f"{key}.interactions.parquet")
    write_json(stage_dir / f"{key}.json", info)


# --------------------------------------------------------------------------------------------- levels


def presentation_order(group_id: str, n_users: int, seed: int) -> list[int]:
    """The seeded permutation of a group's users (indices into its ``full`` users ordered by rating).

    >>> sorted(presentation_order("Books:B1", 5, 0))
    [0, 1, 2, 3, 4]
    """
    order = list(range(n_users))
    random.Random(f"{seed}:{group_id}").shuffle(order)
    return order


def level_rows(group: dict[str, Any], seed: int) -> dict[str, dict[str, Any]]:
    """The group's row for every config: one seeded permutation of its users, each level its first k.

    So easy ⊂ medium ⊂ hard ⊂ full share query items and users, and the order is the presentation order.
    ``full`` holds all the group's users; a level larger than the group (``--group-size`` < 5) is left out.
    (The reference rule for one row; the build applies it to Arrow batches in :func:`level_tables`.)

    >>> g = {"group_id": "g", "users": [{"user_id": str(i)} for i in range(5)]}
    >>> rows = level_rows(g, 0)
    >>> [len(rows[c]["users"]) for c in ("easy", "medium", "hard", "full")]
    [2, 3, 4, 5]
    >>> rows["easy"]["users"] == rows["full"]["users"][:2]
    True
    """
    users = [group["users"][i] for i in presentation_order(group["group_id"], len(group["users"]), seed)]
    sizes = {name: len(users) if name == "full" else size for name, size in CONFIGS.items()}
    return {
        name: {**group, "level": name, "users": users[:k]} for name, k in sizes.items() if k <= len(users)
    }


def level_tables(table: pa.Table, seed: int) -> dict[str, pa.Table]:
    """:func:`level_rows` for a table of ``full`` rows, with Arrow ``take`` (histories are never copied
    into Python objects). Configs with no row are left out.

    >>> users = [[{"user_id": str(i)} for i in range(5)]]
    >>> t = pa.table({"group_id": ["g"], "level": ["full"], "users": users})
    >>> out = level_tables(t, 0)
    >>> [u["user_id"] for u in out["easy"].column("users")[0].as_py()] == [
    ...     u["user_id"] for u in level_rows(t.to_pylist()[0], 0)["easy"]["users"]]
    True
    """
    users = table.column("users").combine_chunks()
    offsets = users.offsets.to_numpy()
    lengths = np.diff(offsets)
    orders = [
        presentation_order(gid, int(n), seed)
        for gid, n in zip(table.column("group_id").to_pylist(), lengths, strict=True)
    ]
    level_index = table.schema.get_field_index("level")
    out = {}
    for name, size in CONFIGS.items():
        keep = [i for i, n in enumerate(lengths) if name == "full" or size <= n]
        if not keep:
            continue
        counts = [int(lengths[i]) if name == "full" else size for i in keep]
        index = np.fromiter(
            (offsets[i] + j for i, k in zip(keep, counts, strict=True) for j in orders[i][:k]), dtype=np.int64
        )
        taken = users.values.take(pa.array(index))
        level_users = pa.ListArray.from_arrays(
            pa.array(np.concatenate([[0], np.cumsum(counts)]), pa.int32()), taken
        )
        part = table.take(pa.array(keep, pa.int64())) if len(keep) < table.num_rows else table
        part = part.set_column(level_index, "level", pa.array([name] * len(keep), pa.string()))
        out[name] = part.set_column(part.schema.get_field_index("users"), "users", level_users)
    return out


def large_level_tables(table: pa.Table, seed: int) -> dict[str, pa.Table]:
    """The large preset's rows by config: each level's own groups, and ``full`` = all of them (level
    ``full``), every group's users in its seeded presentation order (:func:`presentation_order`).

    >>> users = [[{"user_id": str(i)} for i in range(k)] for k in (2, 3)]
    >>> t = pa.table({"group_id": ["g:easy-0", "g:medium-0"], "level": ["easy", "medium"], "users": users})
    >>> out = large_level_tables(t, 0)
    >>> {name: rows.num_rows for name, rows in out.items()}
    {'easy': 1, 'medium': 1, 'full': 2}
    """
    users = table.column("users").combine_chunks()
    offsets = users.offsets.to_numpy()
    lengths = np.diff(offsets)
    index = np.fromiter(
        (
            offsets[i] + j
            for i, (gid, n) in enumerate(zip(table.column("group_id").to_pylist(), lengths, strict=True))
            for j in presentation_order(gid, int(n), seed)
        ),
        dtype=np.int64,
    )
    ordered = pa.ListArray.from_arrays(
        pa.array(np.concatenate([[0], np.cumsum(lengths)]), pa.int32()), users.values.take(pa.array(index))
    )
    permuted = table.set_column(table.schema.get_field_index("users"), "users", ordered)
    out = {}
    for name in CONFIGS:
        if name == "full":
            continue
        part = permuted.filter(pc.equal(permuted["level"], name))
        if part.num_rows:
            out[name] = part
    level_index = table.schema.get_field_index("level")
    out["full"] = permuted.set_column(level_index, "level", pa.array(["full"] * table.num_rows, pa.string()))
    return out


# --------------------------------------------------------------------------------------------- output


def _write(
    folder: Path,
    cfg: BuildConfig,
    level_splits: dict[str, Split],
    results: dict[str, dict[str, Any]],
    funnel: dict[str, dict[str, int]],
    inputs: list[DomainInputs],
    index: pa.Table,
    provenance: dict[str, Any],
) -> None:
    """Write the config × split files, ``stats.json``, the manifest and the card."""
    folder.mkdir(parents=True)
    started = time.perf_counter()
    split = merge_splits(level_splits)
    splits = split.as_dict()
    figures = {label: stats_mod.SplitFigures(cfg.domains) for label in splits}
    # One leak count per split decision: the paper's (on full rows), or each level's own (large).
    leaks = {
        name: stats_mod.LeakCounts(_test_members(index, level_split.test))
        for name, level_split in level_splits.items()
    }
    files = _write_configs(folder, cfg, splits, results, figures, leaks)
    _took("write configs", started)
    interactions = None
    if cfg.with_interactions:
        started = time.perf_counter()
        stages = {d: results[d]["interactions_path"] for d in cfg.domains}
        interactions = write_interactions(folder, cfg, stages, _test_members(index, split.test))
        _took("interactions", started)
    started = time.perf_counter()
    written = index.filter(pc.is_in(index["group_id"], pa.array(split.test + split.train, pa.string())))
    if cfg.preset == "paper":
        split_facts = {**split_counts(split, cfg), "leaks": leaks["full"].result()}
    else:
        split_facts = {
            "rule": cfg.split_rule,
            "levels": {
                name: {**split_counts(s, cfg), "leaks": leaks[name].result()}
                for name, s in level_splits.items()
            },
        }
    stats = stats_mod.compute(
        figures,
        funnel,
        windows={
            name: index.filter(pc.is_in(index["group_id"], pa.array(ids))) for name, ids in splits.items()
        },
        split=split_facts,
    )
    if not cfg.paper_files:
        stats["resolution"] = stats_mod.resolution(index, splits, cfg.level_sizes(), cfg.preset)
        if not cfg.keep_twins:
            stats["twins"] = stats_mod.twin_counts(written, cfg.domains)
    _took("statistics", started)
    started = time.perf_counter()
    write_json(folder / "stats.json", stats)
    info = manifest(cfg, results, inputs, files, split, provenance)
    if interactions is not None:
        info["interactions"] = interactions
    write_json(folder / "manifest.json", info)
    card = build_card(
        cfg,
        files,
        stats,
        builder=f"perrecbench {_version('perrecbench')}",
        source_kind=provenance["source_kind"],
        interactions=interactions,
    )
    write_text(folder / "README.md", card)
    _took("card", started)


def _write_configs(
    folder: Path,
    cfg: BuildConfig,
    splits: dict[str, list[str]],
    results: dict[str, dict[str, Any]],
    figures: dict[str, stats_mod.SplitFigures],
    leaks: dict[str, stats_mod.LeakCounts],
) -> dict[str, dict[str, str]]:
    """Stream every domain's stage file once, in ``group_id`` order, into the config × split files (groups
    the split rule dropped are not written); the statistics count the same ``full`` rows on the way.

    Each batch's rows are read and cut into levels once; a thread pool encodes and compresses the eight
    files and counts the statistics (pyarrow releases the GIL) while this thread prepares the next batch.
    Every writer (and the statistics) gets one task per batch and a batch is handed out only when the
    previous one is done, so each file receives its rows in order and the bytes do not depend on the
    scheduling.

    Returns:
        ``{config: {split: path relative to folder}}`` of the files written.
    """
    split_of = {gid: name for name, ids in splits.items() for gid in ids}
    # Rows are ordered by group_id = "<domain>:<item>": domains by that prefix, items within the stage file.
    domains = sorted(cfg.domains, key=lambda d: f"{d}:")
    workers = min(len(splits) * len(CONFIGS), cfg.threads or os.cpu_count() or 1)
    with (
        contextlib.ExitStack() as files_open,
        _bar(cfg, sum(results[d]["groups"] for d in domains), "  write configs") as bar,
    ):
        writers = {
            (name, label): files_open.enter_context(RowGroupWriter(folder / f".{name}-{label}.parquet"))
            for label in splits
            for name in CONFIGS
        }
        # Entered last, so it is shut down (its writes finished) before the files are closed or dropped.
        pool = files_open.enter_context(ThreadPoolExecutor(max_workers=workers))
        writing: list[Future[None]] = []
        for domain in domains:
            if not results[domain]["groups"]:
                continue
            for table in read_stage(results[domain]["groups_path"], _WRITE_BATCH):
                labels = pa.array(
                    [split_of.get(g) for g in table.column("group_id").to_pylist()], pa.string()
                )
                parts: dict[str, dict[str, pa.Table]] = {}
                cut = level_tables if cfg.preset == "paper" else large_level_tables
                for label in splits:
                    part = table.filter(pc.equal(labels, label))
                    if part.num_rows:
                        parts[label] = cut(part, cfg.seed)
                for done in writing:
                    done.result()
                writing = [
                    pool.submit(writers[(name, label)].write, rows)
                    for label, levels in parts.items()
                    for name, rows in levels.items()
                ]
                writing.append(pool.submit(_count, parts, figures, leaks))
                bar.update(table.num_rows)
        for done in writing:
            done.result()
    files: dict[str, dict[str, str]] = {name: {} for name in CONFIGS}
    for label in splits:
        for name in CONFIGS:
            writer = writers[(name, label)]
            if not writer.rows:
                continue
            # Content-hashed names: datasets serves a stale cache for a rewritten file name (PITFALLS 1).
            relative = f"{name}/{label}-{_sha256(writer.path)[:12]}.parquet"
            (folder / name).mkdir(exist_ok=True)
            writer.path.replace(folder / relative)
            files[name][label] = relative
    return {name: splits for name, splits in files.items() if splits}


def _count(
    parts: dict[str, dict[str, pa.Table]],
    figures: dict[str, stats_mod.SplitFigures],
    leaks: dict[str, stats_mod.LeakCounts],
) -> None:
    """Feed one batch's ``full`` rows of each split to the statistics, and each leak count its config's."""
    for label, levels in parts.items():
        figures[label].add(levels["full"])
        for name, counts in leaks.items():
            if name in levels:
                counts.add(label, levels[name])


def _test_members(index: pa.Table, test: list[str]) -> list[tuple[str, str, str]]:
    """``(domain, user_id, query item)`` of every member of the ``test`` groups, from the group index."""
    rows = index.filter(pc.is_in(index["group_id"], pa.array(test, pa.string())))
    columns = rows.select(["parent_asin", "domain", "user_ids"]).to_pydict()
    return [
        (domain, user, item) for item, domain, users in zip(*columns.values(), strict=True) for user in users
    ]


def _took(stage: str, started: float, now: float | None = None) -> None:
    """Log a stage's wall time (``benchmarks/build_bench.py`` reads these lines)."""
    now = time.perf_counter() if now is None else now
    logger.info("%s took %.2f s", stage, now - started)


def split_counts(split: Split, cfg: BuildConfig) -> dict[str, Any]:
    """The rule and how many groups each domain has in test, in train and dropped from train."""

    def per_domain(ids: list[str]) -> dict[str, int]:
        counts = Counter(gid.split(":", 1)[0] for gid in ids)
        return {domain: counts[domain] for domain in cfg.domains}

    return {
        "rule": cfg.split_rule,
        "test_groups_per_domain": per_domain(split.test),
        "train_groups_per_domain": per_domain(split.train),
        "train_groups_dropped": len(split.dropped),
        "train_groups_dropped_per_domain": per_domain(split.dropped),
    }


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _bar(cfg: BuildConfig, total: int, desc: str) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="group", leave=False, disable=not cfg.progress)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def manifest(
    cfg: BuildConfig,
    results: dict[str, dict[str, Any]],
    inputs: list[DomainInputs],
    files: dict[str, dict[str, str]],
    split: Split,
    provenance: dict[str, Any],
) -> dict[str, Any]:
    """Parameters, where the inputs come from (synthetic or not), inputs (size + content hash, computed from
    these bytes in this run), skipped lines, per-domain funnel, the train groups the split rule dropped,
    output files, package versions."""
    synthetic = set(provenance["synthetic_files"])
    return {
        "source_kind": provenance["source_kind"],
        "parameters": cfg.as_manifest(),
        "inputs": [
            {**entry, "synthetic": entry["file"] in synthetic}
            for item in inputs
            for entry in results[item.domain]["files"]
        ],
        "bad_lines": {
            "count": sum(b["count"] for r in results.values() for b in r["bad_lines"]),
            "files": [b for item in inputs for b in results[item.domain]["bad_lines"]],
        },
        "selection": {d: r["funnel"] for d, r in results.items()},
        "split": {"rule": cfg.split_rule, "dropped_train_groups": split.dropped},
        "outputs": files,
        "versions": {"python": platform.python_version(), **{p: _version(p) for p in _PACKAGES}},
    }


def push_to_hub(folder: Path, repo_id: str, *, synthetic: bool) -> None:
    """Upload the finished folder as a dataset repo with its ``eval.yaml`` (one task per level and method,
    so the Hub lists models' results against it); stale parquet files of an earlier build are deleted.

    The same upload as `perrecbench push benchmark` (`perrec_eval.publish.benchmark_upload`): checked for
    secrets and local paths first. A build from (partly) synthetic input is uploaded with its card, which says
    so in its title, tags and first paragraph; the log warns too. Needs network and a token (``HF_TOKEN`` or
    ``hf auth login``); not exercised by the offline tests.
    """
    from perrec_eval.publish import benchmark_upload, push

    if synthetic:
        logger.warning(
            "uploading a build from SYNTHETIC data (perrecbench synth) to %s; its card and tags say so",
            repo_id,
        )
    url = push(benchmark_upload(folder, repo_id), dry_run=False)
    logger.info("uploaded %s to %s", folder, url)
