"""Scoring: rankings → PTC per (level, method) cell, with confidence intervals, failures and rating errors."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perrec_eval import ptc
from perrec_eval.context import GroupContext
from perrec_eval.engines.base import permanent_fix
from perrec_eval.rankers import Prediction
from perrec_eval.records import PredictionRecord, SampleRecord
from perrec_eval.types import LEVELS, METHODS, Method

CONFIDENCE_LEVEL = 0.95


def prediction_records(
    level: str, method: Method, groups: Sequence[GroupContext], predictions: Mapping[str, Prediction]
) -> list[PredictionRecord]:
    """The metric's inputs and the truth, one record per group (predictions.jsonl)."""
    records = []
    for ctx in groups:
        pred = predictions[ctx.group_id]
        records.append(
            PredictionRecord(
                level=level,
                method=method,
                group_id=ctx.group_id,
                format=pred.format,
                prediction=pred.value,
                predicted_ratings=pred.predicted_ratings,
                references=ctx.group.relative_ratings,
                true_ratings=ctx.group.ratings,
            )
        )
    return records


def score_cells(
    records: Iterable[PredictionRecord],
    samples: Iterable[SampleRecord] = (),
    *,
    variant: str = "tau_b",
    invalid: str = "zero",
    seed: int = 0,
) -> dict[str, Any]:
    """Score every (level, method) cell found in the prediction records; returns scores.json content."""
    cells: dict[tuple[str, str], list[PredictionRecord]] = {}
    for record in records:
        cells.setdefault((record.level, record.method), []).append(record)
    samples = list(samples)
    counts: dict[tuple[str, str], _Counts] = {}
    for sample in samples:
        counts.setdefault((sample.level, sample.method), _Counts()).add(sample)
    out = []
    for (level, method), group_records in sorted(cells.items(), key=_cell_order):
        formats = {r.format for r in group_records}
        if len(formats) != 1:
            raise ValueError(f"cell {level}/{method} mixes prediction formats {sorted(formats)}")
        result = ptc.compute_ptc(
            [r.references for r in group_records],
            [r.prediction or [] for r in group_records],
            prediction_format=formats.pop(),
            variant=variant,
            invalid=invalid,
            confidence_level=CONFIDENCE_LEVEL,
            seed=seed,
        )
        count = counts.get((level, method), _Counts())
        cell = {
            "level": level,
            "method": method,
            "ptc": _finite(result["ptc"]),
            "ptc_ci_low": _finite(result.get("ptc_ci_low")),
            "ptc_ci_high": _finite(result.get("ptc_ci_high")),
            "num_groups": result["num_groups"],
            "num_invalid": result["num_invalid"],
            "parse_failure_rate": count.parse_failed / count.answered if count.answered else 0.0,
            "num_requests": count.requests,
            "num_engine_errors": count.engine_errors,
            "engine_error_rate": count.engine_errors / count.requests if count.requests else 0.0,
        }
        if cell["ptc"] is None:
            cell["ptc_missing"] = (
                f"every group of the cell failed and invalid={invalid!r} drops failed groups: nothing scored"
            )
        cell.update(_rating_errors(group_records))
        out.append(cell)
    values = [c["ptc"] for c in out if c["ptc"] is not None]
    engine_errors = sum(c["num_engine_errors"] for c in out)
    errors = [s.error for s in samples if s.error is not None]
    permanent = [error for error in errors if permanent_fix(error) is not None]
    return {
        "variant": variant,
        "invalid": invalid,
        "confidence_level": CONFIDENCE_LEVEL,
        "complete": engine_errors == 0,
        "num_engine_errors": engine_errors,
        "first_engine_error": errors[0] if errors else None,
        # Errors that asking again cannot cure (a prompt over the context, ...): `engines.base.permanent_fix`.
        "num_permanent_errors": len(permanent),
        "first_permanent_error": permanent[0] if permanent else None,
        "first_transient_error": next((e for e in errors if permanent_fix(e) is None), None),
        "cells": out,
        "average": sum(values) / len(values) if values else None,
    }


@dataclass(slots=True)
class _Counts:
    """Requests of one cell: engine errors apart from the samples that came back and failed to parse."""

    requests: int = 0
    engine_errors: int = 0
    answered: int = 0
    parse_failed: int = 0

    def add(self, sample: SampleRecord) -> None:
        self.requests += 1
        if sample.error is not None:
            self.engine_errors += 1
        else:
            self.answered += len(sample.texts)
            self.parse_failed += sample.num_failed_samples


def _finite(value: float | None) -> float | None:
    """None for a missing or NaN value: JSON has no NaN."""
    return None if value is None or math.isnan(value) else float(value)


def _cell_order(item: tuple[tuple[str, str], Any]) -> tuple[int, int]:
    level, method = item[0]
    return (
        LEVELS.index(level) if level in LEVELS else 99,
        METHODS.index(method) if method in METHODS else 99,
    )


def _rating_errors(records: Sequence[PredictionRecord]) -> dict[str, float]:
    """MAE/RMSE of predicted vs true ratings where a run predicted ratings (pointwise, baselines)."""
    true, pred = [], []
    for record in records:
        for t, p in zip(record.true_ratings, record.predicted_ratings or [], strict=False):
            if p is not None:
                true.append(t)
                pred.append(p)
    if not pred:
        return {}
    errors = ptc.rating_errors(true, pred)
    return {"mae": errors["mae"], "rmse": errors["rmse"]}
