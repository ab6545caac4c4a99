"""``perrecbench build``: raw Amazon Reviews 2023 files → the benchmark folder (parquet + card + stats).

Per domain, :mod:`dataset_builder.selection` selects the 5-user groups (DuckDB + a small Python search) and
:mod:`dataset_builder.assembly` writes them with their histories; the result is kept as a stage file keyed by
the input files' fingerprints and the selection parameters, so a second run on unchanged inputs skips
finished domains. Then the groups are split (seeded), the levels drawn,
and everything is written to a temp folder next to ``out`` that is renamed into place when complete.

Memory: group rows never become Python objects. Stage files are streamed in Arrow batches of
``_WRITE_BATCH`` groups, the levels are cut with Arrow ``take``, each config × split file is written in row
groups of 256 groups, and the statistics are DuckDB queries over the written files. What Python holds per
group is its id (for the seeded split), about 150 bytes.
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
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataset_builder import stats as stats_mod
from dataset_builder.assembly import RowGroupWriter
from dataset_builder.card import build_card
from dataset_builder.config import BuildConfig, BuildError, portable_name
from dataset_builder.schema import CONFIGS, FEATURES
from dataset_builder.selection import STAGES, DomainResult, run_domain
from dataset_builder.sources import InputFile, Source
from perrec_eval.fileio import atomic_open, read_json, write_json, write_text

logger = logging.getLogger(__name__)

# Bump when the stage content changes for the same inputs and parameters (invalidates old stage files).
STAGE_VERSION = 3
_WRITE_BATCH = 256  # groups per Arrow batch when deriving the levels
_PACKAGES = ("perrecbench", "duckdb", "datasets", "pyarrow", "huggingface_hub", "fsspec")


@dataclass(frozen=True, slots=True)
class DomainInputs:
    """A domain's two raw files and what its stage is keyed on."""

    domain: str
    reviews: InputFile
    meta: InputFile

    def stage_key(self, cfg: BuildConfig) -> str:
        payload = {
            "version": STAGE_VERSION,
            "params": cfg.selection_params(),
            "files": [(f.uri, f.size, f.fingerprint) for f in (self.reviews, self.meta)],
        }
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
    if out.exists() and not config.overwrite:
        raise BuildError(f"{out} already exists; pass --overwrite to replace it or choose another --out")
    source = Source.open(config.source)
    inputs = [DomainInputs(d, source.find(d, "reviews"), source.find(d, "meta")) for d in config.domains]
    results = {item.domain: _domain(source, item, config) for item in inputs}

    funnel = {d: r["funnel"] for d, r in results.items()}
    group_ids = [gid for d in config.domains for gid in _group_ids(results[d])]
    if not group_ids:
        raise BuildError(
            "no valid group found. Candidates kept by each criterion:\n"
            + stats_mod.funnel_message(funnel)
            + "\nUse more input, or relax --min-history, --window-days or --min-gap."
        )
    if len(group_ids) < config.test_groups:
        logger.warning(
            "only %d groups (< --test-groups %d): all go to test, no train split. Funnel:\n%s",
            len(group_ids),
            config.test_groups,
            stats_mod.funnel_message(funnel),
        )
    splits = split_groups(group_ids, config.test_groups, config.seed)
    del group_ids
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        _write(tmp, config, splits, results, funnel, inputs)
        _replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    logger.info("wrote %s", out)
    if config.push_to_hub:
        push_to_hub(out, config.push_to_hub)
    return out


# --------------------------------------------------------------------------------------------- stages


