"""Scoring: rankings → PTC per (level, method) cell, with confidence intervals, failures and rating errors."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from perrec_eval import ptc
from perrec_eval.context import GroupContext
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
    failures: dict[tuple[str, str], list[int]] = {}
    for sample in samples:
        counts = failures.setdefault((sample.level, sample.method), [0, 0])
        counts[0] += sample.num_failed_samples
        counts[1] += max(len(sample.texts), sample.num_failed_samples)
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
        failed, total = failures.get((level, method), [0, 0])
        cell = {
            "level": level,
            "method": method,
            "ptc": result["ptc"],
            "ptc_ci_low": result.get("ptc_ci_low"),
            "ptc_ci_high": result.get("ptc_ci_high"),
            "num_groups": result["num_groups"],
            "num_invalid": result["num_invalid"],
            "parse_failure_rate": failed / total if total else 0.0,
        }
        cell.update(_rating_errors(group_records))
        out.append(cell)
    values = [c["ptc"] for c in out if c["ptc"] is not None]
    return {
        "variant": variant,
        "invalid": invalid,
        "confidence_level": CONFIDENCE_LEVEL,
        "cells": out,
        "average": sum(values) / len(values) if values else None,
    }


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
