"""Which runs may share a table, and how each row is named.

Runs are compared only on the same dataset fingerprint, split and group set: anything else is refused with
one line that says what differs, or, with ``allow_mixed``, split into separate tables. Within a table each
row is named by its model (and adapter) plus every setting that differs between the table's runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from perrec_eval.errors import DataError
from perrec_eval.tasks.perrecbench.leaderboard.runs import SETTINGS, Run

Key = tuple[str | None, str, frozenset[str]]


def key(run: Run) -> Key:
    """What must be equal for two runs to be compared: dataset fingerprint, split, group set."""
    return (run.fingerprint, run.split, run.group_ids)


def partition(runs: Sequence[Run]) -> list[list[Run]]:
    """The runs split into comparable sets, in the order each set's first run was given."""
    sets: dict[Key, list[Run]] = {}
    for run in runs:
        sets.setdefault(key(run), []).append(run)
    return list(sets.values())


def check_comparable(runs: Sequence[Run]) -> None:
    """Refuse runs that differ in dataset fingerprint, split or group set, naming what differs.

    Raises:
        DataError: one line listing each difference and the way out (``--allow-mixed``).
    """
    if len(partition(runs)) <= 1:
        return
    raise DataError(
        "these runs cannot share a table: "
        + "; ".join(differences(runs))
        + ". Compare runs of one build, split and group set (same --data, --split, --max-groups and --seed), "
        "or pass --allow-mixed to show each comparable set in its own table"
    )


def differences(runs: Sequence[Run]) -> list[str]:
    """What differs between the runs: fingerprint, split, group set, each with its values."""
    out = []
    fingerprints = _by_value(runs, lambda run: (run.fingerprint or "unknown")[:12])
    if len(fingerprints) > 1:
        out.append("dataset fingerprint differs (" + _listing(fingerprints) + ")")
    splits = _by_value(runs, lambda run: run.split)
    if len(splits) > 1:
        out.append("split differs (" + _listing(splits) + ")")
    group_sets = {run.group_ids for run in runs}
    if len(group_sets) > 1:
        shared = frozenset.intersection(*group_sets)
        sizes = _by_value(runs, lambda run: f"{len(run.group_ids)} groups", index=lambda run: run.group_ids)
        out.append(f"group sets differ ({_listing(sizes)}; {len(shared)} shared by all)")
    return out


def _by_value(runs: Sequence[Run], show, index=None) -> dict[Any, tuple[str, list[str]]]:
    """Runs grouped by a value: {value (or `index`): (value shown, [run paths])}."""
    grouped: dict[Any, tuple[str, list[str]]] = {}
    for run in runs:
        value = show(run)
        grouped.setdefault(index(run) if index else value, (value, []))[1].append(str(run.path))
    return grouped


def _listing(grouped: dict[Any, tuple[str, list[str]]]) -> str:
    """``a, b: X; c: Y``, at most three paths per value."""
    parts = []
    for shown, paths in grouped.values():
        names = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
        parts.append(f"{names}: {shown}")
    return "; ".join(parts)


def differing_settings(runs: Sequence[Run]) -> list[str]:
    """The settings (of `SETTINGS`) with more than one value among the runs it applies to."""
    return [name for name in SETTINGS if len({run.settings.get(name) for run in runs} - {None}) > 1]


def labels(runs: Sequence[Run]) -> list[str]:
    """One distinct row label per run: model (+ adapter) and every setting that differs in the table.

    The fake engine's scripts read ``fake:NAME`` (`runs.system_name`). A no-LLM baseline named like a model of
    the table is marked "baseline". Runs that still share a label (the same command twice) get their folder
    name appended (their path where the folder names agree too).
    """
    names = differing_settings(runs)
    models = {run.model for run in runs if not run.is_baseline}
    out = []
    for run in runs:
        shown = [
            f"{name}={_show(run.settings[name])}" for name in names if run.settings.get(name) is not None
        ]
        if run.is_baseline and run.model in models:
            shown.insert(0, "baseline")
        out.append(run.model + (f" ({', '.join(shown)})" if shown else ""))
    labelled = out
    for where in (lambda run: run.path.name, lambda run: str(run.path)):
        labelled = [
            f"{label} [{where(run)}]" if out.count(label) > 1 else label
            for label, run in zip(out, runs, strict=True)
        ]
        if len(set(labelled)) == len(labelled):
            break
    return labelled


def _show(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
