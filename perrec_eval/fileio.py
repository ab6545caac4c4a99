"""Files that are either whole or absent: every writer of the project goes through `atomic_open`.

A file is written to a hidden temp file next to its target, flushed and fsynced, then renamed over the
target (`os.replace` is atomic on POSIX and Windows). A run killed mid-write leaves the old file (or none)
and at most a stray ``.NAME.tmp-PID`` file, never a half-written file that later passes for whole.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


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


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically."""
    with atomic_open(path) as handle:
        handle.write(text)


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write `obj` as indented JSON atomically."""
    write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


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


def read_json(path: str | os.PathLike[str]) -> Any:
    """Read a JSON file."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a JSON Lines file (blank lines are skipped)."""
    with Path(path).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
