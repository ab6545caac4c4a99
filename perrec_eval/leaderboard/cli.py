"""`perrecbench report` (a leaderboard folder from run folders) and `perrecbench sweep` (a k x shots grid)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from perrec_eval.cliconfig import add_command, check_task, for_task, option
from perrec_eval.errors import ConfigError
from perrec_eval.tasks.perrecbench.config import EvalConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportConfig:
    """Settings of `perrecbench report`: leaderboard, analyses and an HTML page from run folders."""

    run_dirs: tuple[str, ...] = option(
        "run folders to compare (a folder of run folders, such as the baselines', stands for all of them)",
        positional=True,
    )
    out: str | None = option(
        "report folder: leaderboard.md/.json/.csv/.tex, plots/*.png and index.html (default: print the "
        "leaderboard only)",
        default=None,
        metavar="REPORT_DIR",
    )
    allow_mixed: bool = option(
        "show runs over different builds, splits or group sets in separate tables instead of refusing them",
        default=False,
    )
    plots: bool = option("draw the PNG plots (needs the report extra: matplotlib)", default=True)
    resamples: int = option("resamples of the paired significance tests", default=10_000)
    seed: int = option("seed of the significance tests' resampling", default=0)
    task: str = option(
        "task family (`perrecbench tasks` lists them)", default="perrecbench"
    )

    def __post_init__(self) -> None:
        check_task(self.task)
        if isinstance(self.run_dirs, str):
            object.__setattr__(self, "run_dirs", (self.run_dirs,))
        if not self.run_dirs:
            raise ConfigError("pass at least one RUN_DIR (a run folder or a folder of run folders)")
        if self.resamples < 1:
            raise ConfigError(f"--resamples must be >= 1, got {self.resamples}")


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepConfig(EvalConfig):
    """Settings of `perrecbench sweep`: one engine over every (k, shots) pair, one run folder each."""

    replaced: ClassVar[dict[str, str]] = {"k": "--ks", "shots": "--shots-grid"}  # set per grid point
    ks: tuple[int, ...] = option(
        "retrieved history sizes k of the grid (replaces --k; the paper's Fig. 6 used 1,2,4,8,12,16)",
        default=(2, 4, 8),
    )
    shots_grid: tuple[int, ...] = option(
        "few-shot counts of the grid (replaces --shots; the paper's Fig. 6 used 0,1,2,3,4,5)",
        default=(0, 1, 2, 3),
    )
    plots: bool = option("draw the PNG plots of the grid's report (needs the report extra)", default=True)


def register(subparsers: argparse._SubParsersAction) -> None:
    from perrec_eval.commands import engine_options_help

    add_command(
        subparsers,
        "report",
        ReportConfig,
        report,
        help="compare run folders: leaderboard with significance, the paper's analyses, plots, an HTML page",
        description="Compare finished run folders. Runs must share the dataset fingerprint, split and group "
        "set (else they are refused, or split into tables with --allow-mixed). Writes leaderboard.md, "
        ".json, .csv, .tex (the paper's Table 1 layout), plots/*.png and index.html into --out.",
    )
    add_command(
        subparsers,
        "sweep",
        *for_task("sweep", SweepConfig, sweep),
        help="evaluate one engine over a grid of k and shots (paper Fig. 6), then report the grid",
        description="Evaluate one model at every (k, shots) pair of --ks x --shots-grid, each into "
        "OUT/k<K>-shots<S>/ (resumable), then write the grid's report into OUT/report/.",
        epilog=engine_options_help(),
    )


def report(config: ReportConfig) -> int:
    """Compare runs: PerRecBench's leaderboard, and one section per other family (never one table)."""
    from perrec_eval import rundir
    from perrec_eval.leaderboard import family

    folders = [run for folder in config.run_dirs for run in rundir.run_folders(folder)]
    general = [folder for folder in folders if family.is_family_run(folder)]
    if not general:
        return _report_perrecbench(config)
    own = [str(folder) for folder in folders if folder not in general]
    if own:
        sub = config.out and str(Path(config.out) / "perrecbench")
        _report_perrecbench(dataclasses.replace(config, run_dirs=tuple(own), out=sub))
    sections = family.report(general, n_resamples=config.resamples, seed=config.seed)
    for section in sections:
        print(family.markdown(section))
    if config.out:
        written = family.write(sections, config.out)
        print(f"report written to {config.out}/ (leaderboard.md, .json): open {written}")
    return 0


def _report_perrecbench(config: ReportConfig) -> int:
    from perrec_eval.leaderboard import assemble, render

    if config.out:
        assemble.check_out(config.out)  # before the runs are loaded and resampled
    runs = assemble.load_runs(config.run_dirs)
    result = assemble.assemble(
        runs, allow_mixed=config.allow_mixed, n_resamples=config.resamples, seed=config.seed
    )
    for table in result.tables:
        print(f"{render.table_heading(table, len(table.rows))}\n\n{render.leaderboard_markdown(table)}\n")
    if config.out:
        index = assemble.write(result, config.out, plots=config.plots)
        files = "leaderboard.md, .json, .csv, .tex" + (", plots/" if result.plots else "; no plots")
        print(f"report written to {config.out}/ ({files}); open {index}")
    return 0


def sweep(config: SweepConfig) -> int:
    from perrec_eval.leaderboard import assemble, sweep
    from perrec_eval.lock import folder_lock

    out = Path(config.out)
    report_dir = out / "report"
    with folder_lock(out):  # the grid and its report: another sweep on OUT is refused until both are written
        assemble.check_out(report_dir)  # before the grid runs
        results = sweep.run_grid(config)
        result = assemble.report_folder([out], report_dir, plots=config.plots, seed=config.seed)
    from perrec_eval.leaderboard import render

    for table in result.tables:
        print(render.leaderboard_markdown(table) + "\n")
    incomplete = [name for name, scores in results if not scores.complete]
    print(f"{len(results)} grid points in {out}/; report: {report_dir / 'index.html'}")
    if incomplete:
        from perrec_eval.tasks.perrecbench.commands import failure_summary

        points = ", ".join(incomplete)
        print(f"perrecbench sweep: provisional points (engine errors): {points}", file=sys.stderr)
        failed = [scores for _, scores in results if not scores.complete]
        print(failure_summary(failed, "sweep"), file=sys.stderr)
        return 1
    return 0
