"""The task families of the house, by name, loaded on first use (as the engines are).

`get("perrecbench")` imports `perrec_eval/tasks/perrecbench/task.py` and returns its `TASK`. A new family
is a folder under `perrec_eval/tasks/` and one line in `_FAMILIES`; `register` adds a family defined
elsewhere (a plugin, or a toy family inside the tests). The registry sits below the engines and the family
folders: it names the families by their modules' paths and imports none until one is asked for.

>>> names()[0], DEFAULT_TASK
('perrecbench', 'perrecbench')
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, NamedTuple

from perrec_eval.errors import ConfigError
from perrec_eval.task import Cell, Doc, Parsed, Task, check_unique_protocols

__all__ = [
    "DEFAULT_TASK",
    "Cell",
    "Doc",
    "Parsed",
    "Task",
    "answer_regex",
    "get",
    "json_schema",
    "names",
    "register",
]


class Family(NamedTuple):
    """Where a family's parts live, each "module:NAME", imported on first use only.

    `build_config`: its `perrecbench build` settings (a light module: the CLI imports it to build the
    parser); `builder`: its `dataset_builder.tasks.Builder`; `task`: its `Task` (None while the family
    can only be built).
    """

    build_config: str | None
    builder: str | None
    task: str | None = None


DEFAULT_TASK = "perrecbench"
# The one registry of the house: the builder (`dataset_builder.tasks`) and the runner read it.
_FAMILIES: dict[str, Family] = {
    "perrecbench": Family(
        "dataset_builder.perrecbench.config:BuildConfig",
        "dataset_builder.perrecbench.builder:BUILDER",
        "perrec_eval.tasks.perrecbench.task:TASK",
    ),
    "llmrec": Family(
        "dataset_builder.llmrec.config:BuildConfig",
        "dataset_builder.llmrec.builder:BUILDER",
        "perrec_eval.tasks.llmrec.task:TASK",
    ),
    "recbench-plus": Family(
        "dataset_builder.recbench_plus.config:BuildConfig",
        "dataset_builder.recbench_plus.builder:BUILDER",
        "perrec_eval.tasks.recbench_plus.task:TASK",
    ),
}
_registered: dict[str, Task] = {}


def names() -> tuple[str, ...]:
    """Every family's name: the built-in ones first, then the registered ones."""
    return (*_FAMILIES, *(name for name in _registered if name not in _FAMILIES))


def check_name(name: str) -> None:
    """Refuse a name no family has, in one line listing the families (nothing is imported).

    Raises:
        ConfigError: an unknown name.
    """
    if name not in names():
        known = ", ".join(names())
        raise ConfigError(f"unknown task {name!r}: choose one of {known} (`perrecbench tasks` lists them)")


def load(spec: str) -> Any:
    """The object a "module:NAME" spec names."""
    module, _, attribute = spec.partition(":")
    return getattr(importlib.import_module(module), attribute)


def get(name: str) -> Task:
    """The family `name`.

    Raises:
        ConfigError: no such family; the message lists the known ones.
    """
    if name in _registered:
        return _registered[name]
    check_name(name)
    if _FAMILIES[name].task is None:
        raise ConfigError(f"task {name} can be built but not yet evaluated: it declares no Task")
    task = load(_FAMILIES[name].task)
    if task.name != name:
        raise ValueError(f"{_FAMILIES[name]}.TASK is named {task.name!r}, registered as {name!r}")
    _registered[name] = task
    return task


def register(task: Task, *, replace: bool = False) -> None:
    """Add a family defined outside this package (tests, plugins); its protocol names must be new."""
    if not replace and (task.name in _FAMILIES or task.name in _registered):
        raise ValueError(f"a task named {task.name!r} exists; pass replace=True to replace it")
    check_unique_protocols([get(name) for name in evaluable() if name != task.name] + [task])
    _registered[task.name] = task


def unregister(name: str) -> None:
    """Remove a family added with `register` (tests clean up with it)."""
    if name in _FAMILIES:
        raise ValueError(f"{name!r} is a built-in task")
    _registered.pop(name, None)


