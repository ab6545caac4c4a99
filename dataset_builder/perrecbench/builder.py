"""PerRecBench's part of ``perrecbench build``: its stage, its split and its files.

The shared build (:func:`dataset_builder.build.build`) calls, in order:

1. :func:`stage`: per domain, the groups selected from the raw files (:mod:`~.selection`, which reads them
   with :mod:`dataset_builder.raw`), their index and, with ``--with-interactions``, the deduplicated reviews;
2. :func:`plan`: the test / train split, per level for the large preset (:mod:`~.splits`);
3. :func:`write`: the config × split parquet files, the levels cut from each batch (:mod:`~.assembly`,
   :mod:`~.levels`), the statistics counted on the same rows (:mod:`~.stats`), ``--with-interactions``
   (:mod:`~.interactions`), the manifest and the card (:mod:`~.card`).
"""

from __future__ import annotations

import logging
import sys
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from dataset_builder.build import timed
from dataset_builder.config import BuildError
from dataset_builder.manifest import manifest, version
from dataset_builder.perrecbench import stats as stats_mod
from dataset_builder.perrecbench.assembly import write_configs
from dataset_builder.perrecbench.card import build_card
from dataset_builder.perrecbench.config import BuildConfig
from dataset_builder.perrecbench.interactions import write_interactions
from dataset_builder.perrecbench.selection import INDEX_SCHEMA, STAGES, run_domain
from dataset_builder.perrecbench.splits import Split, merge_splits, split_levels
from dataset_builder.sources import Source
from dataset_builder.stages import DomainInputs, StageOutput, StageSpec, Tick
from dataset_builder.tasks import Builder
from perrec_eval.fileio import read_json, write_json, write_text

logger = logging.getLogger(__name__)

# Bump when the stage content changes for the same inputs and parameters (invalidates old stage files).
STAGE_VERSION = 6


class Plan(NamedTuple):
    """The split of a build: every group's index row, each level's split (or the paper's one), their union."""

    index: pa.Table
    level_splits: dict[str, Split]
    split: Split


def stage(cfg: BuildConfig) -> StageSpec:
    """A domain's stage: its groups (``groups_path``), their index (``index_path``) and, with
    ``--with-interactions``, its deduplicated reviews (``interactions_path``)."""
    files = {"groups_path": "arrow", "index_path": "index.parquet"}
    if cfg.with_interactions:
        files["interactions_path"] = "interactions.parquet"
    return StageSpec(
        version=STAGE_VERSION,
        params=cfg.selection_params(),
        flags={"interactions": True} if cfg.with_interactions else {},  # stages of builds without keep keys
        steps=STAGES,
        files=files,
        select=partial(_select, cfg),
    )


def _select(
    cfg: BuildConfig, source: Source, item: DomainInputs, work: Path, files: dict[str, Path], tick: Tick
) -> StageOutput:
    result = run_domain(
        source,
        item.reviews,
        item.meta,
        cfg,
        work,
        files["groups_path"],
        files["index_path"],
        tick=tick,
        interactions_file=files.get("interactions_path"),
    )
    return StageOutput(result.funnel, result.bad_lines, {"groups": result.groups})


def group_index(results: dict[str, dict[str, Any]], domains: tuple[str, ...]) -> pa.Table:
    """Every domain's index rows (:data:`INDEX_SCHEMA`), one table in ``group_id`` order."""
    tables = [pq.read_table(results[d]["index_path"]) for d in domains if results[d]["groups"]]
    if not tables:
        return INDEX_SCHEMA.empty_table()
    return pa.concat_tables(tables).sort_by("group_id")


