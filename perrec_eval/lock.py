"""One process per output: an exclusive lock on a hidden file inside an output folder, or beside a file.

Two `perrecbench evaluate` runs on one folder would both send every request (twice the cost) and write over
each other's files; two `perrecbench profiles` into one file would both generate every profile. `folder_lock`
takes an exclusive `flock` on ``FOLDER/.perrecbench.lock`` and `file_lock` one on ``.NAME.perrecbench.lock``
beside an output, both without waiting; the operating system releases it when the process ends, however it
ends (kill -9 included), so a stale lock file never blocks a later run. A process may take a lock it
already holds (`sweep` holds its folder for the grid and the report, and each grid point's run takes it
again).

A command that ends removes its lock file (a clean clone stays clean). It unlinks the file while it still
holds the lock, and a taker checks, once it holds a lock, that the name still points to the file it locked
(retrying on the new one otherwise): a second process that opened the old file just before it was removed
would else hold a lock nobody else can see, beside a third process on the new file.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from perrec_eval.errors import DataError

LOCK_FILE = ".perrecbench.lock"
_held: set[Path] = set()  # lock files this process holds


@contextmanager
def folder_lock(folder: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the folder's lock for the block (the folder is created if missing).

    A folder this lock created and the block left empty (a command that failed before writing anything)
    is removed again, with the parents made for it, so failed runs leave no empty folders behind.

    Args:
        folder: the output folder.

    Raises:
        DataError: `folder` is a file, or another process holds the lock (the message names its pid).
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise DataError(f"{folder} is a file: --out takes a folder; choose another --out")
    made = [path for path in (folder, *folder.parents) if not path.exists()]
    try:
        with _locked(folder / LOCK_FILE, folder):
            yield
    finally:
        if made and (folder / LOCK_FILE).resolve() not in _held and _empty(folder):
            for path in made:  # innermost first; stops at the first that is not empty
                try:
                    path.rmdir()
                except OSError:
                    break


def _empty(folder: Path) -> bool:
    try:
        return not any(folder.iterdir())
    except OSError:
        return False


@contextmanager
def file_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the lock of output `path`: ``.NAME.perrecbench.lock`` beside it (its folder is made if missing),
    `path` taken with its symlinks resolved.

    For outputs replaced whole by a rename (a build, a profiles file), whose own folder cannot hold the lock.

    Raises:
        DataError: another process holds the lock; the message names its pid.
    """
    try:  # the real output: two names of one file (a symlink) must share one lock
        path = Path(path).resolve()  # "." and "x/.." have a name this way too
    except RuntimeError as err:  # a symlink loop (OSError from Python 3.13 on)
        raise DataError(f"cannot write {path}: it is a symlink loop; choose another --out") from err
    # not ".NAME.lock": beside `build --out X/perrecbench` that is X's own folder lock
    lock_path = path.with_name(f".{path.name}{LOCK_FILE}") if path.name else path / LOCK_FILE
    with _locked(lock_path, path):
        yield


def holder(folder: str | os.PathLike[str]) -> str | None:
    """The pid of the other process that holds `folder`'s lock, or None (no lock, or a stale one); the
    lock file is only read, never made.

    >>> holder("/nonexistent-folder") is None
    True
    """
    path = Path(folder) / LOCK_FILE
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115 - closed below, after the probe
    except OSError:
        return None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return handle.read().strip() or "another process"
        except OSError:
            return None
        fcntl.flock(handle, fcntl.LOCK_UN)
        return None


@contextmanager
def _locked(lock_path: Path, what: Path) -> Iterator[None]:
    try:  # the first write of every command: where an output that cannot be written shows
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = lock_path.resolve()
    except OSError as err:
        raise _unwritable(what, err) from err
    if lock_path in _held:  # taken again inside a block that holds it
        yield
        return
    handle = _take(lock_path, what)
    with handle:
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
            _held.add(lock_path)
            yield
        finally:
            _held.discard(lock_path)
            lock_path.unlink(missing_ok=True)  # still held: a process that opened it finds it gone (`_take`)
            fcntl.flock(handle, fcntl.LOCK_UN)


def _take(lock_path: Path, what: Path) -> IO[str]:
    """`lock_path` opened and locked, or a DataError naming the holder's pid. A file its holder removed
    between our open and our lock is let go and the new one taken."""
    while True:
        try:
            handle = open(lock_path, "a+", encoding="utf-8")  # noqa: SIM115
        except OSError as err:
            raise _unwritable(what, err) from err
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise DataError(
                f"{what} is in use by another perrecbench process (pid {holder}): wait for it to finish, "
                "or choose another --out"
            ) from None
        if _names(handle, lock_path):
            return handle
        handle.close()


def _names(handle: IO[str], path: Path) -> bool:
    """Whether `path` still names the open file `handle` (not removed, not replaced by a new file)."""
    try:
        on_disk = path.stat()
    except FileNotFoundError:
        return False
    mine = os.fstat(handle.fileno())
    return (on_disk.st_dev, on_disk.st_ino) == (mine.st_dev, mine.st_ino)


def _unwritable(what: Path, err: OSError) -> DataError:
    return DataError(f"cannot write {what}: {err.strerror or err} ({err.filename}); choose another --out")
