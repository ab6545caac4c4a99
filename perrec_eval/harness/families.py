"""Each family's harness adapter, by name: PerRecBench's own, the general path's for the others."""

from __future__ import annotations

import functools

from perrec_eval.errors import ConfigError
from perrec_eval.harness.requests import Adapter, GeneralAdapter
from perrec_eval.tasks import get


def adapter(name: str) -> Adapter:
    """The adapter of family `name`.

    Raises:
        ConfigError: a family that runs its own way without a harness adapter.
    """
    if name == "perrecbench":
        from perrec_eval.tasks.perrecbench.harness import ADAPTER

        return ADAPTER
    task = get(name)
    if task.load_docs is None or task.score_doc is None:
        raise ConfigError(f"task {name} has no harness export: it declares no docs and scorer of its own")
    return _general(name)


@functools.cache
def _general(name: str) -> GeneralAdapter:
    return GeneralAdapter(get(name))
