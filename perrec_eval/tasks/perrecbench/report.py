"""A run folder's report.md and the PTC table `perrecbench evaluate` / `score` print and a model card shows.

Each is the leaderboard of the run(s) at hand (`perrec_eval.leaderboard`): the same Table 1, notes and
per-cell tables as `perrecbench report`'s leaderboard.md, without its analyses, plots and published tables.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from perrec_eval import fileio
from perrec_eval.results import RunInfo, read_run_info
from perrec_eval.tasks.perrecbench import rundir
from perrec_eval.tasks.perrecbench.leaderboard import board, compare, render, runs
from perrec_eval.tasks.perrecbench.leaderboard.published import load as load_published
from perrec_eval.tasks.perrecbench.records import PredictionRecord
from perrec_eval.tasks.perrecbench.results import Metric, Scores


def report_of(loaded: Sequence[runs.Run], labels: Sequence[str] | None = None) -> board.Report:
    """The leaderboard of `loaded` (one table per comparable set), rows named by `labels` where given."""
    tables = [
        board.build_table(comparable, number)
        for number, comparable in enumerate(compare.partition(loaded), start=1)
    ]
    if labels is not None:
        names = {id(run): label for run, label in zip(loaded, labels, strict=True)}
        for table in tables:
            for row in table.rows:
                row.label = names[id(row.run)]
    return board.Report(tables=tables, analyses=[], stats=[], published=load_published())


def table(
    loaded: Sequence[runs.Run],
    labels: Sequence[str] | None = None,
    *,
    compact: bool = False,
    legend: bool = True,
) -> str:
    """Table 1 of `loaded` (`render.leaderboard_rows`, `compact` or not), with the legend unless `legend`
    is off: the table `perrecbench evaluate` and `score` print and a model card shows."""
    report = report_of(loaded, labels)
    tables = [render.leaderboard_markdown(table, compact=compact) for table in report.tables]
    return "\n\n".join([*tables, render.markdown_text(render.legend(report))][: None if legend else -1])


def rescored(run_dir: str | os.PathLike, scores: Scores) -> runs.Run:
    """The finished run at `run_dir` with re-computed `scores` (and their metric), as a `runs.Run`."""
    info = replace(read_run_info(run_dir), metric=Metric(scores.variant, scores.invalid))
    return runs.run_of(run_dir, info, scores, rundir.read_predictions(run_dir))


def render_report(loaded: Sequence[runs.Run]) -> str:
    """The text of report.md for the runs of one run folder (or of a folder of run folders)."""
    return render.markdown(render.run_document(report_of(loaded)))


def render_run(
    folder: str | os.PathLike,
    info: RunInfo,
    scores: Scores,
    records: Sequence[PredictionRecord],
) -> str:
    """report.md of one run from what is in memory (`runs.run_of`)."""
    return render_report([runs.run_of(folder, info, scores, records)])


def write_report(out: str | os.PathLike, loaded: Sequence[runs.Run]) -> Path:
    """Write `out/report.md` (atomically) for the given runs."""
    path = Path(out) / "report.md"
    fileio.write_text(path, render_report(loaded))
    return path
