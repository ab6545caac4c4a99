"""Inference backends behind one interface, loaded lazily by name.

Each backend module imports its heavy dependencies only when an engine is built, so importing this package
(and `perrecbench --help`) stays fast, and a missing extra fails with the pip command that installs it.
"""

from __future__ import annotations

import importlib
from typing import Any

from perrec_eval.engines._common import ResultsCallback
from perrec_eval.engines.base import Engine

# name -> (module, class). `baseline` is not here: it is the ranking runner's business, not an LLM backend.
_BACKENDS: dict[str, tuple[str, str]] = {
    "fake": ("perrec_eval.engines.fake", "FakeEngine"),
    "hf": ("perrec_eval.engines.hf", "HFEngine"),
    "openai": ("perrec_eval.engines.openai", "OpenAIEngine"),
    "vllm": ("perrec_eval.engines.vllm", "VLLMEngine"),
}
ENGINE_NAMES: tuple[str, ...] = tuple(_BACKENDS)

__all__ = ["ENGINE_NAMES", "Engine", "ResultsCallback", "load_engine"]


def load_engine(name: str, model: str, **options: Any) -> Engine:
    """Build the engine called `name` for `model`.

    Args:
        name: one of ``fake``, ``hf``, ``openai``, ``vllm``.
        model: model id, local path or served model name.
        **options: keyword arguments of that engine's constructor (e.g. ``adapter=``, ``base_url=``,
            ``concurrency=``; the fake engine needs ``responder=``).

    Returns:
        The engine, ready to `generate`.

    Raises:
        ValueError: unknown engine name (the message lists the known ones).
        ImportError: the engine's optional extra is not installed (the message names the pip command).

    >>> load_engine("fake", "scripted", responder=lambda request, params, i: "[User A]").info()["model"]
    'scripted'
    """
    if name not in _BACKENDS:
        raise ValueError(f"unknown engine {name!r}: choose one of {', '.join(ENGINE_NAMES)}")
    module_name, class_name = _BACKENDS[name]
    backend = getattr(importlib.import_module(module_name), class_name)
    return backend(model=model, **options)
