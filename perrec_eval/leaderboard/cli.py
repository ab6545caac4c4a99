"""`perrecbench report` (a leaderboard folder from run folders) and `perrecbench sweep` (a k x shots grid)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import ClassVar

from perrec_eval.cliconfig import add_command, check_seed, check_task, for_task, option
from perrec_eval.errors import ConfigError
from perrec_eval.registry import DEFAULT_TASK
from perrec_eval.tasks.perrecbench.config import EvalConfig

MAX_RESAMPLES = 1_000_000


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
    plots: bool = option("the PNG plots and their place on index.html (needs the report extra: matplotlib)",
                         default=True)  # fmt: skip
    resamples: int = option("resamples of the paired significance tests", default=10_000)
    seed: int = option("seed of the significance tests' resampling", default=0)
    task: str | None = option(
        "task family of the runs (`perrecbench tasks` lists them); a run of another one is refused",
        default=None,
        shown="each run's own (its run.json)",
    )

    def __post_init__(self) -> None:
        if self.task is not None:
            check_task(self.task)
        if isinstance(self.run_dirs, str):
            object.__setattr__(self, "run_dirs", (self.run_dirs,))
        if not self.run_dirs:
            raise ConfigError("pass at least one RUN_DIR (a run folder or a folder of run folders)")
        if not 1 <= self.resamples <= MAX_RESAMPLES:  # each test holds resamples x groups numbers
            raise ConfigError(f"--resamples must be in 1..{MAX_RESAMPLES:,}, got {self.resamples}")
        check_seed(self.seed)


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
        description="Compare finished run folders, one section per task family. Runs of a family must share "
        "the dataset fingerprint, split and doc set (else they are refused; PerRecBench's runs are split "
        "into tables with --allow-mixed). Writes the same files for every family into --out: "
        "leaderboard.md, .json, .csv, .tex, plots/*.png and index.html.",
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
    """Compare runs, one family at a time: runs of two families never share a table.

    Runs of one family write their report into --out; runs of several write one report folder per family,
    ``OUT/<task>/``, and print one section each.
    """
    from perrec_eval import rundir
    from perrec_eval.leaderboard import family

    folders = [run for folder in config.run_dirs for run in rundir.run_folders(folder)]
    by_task: dict[str, list[Path]] = {}
    for folder in folders:
        by_task.setdefault(family.task_of(folder), []).append(folder)
    other = sorted(set(by_task) - {config.task}) if config.task is not None else []
    if other:
        raise ConfigError(
            f"--task {config.task} given, but {by_task[other[0]][0]} is a run of task {other[0]}: pass "
            f"--task {other[0]}, or none (each run's family is read from its run.json)"
        )
    if set(by_task) <= {DEFAULT_TASK}:
        return _report_perrecbench(config)
    several = len(by_task) > 1
    if several and config.out is not None:
        _check_families_out(config.out, tuple(by_task))
    for task, members in by_task.items():
        out = config.out and (str(Path(config.out) / task) if several else config.out)
        if task == DEFAULT_TASK:
            _report_perrecbench(dataclasses.replace(config, run_dirs=tuple(map(str, members)), out=out))
        else:
            _report_family(members, out, config)
    return 0


def _report_family(folders: list[Path], out: str | None, config: ReportConfig) -> None:
    from perrec_eval.leaderboard import family

    if out is not None:
        _check_report_out(dataclasses.replace(config, out=out))  # before the runs are loaded and resampled
    sections = family.report(folders, n_resamples=config.resamples, seed=config.seed)
    for section in sections:
        print(family.markdown(section))
    if out is not None:
        index = family.write(sections, out, plots=config.plots)
        files = "leaderboard.md, .json, .csv, .tex" + (", plots/" if config.plots else "; no plots")
        print(f"report written to {out}/ ({files}); open {index}")


def _check_families_out(out: str, tasks: tuple[str, ...]) -> None:
    """A report of several families writes ``OUT/<task>/`` folders: OUT may hold nothing else."""
    from perrec_eval import outputs
    from perrec_eval.leaderboard import folder as reports

    def owned(path: PurePosixPath) -> bool:
        return path.parts[0] in tasks and reports.is_report_file(PurePosixPath(*path.parts[1:]))

    outputs.refuse_foreign(outputs.target(out), owned, command="report")


def _report_perrecbench(config: ReportConfig) -> int:
    from perrec_eval.tasks.perrecbench.leaderboard import assemble, render

    if config.out is not None:
        _check_report_out(config)  # before the runs are loaded and resampled
    runs = assemble.load_runs(config.run_dirs)
    result = assemble.assemble(
        runs, allow_mixed=config.allow_mixed, n_resamples=config.resamples, seed=config.seed
    )
    for table in result.tables:
        print(f"{render.table_heading(table, len(table.rows))}\n\n{render.leaderboard_markdown(table)}\n")
    if config.out is not None:
        index = assemble.write(result, config.out, plots=config.plots)
        files = "leaderboard.md, .json, .csv, .tex" + (", plots/" if result.plots else "; no plots")
        print(f"report written to {config.out}/ ({files}); open {index}")
    return 0


def _check_report_out(config: ReportConfig) -> None:
    """Refuse a report folder that is not one (`reports.check_out`) or lies inside a run folder (the run
    would then hold files a run does not write)."""
    from perrec_eval import outputs, rundir
    from perrec_eval.leaderboard import folder as reports

    out = reports.check_out(config.out)
    for run_dir in config.run_dirs:
        for folder in rundir.run_folders(run_dir) if Path(run_dir).is_dir() else ():
            outputs.refuse_overlap(out, {"the run folder": str(folder)})


def sweep(config: SweepConfig) -> int:
    from perrec_eval import rundir
    from perrec_eval.leaderboard import folder as reports
    from perrec_eval.lock import folder_lock
    from perrec_eval.tasks.perrecbench.leaderboard import assemble, sweep

    out = Path(config.out)
    report_dir = out / "report"

    def in_report(path: PurePosixPath) -> bool:
        return path.parts[0] == "report" and reports.is_report_file(PurePosixPath(*path.parts[1:]))

    rundir.check_out(config.out, rundir.local_inputs(config), runs=True, also=in_report, command="sweep")
    with folder_lock(out):  # the grid and its report: another sweep on OUT is refused until both are written
        reports.check_out(report_dir)  # before the grid runs
        results = sweep.run_grid(config)
        result = assemble.report_folder([out], report_dir, plots=config.plots, seed=config.seed)
    from perrec_eval.tasks.perrecbench.leaderboard import render

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
