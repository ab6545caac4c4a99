"""A run's results as typed records: its scores (scores.json) and what was run (run.json).

This module alone knows the layout of the two files, the same for every family: run.json (`RunInfo`) and
scores.json (`FamilyScores`: cells, metrics, intervals, and what a family adds in `extras`). Writers use
`to_json`, every reader (the leaderboard, `perrecbench score`, publishing) `read_family_scores`, which also
reads the layout a family wrote before this one (`Task.legacy_scores`: PerRecBench's own scores.json of runs
written before 2026-11-29). Fields added after the first runs were written are read with their value for
those older files, each said once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from perrec_eval import fileio
from perrec_eval.errors import DataError
from perrec_eval.registry import DEFAULT_TASK

RERUN = "the file was cut or edited; run `perrecbench evaluate` again with the run's settings to rewrite it"


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricValue:
    """One metric of one cell: its value over the cell's docs and its interval (None: no doc to score)."""

    value: float | None
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class FamilyCell:
    """One cell of a family run through the general path: its counts and every metric with its interval."""

    subset: str
    protocol: str
    num_docs: int
    num_failed: int
    num_requests: int = 0
    num_engine_errors: int = 0
    num_clusters: int | None = None
    # what the family counts in its parsed answers, summed over the cell (`Task.answer_counts`)
    answer_counts: Mapping[str, int] | None = None
    # the family's flag of answers a cell's rows cannot give (`Task.leak_check`), where it flags the cell
    leak: Mapping[str, Any] | None = None
    metrics: Mapping[str, MetricValue]
    # what the family records of a cell beyond its metrics (PerRecBench: min. detectable difference, floor,
    # parse failures, listwise position bias): JSON values, read by the family's report hooks
    extras: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("metrics", "extras")}
        for name in ("num_clusters", "answer_counts", "leak"):  # absent where they do not apply
            if out[name] is None:
                del out[name]
        out["metrics"] = {name: vars_of(value) for name, value in self.metrics.items()}
        if self.extras is not None:
            out["extras"] = dict(self.extras)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FamilyCell:
        known = {f.name: data[f.name] for f in fields(cls) if f.name in data and f.name != "metrics"}
        metrics = {name: MetricValue(**value) for name, value in data["metrics"].items()}
        return cls(**known, metrics=metrics)


@dataclass(frozen=True, slots=True, kw_only=True)
class FamilyScores:
    """scores.json of a family run through the general path (`perrec_eval.evaluation`)."""

    task: str
    headline: str
    confidence_level: float
    ci_method: str
    n_resamples: int
    complete: bool
    num_engine_errors: int
    first_engine_error: str | None
    cells: tuple[FamilyCell, ...]
    average: float | None
    # what the family records of the run beyond its cells (PerRecBench: the tau variant, the failed-group
    # policy, the average's min. detectable difference); absent where None
    extras: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["cells"] = [cell.to_json() for cell in self.cells]
        if self.extras is None:
            del out["extras"]
        return out

    def cell(self, subset: str, protocol: str) -> FamilyCell | None:
        """The cell `subset`/`protocol`, or None when the run did not score it."""
        return next((c for c in self.cells if (c.subset, c.protocol) == (subset, protocol)), None)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FamilyScores:
        known = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        return cls(**{**known, "cells": tuple(FamilyCell.from_json(cell) for cell in data["cells"])})


def vars_of(record: Any) -> dict[str, Any]:
    return {f.name: getattr(record, f.name) for f in fields(record)}


def read_family_scores(path: str | os.PathLike, task: str | None = None) -> FamilyScores:
    """A run's scores.json, checked; a family's older layout (`Task.legacy_scores`) read into this one.

    Args:
        path: the scores.json.
        task: the run's family (its run.json's), whose older layout a file without ``headline`` is.

    Raises:
        DataError: not such a file; the message names it and the fix.
    """
    fix = f"rewrite it with `perrecbench score {Path(path).parent} --write`"
    try:
        data = fileio.read_json(path)
        if isinstance(data, Mapping) and "headline" not in data:
            from perrec_eval.registry import get

            family = get(task or DEFAULT_TASK)
            if family.legacy_scores is not None:
                return family.legacy_scores(data, path)
        scores = FamilyScores.from_json(data)
    except (KeyError, TypeError, AttributeError) as err:
        raise DataError(f"{path} is not a run's scores ({type(err).__name__}: {err}): {fix}") from err
    problem = _scores_problem(scores)
    if problem:
        raise DataError(f"{path}: {problem}: {fix}")
    return scores


