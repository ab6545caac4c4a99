"""The run folder of any family: writing a finished run, claiming a folder for a run, finding run folders.

Files of a run folder, each written atomically (`perrec_eval.fileio`), `run.json` last so that it marks a
finished run:

- `run.json`: `results.RunInfo`: the config, engine, metric, versions, the docs of each subset.
- `samples.jsonl`: one record per request (doc, cell, slot, cache key, raw texts, parsed values, ok /
  failure reason, token counts); none for a system that sends no request (a no-LLM baseline).
- `predictions.jsonl`: one record per (cell, doc): the metric's input and the truth, so `perrecbench score`
  re-scores without generating again.
- `scores.json`: the cells' metrics (the family's records); `report.md`: the run's leaderboard.
- `cache.jsonl`: the append-only request cache (`perrec_eval.cache`); running the same command again
  resumes from it.

A family reads its own records back (PerRecBench: `tasks/perrecbench/rundir.py`).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from perrec_eval import fileio
from perrec_eval.cache import adapter_fingerprint, forget_unproven  # noqa: F401 (adapter_fingerprint: re-exported)
from perrec_eval.errors import DataError
from perrec_eval.results import RunInfo, read_run_info
from perrec_eval.secrets import redact


class Record(Protocol):
    """A line of samples.jsonl or predictions.jsonl, or scores.json: what `write_run` writes."""

    def to_json(self) -> Any: ...


def versions(*packages: str) -> dict[str, str | None]:
    """Python's and each installed package's version (None when not installed), for run.json."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in packages:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def run_cost(samples: Sequence[Any], wall_seconds: float, cache_hits: int) -> dict[str, Any]:
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
    samples: Iterable[Record] | None,
    records: Iterable[Record],
    scores: Record,
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
    fileio.write_json(out / "run.json", redact(run_info.to_json()))  # every part that records options


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


def report_folder(out: str | os.PathLike) -> Path:
    """Where the `next:` hint after a run suggests its report: beside a ``runs`` folder as `make demo` lays
    them out (``runs/baselines`` → ``report``, ``runs/llmrec-baselines`` → ``report-llmrec``, any other
    ``runs/NAME`` → ``report-NAME``), else the run folder's name with ``-report``.

    >>> [str(report_folder(f"demo_out/runs/{name}")) for name in ("baselines", "llmrec-baselines", "mf")]
    ['demo_out/report', 'demo_out/report-llmrec', 'demo_out/report-mf']
    >>> str(report_folder("my-run/"))
    'my-run-report'
    """
    out = Path(out)
    if out.parent.name != "runs":
        return out.with_name(out.name + "-report")
    name = out.name.removesuffix("baselines").removesuffix("-")
    return out.parent.with_name(f"report-{name}" if name else "report")


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
        from perrec_eval.lock import holder

        if path.is_dir() and (pid := holder(path)) is not None:  # a run being written (evaluate --overwrite)
            raise DataError(
                f"{path} is being written by another perrecbench process (pid {pid}): wait for it to finish"
            )
        raise DataError(f"{path} is not a run folder: run `perrecbench evaluate --out {path}` first")
    return children


def one_run_folder(path: str | os.PathLike) -> Path:
    """`path` as a single run folder; a folder of several runs names them."""
    folders = run_folders(path)
    if len(folders) > 1:
        names = ", ".join(folder.name for folder in folders)
        raise DataError(f"{path} holds {len(folders)} runs ({names}): name one, e.g. {folders[0]}")
    return folders[0]


def run_name(run_dir: str | os.PathLike) -> str:
    """The system name of a run folder (its model, as run.json records it)."""
    return read_run_info(run_dir).engine.get("model", Path(run_dir).name)
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
