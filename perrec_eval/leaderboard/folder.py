"""A report folder: which files are a report's, and how a new report replaces an old one.

Every family's report writes the same files here (leaderboard.md/.json/.csv/.tex, index.html, plots/*.png)
through `write`: the whole report goes into a temp sibling and then replaces the old one (`move_in`), so the
folder holds exactly the files of the report just written, whichever family wrote the one before it.
A report records the files it wrote and their sha256 in a hidden ``.report.json`` (`RECORD`; it is not
published), and `check_out` refuses a folder holding anything else: a file of the user's, a picture added to
``plots/``, a report file the user edited. Folders written before the record are known by their
``leaderboard.json`` (a report's JSON, not any file of that name).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath

from perrec_eval import fileio, outputs
from perrec_eval.errors import DataError

FILES = ("leaderboard.md", "leaderboard.json", "leaderboard.csv", "leaderboard.tex", "index.html")
RECORD = ".report.json"  # the files the report in this folder wrote: {"files": {path: [sha256, ...]}}
_PLOT = re.compile(r"(t\d+_.+|benchmark_stats_\d+)\.png")  # the names `plots.draw` gives


def check_out(out: str | os.PathLike) -> Path:
    """Refuse an `out` that is not a report folder (`perrec_eval.outputs`); return it resolved.

    A report replaces its own files (:func:`move_in`), so `out` may hold nothing else: no run, no benchmark,
    no notes, no figure of the user's in ``plots/``, no report file changed since it was written. The
    current, home and root folders are refused too.

    Raises:
        ConfigError, DataError: the reason and the fix.
    """
    folder = outputs.target(out)
    owned = own_files(folder)
    if owned is None and folder.is_dir():
        names = [child.name for child in folder.iterdir() if not outputs.transient(PurePosixPath(child.name))]
        families = sorted(name for name in names if own_files(folder / name) is not None)
        if families and len(families) == len(names):
            raise DataError(
                f"--out {out} holds the reports of several families ({', '.join(f'{n}/' for n in families)})"
                ", which a report of runs of one family does not replace: choose another --out, or report "
                "the runs of those families together"
            )
    outputs.refuse_foreign(folder, owned or (lambda path: False), command="report")
    return folder


def own_files(folder: Path) -> Callable[[PurePosixPath], bool] | None:
    """Whether a path in `folder` is a file of the report there (unchanged since written); None when the
    folder holds no report (no record, and no `leaderboard.json` of a report's shape)."""
    recorded = _recorded(folder)
    if recorded is not None:
        return lambda path: str(path) == RECORD or _unchanged(folder / path, recorded.get(str(path), ()))
    try:
        legacy = fileio.read_json(folder / "leaderboard.json")
    except (OSError, ValueError):
        return None
    is_report = (isinstance(legacy, dict) and isinstance(legacy.get("tables"), list)) or (
        isinstance(legacy, list) and bool(legacy) and all(isinstance(s, dict) and "task" in s for s in legacy)
    )
    return is_report_file if is_report else None


def _recorded(folder: Path) -> dict[str, list[str]] | None:
    try:
        record = fileio.read_json(folder / RECORD)
    except (OSError, ValueError):
        return None
    files = record.get("files") if isinstance(record, dict) else None
    if not isinstance(files, dict):
        return None
    return {name: sums for name, sums in files.items() if isinstance(sums, list)}


def _unchanged(path: Path, sums: Iterable[str]) -> bool:
    try:
        return path.is_file() and not path.is_symlink() and _sha256(path) in sums
    except OSError:
        return False


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def is_report_file(path: PurePosixPath) -> bool:
    """Whether `path` (relative to a report folder) is a file a report writes.

    >>> is_report_file(PurePosixPath("plots/t1_leaderboard.png")), is_report_file(PurePosixPath("a.pdf"))
    (True, False)
    """
    if len(path.parts) == 1:
        return path.name in (*FILES, RECORD)
    return len(path.parts) == 2 and path.parts[0] == "plots" and bool(_PLOT.fullmatch(path.name))


def move_in(new: Path, out: Path) -> None:
    """Replace the report in `out` with the finished one in `new`.

    A new `out` is one rename. In an existing one, only the old report's own files go (`own_files`:
    `check_out` refused a folder holding any other). The record first lists the old files and the new ones,
    then the old ones go (``index.html`` first), the new ones come (``index.html`` last), and the record ends
    listing the new ones: a kill at any point leaves a folder whose record covers every file in it, and
    without ``index.html`` (visibly incomplete), never new plots beside an old page.
    """
    files = {
        path.relative_to(new).as_posix(): [_sha256(path)] for path in sorted(new.rglob("*")) if path.is_file()
    }
    if not out.exists():
        fileio.write_json(new / RECORD, {"files": files})
        new.rename(out)
        return
    owned = own_files(out) or (lambda path: False)
    old = [
        path.relative_to(out)
        for path in sorted(out.rglob("*"))
        if path.is_file() and path.name != RECORD and owned(PurePosixPath(path.relative_to(out).as_posix()))
    ]
    both = {str(PurePosixPath(path.as_posix())): [_sha256(out / path)] for path in old}
    for name, sums in files.items():
        both[name] = [*both.get(name, []), *sums]
    fileio.write_json(out / RECORD, {"files": both})
    for path in sorted(old, key=lambda path: path.name != "index.html"):
        (out / path).unlink(missing_ok=True)
        for parent in (out / path).parents:  # plots/, left empty
            if parent == out or any(parent.iterdir()):
                break
            parent.rmdir()
    plots = out / "plots"
    if plots.is_dir() and not plots.is_symlink() and not any(plots.iterdir()):  # nothing in it to lose
        plots.rmdir()
    for name in sorted(files, key=lambda name: name == "index.html"):
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (new / name).rename(out / name)
    fileio.write_json(out / RECORD, {"files": files})


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
