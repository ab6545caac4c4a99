"""The task families the builder knows, loaded lazily by name (``perrecbench build --task NAME``).

A family lives in its folder ``dataset_builder/<family>/``: its settings, a subclass of
:class:`dataset_builder.config.BuildSpec` with the class attributes ``task`` (its name) and ``description``
(the help of ``perrecbench build --task NAME``), in a module that imports nothing heavy (the CLI imports it to
build the parser), and its :class:`Builder` in a module that may import anything (imported when a build runs).
Adding a family means its folder and its line in the house's one registry (``perrec_eval.registry._FAMILIES``,
which names its evaluation part too); the shared build (:func:`dataset_builder.build.build`) and the
command line do the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dataset_builder.config import AMAZON_LAYOUT, BuildConfigError
from perrec_eval import registry
from perrec_eval.registry import Family

if TYPE_CHECKING:
    from dataset_builder.config import BuildSpec
    from dataset_builder.stages import StageSpec


_Family = Family  # (build config "module:Class", builder "module:NAME", task "module:NAME" | None)
_FAMILIES = registry._FAMILIES
DEFAULT_TASK = registry.DEFAULT_TASK


@dataclass(frozen=True, slots=True)
class Builder:
    """A task family's part of a build: the steps the shared build calls, in this order.

    - ``stage(cfg)``: one domain's stage (what it is keyed on, the selection it runs, the files it keeps);
    - ``plan(cfg, results)``: from every domain's stage (``{domain: the stage's JSON plus its files' paths}``)
      what to write, e.g. a split; raises :class:`~dataset_builder.config.BuildError` when nothing is left;
    - ``write(folder, cfg, results, plan, provenance)``: every file of the output into the (temp) folder,
      ``manifest.json`` and ``README.md`` included (``provenance``:
      :meth:`dataset_builder.sources.Source.kind`);
    - ``summary(out)``: what ``perrecbench build`` prints about the finished folder;
    - ``layouts``: the source layouts it reads (`dataset_builder.sources`: Amazon Reviews 2023's, and
      MovieLens-1M's where the family builds from it); a stage is told the layout by its inputs' kinds.
    """

    stage: Callable[[Any], StageSpec]
    plan: Callable[[Any, dict[str, dict[str, Any]]], Any]
    write: Callable[[Path, Any, dict[str, dict[str, Any]], Any, dict[str, Any]], None]
    summary: Callable[[Path], str]
    layouts: tuple[str, ...] = (AMAZON_LAYOUT,)


def task_names() -> tuple[str, ...]:
    """The families that can be built, default first.

    >>> task_names()[0]
    'perrecbench'
    """
    return tuple(name for name, family in _FAMILIES.items() if family.builder is not None)


def _load(name: str, which: str) -> Any:
    if name not in task_names():
        raise BuildConfigError(f"unknown --task {name!r}; known tasks: {', '.join(task_names())}")
    return registry.load(getattr(_FAMILIES[name], which))


def task_config(name: str) -> type[BuildSpec]:
    """The settings class of family `name` (importing its light config module only).

    Raises:
        BuildConfigError: an unknown name (the message lists the known ones).

    >>> task_config("perrecbench").task
    'perrecbench'
    """
    return _load(name, "build_config")


def task_builder(name: str) -> Builder:
    """The builder of family `name` (importing its modules).

    Raises:
        BuildConfigError: an unknown name (the message lists the known ones).
    """
    return _load(name, "builder")