def _scores_problem(scores: FamilyScores) -> str | None:
    """What makes read scores unusable (a cell without its names, a value that is not a number), or None."""
    for cell in scores.cells:
        if not isinstance(cell.subset, str) or not isinstance(cell.protocol, str):
            return "a cell without its subset and protocol"
        for name in ("num_docs", "num_failed"):
            if not is_number(getattr(cell, name)):
                return f"{cell.subset}/{cell.protocol} has {name}={getattr(cell, name)!r}, not a number"
        for metric, value in cell.metrics.items():
            for part in ("value", "ci_low", "ci_high"):
                number = getattr(value, part)
                if number is not None and not is_number(number):
                    return f"{cell.subset}/{cell.protocol} has {metric} {part}={number!r}, not a number"
    if scores.average is not None and not is_number(scores.average):
        return f"average={scores.average!r} is not a number"
    return None


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class FamilyMetric:
    """What a general-path run of a family is ranked by: its task and headline metric."""

    task: str
    headline: str

    def to_json(self) -> dict[str, str]:
        return {"task": self.task, "headline": self.headline}


@dataclass(frozen=True, slots=True, kw_only=True)
class RunInfo:
    """A run's run.json: its config, engine, metric, versions and groups; model runs add how they ran.

    Models and no-LLM baselines write one layout: every field, in this order, None where it does not apply
    (a baseline sends no request; only the collaborative-filtering baselines have `cf`). Baseline runs
    written before 2026-11-26 hold only their parts. `config` is the run's config as recorded (secrets
    redacted), `engine` the engine's own description: open records of other modules.
    """

    config: Mapping[str, Any]
    complete: bool | None = None
    engine_errors: Mapping[str, Any] | None = None
    prompt_variant: str | None = None
    presentation: str | None = None
    metric: Any  # `FamilyMetric`, or the record of a family that writes its own scores (`Task.read_metric`)
    engine: Mapping[str, Any]
    versions: Mapping[str, str | None] | None = None
    templates: Mapping[str, Any] | None = None
    retrieval: Mapping[str, Any] | None = None
    dataset_fingerprint: str | None = None
    groups: Mapping[str, list[str]] | None = None
    demonstration_groups: Mapping[str, list[str]] | None = None
    demonstration_groups_left_out: Mapping[str, int] | None = None
    engine_calls: Mapping[str, int] | None = None
    cache: Mapping[str, int] | None = None
    cost: Mapping[str, Any] | None = None
    adapter_sha256: Mapping[str, str | None] | None = None
    profiles: Mapping[str, Any] | None = None
    profile_failures: int | None = None
    label: str | None = None
    generation: Mapping[str, Any] | None = None
    cf: Mapping[str, Any] | None = None

    @property
    def is_baseline(self) -> bool:
        return self.engine.get("name") == "baseline"

    @property
    def is_fake(self) -> bool:
        """A run of the fake engine (scripted answers for tests and demos: neither a baseline nor a model)."""
        return self.engine.get("name") == "fake"

    @property
    def task(self) -> str:
        """The run's task family (runs written before families existed are PerRecBench's)."""
        return self.config.get("task", DEFAULT_TASK)

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["metric"] = self.metric.to_json()
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any], path: str | os.PathLike = "run.json") -> RunInfo:
        """run.json's content, checked for what the readers need (config, engine, metric).

        Fields a model run writes that older runs lack (the groups, completeness and profiles before
        2026-11-23, 402a133; the label and generation before aa7dde9, the cost and adapter hashes before
        6f35fed, the presentation before 1365010, all 2026-11-24) read as None.

        Raises:
            DataError: not a JSON object with those parts; the message names the file.
        """
        if not isinstance(data, Mapping):
            raise DataError(f"{path} is not a run's record (a JSON object): {RERUN}")
        for part in ("config", "engine", "metric"):
            if not isinstance(data.get(part), Mapping):
                raise DataError(f"{path} has no {part!r} part: {RERUN}")
        metric = data["metric"]
        parts = {f.name: data.get(f.name) for f in fields(cls)}
        if "headline" in metric:  # a family run through the general path
            if not isinstance(metric.get("task"), str) or not isinstance(metric["headline"], str):
                raise DataError(f"{path}: metric {metric!r} does not name its task and headline metric")
            return cls(**{**parts, "metric": FamilyMetric(metric["task"], metric["headline"])})
        # A family that writes its own scores reads its own metric record (`Task.read_metric`).
        from perrec_eval.registry import get

        task = get(data["config"].get("task", DEFAULT_TASK))
        if task.read_metric is None:
            raise DataError(f"{path}: metric {metric!r} does not name its task and headline metric")
        return cls(**{**parts, "metric": task.read_metric(metric, path)})



def read_run_info(run_dir: str | os.PathLike) -> RunInfo:
    """run.json of a finished run folder (see `RunInfo.from_json`)."""
    path = Path(run_dir) / "run.json"
    return RunInfo.from_json(fileio.read_json(path), path)
