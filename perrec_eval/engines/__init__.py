"""Inference backends behind one interface, loaded lazily by name.

Each backend lives in one module of this package with its options dataclass (`FakeOptions`, `HFOptions`,
`OpenAIOptions`, `VLLMOptions`). A module imports its heavy dependencies only when an engine is built, so
importing it (for its options, or for `perrecbench --help`) stays fast, and a missing extra fails with the
pip command that installs it (`perrec_eval.extras.require`). Adding a backend means one module here, one
line in `_BACKENDS`, and its extra in ``pyproject.toml``.
"""

from __future__ import annotations

import dataclasses
import importlib
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

from perrec_eval.cliconfig import describe, options_from_pairs
from perrec_eval.engines.base import Engine, ResultsCallback, checked
from perrec_eval.errors import ConfigError, MissingExtraError


class _Backend(NamedTuple):
    module: str
    engine: str  # class name in `module`
    options: str  # class name in `module`
    needs: tuple[tuple[str, str], ...] = ()  # (module, extra) the engine cannot load without


# `baseline` is not here: it is the ranking runner's business, not an LLM backend.
_BACKENDS: dict[str, _Backend] = {
    "fake": _Backend("perrec_eval.engines.fake", "FakeEngine", "FakeOptions"),
    "hf": _Backend(
        "perrec_eval.engines.hf", "HFEngine", "HFOptions", (("torch", "hf"), ("transformers", "hf"))
    ),
    "openai": _Backend(
        "perrec_eval.engines.openai", "OpenAIEngine", "OpenAIOptions", (("openai", "openai"),)
    ),
    "vllm": _Backend("perrec_eval.engines.vllm", "VLLMEngine", "VLLMOptions", (("vllm", "vllm"),)),
}
ENGINE_NAMES: tuple[str, ...] = tuple(_BACKENDS)

__all__ = [
    "ENGINE_NAMES",
    "Engine",
    "check_installed",
    "MissingExtraError",
    "ResultsCallback",
    "checked",
    "describe_options",
    "load_engine",
    "options_class",
    "parse_options",
]


def _class(name: str, role: Literal["engine", "options"]) -> Any:
    """The engine or options class of backend `name`, importing its (light) module."""
    if name not in _BACKENDS:
        raise ConfigError(f"unknown engine {name!r}: choose one of {', '.join(ENGINE_NAMES)}")
    backend = _BACKENDS[name]
    return getattr(importlib.import_module(backend.module), getattr(backend, role))


def options_class(name: str) -> type:
    """The options dataclass of engine `name` (importing its module, never its heavy dependencies).

    Args:
        name: one of `ENGINE_NAMES`.

    Returns:
        A frozen dataclass whose fields are the engine's options, each with a default.

    Raises:
        ConfigError: unknown engine name (the message lists the known ones).

    >>> options_class("hf")().batch_size
    8
    """
    return _class(name, "options")


def parse_options(name: str, pairs: Sequence[str] = (), /, **given: Any) -> Any:
    """The options of engine `name` from ``KEY=VALUE`` strings and keyword values.

    Args:
        name: one of `ENGINE_NAMES`.
        pairs: ``KEY=VALUE`` strings (``--engine-arg``), typed by the options' fields; later ones win.
        **given: values by option name (e.g. ``base_url=`` from a shortcut flag); None values are ignored,
            so a flag left unset keeps the engine's default. `pairs` override them.

    Returns:
        An instance of `options_class(name)`.

    Raises:
        ConfigError: unknown engine, malformed pair, unknown key (the message lists the valid ones) or a
            value that does not fit.

    >>> options = parse_options("hf", ["batch_size=4"], device="cpu", dtype=None)
    >>> options.batch_size, options.device, options.dtype
    (4, 'cpu', 'auto')
    """
    return options_from_pairs(options_class(name), pairs, f"the {name!r} engine", **given)


def check_installed(name: str) -> None:
    """Fail now, with the pip command, when engine `name`'s extra is not installed: for work that would run
    long (a suite's builds and baselines) before the engine is loaded. Imports nothing.

    Raises:
        MissingExtraError: a package the engine needs is not installed.
    """
    from importlib.util import find_spec

    from perrec_eval.extras import require

    backend = _BACKENDS.get(name)
    for module, extra in backend.needs if backend is not None else ():
        if find_spec(module) is None:
            require(module, extra, by=f"the '{name}' engine")  # raises, naming the extra


def load_engine(
    name: str, model: str, *, adapter: str | None = None, options: Any | Mapping[str, Any] | None = None
) -> Engine:
    """Build the engine called `name` for `model`.

    Args:
        name: one of ``fake``, ``hf``, ``openai``, ``vllm``.
        model: model id, local path or served model name (for ``fake``: a script name, e.g. ``constant``).
        adapter: a LoRA adapter (a folder for hf and vllm, a served name for openai), or None.
        options: the engine's options: None (the defaults), an instance of `options_class(name)`, or a
            mapping of option names to values (checked and typed like ``--engine-arg``).

    Returns:
        The engine, ready to `generate`.

    Raises:
        ConfigError: unknown engine name, options of another engine, or invalid options.
        MissingExtraError: the engine's optional extra is not installed (the message names the pip command);
            an `ImportError` and a `PerrecbenchError`.

    >>> load_engine("fake", "constant").info()["responder"]
    'constant'
    """
    cls = options_class(name)
    if options is None:
        options = cls()
    elif isinstance(options, Mapping):
        options = _from_mapping(name, cls, options)
    elif not isinstance(options, cls):
        raise ConfigError(
            f"the {name!r} engine takes {cls.__name__} (or a mapping of its options), "
            f"got {type(options).__name__}"
        )
    return _class(name, "engine")(model=model, options=options, adapter=adapter)


def _from_mapping(name: str, cls: type, values: Mapping[str, Any]) -> Any:
    """`cls` from a mapping; unlike in `parse_options`, None is a value here ("none"), not "unset"."""
    names = [field.name for field in dataclasses.fields(cls)]
    named = {str(key).replace("-", "_"): value for key, value in values.items()}
    unknown = sorted(set(named) - set(names))
    if unknown:
        raise ConfigError(f"the {name!r} engine has no option {unknown[0]!r}; valid ones: {', '.join(names)}")
    return cls(**named)


def describe_options(name: str) -> str:
    """One line per option of engine `name`: its name, type, default and help (for a ``--help`` epilog).

    Args:
        name: one of `ENGINE_NAMES`.

    Returns:
        The lines, joined by newlines.

    >>> print(describe_options("fake"))  # doctest: +ELLIPSIS
      report_every (int, default 256): report finished requests to the cache in chunks of this many ...
    """
    cls = options_class(name)
    types = typing.get_type_hints(cls)
    lines = []
    for field in dataclasses.fields(cls):
        default = _as_text(field.default)
        lines.append(
            f"  {field.name} ({describe(types[field.name])}, default {default}): {field.metadata['help']}"
        )
    return "\n".join(lines)


def _as_text(value: Any) -> str:
    """A default as it would be written in ``KEY=VALUE``."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)
