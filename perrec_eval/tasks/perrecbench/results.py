"""PerRecBench's scores as typed records: the PTC of each (level, method) cell and the run's metric.

scores.json has the layout every family's has (`perrec_eval.results.FamilyScores`): `Scores.to_family`
lays these records out in it (PTC, MAE and RMSE as metrics; the rest of a cell, such as its min. detectable
difference and floor, in its `extras`), `Scores.from_family` reads them back. Runs written before
2026-11-29 wrote `Scores.to_json` itself: `read_scores` and `legacy_scores` read that layout too. The
general run.json record (`perrec_eval.results.RunInfo`) holds this family's `Metric`. Fields added after the
first runs were written are read with their value for those older files, each said once here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from perrec_eval import fileio
from perrec_eval.errors import DataError
from perrec_eval.results import FamilyCell, FamilyScores, MetricValue, is_number

TASK = "perrecbench"
HEADLINE = "ptc"


@dataclass(frozen=True, slots=True, kw_only=True)
class CellScore:
    """The PTC of one (level, method) cell with its interval, counts, rating errors and diagnostics.

    The optional parts are written only where they apply: `ptc_missing` when nothing was scored,
    `num_clusters`, `design_effect` and `design_effect_bound` on clustered runs, `mae`/`rmse` where
    ratings were predicted, `constant_floor` on pointwise cells and the first-shown shares on listwise
    cells. The defaults of the other fields are what `from_json` reads from older runs' files, which lack
    them.
    """

    level: str
    method: str
    ptc: float | None
    ptc_ci_low: float | None
    ptc_ci_high: float | None
    num_groups: int
    num_invalid: int
    min_detectable_difference: float | None = None  # runs before 3035840 (2026-11-24)
    parse_failure_rate: float
    num_requests: int = 0  # runs before 402a133 (2026-11-23): no engine errors were counted
    num_engine_errors: int = 0  # idem
    engine_error_rate: float = 0.0  # idem
    ptc_missing: str | None = None
    num_clusters: int | None = None
    # the design effect observed on the run (`scoring.observed_design_effect`, which the min. detectable
    # difference carries) and its bound Σm²/Σm; runs before 2026-11-26 wrote the bound as design_effect
    design_effect: float | None = None
    design_effect_bound: float | None = None
    mae: float | None = None
    rmse: float | None = None
    constant_floor: float | None = None
    first_shown_first: float | None = None
    first_shown_truly_first: float | None = None
    num_listwise_answers: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if self._written(f.name)}

    def _written(self, name: str) -> bool:
        if name == "constant_floor":
            return self.method == "pointwise"
        if name in _LISTWISE:
            return self.method == "listwise"
        return name not in _OPTIONAL or getattr(self, name) is not None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CellScore:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


_OPTIONAL = ("ptc_missing", "num_clusters", "design_effect", "design_effect_bound", "mae", "rmse")
_LISTWISE = ("first_shown_first", "first_shown_truly_first", "num_listwise_answers")


@dataclass(frozen=True, slots=True, kw_only=True)
class Scores:
    """A run's scores.json: the metric's settings, the cells, their average and the engine errors.

    The defaults are what `from_json` reads from older runs' files, which lack those fields.
    """

    variant: str
    invalid: str
    confidence_level: float
    ci_method: str = "percentile bootstrap over groups"  # runs before 3035840 (2026-11-24)
    n_resamples: int = 1000  # idem: they resampled 1,000 times
    resolution_basis: str | None = None  # idem
    complete: bool = True  # runs before 402a133 (2026-11-23): no engine errors were counted
    num_engine_errors: int = 0  # idem
    first_engine_error: str | None = None  # idem
    # Errors that asking again cannot cure (a prompt over the context, ...): `profiles.permanent_fix`;
    # runs before c028686 (2026-11-24) do not tell them apart.
    num_permanent_errors: int = 0
    first_permanent_error: str | None = None
    first_transient_error: str | None = None
    cells: tuple[CellScore, ...]
    average: float | None
    average_min_detectable_difference: float | None = None  # runs before 3035840
    clustered_by: str | None = None  # only clustered runs write it, so an unclustered run's file is as before

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["cells"] = [cell.to_json() for cell in self.cells]
        if self.clustered_by is None:
            del out["clustered_by"]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Scores:
        known = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        return cls(**{**known, "cells": tuple(CellScore.from_json(cell) for cell in data["cells"])})

    def to_family(self) -> FamilyScores:
        """These scores in the layout of every family's scores.json (the numbers as they are)."""
        own = self.to_json()
        return FamilyScores(
            task=TASK,
            headline=HEADLINE,
            confidence_level=self.confidence_level,
            ci_method=self.ci_method,
            n_resamples=self.n_resamples,
            complete=self.complete,
            num_engine_errors=self.num_engine_errors,
            first_engine_error=self.first_engine_error,
            cells=tuple(_family_cell(cell) for cell in self.cells),
            average=self.average,
            extras={name: value for name, value in own.items() if name not in _SHARED_RUN},
        )

    @classmethod
    def from_family(cls, scores: FamilyScores) -> Scores:
        """The records `to_family` laid out, read back."""
        data = {name: getattr(scores, name) for name in _SHARED_RUN if name != "cells"}
        data |= dict(scores.extras or {})
        return cls.from_json({**data, "cells": [_cell_json(cell) for cell in scores.cells]})


