"""PerRecBench's scores.json as typed records: the PTC of each (level, method) cell and the run's metric.

Written by the runner with `to_json`, read by every reader with `read_scores` / `from_json`; the general
run.json record (`perrec_eval.results.RunInfo`) holds this family's `Metric`. Fields added after the first
runs were written are read with their value for those older files, each said once here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from perrec_eval import fileio
from perrec_eval.errors import DataError
from perrec_eval.results import is_number


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


def read_scores(path: str | os.PathLike) -> Scores:
    """A scores.json, checked: a JSON object whose cells carry their level, method, counts and numbers.

    Raises:
        DataError: anything else; the message names the file (and the cell).
    """
    fix = f"rewrite it with `perrecbench score {Path(path).parent} --write`"
    try:
        scores = Scores.from_json(fileio.read_json(path))
    except (KeyError, TypeError, AttributeError) as err:
        raise DataError(f"{path} is not a run's scores ({type(err).__name__}: {err}): {fix}") from err
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
