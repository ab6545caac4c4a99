"""Another process holding a perrecbench lock, for the tests of what a second process is told."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_HOLD = """
import sys, time
from perrec_eval.lock import file_lock, folder_lock
lock = folder_lock if sys.argv[1] == "folder" else file_lock
with lock(sys.argv[2]):
    print("held", flush=True)
    time.sleep(120)
"""


@contextmanager
def held_by_another_process(path: str | os.PathLike[str], kind: str = "folder") -> Iterator[int]:
    """A child process holds the lock of folder `path` (of file `path` with ``kind="file"``); yields its pid.

    The child is killed with SIGKILL at the end: the operating system drops the lock with it.
    """
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, kind, str(path)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
