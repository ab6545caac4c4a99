"""Files that are either whole or absent: every writer of the project goes through `atomic_open`.

A file is written to a hidden temp file next to its target, flushed and fsynced, then renamed over the
target (`os.replace` is atomic on POSIX and Windows). A run killed mid-write leaves the old file (or none)
and at most a stray ``.NAME.tmp-PID`` file, never a half-written file that later passes for whole.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
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


def write_jsonl(path: str | os.PathLike[str], records: Iterable[Mapping[str, Any]]) -> None:
    """Write one JSON object per line atomically."""
    with atomic_open(path) as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def read_json(path: str | os.PathLike[str]) -> Any:
    """Read a JSON file.

    Raises:
        DataError: the file is not valid UTF-8 JSON; the message names the file (a folder of runs has many).
    """
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DataError(f"{path} is not valid JSON ({err}): {_REWRITE}") from err


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a JSON Lines file (blank lines are skipped).

    Raises:
        DataError: a line is not a JSON object; the message names the file and the line.
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").split("\n")  # not splitlines: U+2028 is text
    except UnicodeDecodeError as err:
        raise DataError(f"{path} is not UTF-8 text ({err}): {_REWRITE}") from err
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{path} line {number} is not valid JSON ({err}): {_REWRITE}") from err
        if not isinstance(record, dict):
            raise DataError(f"{path} line {number} is not a JSON object: {_REWRITE}")
        records.append(record)
    return records


_REWRITE = "it was cut or edited; run the command that wrote it again"
