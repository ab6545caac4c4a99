"""Run folders → a report folder: tables, analyses, plots, and every file of ``REPORT_DIR``.

``REPORT_DIR`` holds ``leaderboard.md``, ``leaderboard.json``, ``leaderboard.csv``, ``leaderboard.tex``,
``index.html`` and ``plots/*.png``; each file is written atomically.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from perrec_eval import fileio
from perrec_eval.leaderboard import folder
from perrec_eval.tasks.perrecbench.leaderboard import analyses, compare, html, render
from perrec_eval.tasks.perrecbench.leaderboard.board import N_RESAMPLES, Report, build_table
from perrec_eval.tasks.perrecbench.leaderboard.published import load
from perrec_eval.tasks.perrecbench.leaderboard.runs import Run, load_runs


def assemble(
    runs: Sequence[Run], *, allow_mixed: bool = False, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> Report:
    """The report of `runs`: refused when they are not comparable, unless `allow_mixed` (one table each).

    Raises:
        DataError: the runs differ in dataset fingerprint, split or group set and `allow_mixed` is off.
    """
    if not allow_mixed:
        compare.check_comparable(runs)
    tables = [
        build_table(comparable, number, n_resamples=n_resamples, seed=seed)
        for number, comparable in enumerate(compare.partition(runs), start=1)
    ]
    return Report(
        tables=tables,
        analyses=[analyses.analyse(table, n_resamples=n_resamples, seed=seed) for table in tables],
        stats=analyses.benchmark_stats(runs),
        published=load(),
        n_resamples=n_resamples,
    )


def write(report: Report, out: str | os.PathLike, *, plots: bool = True) -> Path:
    """Write the report folder (plots first, so every page can show them) through the rule every report
    follows (`perrec_eval.leaderboard.folder.write`); returns index.html's path."""

    def fill(tmp: Path) -> None:
        if plots:
            from perrec_eval.tasks.perrecbench.leaderboard import plots as drawing

            report.plots = drawing.draw(report, tmp)
        fileio.write_text(tmp / "leaderboard.md", render.markdown(render.document(report)))
        fileio.write_json(tmp / "leaderboard.json", render.json_data(report))
        fileio.write_text(tmp / "leaderboard.csv", render.csv_text(report))
        fileio.write_text(tmp / "leaderboard.tex", render.latex(report))
        fileio.write_text(tmp / "index.html", html.page(report))

    return folder.write(out, fill)


def report_folder(
    run_dirs: Sequence[str | os.PathLike],
    out: str | os.PathLike,
    *,
    allow_mixed: bool = False,
    plots: bool = True,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> Report:
    """Load the runs at `run_dirs`, assemble their report and write it into `out`."""
    report = assemble(load_runs(run_dirs), allow_mixed=allow_mixed, n_resamples=n_resamples, seed=seed)
    write(report, out, plots=plots)
    return report
