"""What a suite folder holds (`perrec_eval.suite` writes it): its record ``suite.json``, its runs (one per
family and model, and each build's baselines) and its report, read back for reports and publishing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from perrec_eval import fileio, registry
from perrec_eval.errors import DataError

SUITE_FILE = "suite.json"
SUITE_VERSION = 1


def is_suite_file(path: PurePosixPath) -> bool:
    """Whether `path` (relative to a suite folder) is something a suite writes there.

    >>> is_suite_file(PurePosixPath("runs/llmrec/m/run.json")), is_suite_file(PurePosixPath("notes.txt"))
    (True, False)
    """
    return path == PurePosixPath(SUITE_FILE) or (
        len(path.parts) > 1 and path.parts[0] in ("data", "runs", "report")
    )


def read_record(out: Path) -> dict[str, Any]:
    path = out / SUITE_FILE
    if not path.is_file():
        return {"suite": SUITE_VERSION, "families": {}}
    data = fileio.read_json(path)
    if not isinstance(data, dict) or data.get("suite") != SUITE_VERSION:
        raise DataError(f"{path} is not a suite's record: choose another --out")
    return data


def write_record(out: Path, record: Mapping[str, Any]) -> None:
    fileio.write_json(out / SUITE_FILE, record)


def run_folders(paths: Sequence[str | os.PathLike]) -> list[Path]:
    """The run folders of `paths`: a suite folder stands for every run in it, any other path as
    `perrec_eval.rundir.run_folders` reads it."""
    from perrec_eval.rundir import run_folders as folders_of

    out: list[Path] = []
    order = {name: i for i, name in enumerate(registry.names())}
    for path in paths:
        folder = Path(path)
        if (folder / SUITE_FILE).is_file():
            for family in sorted(
                (child.name for child in (folder / "runs").iterdir() if child.is_dir()),
                key=lambda name: (order.get(name, len(order)), name),
            ):  # the families in the registry's order, each model's run before the baselines
                runs = folder / "runs" / family
                out += sorted(run.parent for run in runs.glob("*/run.json"))
                out += sorted(run.parent for run in runs.glob("baselines/*/*/run.json"))
        else:
            out += folders_of(path)
    return out


def model_runs(suite_dir: str | os.PathLike, model_ids: Sequence[str]) -> dict[str, Path]:
    """{family: run folder} of the model a suite ran under one of `model_ids` (its Hub id, the local copy
    it ran from, or its label).

    Raises:
        DataError: not a suite folder, or no run of such a model (the message lists the models it holds).
    """
    folder = Path(suite_dir)
    if not (folder / SUITE_FILE).is_file():
        raise DataError(
            f"{folder} is not a suite folder (no {SUITE_FILE}): pass the --out of `perrecbench evaluate "
            "--task all`"
        )
    from perrec_eval.results import read_run_info

    found: dict[str, Path] = {}
    seen = set()
    for run in sorted(folder.glob("runs/*/*/run.json")):
        info = read_run_info(run.parent)
        names = {info.config.get("model"), info.label, info.engine.get("model")}
        seen.add(str(info.label or info.config.get("model")))
        if names & set(model_ids):
            if info.task in found:
                raise DataError(f"{folder} holds two {info.task} runs of {model_ids[0]}: push one run folder")
            found[info.task] = run.parent
    if not found:
        raise DataError(
            f"{folder} holds no run of {' / '.join(model_ids)} (its models: "
            f"{', '.join(sorted(seen)) or 'none'}): pass --model with the name it ran under"
        )
    return found


def is_suite(paths: Sequence[str | os.PathLike]) -> bool:
    return any((Path(path) / SUITE_FILE).is_file() for path in paths)


def costs_of(paths: Sequence[str | os.PathLike]) -> dict[str, Any]:
    """What each model's family runs cost, from the suites' records: {label: {family: cost}}."""
    out: dict[str, Any] = {}
    for path in paths:
        file = Path(path) / SUITE_FILE
        if not file.is_file():
            continue
        for name, entry in (fileio.read_json(file).get("families") or {}).items():
            for label, model in (entry.get("models") or {}).items():
                out.setdefault(label, {})[name] = model.get("cost") or {}
    return out
