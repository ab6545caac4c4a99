"""PerRecBench's run folder read back: its samples and predictions checked, re-scored, its metric rewritten.

The general run folder (`perrec_eval.rundir`: `write_run`, `claim`, `run_folders`) writes the files; this
module reads this family's records from them: `samples.jsonl` (`records.SampleRecord`), `predictions.jsonl`
(`records.PredictionRecord`, one per (level, method, group)) and `scores.json` (`results.Scores`, in the
shared layout). `doc_predictions` gives the shared reports the predictions as every family's
(`perrec_eval.docrecords.DocPrediction`), each group's tau computed once (`GroupAnswer`).
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from perrec_eval import fileio, ptc
from perrec_eval.docrecords import DocPrediction
from perrec_eval.engines.base import is_count
from perrec_eval.errors import DataError
from perrec_eval.results import RERUN, RunInfo, is_number, read_run_info
from perrec_eval.tasks.perrecbench.records import PredictionRecord, SampleRecord
from perrec_eval.tasks.perrecbench.results import Metric, Scores, read_scores
from perrec_eval.tasks.perrecbench.scoring import score_cells


def sample_lines(run_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """samples.jsonl's lines as plain dicts (keys of older and newer runs kept), none for baseline runs.

    Raises:
        DataError: a line is not a sample record; the message names the file, the line and the field.
    """
    path = Path(run_dir) / "samples.jsonl"
    lines = fileio.read_jsonl(path) if path.is_file() else []
    for number, line in enumerate(lines, 1):
        # `error` and `finish_reasons` came later (402a133, c261454, 2026-11-23): older runs lack them.
        missing = [name for name in SampleRecord.__slots__ if name not in (*line, "error", "finish_reasons")]
        if missing:
            raise DataError(f"{path} line {number} has no {missing[0]!r}: {RERUN}")
        for name in ("prompt_tokens", "completion_tokens"):
            count = line[name]
            if count is not None and not is_count(count):
                raise DataError(f"{path} line {number}: {name} is {count!r}, not a token count: {RERUN}")
    return lines


def read_predictions(run_dir: str | os.PathLike) -> list[PredictionRecord]:
    """The prediction records of a finished run folder.

    Raises:
        DataError: no predictions.jsonl, an empty one, or a line that is not a prediction record (the message
            names the file and line).
    """
    path = Path(run_dir) / "predictions.jsonl"
    if not path.is_file():
        raise DataError(
            f"{run_dir} has no predictions.jsonl: finish the run with `perrecbench evaluate` first"
        )
    lines = fileio.read_jsonl(path)
    if not lines:
        raise DataError(f"{path} is empty: {RERUN}")
    for number, line in enumerate(lines, 1):
        problem = _prediction_problem(line)
        if problem:
            raise DataError(f"{path} line {number}: {problem}: {RERUN}")
    return [PredictionRecord.from_json(line) for line in lines]


def _prediction_problem(line: dict[str, Any]) -> str | None:
    """What makes one predictions.jsonl line unusable, or None.

    >>> _prediction_problem({"level": "easy", "method": "pointwise", "group_id": "g", "format": "scores",
    ...                      "prediction": None, "references": [1.0, -1.0], "true_ratings": [4, 2]}) is None
    True
    >>> _prediction_problem({"level": "easy", "method": "pointwise", "group_id": "g", "format": "scores",
    ...                      "prediction": ["a"], "references": [1.0, -1.0], "true_ratings": [4, 2]})
    'prediction is not a list of numbers'
    >>> _prediction_problem({"level": "easy", "method": "pointwise", "group_id": "g", "format": "scores",
    ...                      "prediction": None, "references": [float("nan"), 1.0], "true_ratings": [4, 2]})
    'references and true_ratings must be finite numbers'
    """
    for name in ("level", "method", "group_id", "format"):
        if not isinstance(line.get(name), str):
            return f"{name} is missing"
    for name in ("references", "true_ratings", "prediction"):
        value = line.get(name)
        if name == "prediction" and value is None:
            continue
        if not isinstance(value, list) or not all(is_number(x) for x in value):
            return f"{name} is not a list of numbers"
    references, ratings = line["references"], line["true_ratings"]
    if len(references) < 2 or len(ratings) != len(references):
        return "references and true_ratings are not one number per user of a group (at least 2)"
    if not all(math.isfinite(x) for x in (*references, *ratings)):
        return "references and true_ratings must be finite numbers"
    return None


@dataclass(frozen=True, slots=True)
class GroupAnswer:
    """A group's prediction record as the shared reports hold it, with its tau under the run's metric
    (None: a failed group that the run's policy ``skip`` leaves out; 0.0 under ``zero``)."""

    record: PredictionRecord
    tau: float | None


def doc_predictions(run_dir: str | os.PathLike, info: RunInfo) -> list[DocPrediction]:
    """The run's predictions as the shared `DocPrediction`s (`Task.read_predictions`): one per (level,
    method, group), its `GroupAnswer` as the prediction and the group's true relative ratings as the truth.

    Raises:
        DataError: as `read_predictions` and `check_complete`.
    """
    records = read_predictions(run_dir)
    check_complete(run_dir, info, records)
    return as_doc_predictions(records, info.metric)


def as_doc_predictions(records: Sequence[PredictionRecord], metric: Metric) -> list[DocPrediction]:
    """`records` as the shared `DocPrediction`s, each group's tau under `metric` computed once."""
    by_cell: dict[tuple[str, str], list[PredictionRecord]] = {}
    for record in records:
        by_cell.setdefault((record.level, record.method), []).append(record)
    taus: dict[int, float | None] = {}
    for cell_records in by_cell.values():
        values, valid = ptc.group_taus(
            [r.references for r in cell_records],
            [r.prediction or [] for r in cell_records],
            prediction_format=cell_records[0].format,
            variant=metric.variant,
        )
        for record, tau, ok in zip(cell_records, values.tolist(), valid.tolist(), strict=True):
            taus[id(record)] = tau if ok else (None if metric.invalid == "skip" else 0.0)
    return [
        DocPrediction(
            r.level, r.method, r.group_id, GroupAnswer(r, taus[id(r)]), tuple(r.references), r.cluster
        )
        for r in records
    ]


def check_complete(run_dir: str | os.PathLike, info: RunInfo, records: Iterable[PredictionRecord]) -> None:
    """Every (level, method, group) run.json lists has its line in predictions.jsonl, and only once.

    Runs that do not list their groups (older ones) are taken as they are.

    Raises:
        DataError: a line is missing or repeated; the message says how many and which first.
    """
    listed, methods = info.groups, info.config.get("methods")
    if not isinstance(listed, dict) or not isinstance(methods, list):
        return
    expected = {(lv, m, g) for lv, ids in listed.items() for m in methods for g in ids}
    found = Counter((record.level, record.method, record.group_id) for record in records)
    missing = sorted(expected - set(found))
    repeated = sorted(key for key, count in found.items() if count > 1)
    path = Path(run_dir) / "predictions.jsonl"
    if missing:
        raise DataError(
            f"{path} lacks {len(missing)} of the {len(expected)} (level, method, group) lines run.json "
            f"lists, e.g. {'/'.join(missing[0])}: {RERUN}"
        )
    if repeated:
        raise DataError(f"{path} repeats {len(repeated)} lines, e.g. {'/'.join(repeated[0])}: {RERUN}")


def rescore(run_dir: str | os.PathLike, *, variant: str | None = None, invalid: str | None = None) -> Scores:
    """Re-score a finished run from its saved predictions and samples, without generating again.

    Raises:
        DataError: run.json or predictions.jsonl is damaged, or predictions.jsonl misses lines run.json lists.
    """
    info = read_run_info(run_dir)
    records = read_predictions(run_dir)
    check_complete(run_dir, info, records)
    return score_cells(
        records,
        [SampleRecord.from_json(line) for line in sample_lines(run_dir)],
        variant=variant or info.metric.variant,
        invalid=invalid or info.metric.invalid,
        seed=info.config.get("seed", 0),
    )


def update_metric(run_dir: str | os.PathLike, scores: Scores, report: str) -> None:
    """Rewrite scores.json, report.md (to `report`) and run.json's metric of a run with re-computed `scores`.

    Holds the folder's lock (`perrec_eval.lock`: an evaluate writing the folder refuses it, and the other
    way round). The three files are written to temp names first and renamed in that order, run.json last:
    run.json's metric names the variant scores.json holds, so a kill between two renames leaves a folder
    that `load_scores` refuses (`perrecbench score --write` repairs it), never a mix that reads whole.

    Raises:
        DataError: another process holds the folder.
    """
    from perrec_eval.lock import folder_lock

    run_dir = Path(run_dir)
    with folder_lock(run_dir):
        info = replace(read_run_info(run_dir), metric=Metric(scores.variant, scores.invalid))
        fileio.replace_in_order(
            [
                (run_dir / "scores.json", _json_text(scores.to_family().to_json())),
                (run_dir / "report.md", report),
                (run_dir / "run.json", _json_text(info.to_json())),
            ]
        )


def _json_text(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def load_scores(run_dir: str | os.PathLike) -> Scores:
    """The scores of a finished run folder, checked against the metric its run.json records.

    Raises:
        DataError: no scores.json, a damaged one, or one of another metric than run.json's (a
            `perrecbench score --write` cut short).
    """
    run_dir = Path(run_dir)
    if not (run_dir / "scores.json").is_file():
        raise DataError(f"{run_dir} has no scores.json: run `perrecbench evaluate --out {run_dir}` first")
    scores, metric = read_scores(run_dir / "scores.json"), read_run_info(run_dir).metric
    if (scores.variant, scores.invalid) != (metric.variant, metric.invalid):
        raise DataError(
            f"{run_dir}/scores.json holds {scores.variant}/{scores.invalid} scores but run.json records "
            f"{metric.variant}/{metric.invalid} (a `perrecbench score --write` was interrupted): "
            f"run `perrecbench score {run_dir} --write` to make them agree again"
        )
    return scores
