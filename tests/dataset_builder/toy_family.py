"""A toy task family for the tests: every review with its title and text, and every item's metadata, one
parquet file each per domain. It plugs into the shared build the way a real family does (its config, its
`Builder`), so the tests register it in `dataset_builder.tasks` without touching general code."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from dataset_builder import raw
from dataset_builder.config import BuildError, BuildSpec, portable_name
from dataset_builder.manifest import manifest
from dataset_builder.sources import Source
from dataset_builder.stages import DomainInputs, StageOutput, StageSpec, Tick
from dataset_builder.tasks import Builder
from perrec_eval.cliconfig import option
from perrec_eval.fileio import write_json, write_text


@dataclass(frozen=True, slots=True)
class ToyConfig(BuildSpec):
    """The toy family's build."""

    task: ClassVar[str] = "toy"
    description: ClassVar[str] = "Write every review with its text and every item's metadata (a test family)."
    min_rating: float = option("keep the reviews rated at least this", default=1.0)


def _select(
    cfg: ToyConfig, source: Source, item: DomainInputs, work: Path, files: dict[str, Path], tick: Tick
) -> StageOutput:
    con = raw.connect(cfg, work, source)
    try:
        funnel, bad = raw.read_reviews(con, source, item.reviews, cfg.on_bad_line, text=True, tick=tick)
        tick("read metadata")
        counts, meta_bad = raw.read_meta(con, source, item.meta, cfg.on_bad_line, details=True)
        con.sql(
            f"COPY (SELECT * FROM rev WHERE rating >= {cfg.min_rating} ORDER BY user_id, parent_asin) "
            f"TO '{files['reviews_path']}' (FORMAT parquet)"
        )
        con.sql(f"COPY (SELECT * FROM meta ORDER BY parent_asin) TO '{files['meta_path']}' (FORMAT parquet)")
        kept = con.sql(f"SELECT count(*) FROM rev WHERE rating >= {cfg.min_rating}").fetchall()[0][0]
    finally:
        con.close()
    return StageOutput({**funnel, **counts}, bad + meta_bad, {"kept": kept})


def _stage(cfg: ToyConfig) -> StageSpec:
    return StageSpec(
        version=1,
        params={"min_rating": cfg.min_rating},
        flags={},
        steps=("read reviews", "deduplicate", "read metadata"),
        files={"reviews_path": "reviews.parquet", "meta_path": "meta.parquet"},
        select=partial(_select, cfg),
    )


def _plan(cfg: ToyConfig, results: dict[str, dict[str, Any]]) -> list[str]:
    domains = [d for d in cfg.domains if results[d]["kept"]]
    if not domains:
        raise BuildError(f"no review rated {cfg.min_rating} or more; lower --min-rating")
    return domains


def _write(
    folder: Path, cfg: ToyConfig, results: dict[str, dict[str, Any]], plan: list[str], provenance: dict
) -> None:
    files = {}
    for domain in plan:
        for name in ("reviews", "meta"):
            files[f"{domain}/{name}"] = f"{domain}-{name}.parquet"
            shutil.copyfile(results[domain][f"{name}_path"], folder / files[f"{domain}/{name}"])
    parameters = {"source": portable_name(cfg.source), "min_rating": cfg.min_rating}
    recorded = manifest(parameters, results, provenance, {"outputs": files}, task=cfg.task)
    write_json(folder / "manifest.json", recorded)
    write_text(folder / "README.md", "# toy\n")


BUILDER = Builder(stage=_stage, plan=_plan, write=_write, summary=lambda out: f"toy built in {out}")
