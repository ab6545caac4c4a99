"""`perrecbench report`: a leaderboard folder from run folders, one section per family (and `sweep`, a
family's own command, registered here for the family on the command line)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from perrec_eval.cliconfig import add_command, check_seed, check_task, for_task, option
from perrec_eval.errors import ConfigError
from perrec_eval.registry import default_command

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
        "show a family's runs over different builds, splits or doc sets in separate tables instead of "
        "refusing them",
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


def register(subparsers: argparse._SubParsersAction) -> None:
    from perrec_eval.commands import engine_options_help

    add_command(
        subparsers,
        "report",
        ReportConfig,
        report,
        help="compare run folders: leaderboard with significance, the paper's analyses, plots, an HTML page",
        description="Compare finished run folders, one section per task family. Runs of a family must share "
        "the dataset fingerprint, split and doc set (else they are refused, or split into tables with "
        "--allow-mixed). A suite folder (`perrecbench evaluate --task all`) opens with its summary table. "
        "Writes the same files for every family into --out: leaderboard.md, .json, .csv, .tex, plots/*.png "
        "and index.html.",
    )
    add_command(
        subparsers,
        "sweep",
        *for_task("sweep", *default_command("sweep")),
        help="evaluate one engine over a grid of k and shots (paper Fig. 6), then report the grid",
        description="Evaluate one model at every (k, shots) pair of --ks x --shots-grid, each into "
        "OUT/k<K>-shots<S>/ (resumable), then write the grid's report into OUT/report/.",
        epilog=engine_options_help(),
    )


def report(config: ReportConfig) -> int:
    """Compare runs, one family at a time: runs of two families never share a table. A suite folder's runs
    (and any others given) make one report that opens with the suite's summary table (`perrec_eval.suite`).
    """
    from perrec_eval import suite, suitedir
    from perrec_eval.leaderboard import family

    if config.out is not None:
        _check_report_out(config)  # before the runs are loaded and resampled
    folders = suitedir.run_folders(config.run_dirs)
    by_task: dict[str, list[Path]] = {}
    for folder in folders:
        by_task.setdefault(family.task_of(folder), []).append(folder)
    other = sorted(set(by_task) - {config.task}) if config.task is not None else []
    if other:
        raise ConfigError(
            f"--task {config.task} given, but {by_task[other[0]][0]} is a run of task {other[0]}: pass "
            f"--task {other[0]}, or none (each run's family is read from its run.json)"
        )
    runs = family.load_runs(folders)
    base = config.out if config.out is not None else None
    sections = family.sections_of(
        runs, n_resamples=config.resamples, seed=config.seed, base=base, allow_mixed=config.allow_mixed
    )
    summary = (
        suite.summary(runs, seed=config.seed, costs=suitedir.costs_of(config.run_dirs))
        if suitedir.is_suite(config.run_dirs)
        else None
    )
    if summary is not None:
        print(suite.summary_markdown(summary))
    for data in sections:
        print(family.markdown(data))
    if config.out is not None:
        lead = None if summary is None else (lambda tmp: suite.summary_blocks(summary))
        extra = None if summary is None else {"summary": summary}
        family.write(sections, config.out, plots=config.plots, lead=lead, extra=extra)
        files = "leaderboard.md, .json, .csv, .tex" + (", plots/" if config.plots else "; no plots")
        index = Path(config.out) / "index.html"
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
