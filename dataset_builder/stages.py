"""The stage cache: each domain's selection, kept between builds and keyed by its inputs' bytes.

A task family's selection of one domain (its :class:`StageSpec`: the raw files read with
:mod:`dataset_builder.raw`, then selected from) writes its files into a work folder (PerRecBench: its groups,
their index and, with ``--with-interactions``, the deduplicated reviews) and reports its accounting
(:class:`StageOutput`); the stage keeps those files and a JSON file of the accounting, written last (the
completion marker). A stage's name hashes the family's parameters, the files' names and sizes and their
**content hashes**, so a second run on unchanged inputs skips finished domains, and a file rewritten in
place, even with its size and mtime restored, is selected again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataset_builder.config import BuildSpec, portable_name
from dataset_builder.sources import InputFile, Source
from perrec_eval import progress
from perrec_eval.fileio import pid_alive, read_json, write_json

logger = logging.getLogger(__name__)

Tick = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class StageOutput:
    """What a family's selection of one domain reports; its files are where it was told to write them."""

    funnel: dict[str, int]  # what each step kept (the manifest's and the card's selection funnel)
    bad_lines: list[dict[str, Any]]  # `dataset_builder.sources.BadLines.as_dict` of each file with some
    counts: dict[str, Any] = field(default_factory=dict)  # recorded last in the stage's JSON (e.g. groups)


@dataclass(frozen=True, slots=True)
class DomainInputs:
    """A domain's raw files and what its stage is keyed on."""

    domain: str
    reviews: InputFile
    meta: InputFile
    extra: tuple[InputFile, ...] = ()  # further files of the layout (MovieLens-1M: users.dat)

    @property
    def files(self) -> tuple[InputFile, ...]:
        return (self.reviews, self.meta, *self.extra)

    def selection(self, spec: StageSpec) -> dict[str, Any]:
        """What a stage depends on besides the files' bytes (a cheap pre-check before hashing finishes)."""
        return {
            "version": spec.version,
            "params": spec.params,
            "files": [[portable_name(f.uri), f.size] for f in self.files],
            **spec.flags,
        }

    def stage_key(self, spec: StageSpec, content_hashes: list[str]) -> str:
        """The stage's name: the selection plus the content hashes of its files."""
        payload = {**self.selection(spec), "hashes": content_hashes}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


# A family's selection of one domain: (source, inputs, work folder, {name: file to write}, tick) → output.
SelectDomain = Callable[[Source, DomainInputs, Path, dict[str, Path], Tick], StageOutput]


@dataclass(frozen=True, slots=True)
class StageSpec:
    """A task family's stage of one domain: what it is keyed on, what it runs, which files it keeps."""

    version: int  # bump when the stage content changes for the same inputs and parameters
    params: dict[str, Any]  # the settings the selection depends on
    flags: dict[str, Any]  # keyed on too, but present only when set (so the stages of builds without stay)
    steps: tuple[str, ...]  # the names `select` ticks, in order (progress)
    files: dict[str, str]  # each file's name in the results (e.g. ``groups_path``) → its suffix in the stage
    select: SelectDomain


def load(source: Source, item: DomainInputs, cfg: BuildSpec, spec: StageSpec) -> dict[str, Any]:
    """The domain's accounting (the stage's JSON) plus its files' paths (``spec.files``' names), from its
    stage when the inputs' bytes are unchanged.

    The content hashes are computed in a thread. When a stage with the same parameters and file sizes
    exists, the build waits for them to decide whether it can be reused; otherwise the selection runs while
    they are computed (hashlib releases the GIL) and the new stage is keyed by them.
    """
    stage_dir = cfg.stage_root / item.domain
    with ThreadPoolExecutor(max_workers=1) as pool:
        futures = [pool.submit(source.content_hash, f) for f in item.files]
        if any(read_json(p).get("selection") == item.selection(spec) for p in stage_dir.glob("*.json")):
            key = item.stage_key(spec, [f.result() for f in futures])
            if (stage_dir / f"{key}.json").exists():
                logger.info("%s: inputs unchanged since the last run, reusing stage %s", item.domain, key)
                return _read(stage_dir, key, spec)
            logger.info(
                "%s: an input changed since the last run (content hash), selecting again", item.domain
            )
        key = _select(source, item, spec, stage_dir, futures, cfg)
    return _read(stage_dir, key, spec)


def _select(
    source: Source,
    item: DomainInputs,
    spec: StageSpec,
    stage_dir: Path,
    hashes: list[Future[str]],
    cfg: BuildSpec,
) -> str:
    """Run the domain's selection into a work folder and save it as a stage; return the stage's key.

    DuckDB running out of memory or failing to read an input, in any family's selection, becomes the
    one-line error naming the step and the fix (`raw.duckdb_error`).
    """
    import duckdb

    from dataset_builder import raw

    for stale in stage_dir.glob("work-*"):  # the work folders of builds that were killed
        pid = stale.name.removeprefix("work-")
        if pid.isascii() and pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    work = stage_dir / f"work-{os.getpid()}"
    bar = progress.bar(total=len(spec.steps), desc=item.domain, unit="stage")
    started: list[tuple[str, float]] = []

    def tick(stage: str) -> None:
        now = time.perf_counter()
        if started:  # at debug level (-v): benchmarks/build_bench.py reads these lines
            bar.update(1)
            logger.debug("%s: %s took %.2f s", item.domain, started[-1][0], now - started[-1][1])
        started.append((stage, now))
        bar.set_postfix_str(stage)

    try:
        files = {name: work / f"stage.{suffix}" for name, suffix in spec.files.items()}
        try:
            result = spec.select(source, item, work, files, tick)
        except duckdb.Error as err:
            problem = raw.duckdb_error(err, cfg, item.domain, started[-1][0] if started else "selection")
            if problem is None:
                raise
            raise problem from err
        tick("done")
        content = [h.result() for h in hashes]
        key = item.stage_key(spec, content)
        info = {
            "domain": item.domain,
            "key": key,
            "selection": item.selection(spec),
            "funnel": result.funnel,
            "bad_lines": result.bad_lines,
            "files": [
                {"domain": f.domain, "kind": f.kind, "file": portable_name(f.uri), "size": f.size, "hash": h}
                for f, h in zip(item.files, content, strict=True)
            ],
            **result.counts,
        }
        _save(stage_dir, key, {files[name]: suffix for name, suffix in spec.files.items()}, info)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        bar.update(bar.total - bar.n)
        bar.close()
    return key


def _read(stage_dir: Path, key: str, spec: StageSpec) -> dict[str, Any]:
    info = read_json(stage_dir / f"{key}.json")
    for name, suffix in spec.files.items():
        info[name] = stage_dir / f"{key}.{suffix}"
    return info


def _save(stage_dir: Path, key: str, files: dict[Path, str], info: dict[str, Any]) -> None:
    """Move the work files in (as ``<key>.<suffix>``), then write the JSON (the completion marker); drop
    older stages (every file here: the work folders of running builds are folders)."""
    stage_dir.mkdir(parents=True, exist_ok=True)
    for old in stage_dir.iterdir():
        if old.is_file():
            old.unlink()
    for path, suffix in files.items():
        path.replace(stage_dir / f"{key}.{suffix}")
    write_json(stage_dir / f"{key}.json", info)
