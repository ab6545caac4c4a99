"""Optional extras: import one where it is needed, or fail with the pip command that installs it."""

from __future__ import annotations

import importlib
from types import ModuleType

from perrec_eval.errors import MissingExtraError

# The third-party packages of perrecbench's optional extras (``pyproject.toml``): one of these missing is
# the user's to install; any other missing module is a bug and keeps its traceback.
_PACKAGES = frozenset(
    {"torch", "transformers", "accelerate", "gguf", "peft", "safetensors", "trl"}
    | {"outlines", "outlines_core", "openai", "vllm"}
)
# Said wherever torch comes in: a bare `pip install torch` (or an extra that needs it) pulls the CUDA build.
_TORCH_FIRST = "; install torch first (pip install torch==2.13.0 is the CPU build, else your CUDA's build)"


def require(module: str, extra: str, *, by: str) -> ModuleType:
    """Import an optional dependency, or fail with the pip command of the extra that brings it.

    Args:
        module: dotted module name, e.g. ``"vllm"`` or ``"peft.tuners.lora"``.
        extra: perrecbench's extra that brings it (``hf``, ``structured``, ``openai``, ``vllm``, ``train``).
        by: what needs it, named in the error (``"the 'hf' engine"``, ``"fine-tuning"``).

    Returns:
        The imported module.

    Raises:
        MissingExtraError: the module (or a package it imports) belongs to an extra and is not installed.

    >>> require("json", "hf", by="the 'hf' engine").__name__
    'json'
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        missing = (err.name or module).split(".")[0]
        if missing not in _PACKAGES:
            raise
        error = MissingExtraError(
            f"{by} needs {missing!r}, which is not installed: "
            f'pip install "perrecbench[{extra}]" (in a clone of the repository: pip install -e ".[{extra}]")'
            + (_TORCH_FIRST if extra in ("hf", "train") else "")
        )
        error.name = missing
        raise error from err
