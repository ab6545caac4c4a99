"""The `[train]` extra, imported only inside command handlers: a missing one is one line naming the fix."""

from __future__ import annotations

import importlib
from types import ModuleType

from perrec_eval.engines import MissingExtraError
from perrec_eval.engines._common import TORCH_FIRST

# The third-party packages the fine-tuning commands need, all in perrecbench's `[train]` extra.
TRAIN_PACKAGES = frozenset({"torch", "transformers", "peft", "trl", "accelerate", "safetensors"})


def require(module: str) -> ModuleType:
    """Import `module`, or fail with the pip command of the `[train]` extra.

    Args:
        module: dotted module name, e.g. ``"trl"`` or ``"peft.tuners.lora"``.

    Returns:
        The imported module.

    Raises:
        MissingExtraError: `module` (or a package it imports) belongs to the `[train]` extra and is missing.

    >>> require("json").__name__
    'json'
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        missing = (err.name or module).split(".")[0]
        if missing not in TRAIN_PACKAGES:
            raise
        error = MissingExtraError(
            f'fine-tuning needs {missing!r}, which is not installed: pip install "perrecbench[train]" '
            '(in a clone of the repository: pip install -e ".[train]")' + TORCH_FIRST
        )
        error.name = missing
        raise error from err
