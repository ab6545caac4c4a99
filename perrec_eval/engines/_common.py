"""Small pieces every backend shares: lazy imports of optional extras and the partial-results callback."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType

from perrec_eval.types import Completion

# An engine that finishes requests one batch at a time reports each finished batch through this callback, as
# (index into the `requests` it was given, completion) pairs, so the cache can persist them before the whole
# call returns: a run killed mid-call then loses only the requests still in flight.
ResultsCallback = Callable[[list[tuple[int, Completion]]], None]

# Which optional extra of perrecbench brings each third-party module.
_EXTRA_OF: dict[str, str] = {
    "torch": "hf",
    "transformers": "hf",
    "accelerate": "hf",
    "peft": "train",
    "openai": "openai",
    "vllm": "vllm",
}


def require(module: str, *, engine: str) -> ModuleType:
    """Import an optional dependency, or fail with the pip command that installs it.

    Args:
        module: dotted module name, e.g. ``"vllm"`` or ``"vllm.lora.request"``.
        engine: the engine that needs it, named in the error.

    Returns:
        The imported module.

    >>> require("json", engine="fake").__name__
    'json'
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        missing = (err.name or module).split(".")[0]
        extra = _EXTRA_OF.get(missing)
        if extra is None:
            raise
        raise ImportError(
            f"the {engine!r} engine needs {missing!r}, which is not installed: "
            f'pip install "perrecbench[{extra}]"'
        ) from err


def split_evenly(items: list[int], size: int) -> list[list[int]]:
    """Cut a list into consecutive chunks of at most `size` items.

    >>> split_evenly([1, 2, 3, 4, 5], 2)
    [[1, 2], [3, 4], [5]]
    """
    if size < 1:
        raise ValueError(f"chunk size must be >= 1, got {size}")
    return [items[start : start + size] for start in range(0, len(items), size)]
