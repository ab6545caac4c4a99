"""``perrecbench build``: raw Amazon Reviews 2023 files → the benchmark folder (parquet + card + stats).

Per domain, :mod:`dataset_builder.stage` selects the 5-user groups (DuckDB + a small Python search); the
result is kept as a stage file keyed by the input files' fingerprints and the selection parameters, so a
second run on unchanged inputs skips finished domains. Then the groups are split (seeded), the levels drawn,
and everything is written to a temp folder next to ``out`` that is renamed into place when complete.
"""

from __future__ import annotations

import hashlib
import io
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

import pyarrow as pa
import pyarrow.parquet as pq

from dataset_builder import stats as stats_mod
from dataset_builder.card import build_card
from dataset_builder.config import BuildConfig, BuildError
from dataset_builder.schema import CONFIGS, FEATURES
from dataset_builder.sources import InputFile, Source
from dataset_builder.stage import STAGES, DomainResult, run_domain

logger = logging.getLogger(__name__)

# Bump when the stage content changes for the same inputs and parameters (invalidates old stage files).
STAGE_VERSION = 2
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
    groups = [row for d in config.domains for row in results[d]["rows"]]
    if not groups:
        raise BuildError(
            "no valid group found. Candidates kept by each criterion:\n"
            + stats_mod.funnel_message(funnel)
            + "\nUse more input, or relax --min-history, --window-days or --min-gap."
        )
    if len(groups) < config.test_groups:
        logger.warning(
            "only %d groups (< --test-groups %d): all go to test, no train split. Funnel:\n%s",
            len(groups),
            config.test_groups,
            stats_mod.funnel_message(funnel),
        )
    splits = split_groups(groups, config.test_groups, config.seed)
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
        info = json.loads(done.read_text())
        info["rows"] = pq.read_table(stage_dir / info["groups_file"]).to_pylist()
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
            result: DomainResult = run_domain(source, item.reviews, item.meta, cfg, work, tick=tick)
            tick("done")
        finally:
            shutil.rmtree(work, ignore_errors=True)
            bar.update(bar.total - bar.n)
            bar.close()
        files = [_file_entry(f, h.result()) for f, h in zip((item.reviews, item.meta), hashes, strict=True)]
    info = {
        "domain": item.domain,
        "funnel": result.funnel,
        "bad_lines": result.bad_lines,
        "files": files,
        "groups_file": f"{key}.parquet",
    }
    _save_stage(stage_dir, key, result.rows, info)
    info["rows"] = result.rows
    return info


def _file_entry(file: InputFile, content_hash: str) -> dict[str, Any]:
    return {
        "domain": file.domain,
        "kind": file.kind,
        "file": file.uri,
        "size": file.size,
        "hash": content_hash,
    }


def _save_stage(stage_dir: Path, key: str, rows: list[dict[str, Any]], info: dict[str, Any]) -> None:
    """Write the stage parquet, then its JSON (the completion marker); drop older stages of the domain."""
    stage_dir.mkdir(parents=True, exist_ok=True)
    for old in stage_dir.glob("*.json"):
        old.unlink()
    for old in stage_dir.glob("*.parquet"):
        old.unlink()
    table = pa.Table.from_pylist(rows, schema=FEATURES.arrow_schema)
    tmp = stage_dir / f".{key}.parquet.tmp"
    pq.write_table(table, tmp)
    tmp.replace(stage_dir / f"{key}.parquet")
    tmp = stage_dir / f".{key}.json.tmp"
    tmp.write_text(json.dumps(info, indent=1))
    tmp.replace(stage_dir / f"{key}.json")


# --------------------------------------------------------------------------------------------- splits


def split_groups(
    groups: list[dict[str, Any]], test_groups: int, seed: int
) -> dict[str, list[dict[str, Any]]]:
    """Seeded split of ``full`` groups into ``test`` (``test_groups``) and ``train`` (the rest, if any).

    >>> rows = [{"group_id": str(i)} for i in range(5)]
    >>> {k: len(v) for k, v in split_groups(rows, 3, 0).items()}
    {'test': 3, 'train': 2}
    >>> list(split_groups(rows, 9, 0))
    ['test']
    """
    ordered = sorted(groups, key=lambda g: g["group_id"])
    random.Random(seed).shuffle(ordered)
    out = {"test": sorted(ordered[:test_groups], key=lambda g: g["group_id"])}
    if len(ordered) > test_groups:
        out["train"] = sorted(ordered[test_groups:], key=lambda g: g["group_id"])
    return out


def level_rows(group: dict[str, Any], seed: int) -> dict[str, dict[str, Any]]:
    """The group's row for every config: one seeded permutation of its users, each level its first k.

    So easy ⊂ medium ⊂ hard ⊂ full share query items and users, and the order is the presentation order.
    ``full`` holds all the group's users; a level larger than the group (``--group-size`` < 5) is left out.

    >>> g = {"group_id": "g", "users": [{"user_id": str(i)} for i in range(5)]}
    >>> rows = level_rows(g, 0)
    >>> [len(rows[c]["users"]) for c in ("easy", "medium", "hard", "full")]
    [2, 3, 4, 5]
    >>> rows["easy"]["users"] == rows["full"]["users"][:2]
    True
    """
    users = list(group["users"])
    random.Random(f"{seed}:{group['group_id']}").shuffle(users)
    sizes = {name: len(users) if name == "full" else size for name, size in CONFIGS.items()}
    return {
        name: {**group, "level": name, "users": users[:k]} for name, k in sizes.items() if k <= len(users)
    }


# --------------------------------------------------------------------------------------------- output


def _parquet_bytes(rows: list[dict[str, Any]]) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=FEATURES.arrow_schema), buffer, compression="zstd")
    return buffer.getvalue()


def _write(
    folder: Path,
    cfg: BuildConfig,
    splits: dict[str, list[dict[str, Any]]],
    results: dict[str, dict[str, Any]],
    funnel: dict[str, dict[str, int]],
    inputs: list[DomainInputs],
) -> None:
    folder.mkdir(parents=True)
    files: dict[str, dict[str, str]] = {name: {} for name in CONFIGS}
    for split, groups in splits.items():
        per_config: dict[str, list[dict[str, Any]]] = {name: [] for name in CONFIGS}
        for group in groups:
            for name, row in level_rows(group, cfg.seed).items():
                per_config[name].append(row)
        for name, rows in per_config.items():
            if not rows:
                continue
            data = _parquet_bytes(rows)
            # Content-hashed names: datasets serves a stale cache for a rewritten file name (PITFALLS 1).
            relative = f"{name}/{split}-{hashlib.sha256(data).hexdigest()[:12]}.parquet"
            (folder / name).mkdir(exist_ok=True)
            (folder / relative).write_bytes(data)
            files[name][split] = relative
    files = {name: splits for name, splits in files.items() if splits}
    stats = stats_mod.compute(splits, cfg.domains, funnel)
    _dump(folder / "stats.json", stats)
    _dump(folder / "manifest.json", manifest(cfg, results, inputs, files))
    card = build_card(cfg, files, stats, builder=f"perrecbench {_version('perrecbench')}")
    (folder / "README.md").write_text(card, encoding="utf-8")


def _dump(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


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
