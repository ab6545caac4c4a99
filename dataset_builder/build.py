"""``perrecbench build``: raw Amazon Reviews 2023 files → the benchmark folder (parquet + card + stats).

The steps, each in its module:

1. the domains (``--domains all``: every category of the source) and their files
   (:mod:`~dataset_builder.sources`);
2. per domain, its groups from the stage cache, or selected again when an input's bytes changed
   (:mod:`~dataset_builder.stages`, :mod:`~dataset_builder.selection`);
3. the test / train split, per level for the large preset (:mod:`~dataset_builder.splits`);
4. into a temp folder next to ``out``: the config × split parquet files, the levels cut from each batch
   (:mod:`~dataset_builder.assembly`, :mod:`~dataset_builder.levels`), the statistics counted on the same rows
   (:mod:`~dataset_builder.stats`), ``--with-interactions`` (:mod:`~dataset_builder.interactions`), the
   manifest (:mod:`~dataset_builder.manifest`) and the card (:mod:`~dataset_builder.card`); the folder is
   renamed into place when complete;
5. ``--push-to-hub``: the upload of `perrecbench push benchmark`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from dataset_builder import stages
from dataset_builder import stats as stats_mod
from dataset_builder.assembly import write_configs
from dataset_builder.card import build_card
from dataset_builder.config import BuildConfig, BuildError
from dataset_builder.interactions import write_interactions
from dataset_builder.manifest import check_out, manifest, version
from dataset_builder.sources import Source
from dataset_builder.splits import Split, merge_splits, split_levels
from perrec_eval.fileio import remove_stale, swap_in, write_json, write_text

logger = logging.getLogger(__name__)


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
    config = replace(config, domains=source.domains(config.domains))
    inputs = [
        stages.DomainInputs(d, source.find(d, "reviews"), source.find(d, "meta")) for d in config.domains
    ]
    results = {item.domain: stages.load(source, item, config) for item in inputs}
    funnel = {d: r["funnel"] for d, r in results.items()}
    with _timed("split"):
        index = stages.group_index(results, config.domains)
        if not index.num_rows:
            raise BuildError(
                "no valid group found. Candidates kept by each criterion:\n"
                + stats_mod.funnel_message(funnel)
                + "\nUse more input, or relax --min-history, --window-days or --min-gap."
            )
        level_splits = split_levels(index, config, funnel)
        for name, level in level_splits.items():
            if not level.test and (level.train or level.dropped):  # only --train-fraction can do this
                raise BuildError(
                    f"--train-fraction {config.train_fraction} leaves no {name} group in test (of "
                    f"{len(level.train) + len(level.dropped)}): lower --train-fraction"
                )
        split = merge_splits(level_splits)
        if split.dropped:
            total = len(split.dropped) + len(split.train)
            logger.info(
                "--split-rule %s dropped %d of %d train groups", config.split_rule, len(split.dropped), total
            )
    provenance = source.kind([entry for r in results.values() for entry in r["files"]])
    remove_stale(out)  # the .NAME.tmp-PID / .old-PID folders of builds that were killed
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        _write(tmp, config, results, index, level_splits, split, provenance)
        swap_in(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    logger.info("wrote %s", out)
    if config.push_to_hub:
        push_to_hub(out, config.push_to_hub, synthetic=provenance["source_kind"] != "raw")
    return out


def _write(
    folder: Path,
    cfg: BuildConfig,
    results: dict[str, dict[str, Any]],
    index: pa.Table,
    level_splits: dict[str, Split],
    split: Split,
    provenance: dict[str, Any],
) -> None:
    """Write the config × split files, the interactions, ``stats.json``, the manifest and the card."""
    folder.mkdir(parents=True)
    with _timed("write configs"):
        figures = {label: stats_mod.SplitFigures(cfg.domains) for label in split.as_dict()}
        # One leak count per split decision: the paper's (on full rows), or each level's own (large).
        leaks = {
            name: stats_mod.LeakCounts(stats_mod.test_members(index, s.test))
            for name, s in level_splits.items()
        }
        files = write_configs(folder, cfg, split.as_dict(), results, figures, leaks)
    interactions = None
    if cfg.with_interactions:
        with _timed("interactions"):
            paths = {d: results[d]["interactions_path"] for d in cfg.domains}
            interactions = write_interactions(folder, cfg, paths, stats_mod.test_members(index, split.test))
    with _timed("statistics"):
        funnel = {d: r["funnel"] for d, r in results.items()}
        stats = stats_mod.compute(cfg, index, level_splits, split, figures, leaks, funnel)
    with _timed("card"):
        write_json(folder / "stats.json", stats)
        write_json(folder / "manifest.json", manifest(cfg, results, files, split, provenance, interactions))
        builder = f"perrecbench {version('perrecbench')}"
        card = build_card(cfg, files, stats, builder, provenance["source_kind"], interactions)
        write_text(folder / "README.md", card)


@contextlib.contextmanager
def _timed(stage: str) -> Iterator[None]:
    """Log a stage's wall time (``benchmarks/build_bench.py`` reads these lines)."""
    started = time.perf_counter()
    yield
    logger.info("%s took %.2f s", stage, time.perf_counter() - started)


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
