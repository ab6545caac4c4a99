"""Each family's harness adapter, by name: PerRecBench's own, the general path's for the others."""

from __future__ import annotations

import functools

from perrec_eval.errors import ConfigError
from perrec_eval.harness.requests import Adapter, GeneralAdapter
from perrec_eval.registry import get, load


def adapter(name: str) -> Adapter:
    """The adapter of family `name`.

    Raises:
        ConfigError: a family that runs its own way without a harness adapter.
    """
    task = get(name)
    if task.harness is not None:
        return load(task.harness)
    if task.load_docs is None or task.score_doc is None:
        raise ConfigError(f"task {name} has no harness export: it declares no docs and scorer of its own")
    return _general(name)


@functools.cache
def _general(name: str) -> GeneralAdapter:
    return GeneralAdapter(get(name))