def _domain(source: Source, item: DomainInputs, cfg: BuildConfig) -> dict[str, Any]:
    """The domain's groups and accounting, from its stage file when the inputs are unchanged."""
    from tqdm.auto import tqdm

    stage_dir = cfg.stage_root / item.domain
    key = item.stage_key(cfg)
    done = stage_dir / f"{key}.json"
    if done.exists():
        logger.info("%s: inputs unchanged since the last run, reusing %s", item.domain, done)
        info = read_json(done)
        info["groups_path"] = stage_dir / info["groups_file"]
        return info

    work = stage_dir / f"work-{os.getpid()}"
    bar = tqdm(total=len(STAGES), desc=item.domain, unit="stage", disable=not cfg.progress)

    started: list[tuple[str, float]] = []

    def tick(stage: str) -> None:
        now = time.perf_counter()
        if started:
            bar.update(1)
            logger.info("%s: %s took %.1f s", item.domain, started[-1][0], now - started[-1][1])
        started.append((stage, now))
        bar.set_postfix_str(stage)

    with ThreadPoolExecutor(max_workers=1) as pool:
        # Hashing overlaps the DuckDB work (hashlib releases the GIL).
        hashes: list[Future[str]] = [pool.submit(source.content_hash, f) for f in (item.reviews, item.meta)]
        try:
            groups_tmp = work / "groups.parquet"
            result: DomainResult = run_domain(
                source, item.reviews, item.meta, cfg, work, groups_tmp, tick=tick
            )
            tick("done")
            files = [
                _file_entry(f, h.result()) for f, h in zip((item.reviews, item.meta), hashes, strict=True)
            ]
            info = {
                "domain": item.domain,
                "funnel": result.funnel,
                "bad_lines": result.bad_lines,
                "files": files,
                "groups": result.groups,
                "groups_file": f"{key}.parquet",
            }
            _save_stage(stage_dir, key, groups_tmp, info)
        finally:
            shutil.rmtree(work, ignore_errors=True)
            bar.update(bar.total - bar.n)
            bar.close()
    info["groups_path"] = stage_dir / info["groups_file"]
    return info


def _group_ids(info: dict[str, Any]) -> list[str]:
    """The domain's group ids, read from its stage file (one column; no rows are loaded)."""
    if not info["groups"]:
        return []
    return pq.read_table(info["groups_path"], columns=["group_id"]).column(0).to_pylist()


def _file_entry(file: InputFile, content_hash: str) -> dict[str, Any]:
    return {
        "domain": file.domain,
        "kind": file.kind,
        "file": portable_name(file.uri),
        "size": file.size,
        "hash": content_hash,
    }


def _save_stage(stage_dir: Path, key: str, groups: Path, info: dict[str, Any]) -> None:
    """Move the groups parquet in, then write its JSON (the completion marker); drop older stages."""
    stage_dir.mkdir(parents=True, exist_ok=True)
    for old in stage_dir.glob("*.json"):
        old.unlink()
    for old in stage_dir.glob("*.parquet"):
        old.unlink()
    if info["groups"]:
        groups.replace(stage_dir / info["groups_file"])
    else:  # no group: an empty file with the schema, so every stage has its parquet
        with atomic_open(stage_dir / info["groups_file"], "wb") as handle:
            pq.write_table(FEATURES.arrow_schema.empty_table(), handle)
    write_json(stage_dir / f"{key}.json", info)


# --------------------------------------------------------------------------------------------- splits


def split_groups(group_ids: list[str], test_groups: int, seed: int) -> dict[str, list[str]]:
    """Seeded split of the group ids into ``test`` (``test_groups``) and ``train`` (the rest, if any).

    >>> ids = [str(i) for i in range(5)]
    >>> {k: len(v) for k, v in split_groups(ids, 3, 0).items()}
    {'test': 3, 'train': 2}
    >>> list(split_groups(ids, 9, 0))
    ['test']
    """
    ordered = sorted(group_ids)
    random.Random(seed).shuffle(ordered)
    out = {"test": sorted(ordered[:test_groups])}
    if len(ordered) > test_groups:
        out["train"] = sorted(ordered[test_groups:])
    return out


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


# --------------------------------------------------------------------------------------------- output


