"""Output folders of `perrecbench sft`: never one of the inputs, never a folder of something else.

A local ``--model``, ``--data`` or adapter folder must be neither ``--out``, nor inside it, nor hold it: the
command would write over its own input (a base model whose weights a merge replaces, or that silently loads
the adapter trained into it). A finished result is replaced only on purpose, and a merge is written to a
temp sibling that replaces ``--out`` whole, so no earlier file is left beside the new ones.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from perrec_eval import fileio
from perrec_eval.errors import ConfigError
from perrec_eval.lock import LOCK_FILE


def refuse_overlap(out: str | os.PathLike[str], inputs: Mapping[str, str | None]) -> None:
    """Refuse an `out` that is, is inside, or holds any local folder of `inputs` (``{flag: path}``).

    Hub ids and missing paths are not local folders and never overlap.

    >>> refuse_overlap("/tmp/new-adapter", {"--model": "Qwen/Qwen2.5-0.5B-Instruct"})
    """
    target = Path(out).expanduser().resolve()
    for flag, path in inputs.items():
        if not path or not Path(path).expanduser().exists():
            continue
        local = Path(path).expanduser().resolve()
        if target == local or local in target.parents or target in local.parents:
            where = "is" if target == local else "is inside" if local in target.parents else "holds"
            raise ConfigError(f"--out {out} {where} {flag} {path}: write to a new folder outside it")


def is_empty(folder: Path) -> bool:
    """Whether `folder` is missing or an empty folder (its lock file aside)."""
    return not folder.exists() or (folder.is_dir() and all(p.name == LOCK_FILE for p in folder.iterdir()))


@contextmanager
def replaced(out: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a fresh temp sibling of `out`; when the block succeeds it replaces `out` whole.

    The old `out` is moved aside before the new one is renamed in and removed after, so a kill leaves
    either the old folder or the new one (and at most a hidden ``.NAME.old-PID``/``.NAME.tmp-PID`` sibling).
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fileio.remove_stale(out)  # what a killed merge left beside it
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
        fileio.swap_in(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