# Fields of `Scores` and `CellScore` that the shared layout holds itself (the rest go to its extras).
_SHARED_RUN = (
    "confidence_level ci_method n_resamples complete num_engine_errors first_engine_error cells average"
).split()
_SHARED_CELL = {"level": "subset", "method": "protocol", "num_groups": "num_docs"}
_SHARED_CELL |= {"num_invalid": "num_failed"}
_SHARED_CELL |= {name: name for name in ("num_requests", "num_engine_errors", "num_clusters")}
_METRIC_FIELDS = ("ptc", "ptc_ci_low", "ptc_ci_high", "mae", "rmse")


def _family_cell(cell: CellScore) -> FamilyCell:
    own = cell.to_json()
    metrics = {HEADLINE: MetricValue(value=cell.ptc, ci_low=cell.ptc_ci_low, ci_high=cell.ptc_ci_high)}
    for name in ("mae", "rmse"):  # where ratings were predicted; no interval (a statistic of the users)
        if getattr(cell, name) is not None:
            metrics[name] = MetricValue(value=getattr(cell, name), ci_low=None, ci_high=None)
    return FamilyCell(
        **{shared: getattr(cell, name) for name, shared in _SHARED_CELL.items()},
        metrics=metrics,
        extras={name: value for name, value in own.items() if name not in (*_SHARED_CELL, *_METRIC_FIELDS)},
    )


def _cell_json(cell: FamilyCell) -> dict[str, Any]:
    data: dict[str, Any] = {name: getattr(cell, shared) for name, shared in _SHARED_CELL.items()}
    ptc = cell.metrics[HEADLINE]
    data |= {"ptc": ptc.value, "ptc_ci_low": ptc.ci_low, "ptc_ci_high": ptc.ci_high}
    for name in ("mae", "rmse"):
        if name in cell.metrics:
            data[name] = cell.metrics[name].value
    return data | dict(cell.extras or {})


def legacy_scores(data: Mapping[str, Any], path: str | os.PathLike = "scores.json") -> FamilyScores:
    """A scores.json written before 2026-11-29 (`Scores.to_json`) in the shared layout (`Task.legacy_scores`).

    Raises:
        DataError: not such a file; the message names it and the fix.
    """
    return _checked(Scores.from_json(data), path).to_family()


def read_scores(path: str | os.PathLike) -> Scores:
    """A scores.json, checked: a JSON object whose cells carry their level, method, counts and numbers, in
    the shared layout or in the one of runs written before 2026-11-29.

    Raises:
        DataError: anything else; the message names the file (and the cell).
    """
    fix = f"rewrite it with `perrecbench score {Path(path).parent} --write`"
    try:
        data = fileio.read_json(path)
        if isinstance(data, Mapping) and "headline" in data:
            if data.get("task") != TASK:
                raise DataError(f"{path} holds the scores of task {data.get('task')!r}, not {TASK}: {fix}")
            return _checked(Scores.from_family(FamilyScores.from_json(data)), path)
        scores = Scores.from_json(data)
    except (KeyError, TypeError, AttributeError) as err:
        raise DataError(f"{path} is not a run's scores ({type(err).__name__}: {err}): {fix}") from err
    return _checked(scores, path)


def _checked(scores: Scores, path: str | os.PathLike) -> Scores:
    """`scores` when every cell carries its level, method, counts and numbers.

    Raises:
        DataError: else; the message names the file and the cell.
    """
    fix = f"rewrite it with `perrecbench score {Path(path).parent} --write`"
    for cell in scores.cells:
        if not isinstance(cell.level, str) or not isinstance(cell.method, str):
            raise DataError(f"{path}: a cell without its level and method: {fix}")
        for name in ("ptc", "ptc_ci_low", "ptc_ci_high", "parse_failure_rate", "num_groups", "num_invalid"):
            value = getattr(cell, name)
            if value is not None and not is_number(value):
                where = f"{path}: {cell.level}/{cell.method}"
                raise DataError(f"{where} has {name}={value!r}, not a number: {fix}")
    if scores.average is not None and not is_number(scores.average):
        raise DataError(f"{path}: average={scores.average!r} is not a number: {fix}")
    return scores


@dataclass(frozen=True, slots=True)
class Metric:
    """How a run's PTC is computed: the tau variant (tau_b|paper) and what failed groups count (zero|skip)."""

    variant: str
    invalid: str

    def to_json(self) -> dict[str, str]:
        return {"variant": self.variant, "invalid": self.invalid}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], path: str | os.PathLike = "run.json") -> Metric:
        """run.json's metric part, checked (`Task.read_metric`).

        Raises:
            DataError: not a variant and a failed-group policy; the message names the file.
        """
        if data.get("variant") not in ("tau_b", "paper") or data.get("invalid") not in ("zero", "skip"):
            raise DataError(f"{path}: metric {data!r} is not a variant (tau_b|paper) and invalid (zero|skip)")
        return cls(data["variant"], data["invalid"])
