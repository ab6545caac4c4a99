"""The task families of the house, by name, loaded on first use (as the engines are).

`get("perrecbench")` imports `perrec_eval/tasks/perrecbench/task.py` and returns its `TASK`. A new family
is a folder beside `perrecbench/` and one line in `_FAMILIES`; `register` adds a family defined elsewhere
(a plugin, or a toy family inside the tests).

>>> names()[0], DEFAULT_TASK
('perrecbench', 'perrecbench')
"""

from __future__ import annotations

import importlib
from typing import Any

from perrec_eval.errors import ConfigError
from perrec_eval.tasks.base import Cell, Doc, Task, check_unique_protocols

__all__ = ["DEFAULT_TASK", "Cell", "Doc", "Task", "answer_regex", "get", "json_schema", "names", "register"]

DEFAULT_TASK = "perrecbench"
# name -> module defining TASK; imported on first use only.
_FAMILIES: dict[str, str] = {
    "perrecbench": "perrec_eval.tasks.perrecbench.task",
}
_registered: dict[str, Task] = {}


def names() -> tuple[str, ...]:
    """Every family's name: the built-in ones first, then the registered ones."""
    return (*_FAMILIES, *(name for name in _registered if name not in _FAMILIES))


def get(name: str) -> Task:
    """The family `name`.

    Raises:
        ConfigError: no such family; the message lists the known ones.
    """
    if name in _registered:
        return _registered[name]
    if name not in _FAMILIES:
        known = ", ".join(names())
        raise ConfigError(f"unknown task {name!r}: choose one of {known} (`perrecbench tasks` lists them)")
    task = importlib.import_module(_FAMILIES[name]).TASK
    if task.name != name:
        raise ValueError(f"{_FAMILIES[name]}.TASK is named {task.name!r}, registered as {name!r}")
    _registered[name] = task
    return task


def register(task: Task, *, replace: bool = False) -> None:
    """Add a family defined outside this package (tests, plugins); its protocol names must be new."""
    if not replace and (task.name in _FAMILIES or task.name in _registered):
        raise ValueError(f"a task named {task.name!r} exists; pass replace=True to replace it")
    check_unique_protocols([get(name) for name in names() if name != task.name] + [task])
    _registered[task.name] = task


def unregister(name: str) -> None:
    """Remove a family added with `register` (tests clean up with it)."""
    if name in _FAMILIES:
        raise ValueError(f"{name!r} is a built-in task")
    _registered.pop(name, None)


def _protocol_of_format(spec: str) -> tuple[Task, str]:
    head = spec.partition("+")[0].partition(":")[0]
    for name in names():
        task = get(name)
        if head in task.protocols:
            return task, head
    raise ValueError(f"answer format {spec!r} names no protocol of any task ({', '.join(names())})")


def answer_regex(spec: str) -> str:
    """The regular expression an answer of format `spec` (`GenParams.answer_format`) must match in full."""
    task, _ = _protocol_of_format(spec)
    return task.answer_regex(spec)


def json_schema(spec: str) -> dict[str, Any] | None:
    """A JSON schema of format `spec` for servers that only take ``response_format``; None if none fits."""
    task, _ = _protocol_of_format(spec)
    return task.json_schema(spec)


def describe_cell(task: Task, cell: Cell) -> str:
    """A cell in the family's words, e.g. ``level easy, method listwise``."""
    return f"{task.subset_axis} {cell.subset}, {task.protocol_axis} {cell.protocol}"
