"""Small pieces every backend shares: lazy imports of optional extras, typed options, and batching."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import typing
from types import ModuleType
from typing import Any

from perrec_eval.cliconfig import coerce

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


@functools.cache
def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def coerce_fields(options: Any) -> None:
    """Give every field of a frozen options dataclass its declared type, in place (for `__post_init__`).

    Text (``"4"`` from ``KEY=VALUE``) and YAML scalars become typed values, so an options object built from
    a flag, a file or Python holds the same values.

    Args:
        options: a dataclass instance whose fields are annotated with types `cliconfig.coerce` knows.

    Raises:
        ConfigError: a value does not fit its field's type; the message names the field and the type.
    """
    types = _field_types(type(options))
    for field in dataclasses.fields(options):
        value = getattr(options, field.name)
        typed = coerce(field.name, types[field.name], value)
        if typed is not value:
            object.__setattr__(options, field.name, typed)


def split_evenly(items: list[int], size: int) -> list[list[int]]:
    """Cut a list into consecutive chunks of at most `size` items.

    Args:
        items: the list to cut.
        size: the largest chunk.

    Returns:
        The chunks, in order.

    >>> split_evenly([1, 2, 3, 4, 5], 2)
    [[1, 2], [3, 4], [5]]
    """
    if size < 1:
        raise ValueError(f"chunk size must be >= 1, got {size}")
    return [items[start : start + size] for start in range(0, len(items), size)]
