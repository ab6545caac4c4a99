"""`perrecbench report`: one Table-1 style table from several run folders."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from perrec_eval.cliconfig import add_command, option


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportConfig:
    """Settings of `perrecbench report`: one Table-1 style table from several run folders."""

    run_dirs: tuple[str, ...] = option(
        "run folders to compare (a folder of run folders, such as the baselines', stands for all of them)",
        positional=True,
    )
    out: str | None = option("write the markdown report here (default: print the table only)", default=None)


def register(subparsers: argparse._SubParsersAction) -> None:
    add_command(
        subparsers, "report", ReportConfig, report, help="one Table-1 style table from several run folders"
    )


def report(config: ReportConfig) -> int:
    from perrec_eval import fileio, rundir
    from perrec_eval import report as tables

    systems = [rundir.load_run(d) for path in config.run_dirs for d in rundir.run_folders(path)]
    if config.out:
        fileio.write_text(config.out, tables.render(systems))
    print(tables.table(systems))
    return 0
