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

import hashlib
import os
import platform
from collections.abc import Iterable, Mapping, Sequence
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


def adapter_fingerprint(folder: str | os.PathLike) -> str | None:
    """sha256 of an adapter folder's weights (``adapter_model.safetensors``), None when it has none."""
    weights = Path(folder) / "adapter_model.safetensors"
    if not weights.is_file():
        return None
    digest = hashlib.sha256()
    with weights.open("rb") as handle:
        for block in iter(lambda: handle.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


def run_cost(samples: Sequence[SampleRecord], wall_seconds: float, cache_hits: int) -> dict[str, Any]:
    """What the run's last invocation cost: wall seconds, requests (sent and from the cache), requests per
    second, prompt and answer tokens (summed over the requests whose engine reported them).

    >>> run_cost([], 2.0, 0)["requests_per_second"]
    0.0
    """
    prompt = [s.prompt_tokens for s in samples if s.prompt_tokens is not None]
    answer = [s.completion_tokens for s in samples if s.completion_tokens is not None]
    return {
        "wall_seconds": round(wall_seconds, 3),
        "requests": len(samples),
        "cache_hits": cache_hits,
        "requests_per_second": round(len(samples) / wall_seconds, 3) if wall_seconds > 0 else None,
        "prompt_tokens": sum(prompt) if prompt else None,
        "answer_tokens": sum(answer) if answer else None,
    }


def write_run(
    out: Path,
    name: str,
    *,
    samples: Iterable[SampleRecord] | None,
    records: Iterable[PredictionRecord],
    scores: Mapping[str, Any],
    run_info: Mapping[str, Any],
) -> None:
    """Write a run folder's files, each atomically; run.json last, so it marks a finished run.

    `samples` is None for runs without engine requests (baselines): no samples.jsonl is written.
    """
    from perrec_eval.report import write_report

    (out / "run.json").unlink(missing_ok=True)  # until the new one is written, the folder is unfinished
    if samples is not None:
        fileio.write_jsonl(out / "samples.jsonl", (sample.to_json() for sample in samples))
    fileio.write_jsonl(out / "predictions.jsonl", (record.to_json() for record in records))
    fileio.write_json(out / "scores.json", scores)
    write_report(out, [(name, scores)], cf_cells=cf_cells_of(name, run_info))
    fileio.write_json(out / "run.json", run_info)


def cf_cells_of(name: str, run_info: Mapping[str, Any]) -> dict[str, Any]:
    """``{name: run.json cf.cells}`` for a collaborative-filtering baseline's run, else ``{}``."""
    cells = (run_info.get("cf") or {}).get("cells")
    return {name: cells} if cells else {}


# Config fields that do not change a run's results (a finished run may be resumed with other values).
RUN_ONLY = ("progress", "out", "overwrite")


def claim(out: Path, config: Mapping[str, Any], *, overwrite: bool) -> None:
    """Make `out` ready for a run of `config` (its run.json record): refuse another config's finished run.

    The same config resumes (its cache answers); with `overwrite`, another config's run.json is removed
    first, so the folder reads as unfinished until the new run is written.

    Raises:
        DataError: `out` holds a finished run of another config and `overwrite` is off.
    """
    path = out / "run.json"
    if not path.is_file():
        return
    try:
        recorded = fileio.read_json(path)["config"]
        # Settings one side does not know (added or removed by another version) are not compared.
        changed = sorted(
            key
            for key in recorded.keys() & config.keys()
            if key not in RUN_ONLY and recorded[key] != config[key]
        )
        what = f"{recorded.get('engine')} {recorded.get('model')}"
    except (ValueError, KeyError, TypeError, AttributeError):
        changed, what = ["run.json unreadable"], "an unknown run"
    if not changed:
        return
    if not overwrite:
        shown = ", ".join(changed[:4]) + (", ..." if len(changed) > 4 else "")
        raise DataError(
            f"{out} holds a finished run of {what} with other settings ({shown}): choose another --out, "
            "or pass --overwrite to replace it"
        )
    path.unlink()


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


def run_folders(path: str | os.PathLike) -> list[Path]:
    """The run folders at `path`: itself when it is one, else the run folders directly inside it.

    `perrecbench evaluate --engine baseline --model all --out DIR` writes one run folder per baseline
    into DIR, so DIR stands for all of them.
    """
    path = Path(path)
    if (path / "run.json").is_file():
        return [path]
    children = (
        sorted(child for child in path.iterdir() if (child / "run.json").is_file()) if path.is_dir() else []
    )
    if not children:
        raise DataError(f"{path} is not a run folder: run `perrecbench evaluate --out {path}` first")
    return children


def one_run_folder(path: str | os.PathLike) -> Path:
    """`path` as a single run folder; a folder of several runs names them."""
    folders = run_folders(path)
    if len(folders) > 1:
        names = ", ".join(folder.name for folder in folders)
        raise DataError(f"{path} holds {len(folders)} runs ({names}): name one, e.g. {folders[0]}")
    return folders[0]


def update_metric(run_dir: str | os.PathLike, scores: Mapping[str, Any]) -> None:
    """Rewrite scores.json, report.md and run.json's metric of a run with re-computed `scores`.

    Holds the folder's lock (`perrec_eval.lock`: an evaluate writing the folder refuses it, and the other
    way round). The three files are written to temp names first and renamed in that order, run.json last:
    run.json's metric names the variant scores.json holds, so a kill between two renames leaves a folder
    that `load_run` refuses (the same `perrecbench score --write` repairs it), never a mix that reads whole.

    Raises:
        DataError: another process holds the folder.
    """
    import json

    from perrec_eval.lock import folder_lock
    from perrec_eval.report import render

    run_dir = Path(run_dir)
    with folder_lock(run_dir):
        info = fileio.read_json(run_dir / "run.json")
        info["metric"] = {"variant": scores["variant"], "invalid": scores["invalid"]}
        fileio.replace_in_order(
            [
                (run_dir / "scores.json", json.dumps(scores, indent=2, ensure_ascii=False) + "\n"),
                (
                    run_dir / "report.md",
                    render([(run_name(run_dir), scores)], cf_cells=cf_cells_of(run_name(run_dir), info)),
                ),
                (run_dir / "run.json", json.dumps(info, indent=2, ensure_ascii=False) + "\n"),
            ]
        )


def run_name(run_dir: str | os.PathLike) -> str:
    """The system name of a run folder (its model, as run.json records it)."""
    info = fileio.read_json(Path(run_dir) / "run.json")
    return info["engine"].get("model", Path(run_dir).name)


def check_metric(run_dir: str | os.PathLike, info: Mapping[str, Any], scores: Mapping[str, Any]) -> None:
    """Refuse a scores.json whose metric is not the one run.json records (a `score --write` cut short).

    Raises:
        DataError: the variant or the invalid rule differ.
    """
    recorded = info.get("metric")
    if not isinstance(recorded, Mapping) or not isinstance(scores, Mapping):
        return
    held = {key: scores.get(key) for key in ("variant", "invalid")}
    wanted = {key: recorded.get(key) for key in ("variant", "invalid")}
    if None not in held.values() and held != wanted:
        raise DataError(
            f"{run_dir}/scores.json holds {held['variant']}/{held['invalid']} scores but run.json records "
            f"{wanted['variant']}/{wanted['invalid']} (a `perrecbench score --write` was interrupted): run "
            f"`perrecbench score {run_dir} --write` to make them agree again"
        )


def load_run(run_dir: str | os.PathLike) -> tuple[str, dict[str, Any]]:
    """(system name, scores) of a finished run folder."""
    run_dir = Path(run_dir)
    scores_path = run_dir / "scores.json"
    if not scores_path.is_file():
        raise DataError(f"{run_dir} has no scores.json: run `perrecbench evaluate --out {run_dir}` first")
    info = fileio.read_json(run_dir / "run.json")
    scores = fileio.read_json(scores_path)
    check_metric(run_dir, info, scores)
    return info.get("label") or info["engine"].get("model", run_dir.name), scores
