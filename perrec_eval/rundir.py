"""The run folder: writing a finished run, reading it back, and re-scoring it without generating again.

Files of `RUN_DIR`, each written atomically (`perrec_eval.fileio`), `run.json` last so that it marks a
finished run:

- `run.json`: the full config, versions, template ids + hashes, retrieval settings, dataset fingerprint.
- `samples.jsonl`: one `records.SampleRecord` per request (group, level, method, slot, cache key, raw texts,
  parsed values, ok / failure reason, token counts).
- `predictions.jsonl`: one `records.PredictionRecord` per (level, method, group): the ranking input of the
  metric and the truth, so `perrecbench score` re-scores without generating again.
- `scores.json`: `{"cells": [...], "average": ...}`; `report.md`: the paper's Table 1 layout.
- `cache.jsonl`: the append-only request cache (`perrec_eval.cache`); running the same command again
  resumes from it.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from perrec_eval import fileio
from perrec_eval.errors import DataError
from perrec_eval.records import PredictionRecord, SampleRecord
from perrec_eval.scoring import score_cells


def versions(*packages: str) -> dict[str, str | None]:
    """Python's and each installed package's version (None when not installed), for run.json."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in packages:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def write_run(
    out: Path,
    name: str,
    *,
    samples: Iterable[SampleRecord],
    records: Iterable[PredictionRecord],
    scores: Mapping[str, Any],
    run_info: Mapping[str, Any],
) -> None:
    """Write a run folder's files, each atomically; run.json last, so it marks a finished run."""
    from perrec_eval.report import write_report

    fileio.write_jsonl(out / "samples.jsonl", (sample.to_json() for sample in samples))
    fileio.write_jsonl(out / "predictions.jsonl", (record.to_json() for record in records))
    fileio.write_json(out / "scores.json", scores)
    write_report(out, [(name, scores)])
    fileio.write_json(out / "run.json", run_info)


def read_samples(run_dir: str | os.PathLike) -> list[SampleRecord]:
    """The sample records of a run folder (none for baseline runs)."""
    path = Path(run_dir) / "samples.jsonl"
    return [SampleRecord.from_json(line) for line in fileio.read_jsonl(path)] if path.is_file() else []


def read_predictions(run_dir: str | os.PathLike) -> list[PredictionRecord]:
    """The prediction records of a finished run folder."""
    path = Path(run_dir) / "predictions.jsonl"
    if not path.is_file():
        raise DataError(
            f"{run_dir} has no predictions.jsonl: finish the run with `perrecbench evaluate` first"
        )
    return [PredictionRecord.from_json(line) for line in fileio.read_jsonl(path)]


def rescore(
    run_dir: str | os.PathLike, *, variant: str | None = None, invalid: str | None = None
) -> dict[str, Any]:
    """Re-score a finished run from its saved predictions and samples, without generating again."""
    records = read_predictions(run_dir)
    info = fileio.read_json(Path(run_dir) / "run.json")
    return score_cells(
        records,
        read_samples(run_dir),
        variant=variant or info["metric"]["variant"],
        invalid=invalid or info["metric"]["invalid"],
        seed=info["config"].get("seed", 0),
    )


def load_run(run_dir: str | os.PathLike) -> tuple[str, dict[str, Any]]:
    """(system name, scores) of a finished run folder."""
    run_dir = Path(run_dir)
    scores_path = run_dir / "scores.json"
    if not scores_path.is_file():
        raise DataError(f"{run_dir} has no scores.json: run `perrecbench evaluate --out {run_dir}` first")
    info = fileio.read_json(run_dir / "run.json")
    return info["engine"].get("model", run_dir.name), fileio.read_json(scores_path)
