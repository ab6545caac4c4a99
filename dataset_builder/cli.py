"""`perrecbench synth` and `perrecbench build`: the builder's commands, their flags derived from the configs.

The flags, defaults and help texts come from :class:`~dataset_builder.config.SynthConfig` and
:class:`~dataset_builder.config.BuildConfig` (``--config FILE.yaml`` included); the handlers receive the
validated config, call the library and print a summary. Heavy imports stay inside the handlers, so
``perrecbench --help`` stays fast. Errors of the :mod:`perrec_eval.errors` family are printed as one line
by :func:`perrec_eval.cli.main`.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

from dataset_builder.config import BuildConfig, SynthConfig
from perrec_eval import cliconfig


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``synth`` and ``build`` to the ``perrecbench`` command."""
    cliconfig.add_command(
        subparsers,
        "synth",
        SynthConfig,
        run_synth,
        help="write synthetic raw Amazon Reviews 2023 files with a planted preference signal",
        description="Write Amazon Reviews 2023 categories (default: the paper's four; any category or all)\n"
        "in the raw layout (<Category>.jsonl, meta_<Category>.jsonl) with a planted, documented personal\n"
        "preference signal, plus synth_truth.json with the planted parameters and synth_marker.json with\n"
        "the sha256 of every file written (a build from them is marked synthetic in its card).",
    )
    cliconfig.add_command(
        subparsers,
        "build",
        BuildConfig,
        run_build,
        help="build the benchmark (parquet + dataset card + stats) from raw Amazon Reviews 2023 files",
        description="Select PerRecBench groups (PROTOCOL §2) from raw review and metadata files with DuckDB\n"
        "and write a folder that datasets.load_dataset reads: configs easy/medium/hard/full, splits\n"
        "test/train, a dataset card, stats.json and manifest.json. --preset paper (default) reproduces\n"
        "the paper's 5-user groups; --preset large finds each level's groups directly, several per item,\n"
        "for the resolution that model comparisons need (the card states each level's resolution).",
    )


def run_synth(config: SynthConfig) -> int:
    """``perrecbench synth``, holding the output folder's lock: two synths into one folder would mix files."""
    from perrec_eval.lock import folder_lock

    with folder_lock(config.out):
        return _run_synth(config)


def _run_synth(config: SynthConfig) -> int:
    """``perrecbench synth``: write the files and print a one-screen summary.

    Args:
        config: the validated settings.

    Returns:
        The exit status (0).
    """
    from dataset_builder.synth import write_synthetic

    summary = write_synthetic(
        config.out,
        reviews_per_domain=config.reviews_per_domain,
        domains=config.domains,
        seed=config.seed,
        gzip=config.gzip,
        dirty=config.dirty,
        twins=config.twins,
    )
    print(f"wrote {summary['out']} in {summary['seconds']} s ({summary['reviews_per_second']:,} reviews/s)")
    for name, info in summary["domains"].items():
        print(
            f"  {name}: {info['reviews']:,} reviews, {info['users']:,} users "
            f"({info['users_over_20_reviews']:,} with >20 reviews), {info['items']:,} items"
        )
    for fault in summary["faults"]:
        where = f"line {fault['line']}" if "line" in fault else fault["parent_asin"]
        print(f"  planted fault {fault['kind']}: {fault['file']} {where}")
    print(f"  planted parameters: {summary['truth']}")
    return 0


def run_build(config: BuildConfig) -> int:
    """``perrecbench build``, holding the lock beside ``--out`` (and ``--work-dir``): a second build into
    the same folder, or with the same stages, is refused instead of deleting the other's stage files."""
    from perrec_eval.lock import file_lock

    work_dir = file_lock(config.work_dir) if config.work_dir is not None else contextlib.nullcontext()
    with file_lock(config.out), work_dir:  # the default stages sit beside --out: its lock covers them
        return _run_build(config)


def _run_build(config: BuildConfig) -> int:
    """``perrecbench build``: build the folder and print its statistics (the paper's Table 4 layout).

    Args:
        config: the validated settings.

    Returns:
        The exit status (0).
    """
    from dataset_builder.build import build
    from dataset_builder.stats import format_table
    from perrec_eval.fileio import read_json

    out = build(config)
    stats = read_json(out / "stats.json")
    print(f"PerRecBench built in {out}")
    print(format_table(stats))
    split = stats["split"]
    levels = split["levels"].values() if "levels" in split else [split]
    if not sum(n for level in levels for n in level["train_groups_per_domain"].values()):
        print(
            f"perrecbench build: warning: no train groups (--test-groups {config.test_groups}, --split-rule "
            f"{config.split_rule}): few-shot demonstrations (--shots) and `perrecbench sft data` need them; "
            "lower --test-groups or use more input",
            file=sys.stderr,
        )
    return 0
