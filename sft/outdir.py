"""Output folders of `perrecbench sft`: never one of the inputs, never a folder of something else.

A local ``--model``, ``--data`` or adapter folder must be neither ``--out``, nor inside it, nor hold it: the
command would write over its own input (a base model whose weights a merge replaces, or that silently loads
the adapter trained into it). A finished result is replaced only on purpose, and a merge is written to a
temp sibling that replaces ``--out`` whole, so no earlier file is left beside the new ones. The rules are
every command's (`perrec_eval.outputs`); this module names them for the sft commands.
"""

from __future__ import annotations

from pathlib import Path

from perrec_eval.lock import LOCK_FILE
from perrec_eval.outputs import refuse_overlap, replaced

__all__ = ["is_empty", "refuse_overlap", "replaced"]


def is_empty(folder: Path) -> bool:
    """Whether `folder` is missing or an empty folder (its lock file aside)."""
    return not folder.exists() or (folder.is_dir() and all(p.name == LOCK_FILE for p in folder.iterdir()))