def _write(
    folder: Path,
    cfg: BuildConfig,
    splits: dict[str, list[str]],
    results: dict[str, dict[str, Any]],
    funnel: dict[str, dict[str, int]],
    inputs: list[DomainInputs],
) -> None:
    """Stream every domain's stage file once, in ``group_id`` order, into the config × split files."""
    folder.mkdir(parents=True)
    started = time.perf_counter()
    split_of = {gid: split for split, ids in splits.items() for gid in ids}
    # Rows are ordered by group_id = "<domain>:<item>": domains by that prefix, items within the stage file.
    domains = sorted(cfg.domains, key=lambda d: f"{d}:")
    with (
        contextlib.ExitStack() as files_open,
        _bar(cfg, sum(results[d]["groups"] for d in domains), "  write configs") as bar,
    ):
        writers = {
            (name, split): files_open.enter_context(RowGroupWriter(folder / f".{name}-{split}.parquet"))
            for split in splits
            for name in CONFIGS
        }
        for domain in domains:
            if not results[domain]["groups"]:
                continue
            for batch in pq.ParquetFile(results[domain]["groups_path"]).iter_batches(_WRITE_BATCH):
                table = pa.Table.from_batches([batch])
                labels = pa.array([split_of[g] for g in table.column("group_id").to_pylist()])
                for split in splits:
                    part = table.filter(pc.equal(labels, split))
                    if part.num_rows:
                        for name, rows in level_tables(part, cfg.seed).items():
                            writers[(name, split)].write(rows)
                bar.update(table.num_rows)
    files: dict[str, dict[str, str]] = {name: {} for name in CONFIGS}
    for split in splits:
        for name in CONFIGS:
            writer = writers[(name, split)]
            if not writer.rows:
                continue
            # Content-hashed names: datasets serves a stale cache for a rewritten file name (PITFALLS 1).
            relative = f"{name}/{split}-{_sha256(writer.path)[:12]}.parquet"
            (folder / name).mkdir(exist_ok=True)
            writer.path.replace(folder / relative)
            files[name][split] = relative
    files = {name: splits for name, splits in files.items() if splits}
    logger.info("write configs took %.1f s", time.perf_counter() - started)
    started = time.perf_counter()
    stats = stats_mod.compute(
        {split: folder / path for split, path in files["full"].items()},
        cfg.domains,
        funnel,
        memory_limit=cfg.memory_limit,
        threads=cfg.threads,
        spill=folder / ".stats-spill",
    )
    logger.info("statistics took %.1f s", time.perf_counter() - started)
    write_json(folder / "stats.json", stats)
    write_json(folder / "manifest.json", manifest(cfg, results, inputs, files))
    card = build_card(cfg, files, stats, builder=f"perrecbench {_version('perrecbench')}")
    write_text(folder / "README.md", card)


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
) -> dict[str, Any]:
    """Parameters, inputs (size + hash), skipped lines, per-domain funnel, output files, package versions."""
    return {
        "parameters": cfg.as_manifest(),
        "inputs": [entry for item in inputs for entry in results[item.domain]["files"]],
        "bad_lines": {
            "count": sum(b["count"] for r in results.values() for b in r["bad_lines"]),
            "files": [b for item in inputs for b in results[item.domain]["bad_lines"]],
        },
        "selection": {d: r["funnel"] for d, r in results.items()},
        "outputs": files,
        "versions": {"python": platform.python_version(), **{p: _version(p) for p in _PACKAGES}},
    }


def _replace(tmp: Path, out: Path) -> None:
    """Move the finished folder into place; an old ``out`` is removed only after the new one is there."""
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.rename(out)


def push_to_hub(folder: Path, repo_id: str) -> None:
    """Upload the finished folder as a dataset repo; stale parquet files of an earlier build are deleted.

    Needs network and a token (``HF_TOKEN`` or ``hf auth login``); not exercised by the offline tests.
    """
    from huggingface_hub import HfApi

    api = HfApi()
    api.create_repo(repo_id, repo_type="dataset", exist_ok=True)
    api.upload_folder(
        repo_id=repo_id,
        folder_path=folder,
        repo_type="dataset",
        commit_message="perrecbench build",
        delete_patterns=["*/*.parquet"],
    )
    logger.info("uploaded %s to https://huggingface.co/datasets/%s", folder, repo_id)
