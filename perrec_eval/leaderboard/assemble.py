"""Run folders → a report folder: tables, analyses, plots, and every file of ``REPORT_DIR``.

``REPORT_DIR`` holds ``leaderboard.md``, ``leaderboard.json``, ``leaderboard.csv``, ``leaderboard.tex``,
``index.html`` and ``plots/*.png``; each file is written atomically.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from perrec_eval import fileio, outputs
from perrec_eval.leaderboard import analyses, compare, html, render
from perrec_eval.leaderboard.board import N_RESAMPLES, Report, build_table
from perrec_eval.leaderboard.published import load
from perrec_eval.leaderboard.runs import Run, load_runs

FILES = ("leaderboard.md", "leaderboard.json", "leaderboard.csv", "leaderboard.tex", "index.html")
_PLOT = re.compile(r"(t\d+_.+|benchmark_stats_\d+)\.png")  # the names `plots.draw` gives


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
    """Write the report folder (plots first, so every page can show them); returns index.html's path.

    Everything is written into a temp sibling first and then moved in (:func:`move_in`), so a report killed
    mid-way leaves the old report untouched; the folder's lock (`perrec_eval.lock`) refuses a second report
    into it while this one writes.
    """
    from perrec_eval.lock import folder_lock

    out = check_out(out)
    with folder_lock(out):
        check_out(out)  # again under the lock: another report may have written it meanwhile
        return _write(report, out, plots=plots)


def check_out(out: str | os.PathLike) -> Path:
    """Refuse an `out` that is not a report folder (`perrec_eval.outputs`); return it resolved.

    A report replaces its own files (:func:`move_in`), so `out` may hold nothing else: no run, no benchmark,
    no notes, no figure of the user's in ``plots/``. A report folder is known by its ``leaderboard.json``
    (moved in first and removed last): without it, even a file with a report's name is someone else's. The
    current, home and root folders are refused too.

    Raises:
        ConfigError, DataError: the reason and the fix.
    """
    folder = outputs.target(out)
    ours = (folder / "leaderboard.json").is_file()
    outputs.refuse_foreign(folder, is_report_file if ours else lambda path: False, command="report")
    return folder


def is_report_file(path: PurePosixPath) -> bool:
    """Whether `path` (relative to a report folder) is a file a report writes.

    >>> is_report_file(PurePosixPath("plots/t1_leaderboard.png")), is_report_file(PurePosixPath("a.pdf"))
    (True, False)
    """
    if len(path.parts) == 1:
        return path.name in FILES
    return len(path.parts) == 2 and path.parts[0] == "plots" and bool(_PLOT.fullmatch(path.name))


def _write(report: Report, out: Path, *, plots: bool) -> Path:
    fileio.remove_stale(out)  # what a killed report left beside it (under the lock: no live writer's)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        if plots:
            from perrec_eval.leaderboard import plots as drawing

            report.plots = drawing.draw(report, tmp)
        fileio.write_text(tmp / "leaderboard.md", render.markdown(render.document(report)))
        fileio.write_json(tmp / "leaderboard.json", render.json_data(report))
        fileio.write_text(tmp / "leaderboard.csv", render.csv_text(report))
        fileio.write_text(tmp / "leaderboard.tex", render.latex(report))
        fileio.write_text(tmp / "index.html", html.page(report))
        move_in(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out / "index.html"


def move_in(new: Path, out: Path) -> None:
    """Replace the report in `out` with the finished one in `new`.

    A new `out` is one rename. In an existing one (which may hold other files: they stay), the old report's
    ``index.html`` goes first and the new one comes last, so a kill in between leaves a folder without
    ``index.html`` (visibly incomplete), never new plots beside an old page.
    """
    if not out.exists():
        new.rename(out)
        return
    # index.html goes first and comes last; leaderboard.json (it marks a report folder: `check_out`) goes
    # last and comes first.
    for name in sorted(
        (*FILES, "plots"), key=lambda name: (name != "index.html", name == "leaderboard.json")
    ):
        old = out / name
        if old.is_dir():  # plots/: only the report's own pictures (`check_out` refused any other file)
            for picture in old.iterdir():
                if is_report_file(PurePosixPath("plots", picture.name)):
                    picture.unlink()
            if not any(old.iterdir()):
                old.rmdir()
        else:
            old.unlink(missing_ok=True)
    for entry in sorted(
        new.iterdir(), key=lambda path: (path.name != "leaderboard.json", path.name == "index.html")
    ):
        entry.rename(out / entry.name)


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
