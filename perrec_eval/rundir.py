"""The run folder: writing a finished run, reading it back, and re-scoring it without generating again.

Files of `RUN_DIR`, each written atomically (`perrec_eval.fileio`), `run.json` last so that it marks a
finished run:

- `run.json`: `results.RunInfo`: the config, versions, template ids + hashes, retrieval, dataset fingerprint.
- `samples.jsonl`: one `records.SampleRecord` per request (group, level, method, slot, cache key, raw texts,
  parsed values, ok / failure reason, token counts).
- `predictions.jsonl`: one `records.PredictionRecord` per (level, method, group): the ranking input of the
  metric and the truth, so `perrecbench score` re-scores without generating again.
- `scores.json`: `results.Scores` (the cells and their average); `report.md`: the paper's Table 1 layout.
- `cache.jsonl`: the append-only request cache (`perrec_eval.cache`); running the same command again
  resumes from it.
"""

from __future__ import annotations

import json
import math
import os
import platform
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any

from perrec_eval import fileio
from perrec_eval.cache import adapter_fingerprint, forget_unproven  # noqa: F401 (adapter_fingerprint: re-exported)
from perrec_eval.errors import DataError
from perrec_eval.results import RERUN, Metric, RunInfo, Scores, is_number, read_run_info, read_scores
from perrec_eval.tasks.perrecbench.records import PredictionRecord, SampleRecord
from perrec_eval.tasks.perrecbench.scoring import score_cells


def versions(*packages: str) -> dict[str, str | None]:
    """Python's and each installed package's version (None when not installed), for run.json."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in packages:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


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
    *,
    samples: Iterable[SampleRecord] | None,
    records: Iterable[PredictionRecord],
    scores: Scores,
    run_info: RunInfo,
    report: Callable[[], str] | None,
) -> None:
    """Write a run folder's files, each atomically; run.json last, so it marks a finished run.

    `samples` is None for runs without engine requests (baselines): no samples.jsonl is written. `report`
    makes report.md's text once the other files but run.json are written (None: no report.md).
    """
    (out / "run.json").unlink(missing_ok=True)  # until the new one is written, the folder is unfinished
    if samples is not None:
        fileio.write_jsonl(out / "samples.jsonl", (sample.to_json() for sample in samples))
    fileio.write_jsonl(out / "predictions.jsonl", (record.to_json() for record in records))
    fileio.write_json(out / "scores.json", scores.to_json())
    if report is not None:
        fileio.write_text(out / "report.md", report())
    fileio.write_json(out / "run.json", run_info.to_json())


# Config fields that do not change a run's results (a finished run may be resumed with other values).
RUN_ONLY = ("out", "overwrite")


def claim(out: Path, config: Mapping[str, Any], *, overwrite: bool) -> None:
    """Make `out` ready for a run of `config` (its run.json record): refuse another config's finished run.

    The same config resumes (its cache answers); with `overwrite`, another config's run.json is removed
    first, so the folder reads as unfinished until the new run is written, and its cache keeps only the
    answers whose keys cover every setting that changes them (`cache.forget_unproven`): under older keys an
    answer of the old settings could be served to the new ones.

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
    forget_unproven(out / "cache.jsonl")


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
            if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
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
                (run_dir / "scores.json", _json_text(scores.to_json())),
                (run_dir / "report.md", report),
                (run_dir / "run.json", _json_text(info.to_json())),
            ]
        )


def _json_text(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def run_name(run_dir: str | os.PathLike) -> str:
    """The system name of a run folder (its model, as run.json records it)."""
    return read_run_info(run_dir).engine.get("model", Path(run_dir).name)


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


RUN_FILES = frozenset(
    ("run.json", "samples.jsonl", "predictions.jsonl", "scores.json", "report.md", "cache.jsonl")
    + ("profiles.jsonl",)
)
"""The files `perrecbench evaluate` writes into a run folder."""


def is_run_file(path: PurePosixPath) -> bool:
    """Whether `path` (relative to a run folder) is a file a run writes.

    >>> is_run_file(PurePosixPath("cache.jsonl")), is_run_file(PurePosixPath("random/run.json"))
    (True, False)
    """
    return len(path.parts) == 1 and path.name in RUN_FILES


def is_runs_file(path: PurePosixPath) -> bool:
    """Whether `path` (relative to a folder of runs: `--model all`, several adapters, a sweep) is a file
    written there: the combined report.md, or a run's file in a run folder one level down.

    >>> is_runs_file(PurePosixPath("report.md")), is_runs_file(PurePosixPath("random/run.json"))
    (True, True)
    >>> is_runs_file(PurePosixPath("run.json"))
    False
    """
    return path == PurePosixPath("report.md") or (len(path.parts) == 2 and path.name in RUN_FILES)


def local_inputs(config: Any) -> dict[str, str | None]:
    """The inputs of a run (an evaluate config: data, engine, model, adapters) that its run folder must not
    overlap, as ``{flag: path}`` (Hub ids never do)."""
    inputs: dict[str, str | None] = {"--data": config.data}
    if config.engine != "baseline":  # a baseline's --model names no file
        inputs["--model"] = config.model
    return {**inputs, **{f"--adapter {name}": path for name, path in config.adapters().items()}}


def check_out(
    out: str | os.PathLike,
    inputs: Mapping[str, str | None],
    *,
    runs: bool = False,
    also: Callable[[PurePosixPath], bool] | None = None,
    command: str = "evaluate",
) -> Path:
    """Refuse an evaluate `--out` before anything is written (`perrec_eval.outputs`); return it resolved.

    Refused: the current, home or root folder; an input (`--data`, a model or adapter folder), a folder
    inside one or holding one; a folder holding files a run does not write. A single run written into a
    folder of runs would hide them (`run_folders` takes a run folder for itself alone), so that is refused
    with its own message.

    Args:
        out: the output folder.
        inputs: ``{flag: path}`` of the local inputs.
        runs: `out` is a folder of run folders (one per baseline, adapter or grid point) rather than one run.
        also: other files the command writes into `out` (a sweep's report folder).
        command: the command, for the messages.

    Raises:
        ConfigError, DataError: the reason and the fix.
    """
    from perrec_eval import outputs

    folder = outputs.target(out)
    outputs.refuse_overlap(folder, inputs)
    if not runs and folder.is_dir():
        held = _runs_inside(folder)
        if held:
            names = ", ".join(held[:4]) + (", ..." if len(held) > 4 else "")
            raise DataError(
                f"--out {out} is a folder of runs ({names}): a run written beside them would hide them "
                f"from reports; choose a new --out, e.g. --out {Path(out) / 'new-run'}"
            )
    owned = is_runs_file if runs else is_run_file
    outputs.refuse_foreign(
        folder, owned if also is None else lambda path: owned(path) or also(path), command=command
    )
    return folder


def _runs_inside(folder: Path) -> list[str]:
    """The names of the run folders directly inside `folder` (none when it cannot be read)."""
    try:
        return sorted(child.name for child in folder.iterdir() if (child / "run.json").is_file())
    except OSError:  # `refuse_foreign` says what cannot be read
        return []
