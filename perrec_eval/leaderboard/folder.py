"""A report folder: which files are a report's, and how a new report replaces an old one.

Every family's report writes the same files here (leaderboard.md/.json/.csv/.tex, index.html, plots/*.png)
through `write`: the whole report goes into a temp sibling and then replaces the old one (`move_in`), so the
folder holds exactly the files of the report just written, whichever family wrote the one before it.
`check_out` refuses a folder holding anything else.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from perrec_eval import fileio, outputs

FILES = ("leaderboard.md", "leaderboard.json", "leaderboard.csv", "leaderboard.tex", "index.html")
_PLOT = re.compile(r"(t\d+_.+|benchmark_stats_\d+)\.png")  # the names `plots.draw` gives


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


def write(out: str | os.PathLike, fill: Callable[[Path], None]) -> Path:
    """Write a report into `out`: `fill(folder)` writes every file of it into a temp sibling, which then
    replaces the report in `out` (`move_in`); returns index.html's path.

    A report killed mid-way leaves the old report untouched; the folder's lock (`perrec_eval.lock`) refuses
    a second report into it while this one writes. Files of the old report that the new one does not write
    (another family's plots, a page a report without plots lacks) go with it.
    """
    from perrec_eval.lock import folder_lock

    folder = check_out(out)
    with folder_lock(folder):
        check_out(folder)  # again under the lock: another report may have written it meanwhile
        fileio.remove_stale(folder)  # what a killed report left beside it (under the lock: no live writer's)
        tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            fill(tmp)
            move_in(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return folder / "index.html"
