"""One process per output folder: an exclusive lock on a hidden file inside it.

Two `perrecbench evaluate` runs on one folder would both send every request (twice the cost) and write over
each other's files. `folder_lock` takes an exclusive `flock` on ``FOLDER/.perrecbench.lock`` without
waiting; the operating system releases it when the process ends, however it ends (kill -9 included), so a
stale lock file never blocks a later run.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from perrec_eval.errors import DataError

LOCK_FILE = ".perrecbench.lock"


@contextmanager
def folder_lock(folder: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the folder's lock for the block (the folder is created if missing).

    Raises:
        DataError: another process holds the lock.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOCK_FILE, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise DataError(
                f"{folder} is in use by another perrecbench process (pid {holder}): wait for it to finish, "
                "or choose another --out"
            ) from None
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
