"""The stage cache: each domain's selection, kept between builds and keyed by its inputs' bytes.

A stage holds what :func:`dataset_builder.perrecbench.selection.run_domain` found in one domain: the groups
(an Arrow IPC file of ``full`` rows, :mod:`dataset_builder.perrecbench.assembly`), their index (parquet,
:data:`INDEX_SCHEMA`), with ``--with-interactions`` the deduplicated reviews, and a JSON file of its
accounting, written last (the completion marker). Its name hashes the selection parameters, the files' names
and sizes and their **content hashes**, so a second run on unchanged inputs skips finished domains, and a file
rewritten in place, even with its size and mtime restored, is selected again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dataset_builder.config import BuildConfig, portable_name
from dataset_builder.perrecbench.selection import INDEX_SCHEMA, STAGES, run_domain
from dataset_builder.sources import InputFile, Source
from perrec_eval import progress
from perrec_eval.fileio import pid_alive, read_json, write_json

logger = logging.getLogger(__name__)

# Bump when the stage content changes for the same inputs and parameters (invalidates old stage files).
STAGE_VERSION = 6


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


def load(source: Source, item: DomainInputs, cfg: BuildConfig) -> dict[str, Any]:
    """The domain's groups and accounting (the stage's JSON plus its files' paths), from its stage when the
    inputs' bytes are unchanged.

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
                return _read(stage_dir, key)
            logger.info(
                "%s: an input changed since the last run (content hash), selecting again", item.domain
            )
        key = _select(source, item, cfg, stage_dir, futures)
    return _read(stage_dir, key)


def group_index(results: dict[str, dict[str, Any]], domains: tuple[str, ...]) -> pa.Table:
    """Every domain's index rows (:data:`INDEX_SCHEMA`), one table in ``group_id`` order."""
    tables = [pq.read_table(results[d]["index_path"]) for d in domains if results[d]["groups"]]
    if not tables:
        return INDEX_SCHEMA.empty_table()
    return pa.concat_tables(tables).sort_by("group_id")


def _select(
    source: Source, item: DomainInputs, cfg: BuildConfig, stage_dir: Path, hashes: list[Future[str]]
) -> str:
    """Run the domain's selection into a work folder and save it as a stage; return the stage's key."""
    for stale in stage_dir.glob("work-*"):  # the work folders of builds that were killed
        pid = stale.name.removeprefix("work-")
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    work = stage_dir / f"work-{os.getpid()}"
    bar = progress.bar(total=len(STAGES), desc=item.domain, unit="stage")
    started: list[tuple[str, float]] = []

    def tick(stage: str) -> None:
        now = time.perf_counter()
        if started:  # benchmarks/build_bench.py reads these lines
            bar.update(1)
            logger.info("%s: %s took %.2f s", item.domain, started[-1][0], now - started[-1][1])
        started.append((stage, now))
        bar.set_postfix_str(stage)

    try:
        groups, index = work / "groups.arrow", work / "index.parquet"
        interactions = work / "interactions.parquet" if cfg.with_interactions else None
        result = run_domain(
            source,
            item.reviews,
            item.meta,
            cfg,
            work,
            groups,
            index,
            tick=tick,
            interactions_file=interactions,
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
            "files": [
                {"domain": f.domain, "kind": f.kind, "file": portable_name(f.uri), "size": f.size, "hash": h}
                for f, h in zip((item.reviews, item.meta), content, strict=True)
            ],
            "groups": result.groups,
        }
        _save(stage_dir, key, groups, index, info, interactions)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        bar.update(bar.total - bar.n)
        bar.close()
    return key


def _read(stage_dir: Path, key: str) -> dict[str, Any]:
    info = read_json(stage_dir / f"{key}.json")
    info["groups_path"] = stage_dir / f"{key}.arrow"
    info["index_path"] = stage_dir / f"{key}.index.parquet"
    info["interactions_path"] = stage_dir / f"{key}.interactions.parquet"
    return info


def _save(
    stage_dir: Path, key: str, groups: Path, index: Path, info: dict[str, Any], interactions: Path | None
) -> None:
    """Move the groups, index (and interactions) files in, then write the JSON (the completion marker); drop
    older stages."""
    stage_dir.mkdir(parents=True, exist_ok=True)
    for pattern in ("*.json", "*.arrow", "*.parquet"):
        for old in stage_dir.glob(pattern):
            old.unlink()
    groups.replace(stage_dir / f"{key}.arrow")
    index.replace(stage_dir / f"{key}.index.parquet")
    if interactions is not None:
        interactions.replace(stage_dir / f"{key}.interactions.parquet")
    write_json(stage_dir / f"{key}.json", info)
