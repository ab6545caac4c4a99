"""The lines of a general-path run's files: ``samples.jsonl`` (`DocSample`) and ``predictions.jsonl``
(`DocPrediction`), with their readers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perrec_eval import fileio
from perrec_eval.errors import DataError
from perrec_eval.task import Cell, Task


@dataclass(frozen=True, slots=True)
class DocSample:
    """One engine request of a run and what came back (a line of ``samples.jsonl``)."""

    id: str
    subset: str
    protocol: str
    step: int
    slot: Any
    key: str | None
    texts: list[str]
    parsed: list[Any]
    value: Any
    ok: bool
    reason: str | None
    num_failed_samples: int
    prompt_tokens: int | None
    completion_tokens: int | None
    error: str | None = None
    finish_reasons: list[str | None] | None = None

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class DocPrediction:
    """A doc's prediction in one cell and its truth (a line of ``predictions.jsonl``); None: it failed."""

    subset: str
    protocol: str
    id: str
    prediction: Any
    truth: Any
    cluster: str | None = None

    @property
    def cell(self) -> Cell:
        return Cell(self.subset, self.protocol)

    def to_json(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__slots__}
        if self.cluster is None:
            del out["cluster"]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DocPrediction:
        return cls(**{name: data.get(name) for name in cls.__slots__})


def read_predictions(run_dir: str | Path, task: Task | None = None) -> list[DocPrediction]:
    """predictions.jsonl of a general-path run (of `task`: each row must be of one of its cells), each
    (cell, doc) once.

    Raises:
        DataError: a line that is not a prediction, a row given twice (it would be counted twice), or one
            of a cell `task` has none of (a run.json that names another family than the one that wrote the
            run: its rows would be scored by the wrong rules).
    """
    path = Path(run_dir) / "predictions.jsonl"
    try:
        records = [DocPrediction.from_json(line) for line in fileio.read_jsonl(path)]
    except TypeError as err:
        raise DataError(
            f"{path} is not a run's predictions ({err}): run `perrecbench evaluate` again"
        ) from err
    cells = set(task.cells()) if task is not None else None
    foreign = next((record for record in records if cells is not None and record.cell not in cells), None)
    if foreign is not None and task is not None:
        raise DataError(
            f"{path} holds predictions of {foreign.subset}/{foreign.protocol}, a cell task {task.name} has "
            "not: the run's run.json names another task than the one that wrote it; run `perrecbench "
            "evaluate` again"
        )
    seen: set[tuple[str, str, str]] = set()
    for number, record in enumerate(records, start=1):
        key = (record.subset, record.protocol, str(record.id))
        if key in seen:
            raise DataError(
                f"{path} line {number} repeats row {key[2]!r} of {key[0]}/{key[1]}: run `perrecbench "
                "evaluate` again with the run's settings to rewrite it"
            )
        seen.add(key)
    return records


def read_samples(run_dir: str | Path) -> list[DocSample]:
    """samples.jsonl of a general-path run (none for a baseline's run)."""
    path = Path(run_dir) / "samples.jsonl"
    if not path.is_file():
        return []
    try:
        return [DocSample(**line) for line in fileio.read_jsonl(path)]
    except TypeError as err:
        raise DataError(f"{path} is not a run's samples ({err}): run `perrecbench evaluate` again") from err