def _protocol_of_format(spec: str) -> tuple[Task, str]:
    head = spec.partition("+")[0].partition(":")[0]
    for name in evaluable():
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


# The general path's command-line commands: command -> "module:ConfigClass:handler".
GENERAL_COMMANDS: dict[str, str] = {
    "evaluate": "perrec_eval.evaluation:TaskEvalConfig:evaluate_command",
    "score": "perrec_eval.evaluation:TaskScoreConfig:score_command",
    "sft data": "sft.family_data:FamilyDataConfig:write_command",
}
# Commands that take any family's runs and tell the families apart themselves.
EVERY_FAMILY = ("report", "push results")


def _load(spec: str) -> tuple[type, Callable[[Any], int]]:
    module, cls, handler = spec.split(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, cls), getattr(loaded, handler)


def default_command(command: str) -> tuple[type, Callable[[Any], int]]:
    """The default family's config class and handler of `command`: what a command line without --task runs."""
    return _load(get(DEFAULT_TASK).handlers[command])


def evaluable() -> tuple[str, ...]:
    """The families that declare a Task (the others can only be built so far)."""
    return tuple(name for name in names() if name in _registered or _FAMILIES[name].task is not None)


def command_for(task: Task, command: str, cls: type, handler: Callable[[Any], int]) -> tuple[type, Any]:
    """The config class and handler of `command` for `task`: its own, the general path's, or a refusal."""
    if command in task.handlers:
        return _load(task.handlers[command])
    if command in EVERY_FAMILY:
        return cls, handler
    if command in GENERAL_COMMANDS and task.load_docs is not None:
        return _load(GENERAL_COMMANDS[command])
    return cls, refusal(task.name, command, "`perrecbench tasks` describes it")


# `perrecbench evaluate --task all|NAME,NAME`: a list of tasks (`perrec_eval.suite`)
ALL = "all"
SUITE_COMMAND = "perrec_eval.suite:SuiteConfig:evaluate_command"


def is_suite_spec(spec: str | None) -> bool:
    """Whether a ``--task`` value names a suite (``all``, or several families) rather than one family.

    >>> is_suite_spec("all"), is_suite_spec("perrecbench,llmrec"), is_suite_spec("llmrec")
    (True, True, False)
    """
    return spec is not None and (spec.strip() == ALL or "," in spec)


def parse_tasks(spec: str) -> tuple[str, ...]:
    """The families a ``--task`` value names: ``all`` (every evaluable family) or a comma-separated list.

    Raises:
        ConfigError: an unknown family, or one named twice.
    """
    if spec.strip() == ALL:
        return evaluable()
    names = tuple(part.strip() for part in spec.split(",") if part.strip())
    if not names:
        raise ConfigError(f"--task {spec!r} names no family: pass all, or NAME,NAME")
    for name in names:
        check_name(name)
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(f"--task names {', '.join(repeated)} twice: name each family once")
    return names


def suite_command() -> tuple[type, Callable[[Any], int]]:
    """The config class and handler of `perrecbench evaluate --task all` (`perrec_eval.suite`)."""
    return _load(SUITE_COMMAND)


def evaluate_command(task: Task) -> tuple[type, Callable[[Any], int]]:
    """The config class and handler of `task`'s evaluate: its own, or the general path's."""
    return _load(task.handlers.get("evaluate") or GENERAL_COMMANDS["evaluate"])


def refusal(name: str, command: str, why: str) -> Callable[[Any], int]:
    """A handler that refuses `command` for family `name` in one line."""

    def refuse(config: Any) -> int:
        raise ConfigError(f"task {name} has no `{command}` command: {why}")

    return refuse


def describe_cell(task: Task, cell: Cell) -> str:
    """A cell in the family's words, e.g. ``level easy, method listwise``."""
    return f"{task.subset_axis} {cell.subset}, {task.protocol_axis} {cell.protocol}"
