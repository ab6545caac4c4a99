"""Files that are either whole or absent: every writer of the project goes through `atomic_open`.

A file is written to a hidden temp file next to its target, flushed and fsynced, then renamed over the
target (`os.replace` is atomic on POSIX and Windows). A run killed mid-write leaves the old file (or none)
and at most a stray ``.NAME.tmp-PID`` file (which the next writer of the same target removes, see
`remove_stale`), never a half-written file that later passes for whole.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from perrec_eval.errors import DataError


@contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temp file for writing that replaces `path` only when the block finishes without error.

    Args:
        path: the target file; its folder is created if missing.
        mode: ``"w"`` (UTF-8 text) or ``"wb"``.

    Yields:
        The open temp file.

    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "a.txt"
    >>> with atomic_open(target) as f:
    ...     _ = f.write("whole")
    >>> target.read_text()
    'whole'
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes whole files: mode must be 'w' or 'wb', got {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    kind = special_kind(path)
    if kind is not None:  # a rename over it would replace the device itself (`outputs.refuse_special`)
        raise DataError(f"{path} is {kind}, not a regular file: choose another path")
    remove_stale(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def special_kind(path: str | os.PathLike[str]) -> str | None:
    """What `path` is when it exists and is neither a regular file, a folder nor a symlink to one: ``"a
    FIFO"``, ``"a character device"``, ``"a block device"``, ``"a socket"``; None otherwise.

    >>> special_kind("/dev/null"), special_kind("/nonexistent")
    ('a character device', None)
    """
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:  # missing, or a dangling link: written as a new file
        return None
    for test, kind in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return None


def remove_stale(path: str | os.PathLike[str]) -> list[Path]:
    """Clean up the ``.NAME.tmp-PID`` and ``.NAME.old-PID`` files or folders of `path` left by dead processes.

    A process killed with SIGKILL cannot clean up after itself; the next writer of the same target does
    it. A ``.tmp`` is unfinished work: removed. An ``.old`` is the previous result, moved aside just before
    the new one was moved in: removed when `path` exists, moved back when the kill came in between (so the
    target is the old result again, never missing). Those of a process still running are left alone.

    Args:
        path: the target file or folder (its leftovers sit beside it).

    Returns:
        The leftovers removed or moved back.
    """
    import shutil

    path = Path(path)
    cleaned = []
    for kind in ("tmp", "old"):
        for stale in sorted(path.parent.glob(f".{glob_escape(path.name)}.{kind}-*")):
            pid = stale.name.rpartition("-")[2]
            if not (pid.isascii() and pid.isdigit()) or pid_alive(int(pid)):
                continue
            if kind == "old" and not path.exists() and not path.is_symlink():
                stale.rename(path)
            elif stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale, ignore_errors=True)
            else:
                stale.unlink(missing_ok=True)
            cleaned.append(stale)
    return cleaned


def glob_escape(name: str) -> str:
    """`name` with glob's special characters taken literally.

    >>> glob_escape("a[1]*.json")
    'a[[]1][*].json'
    """
    return "".join(f"[{char}]" if char in "[*?" else char for char in name)


def pid_alive(pid: int) -> bool:
    """Whether process `pid` is running (another user's process counts as running)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: running
        return True
    return True


def open_permissions(folder: str | os.PathLike[str]) -> None:
    """Give the files under `folder` that were written private (0600, as safetensors writes its files)
    the permissions of any other file: 0666 less the umask."""
    mask = os.umask(0)
    os.umask(mask)
    for path in Path(folder).rglob("*"):
        if path.is_file() and not path.is_symlink() and path.stat().st_mode & 0o777 == 0o600:
            path.chmod(0o666 & ~mask)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically."""
    with atomic_open(path) as handle:
        handle.write(text)


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write `obj` as indented JSON atomically."""
    write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def swap_in(tmp: str | os.PathLike[str], out: str | os.PathLike[str]) -> None:
    """Move the finished folder `tmp` to `out`; an old `out` is moved aside first and removed only after.

    A kill leaves either the old folder or the new one in place (and at most a hidden ``.NAME.old-PID``
    sibling, which :func:`remove_stale` puts back or clears).
    """
    tmp, out = Path(tmp), Path(out)
    if out.exists() and not out.is_dir():  # never set a user's file aside (the next writer would remove it)
        raise DataError(f"{out} is a file where a folder is written: move it away or choose another path")
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.rename(out)


def replace_in_order(files: Sequence[tuple[str | os.PathLike[str], str]]) -> None:
    """Write several files (path, UTF-8 text) as one step: every temp file first, then the renames in order.

    A kill while the temp files are written leaves every target as it was; one between two renames leaves
    the first targets new and the last old, so the caller puts last the file that marks the whole as
    finished and gives it a way to tell its companions apart (run.json names the metric scores.json holds).
    """
    done: list[tuple[Path, Path]] = []
    try:
        for target, text in files:
            target = Path(target)
            tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
            done.append((tmp, target))
            with open(tmp, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
        for tmp, target in done:
            os.replace(tmp, target)
    finally:
        for tmp, _ in done:
            tmp.unlink(missing_ok=True)


def write_jsonl(path: str | os.PathLike[str], records: Iterable[Mapping[str, Any]]) -> None:
    """Write one JSON object per line atomically."""
    with atomic_open(path) as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def starts_with_record(path: str | os.PathLike[str], keys: Iterable[str]) -> bool:
    """Whether the first line of `path` is a JSON object holding every one of `keys`: a JSONL file of the
    kind a command writes (and so may replace or extend), told apart from any other file."""
    with Path(path).open("rb") as handle:
        first = handle.readline(1 << 20)
    try:
        record = loads(first)
    except ValueError:
        return False
    return isinstance(record, dict) and set(keys) <= record.keys()


def loads(text: str | bytes) -> Any:
    """`json.loads` that reads any input without a traceback: JSON nested deeper than Python's recursion
    allows (``[[[[...]]]]``) is a ValueError as other invalid JSON is, so every reader that names the file
    of a ValueError names this one too.

    >>> loads('{"a": [1]}')
    {'a': [1]}
    >>> loads("[" * 100_000 + "]" * 100_000)
    Traceback (most recent call last):
    ...
    ValueError: nested too deeply to be read (more than ... levels)
    """
    try:
        return json.loads(text)
    except RecursionError:
        levels = sys.getrecursionlimit()
        raise ValueError(f"nested too deeply to be read (more than {levels} levels)") from None


def read_json(path: str | os.PathLike[str]) -> Any:
    """Read a JSON file.

    Raises:
        DataError: the file is missing or not valid UTF-8 JSON; the message names the file (a folder of runs
            has many).
    """
    try:
        return loads(_read(path))
    except (ValueError, UnicodeDecodeError) as err:
        raise DataError(f"{path} is not valid JSON ({err}): {_REWRITE}") from err


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a JSON Lines file (blank lines are skipped).

    Raises:
        DataError: a line is not a JSON object; the message names the file and the line.
    """
    try:
        lines = _read(path).split("\n")  # not splitlines: U+2028 is text
    except UnicodeDecodeError as err:
        raise DataError(f"{path} is not UTF-8 text ({err}): {_REWRITE}") from err
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = loads(line)
        except ValueError as err:
            raise DataError(f"{path} line {number} is not valid JSON ({err}): {_REWRITE}") from err
        if not isinstance(record, dict):
            raise DataError(f"{path} line {number} is not a JSON object: {_REWRITE}")
        records.append(record)
    return records


def _read(path: str | os.PathLike[str]) -> str:
    """The UTF-8 text of `path`; a file that vanished (a checked file replaced by another command while this
    one ran, e.g. `evaluate --overwrite` under `score --write`) is a DataError, not a traceback."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise DataError(
            f"{path} is missing (another command may be replacing it): run this command again when that "
            "one has finished, or run the command that writes it"
        ) from err


_REWRITE = "it was cut or edited; run the command that wrote it again"
