"""Optional extras: import one where it is needed, or fail with the pip command that installs it."""

from __future__ import annotations

import importlib
import warnings
from types import ModuleType

from perrec_eval.errors import MissingExtraError

# What an extra brings besides the module asked for (``pyproject.toml``; the asked-for package itself always
# counts): one of these missing is the user's to install; any other missing module is a bug and keeps its
# traceback.
_PACKAGES = frozenset(
    {"torch", "transformers", "accelerate", "gguf", "peft", "safetensors", "trl"}
    | {"outlines", "outlines_core", "openai", "vllm"}
)
# Warnings a library raises from its own calls into another, which no user of perrecbench can act on: hidden
# once the library is imported through `require`. PEFT (and TRL through it) reads transformers' deprecated
# `is_gradient_checkpointing` on every model it wraps (a FutureWarning on `sft train`, `sft merge` and every
# adapter an engine loads).
_FOREIGN_WARNINGS = {
    "peft": (FutureWarning, r"`is_gradient_checkpointing` is deprecated"),
    "trl": (FutureWarning, r"`is_gradient_checkpointing` is deprecated"),
}
# Said wherever torch comes in: a bare `pip install torch` (or an extra that needs it) pulls the CUDA build.
_TORCH_FIRST = (
    "; install torch first (the CPU build: pip install torch==2.13.0 --index-url "
    "https://download.pytorch.org/whl/cpu; else your CUDA's build)"
)


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
        imported = importlib.import_module(module)
    except ModuleNotFoundError as err:
        missing = (err.name or module).split(".")[0]
        if missing not in _PACKAGES and missing != module.split(".")[0]:
            raise
        error = MissingExtraError(
            f"{by} needs {missing!r}, which is not installed: "
            f'pip install "perrecbench[{extra}]" (in a clone of the repository: pip install -e ".[{extra}]")'
            + (_TORCH_FIRST if extra in ("hf", "train") else "")
        )
        error.name = missing
        raise error from err
    if (foreign := _FOREIGN_WARNINGS.get(module.split(".")[0])) is not None:
        warnings.filterwarnings("ignore", message=foreign[1], category=foreign[0])
    return imported