def plan(cfg: BuildConfig, results: dict[str, dict[str, Any]]) -> Plan:
    """The test / train split of every domain's groups.

    Raises:
        BuildError: no group at all (the message gives each filter's count).
    """
    funnel = {d: r["funnel"] for d, r in results.items()}
    with timed("split"):
        index = group_index(results, cfg.domains)
        titled = [f.get("active_reviews_with_metadata") for f in funnel.values()]
        if not index.num_rows and any(f.get("active_reviews") for f in funnel.values()) and not any(titled):
            raise BuildError(
                "no active review is of an item with a title in its metadata (meta_<Category>.jsonl's "
                '"title"): the prompts name items by title; pass metadata files with titles. Candidates kept '
                "by each criterion:\n" + stats_mod.funnel_message(funnel)
            )
        if not index.num_rows:
            raise BuildError(
                "no valid group found. Candidates kept by each criterion:\n"
                + stats_mod.funnel_message(funnel)
                + "\nUse more input, or relax --min-history, --window-days or --min-gap."
            )
        level_splits = split_levels(index, cfg, funnel)
        for name, level in level_splits.items():
            if not level.test and (level.train or level.dropped):  # only --train-fraction can do this
                raise BuildError(
                    f"--train-fraction {cfg.train_fraction} leaves no {name} group in test (of "
                    f"{len(level.train) + len(level.dropped)}): lower --train-fraction"
                )
        split = merge_splits(level_splits)
        if split.dropped:
            total = len(split.dropped) + len(split.train)
            logger.debug(  # the build's summary says it
                "--split-rule %s dropped %d of %d train groups", cfg.split_rule, len(split.dropped), total
            )
    return Plan(index, level_splits, split)


def write(
    folder: Path,
    cfg: BuildConfig,
    results: dict[str, dict[str, Any]],
    plan: Plan,
    provenance: dict[str, Any],
) -> None:
    """Write the config × split files, the interactions, ``stats.json``, the manifest and the card."""
    index, level_splits, split = plan
    with timed("write configs"):
        figures = {label: stats_mod.SplitFigures(cfg.domains) for label in split.as_dict()}
        # One leak count per split decision: the paper's (on full rows), or each level's own (large).
        leaks = {
            name: stats_mod.LeakCounts(stats_mod.test_members(index, s.test))
            for name, s in level_splits.items()
        }
        files = write_configs(folder, cfg, split.as_dict(), results, figures, leaks)
    interactions = None
    if cfg.with_interactions:
        with timed("interactions"):
            paths = {d: results[d]["interactions_path"] for d in cfg.domains}
            interactions = write_interactions(folder, cfg, paths, stats_mod.test_members(index, split.test))
    with timed("statistics"):
        funnel = {d: r["funnel"] for d, r in results.items()}
        stats = stats_mod.compute(cfg, index, level_splits, split, figures, leaks, funnel)
    with timed("card"):
        write_json(folder / "stats.json", stats)
        outputs = {"split": {"rule": cfg.split_rule, "dropped_train_groups": split.dropped}, "outputs": files}
        extra = {"interactions": interactions} if interactions is not None else None
        recorded = manifest(cfg.as_manifest(), results, provenance, outputs, extra, task=cfg.task)
        write_json(folder / "manifest.json", recorded)
        builder = f"perrecbench {version('perrecbench')}"
        card = build_card(cfg, files, stats, builder, provenance["source_kind"], interactions)
        write_text(folder / "README.md", card)


def summary(out: Path) -> str:
    """What ``perrecbench build`` prints: the folder and its statistics (the paper's Table 4 layout).

    A build without any train group says so on stderr: few-shot demonstrations and `sft data` need them.
    """
    stats = read_json(out / "stats.json")
    split = stats["split"]
    levels = split["levels"].values() if "levels" in split else [split]
    if not sum(n for level in levels for n in level["train_groups_per_domain"].values()):
        parameters = _parameters(out)
        print(
            f"perrecbench build: warning: no train groups (--test-groups {parameters.get('test_groups')}, "
            f"--split-rule {parameters.get('split_rule')}): few-shot demonstrations (--shots) and "
            "`perrecbench sft data` need them; lower --test-groups or use more input",
            file=sys.stderr,
        )
    elif (note := stats_mod.thin_train_note(split, _parameters(out).get("train_fraction"))) is not None:
        print(f"perrecbench build: warning: {note}", file=sys.stderr)
    return f"PerRecBench built in {out}\n" + stats_mod.format_table(stats)


def _parameters(out: Path) -> dict[str, Any]:
    return read_json(out / "manifest.json").get("parameters", {})


BUILDER = Builder(stage=stage, plan=plan, write=write, summary=summary)
