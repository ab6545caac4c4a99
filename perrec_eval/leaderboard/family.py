"""Every family's leaderboard: runs × cells, each cell's metrics with intervals, tests against the best, and
the honesty rules every report keeps.

Each family gets its own section: runs of different families never share a table. Within a family, runs
are compared only on one build (dataset fingerprint), split and doc set. A section (`section`, JSON-ready)
holds, per run and cell, the cell's counts and every metric defined on it with its interval; `document`
lays the sections out as blocks (`perrec_eval.leaderboard.document`) for leaderboard.md and index.html,
`csv_text` and `latex` write the rest of the report folder, `plots` its pictures. A family adds its own
sections through its `Task.report` hooks (`ReportHooks`) and published rows through `Task.published_rows`.

The rules, for every family and metric:

- a cell shows its failed share whenever any doc failed; a cell where every doc failed says ``all N
  failed``, distinct from ``–`` (not run);
- a metric over the answered docs only (a corpus metric that a failed doc adds nothing to, RMSE) shows its
  coverage where docs failed, and such a cell is never marked best;
- a cell's best run is bold only when it beats every other run (no tie), more than half its docs answered,
  and the cell has at least the family's `Task.min_docs_to_compare` docs (clusters where docs share one):
  below it the section says "too few docs to compare (N)";
- the average column averages one metric (one direction and scale) over cells of distinct doc sets (each
  subset once), or there is none;
- a cell whose answers the family's leak check flags (`Task.leak_check`: answers only a column the cell
  does not show could give) says ``(leak)``, is never marked best and gives its row no average;
- each column's heading names its metric and direction.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from perrec_eval import fileio, rundir
from perrec_eval.docrecords import read_predictions
from perrec_eval.errors import DataError
from perrec_eval.leaderboard.document import (
    DASH,
    Block,
    Code,
    Grid,
    Heading,
    Images,
    Para,
    Strong,
    Text,
    from_markdown,
    latex_escape,
    markdown_text,
)
from perrec_eval.registry import get
from perrec_eval.results import FamilyScores, RunInfo, read_family_scores, read_run_info
from perrec_eval.stats import resampled_docs
from perrec_eval.task import Cell, Task

ALPHA = 0.05
MIN_DOCS_TO_COMPARE = 6  # `Task.min_docs_to_compare`'s default
MOSTLY_FAILED = 0.5
# Relative difference below which a scores.json value is the one its predictions give (float summation
# order); anything farther is an edited or damaged file.
SCORES_TOLERANCE = 1e-9


class ReportHooks(Protocol):
    """What a family adds to its report section (`Task.report`); every member is optional.

    - ``main_cells(cells) -> cells``: the cells of the compact main table (default: all; the others are
      shown in the per-cell metrics tables and the family's own blocks);
    - ``settings(run) -> {name: value}``: the settings that tell two runs of one label apart (a row's
      label then names those that differ; PerRecBench: k, shots, pairwise strategy, ...);
    - ``paired_test(metric, best, other, cell, *, n_resamples, seed) -> dict | None``: the family's own
      paired test of a cell's shown metric (``difference``, ``p_value``; or ``untested``: why none ran);
      None: the shared test of `Task.score_doc` values;
    - ``paired_average(best, other, cells, *, n_resamples, seed) -> dict``: a paired test of the average
      column; a family that has one gets its average marked like a cell (best, †, =);
    - ``resolution(runs, cells) -> float | None``: the smallest difference the runs' docs detect in these
      cells (one cell, or the averaged ones): a best whose lead over the runner-up is below it and that the
      test does not tell apart is not bold;
    - ``rank_rows``: True to list the rows by their average, best first (ties by label);
    - ``extras(section, runs, *, n_resamples, seed) -> dict``: the family's own numbers, kept in the
      section (and leaderboard.json) under ``extras`` for its blocks and plots;
    - ``reference_rows(section) -> [[label, per main cell..., average]]``: rows under the runs of the main
      table that are not runs (PerRecBench: the constant-rating floor, the min. detectable difference);
    - ``notes(section) -> [Text]``: what the family's numbers mean, under the shared notes;
    - ``blocks(section) -> list[Block]``: the family's own tables and notes, after the per-cell metrics;
    - ``plots(section, out, prefix) -> list[Plot]``: the family's own pictures, drawn with
      `perrec_eval.leaderboard.plots` into ``out/plots/`` under names starting with `prefix`.
    """


@dataclass(frozen=True, slots=True)
class FamilyRun:
    """A finished run folder of any family, loaded for comparison."""

    path: Path
    label: str
    info: RunInfo
    scores: FamilyScores
    predictions: tuple[Any, ...]

    @property
    def task(self) -> str:
        return self.info.task

    def doc_ids(self) -> frozenset[tuple[str, str, str]]:
        return frozenset((p.subset, p.protocol, p.id) for p in self.predictions)


def run_label(info: RunInfo, folder: Path) -> str:
    """A run's row name: its ``--label`` (or the model's short name), with its LoRA adapters' names; the
    fake engine's named scripts read ``fake:NAME`` (`perrec_eval.config.default_label`).

    >>> from perrec_eval.results import FamilyMetric
    >>> info = RunInfo(config={"adapter": ["pw=/a/b"]}, engine={"model": "m"}, metric=FamilyMetric("t", "h"))
    >>> run_label(info, Path("x"))
    'm + pw'
    >>> from dataclasses import replace
    >>> run_label(replace(info, config={}, label="smol"), Path("x"))
    'smol'
    >>> run_label(replace(info, config={}, engine={"name": "fake", "model": "constant"}), Path("x"))
    'fake:constant'
    """
    from perrec_eval.config import default_label

    engine_model = info.engine.get("model")
    model = info.label or engine_model or folder.name
    if info.is_fake and model == engine_model:  # runs before 2026-11-26 recorded a script's bare name
        model = default_label(str(model), "fake")
    adapters = info.config.get("adapter") or ()
    if isinstance(adapters, str):
        adapters = (adapters,)
    names = []
    for spec in adapters:
        name, sep, path = str(spec).partition("=")
        names.append(name if sep else Path(spec).name or spec)
    return " + ".join([str(model), *names])


def load(folder: str | os.PathLike, *, checked: bool = True) -> FamilyRun:
    """A finished run folder of any family: run.json, scores.json (checked against its predictions: an
    edited or damaged file is refused, `check_scores`; not with `checked` off, for `perrecbench score`,
    which computes them again) and predictions.jsonl (each row once).

    Raises:
        DataError: a file is missing, damaged, or disagrees with the others; the message names the fix.
    """
    path = Path(folder)
    info = read_run_info(path)
    task = get(info.task)
    if not (path / "scores.json").is_file():
        raise DataError(f"{path} has no scores.json: run `perrecbench evaluate --out {path}` first")
    scores = read_family_scores(path / "scores.json", info.task)
    if checked:
        check_metric(path, info, scores)
    if task.read_predictions is not None:
        predictions = tuple(task.read_predictions(path, info))
    else:
        predictions = tuple(read_predictions(path, task))
    if checked:
        check_scores(task, path, scores, predictions)
    return FamilyRun(path, run_label(info, path), info, scores, predictions)


def check_metric(path: Path, info: RunInfo, scores: FamilyScores) -> None:
    """Refuse scores of another metric than run.json records (a `perrecbench score --write` cut short).

    A general-path run's metric names its task and headline; a family's own metric record (PerRecBench's
    tau variant and failed-group policy) is kept in the scores' extras and must agree with it.

    Raises:
        DataError: they disagree; the message says how to make them agree again.
    """
    recorded = info.metric.to_json()
    held = {"task": scores.task, "headline": scores.headline, **(scores.extras or {})}
    differing = {name: value for name, value in recorded.items() if held.get(name) != value}
    if differing:
        mine = "/".join(str(held.get(name)) for name in differing)
        theirs = "/".join(str(value) for value in differing.values())
        raise DataError(
            f"{path}/scores.json holds {mine} scores but run.json records {theirs} (a `perrecbench score "
            f"--write` was interrupted): run `perrecbench score {path} --write` to make them agree again"
        )


def check_scores(task: Task, path: Path, scores: FamilyScores, predictions: Sequence[Any]) -> None:
    """Refuse a scores.json that its predictions.jsonl does not give: each cell's count of docs and, for
    every metric a doc can be scored on alone, its value computed again from the predictions, inside its
    own interval; and refuse a prediction row given twice.

    Raises:
        DataError: the first disagreement, naming the cell, the metric and the fix.
    """
    fix = f"run `perrecbench score {path} --write` to rewrite the scores from its predictions"
    seen: set[tuple[str, str, str]] = set()
    by_cell: dict[tuple[str, str], list[Any]] = {}
    for record in predictions:
        key = (record.subset, record.protocol, str(record.id))
        if key in seen:
            raise DataError(
                f"{path}/predictions.jsonl holds row {key[2]!r} of {key[0]}/{key[1]} twice: {RERUN_HINT}"
            )
        seen.add(key)
        by_cell.setdefault(key[:2], []).append(record)
    for cell in scores.cells:
        records = by_cell.get((cell.subset, cell.protocol), [])
        where = f"{path}/scores.json, {cell.subset}/{cell.protocol}"
        if cell.num_docs != len(records):
            raise DataError(f"{where}: {cell.num_docs} docs, but the predictions hold {len(records)}: {fix}")
        for metric in task.metrics:
            value = cell.metrics.get(metric.name)
            if value is None or value.value is None:
                continue
            problem = _value_problem(task, metric, value, records)
            if problem:
                raise DataError(f"{where}: {metric.name} {problem}: {fix}")


RERUN_HINT = "run `perrecbench evaluate` again with the run's settings to rewrite it"


def _value_problem(task: Task, metric: Any, value: Any, records: Sequence[Any]) -> str | None:
    """Why a cell's recorded `value` of `metric` is not what `records` give (None: it is)."""
    low, high = value.ci_low, value.ci_high
    if low is not None and high is not None and not low - 1e-9 <= value.value <= high + 1e-9:
        return f"{value.value!r} lies outside its own interval [{low!r}, {high!r}]"
    items = [task.score_doc(metric.name, r.prediction, r.truth) for r in records]
    kept = [item for item in items if item is not None]
    if not kept:  # not a metric a doc is scored on alone (the family computes it over the cell)
        return None
    computed = metric.value(kept)
    if not math.isfinite(computed):
        return None
    if abs(computed - value.value) > SCORES_TOLERANCE * max(1.0, abs(computed)):
        return f"is {value.value!r}, but its predictions give {computed!r}"
    return None


def task_of(folder: str | os.PathLike) -> str:
    """The task family of a finished run folder (runs written before families existed: PerRecBench's)."""
    return read_run_info(folder).task


def _selection(run: FamilyRun) -> str:
    """How a run chose its docs, as the flags that choose them."""
    config = run.info.config
    limit = next((config.get(key) for key in ("limit", "max_docs", "max_groups") if config.get(key)), None)
    parts = [f"--limit {limit}" if limit is not None else "all docs (no --limit)"]
    parts.append(f"--seed {config.get('seed', 0)}")
    return " ".join(parts)


def check_comparable(runs: Sequence[FamilyRun]) -> None:
    """Refuse runs of one family over different builds, splits or doc sets (one line naming the fix)."""
    if not runs:
        return
    first = runs[0]
    for run in runs[1:]:
        difference = _difference(first, run)
        if difference is not None:
            raise DataError(difference)


def _difference(first: FamilyRun, run: FamilyRun) -> str | None:
    """Why `first` and `run` cannot share a table, as the line that refuses them (None: they can)."""
    # a run may answer only some cells (a baseline of one task): doc sets are compared where both answer
    shared = {(s, p) for s, p, _ in first.doc_ids()} & {(s, p) for s, p, _ in run.doc_ids()}
    for what, a, b in (
        ("builds (dataset fingerprints)", first.info.dataset_fingerprint, run.info.dataset_fingerprint),
        ("splits", first.info.config.get("split"), run.info.config.get("split")),
    ):
        if a != b:
            return (
                f"runs {first.path} and {run.path} of task {first.task} differ in their {what}: compare "
                "runs of one build and split (same --data and --split), or pass --allow-mixed to show each "
                "comparable set in its own table"
            )
    if _in_cells(first, shared) != _in_cells(run, shared):
        return (
            f"runs {first.path} ({_selection(first)}) and {run.path} ({_selection(run)}) of task "
            f"{first.task} differ in their doc sets: evaluate or score them with the same --limit and "
            "--seed (`perrecbench score --predictions` takes them too), or pass --allow-mixed to show each "
            "comparable set in its own table"
        )
    return None


def partition(runs: Sequence[FamilyRun]) -> list[list[FamilyRun]]:
    """The runs split into comparable sets (`check_comparable`), in the order each set's first run came."""
    sets: list[list[FamilyRun]] = []
    for run in runs:
        home = next((members for members in sets if _difference(members[0], run) is None), None)
        if home is None:
            sets.append([run])
        else:
            home.append(run)
    return sets


def _in_cells(run: FamilyRun, cells: set[tuple[str, str]]) -> frozenset[tuple[str, str, str]]:
    return frozenset(key for key in run.doc_ids() if key[:2] in cells)


def _records(run: FamilyRun, cell: Cell) -> list[Any]:
    return sorted((p for p in run.predictions if p.cell == cell), key=lambda p: p.id)


def _per_doc(task: Task, run: FamilyRun, cell: Cell, metric: Any) -> tuple[list[Any], list[Any]]:
    records = _records(run, cell)
    return [task.score_doc(metric.name, p.prediction, p.truth) for p in records], [p.cluster for p in records]


def _answered_only(task: Task, metric: Any, runs: Sequence[FamilyRun], cell: Cell) -> bool:
    """Whether a failed doc of `cell` adds nothing to `metric` (a corpus metric of the answered docs)."""
    for run in runs:
        for record in _records(run, cell):
            if record.prediction is None:
                item = task.score_doc(metric.name, None, record.truth)
                return item is not None and not resampled_docs(metric, [item])
    return False


def _direction(higher: bool) -> str:
    return "higher is better" if higher else "lower is better"


def _hooks(task: Task) -> Any:
    return getattr(task, "report", None)


def _hook(task: Task, name: str) -> Any:
    """The family's report hook `name`, or None."""
    return getattr(_hooks(task), name, None)


def labels(task: Task, runs: Sequence[FamilyRun]) -> list[str]:
    """One distinct row name per run: its label; runs that share one also name the settings that differ
    between them (`ReportHooks.settings`), a no-LLM baseline named like a model of the table says
    "baseline", and runs still alike get their folder's name (their path where those agree too)."""
    settings = _hook(task, "settings")
    models = {run.label for run in runs if not run.info.is_baseline}
    out = []
    for run in runs:
        shown = []
        if run.info.is_baseline and run.label in models:
            shown.append("baseline")
        alike = [other for other in runs if other.label == run.label]
        if settings is not None and len(alike) > 1:
            values = [settings(other) for other in alike]
            mine = settings(run)
            differing = [name for name in mine if len({str(v.get(name)) for v in values} - {"None"}) > 1]
            shown += [f"{name}={_show(mine[name])}" for name in differing if mine.get(name) is not None]
        out.append(run.label + (f" ({', '.join(shown)})" if shown else ""))
    labelled = out
    for where in (lambda run: run.path.name, lambda run: str(run.path)):
        labelled = [
            f"{label} [{where(run)}]" if out.count(label) > 1 else label
            for label, run in zip(out, runs, strict=True)
        ]
        if len(set(labelled)) == len(labelled):
            break
    return labelled


def _show(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def shown_path(path: Path, base: str | os.PathLike | None) -> str:
    """A run folder as a report names it: relative to `base` (the report folder, or the current folder),
    so that no report holds a local absolute path (and `push leaderboard` publishes it as written).

    >>> shown_path(Path("runs/a"), "report")
    '../runs/a'
    """
    start = Path(base) if base is not None else Path.cwd()
    try:
        return Path(os.path.relpath(Path(path).absolute(), start.absolute())).as_posix()
    except ValueError:  # another drive (Windows): the folder's own name
        return Path(path).name


def section(
    task: Task,
    runs: Sequence[FamilyRun],
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    base: str | os.PathLike | None = None,
    number: int | None = None,
) -> dict[str, Any]:
    """The comparison of `runs` (one family, one build, split and doc set) as a JSON-ready section.

    Args:
        base: the folder the runs' paths are written relative to (the report folder; None: the current).
        number: the section's number among its family's comparable sets (``--allow-mixed``), or None.

    Raises:
        DataError: the runs are not comparable (`check_comparable`).
    """
    check_comparable(runs)
    order = {cell: i for i, cell in enumerate(task.cells())}
    answered = {Cell(c.subset, c.protocol) for run in runs for c in run.scores.cells}
    cells = sorted(answered, key=lambda cell: order.get(cell, len(order)))
    defined = {cell: _defined(task, runs, cell) for cell in cells}
    shown = {cell: (defined[cell] or [task.headline])[0] for cell in cells}
    hooks = _hooks(task)
    names = [str(cell) for cell in cells]
    main = list(hooks.main_cells(names)) if hooks is not None and hasattr(hooks, "main_cells") else names
    main = main or names  # runs of none of the main cells: their own cells are the main table
    rows = [
        _row(task, run, cells, defined, label, base)
        for run, label in zip(runs, labels(task, runs), strict=True)
    ]
    too_few: dict[str, int] = {}
    ties: list[str] = []
    undetected: list[str] = []
    for cell in cells:
        for metric in defined[cell]:
            partial = _answered_only(task, metric, runs, cell)
            for row in rows:
                entry = row["cells"].get(str(cell))
                if entry is not None and metric.name in entry["metrics"]:
                    entry["metrics"][metric.name]["answered_only"] = partial
        outcome = _mark_best(task, rows, runs, cell, shown[cell], n_resamples=n_resamples, seed=seed)
        if isinstance(outcome, int):
            too_few[str(cell)] = outcome
        elif outcome == "tie":
            ties.append(str(cell))
        elif outcome == "undetected":
            undetected.append(str(cell))
    average = _average(task, cells, shown, main)
    for row in rows:
        row["average"] = _row_average(row, average)
        if row["average"] is not None:
            entries = [row["cells"][cell] for cell in average["cells"]]
            failed = sum(entry["num_failed"] > MOSTLY_FAILED * entry["num_docs"] for entry in entries)
            if failed:
                row["average_mostly_failed"] = f"{failed} of {len(entries)} cells mostly failed"
    if average is not None:
        outcome = _mark_best_average(task, rows, runs, average, n_resamples=n_resamples, seed=seed)
        if outcome == "undetected":
            undetected.append("average")
    ordered = list(zip(rows, runs, strict=True))
    if getattr(hooks, "rank_rows", False) and average is not None:
        sign = 1 if average["higher_is_better"] else -1
        ordered.sort(key=lambda pair: _rank(pair[0], sign))
    data = {
        "task": task.name,
        "title": task.title,
        "number": number,
        "headline": task.headline.name,
        "higher_is_better": task.headline.higher_is_better,
        "subset_axis": task.subset_axis,
        "protocol_axis": task.protocol_axis,
        "min_docs_to_compare": task.min_docs_to_compare,
        "dataset_fingerprint": runs[0].info.dataset_fingerprint if runs else None,
        "split": runs[0].info.config.get("split", "test") if runs else None,
        "cells": names,
        "main_cells": [cell for cell in names if cell in main],
        "cell_metrics": {
            str(cell): [{"name": m.name, "higher_is_better": m.higher_is_better} for m in defined[cell]]
            for cell in cells
        },
        "shown": {str(cell): shown[cell].name for cell in cells},
        "average": average,
        "n_resamples": sorted({run.scores.n_resamples for run in runs}),
        "too_few_docs": too_few,
        "tied": ties,
        "undetected": undetected,
        "rows": [row for row, _ in ordered],
        **_published(task, names),
    }
    if hooks is not None and hasattr(hooks, "extras"):
        data["extras"] = hooks.extras(data, [run for _, run in ordered], n_resamples=n_resamples, seed=seed)
    return data


def _rank(row: Mapping[str, Any], sign: int) -> tuple[bool, float, str]:
    """A row's place in a list by average: best first, rows without one last, ties by label."""
    return row["average"] is None, -sign * (row["average"] or 0.0), row["label"]


def mean_interval(
    task: Task,
    run: FamilyRun,
    metric: str,
    cells: Sequence[Cell],
    *,
    docs: set[str] | frozenset[str] | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> tuple[float | None, float | None]:
    """The 95% interval of a run's mean over `cells` of each cell's mean `metric` (a metric that averages
    one value per doc), over the docs in `docs` (None: all): the cells of one subset ask the same docs and
    are resampled together (`stats.average_interval`). (None, None) when a cell lacks a doc's value (a
    corpus metric, or a doc that a failure policy leaves out).
    """
    from perrec_eval.stats import average_interval

    by_subset: dict[str, list[Cell]] = {}
    for cell in cells:
        by_subset.setdefault(cell.subset, []).append(cell)
    strata, clusters = [], []
    for members in by_subset.values():
        per_cell = [{str(p.id): p for p in run.predictions if p.cell == cell} for cell in members]
        ids = sorted(set.intersection(*(set(found) for found in per_cell)))
        if docs is not None:
            ids = [doc for doc in ids if doc in docs]
        rows = [
            [task.score_doc(metric, found[doc].prediction, found[doc].truth) for found in per_cell]
            for doc in ids
        ]
        if not rows or any(not isinstance(v, int | float) or not math.isfinite(v) for r in rows for v in r):
            return None, None
        strata.append(rows)
        ids_of = [per_cell[0][doc].cluster for doc in ids]
        clusters.append(ids_of if None not in ids_of else None)
    low, high = average_interval(strata, clusters, n_resamples=n_resamples, seed=seed)
    return (low, high) if math.isfinite(low) and math.isfinite(high) else (None, None)


def _defined(task: Task, runs: Sequence[FamilyRun], cell: Cell) -> list[Any]:
    """The family's metrics defined on `cell`: with a value in a run, or with an item for a failed doc
    (a cell where every doc failed still has its metrics, with no value)."""
    out = []
    for metric in task.metrics:
        values = [
            c.metrics[metric.name].value
            for run in runs
            for c in run.scores.cells
            if Cell(c.subset, c.protocol) == cell and metric.name in c.metrics
        ]
        if any(value is not None for value in values):
            out.append(metric)
            continue
        records = next((r for run in runs if (r := _records(run, cell))), [])
        if records and task.score_doc(metric.name, None, records[0].truth) is not None:
            out.append(metric)
    return out


def _row(
    task: Task,
    run: FamilyRun,
    cells: Sequence[Cell],
    defined: Mapping[Cell, list[Any]],
    label: str,
    base: str | os.PathLike | None,
) -> dict:
    by_cell = {Cell(c.subset, c.protocol): c for c in run.scores.cells}
    row_cells = {}
    for cell in cells:
        scored = by_cell.get(cell)
        if scored is None:
            continue
        row_cells[str(cell)] = {
            "num_docs": scored.num_docs,
            "num_failed": scored.num_failed,
            "num_engine_errors": scored.num_engine_errors,
            "num_clusters": scored.num_clusters,
            "metrics": {
                m.name: {
                    "value": scored.metrics[m.name].value,
                    "ci_low": scored.metrics[m.name].ci_low,
                    "ci_high": scored.metrics[m.name].ci_high,
                }
                for m in defined[cell]
                if m.name in scored.metrics
            },
        }
        if scored.leak is not None and scored.leak["flagged"]:
            row_cells[str(cell)]["leak"] = dict(scored.leak)
    row: dict[str, Any] = {
        "label": label,
        "path": shown_path(run.path, base),
        "engine": run.info.engine.get("name"),
        "provisional": not run.scores.complete,
        "cells": row_cells,
    }
    if run.info.cost:
        row["cost"] = dict(run.info.cost)
    if run.info.engine.get("warning"):  # a predictions file flagged when it was scored (read labels)
        row["warning"] = run.info.engine["warning"]
    counts = {
        str(Cell(c.subset, c.protocol)): dict(c.answer_counts) for c in run.scores.cells if c.answer_counts
    }
    if counts:
        row["answer_counts"] = counts
    return row


def _contenders(scored: list[tuple[dict, FamilyRun, dict]]) -> list[tuple[dict, FamilyRun, dict]]:
    """The runs that may be a column's best: not a run flagged for reading the labels, nor the fake
    engine's scripted answers unless only they are there (a table of test doubles still has its best)."""
    honest = [item for item in scored if not item[0].get("warning")]
    real = [item for item in honest if not item[1].info.is_fake]
    return real or honest


def _mark_best(
    task: Task,
    rows: list[dict],
    runs: Sequence[FamilyRun],
    cell: Cell,
    metric: Any,
    *,
    n_resamples: int,
    seed: int,
) -> int | str | None:
    """Mark the best run of `cell` (its shown `metric`) and test the others against it.

    Returns the cell's doc (or cluster) count when too few to compare, ``"tie"`` when the best ties (no
    bold; the others are still tested against the first of the tied, so their marks and p-values say how
    far they are), ``"undetected"`` when its lead is below what the docs can detect and untested, else
    None. A run is a candidate when it has a value, more than half its docs answered and, for a metric of
    the answered docs only, every doc answered.
    """
    key = str(cell)
    sign = 1 if metric.higher_is_better else -1
    scored = []
    for row, run in zip(rows, runs, strict=True):
        entry = row["cells"].get(key)
        value = None if entry is None else entry["metrics"].get(metric.name, {}).get("value")
        if value is not None:
            scored.append((row, run, entry))
    if len(scored) < 2:
        return None
    sizes = [entry["num_clusters"] or entry["num_docs"] for _, _, entry in scored]
    if min(sizes) < task.min_docs_to_compare:
        return min(sizes)
    candidates = _contenders([
        (row, run, entry)
        for row, run, entry in scored
        if entry["num_failed"] <= MOSTLY_FAILED * entry["num_docs"]
        and not (entry["metrics"][metric.name].get("answered_only") and entry["num_failed"])
        and not entry.get("leak")
    ])  # fmt: skip
    if not candidates:
        return None
    best_row, best_run, best_entry = max(
        candidates, key=lambda c: sign * c[2]["metrics"][metric.name]["value"]
    )
    best_value = best_entry["metrics"][metric.name]["value"]
    tied = [
        c for c in scored if c[0] is not best_row and _same(c[2]["metrics"][metric.name]["value"], best_value)
    ]
    for _, _, entry in [(best_row, best_run, best_entry), *tied] if tied else ():
        entry["metrics"][metric.name]["tied"] = True  # no bold; the others are still tested against it
    if not tied:
        best_entry["metrics"][metric.name]["best"] = True
    own = _hook(task, "paired_test")
    for _, run, entry in scored:
        if run is best_run:
            continue
        test = None
        if own is not None:
            test = own(metric, best_run, run, cell, n_resamples=n_resamples, seed=seed)
        if test is None:
            test = _shared_test(task, metric, best_run, run, cell, n_resamples=n_resamples, seed=seed)
        if test is not None:
            entry["metrics"][metric.name]["vs_best"] = test
    if tied:
        return "tie"
    others = [entry for _, run, entry in candidates if run is not best_run]
    if others and _undetected(task, runs, [cell], best_value, metric, others):
        del best_entry["metrics"][metric.name]["best"]
        return "undetected"
    return None


def _undetected(
    task: Task, runs: Sequence[FamilyRun], cells: Sequence[Cell], best: float, metric: Any, others: list[dict]
) -> bool:
    """Whether the best's lead over the runner-up is below the smallest difference the docs detect (the
    family's `ReportHooks.resolution`) while the paired test does not tell them apart."""
    resolution = _hook(task, "resolution")
    if resolution is None:
        return False
    detectable = resolution(runs, cells)
    if detectable is None:
        return False
    sign = 1 if metric.higher_is_better else -1

    def part(entry: dict) -> dict:
        return entry["metrics"][metric.name] if "metrics" in entry else entry

    runner = max(others, key=lambda entry: sign * part(entry)["value"])
    test = part(runner).get("vs_best") or {}
    told_apart = test.get("p_value") is not None and test["p_value"] < ALPHA
    return abs(best - part(runner)["value"]) < detectable and not told_apart


def _shared_test(
    task: Task, metric: Any, best_run: FamilyRun, run: FamilyRun, cell: Cell, *, n_resamples: int, seed: int
) -> dict | None:
    """The paired test of `run` against the best in `cell`, on the per-doc values of `Task.score_doc`."""
    best_items, clusters = _per_doc(task, best_run, cell, metric)
    items, _ = _per_doc(task, run, cell, metric)
    if len(items) != len(best_items):
        return None
    shared = clusters if len(set(clusters)) < len(clusters) and None not in clusters else None
    keep = sorted(set(resampled_docs(metric, best_items)) & set(resampled_docs(metric, items)))
    if not keep:  # no doc on which both runs have the metric: nothing to test
        return None
    test = metric.paired_test(
        [best_items[i] for i in keep],
        [items[i] for i in keep],
        [shared[i] for i in keep] if shared is not None else None,
        n_resamples=n_resamples,
        seed=seed,
    )
    return {"difference": test.difference, "p_value": test.p_value}


def _mark_best_average(
    task: Task, rows: list[dict], runs: Sequence[FamilyRun], average: dict, *, n_resamples: int, seed: int
) -> str | None:
    """Mark the best average as a cell's best is marked, where the family tests its average
    (`ReportHooks.paired_average`): rows with a mostly failed averaged cell are never the best."""
    test = _hook(task, "paired_average")
    if test is None:
        return None
    sign = 1 if average["higher_is_better"] else -1
    cells = [Cell(*cell.split("/", 1)) for cell in average["cells"]]
    scored = [(row, run) for row, run in zip(rows, runs, strict=True) if row["average"] is not None]
    if len(scored) < 2:
        return None
    sizes = [
        row["cells"][cell]["num_clusters"] or row["cells"][cell]["num_docs"]
        for row, _ in scored
        for cell in average["cells"]
    ]
    if min(sizes) < task.min_docs_to_compare:
        return None
    failed = {
        id(row)
        for row, _ in scored
        for cell in average["cells"]
        if row["cells"][cell]["num_failed"] > MOSTLY_FAILED * row["cells"][cell]["num_docs"]
    }
    candidates = [
        (row, run, row) for row, run in scored if id(row) not in failed
    ]
    candidates = _contenders(candidates)
    if not candidates:
        return None
    best_row, best_run, _ = max(candidates, key=lambda c: sign * c[0]["average"])
    tied = [row for row, _ in scored if row is not best_row and _same(row["average"], best_row["average"])]
    for row in [best_row, *tied] if tied else ():
        row["average_tied"] = True  # no bold; the others are still tested against it
    if not tied:
        best_row["average_best"] = True
    for row, run in scored:
        if run is best_run:
            continue
        row["average_vs_best"] = test(best_run, run, cells, n_resamples=n_resamples, seed=seed)
    if tied:
        return "tie"
    others = [
        {"value": row["average"], "vs_best": row.get("average_vs_best")}
        for row, run, _ in candidates
        if run is not best_run
    ]
    metric = next(m for m in task.metrics if m.name == average["metric"])
    if others and _undetected(task, runs, cells, best_row["average"], metric, others):
        del best_row["average_best"]
        return "undetected"
    return None


def _same(a: float, b: float) -> bool:
    """Equal as the table shows them (three decimals): a difference no reader can see is a tie."""
    return round(a, 3) == round(b, 3)


def _average(
    task: Task, cells: Sequence[Cell], shown: Mapping[Cell, Any], main: Sequence[str]
) -> dict | None:
    """What the average column averages: one metric (the headline where it is shown in two or more main
    cells, else the metric every main cell shows) over main cells of distinct subsets (each doc set once),
    or, for a family whose average is over cells (`Task.average_over`), over every main cell; None when no
    metric is shown in two such cells. The reason there is none is kept (`no_average`)."""
    in_main = [cell for cell in cells if str(cell) in main]
    names = list(dict.fromkeys(shown[cell].name for cell in in_main))
    name = task.headline.name if task.headline.name in names else (names[0] if len(names) == 1 else None)
    if name is None:
        return None
    chosen: dict[Any, Cell] = {}
    for cell in in_main:
        if shown[cell].name == name:
            key = cell if task.average_over == "cells" else cell.subset
            chosen.setdefault(key, cell)  # one protocol per subset: its docs counted once
    if len(chosen) < 2:
        return None
    metric = next(m for m in task.metrics if m.name == name)
    return {
        "metric": name,
        "higher_is_better": metric.higher_is_better,
        "cells": [str(cell) for cell in chosen.values()],
        "over": task.average_over,
    }


def no_average_reason(data: Mapping[str, Any]) -> str:
    """Why a section with several main columns has no average column: different metrics, or one metric
    over the docs of one subset only (two protocols asking the same docs)."""
    names = {data["shown"][cell] for cell in data["main_cells"]}
    if len(names) > 1:
        return "No average: the columns' metrics differ in direction or scale."
    subsets = {cell.partition("/")[0] for cell in data["main_cells"]}
    if len(subsets) < 2:
        return (
            "No average: the columns ask the same docs in different ways; an average would count them twice."
        )
    return "No average: fewer than two columns share a metric over different docs."


def _row_average(row: dict, average: dict | None) -> float | None:
    if average is None:
        return None
    values = []
    for cell in average["cells"]:
        entry = row["cells"].get(cell)
        value = None if entry is None else entry["metrics"].get(average["metric"], {}).get("value")
        if value is None or entry.get("leak"):
            return None  # a row without every averaged cell (or with a leaking one) has no average
        values.append(value)
    return sum(values) / len(values)


def _published(task: Task, cells: list[str]) -> dict[str, Any]:
    """The family's published rows (another dataset) where the runs answer their config, apart from rows."""
    data = None if task.published_rows is None else task.published_rows.for_cells(cells)
    return {} if data is None else {"published": data}


# ---------------------------------------------------------------------------------------------- text


def fmt(value: float | None) -> str:
    """A metric value as the tables show it (three decimals), a dash for none."""
    return DASH if value is None or not math.isfinite(value) else f"{value:.3f}"


def failed_text(entry: Mapping[str, Any]) -> str:
    """`` (N% failed)`` (``n/N``) whenever any doc of the cell failed, else nothing.

    >>> failed_text({"num_docs": 30, "num_failed": 18}), failed_text({"num_docs": 3, "num_failed": 0})
    (' (18/30 failed, 60%)', '')
    >>> failed_text({"num_docs": 400, "num_failed": 1})
    ' (1/400 failed, <1%)'
    """
    failed, docs = entry["num_failed"], entry["num_docs"]
    if not failed or not docs:
        return ""
    share = "<1%" if failed / docs < 0.005 else f"{failed / docs:.0%}"
    return f" ({failed}/{docs} failed, {share})"


def value_text(entry: Mapping[str, Any] | None, metric: str, *, marks: bool = True) -> Text:
    """A cell's value of `metric`: ``v [lo, hi]``, with its coverage where it covers the answered docs
    only, its failed share, and (with `marks`) bold for the best, † where the paired test finds no
    difference from the best, = on a tie (and then no †); ``all N failed`` where no doc answered; ``–``
    not run."""
    if entry is None:
        return DASH
    value = entry["metrics"].get(metric)
    if value is None:
        return DASH
    failed, docs = entry["num_failed"], entry["num_docs"]
    if docs and failed == docs:
        return f"all {docs} failed"
    if value["value"] is None:
        return DASH
    text = fmt(value["value"])
    if value["ci_low"] is not None and value["ci_high"] is not None:
        text += f" [{fmt(value['ci_low'])}, {fmt(value['ci_high'])}]"
    if value.get("answered_only") and failed:
        text += f" (answered {docs - failed}/{docs})"
    elif failed:
        text += failed_text(entry)
    if entry.get("leak"):
        text += " (leak)"
    if not marks:
        return text
    return _marked(text, value.get("best"), value.get("tied"), value.get("vs_best"))


def _marked(text: str, best: Any, tied: Any, test: Mapping[str, Any] | None) -> Text:
    """A value with its marks: bold for the best, = on a tie with it (alone: a test against one of its
    twins says nothing more), † where the paired test finds no difference from it."""
    if best:
        return (Strong(text),)
    if tied:
        return text + " ="
    if test is not None and test.get("p_value") is not None and not test["p_value"] < ALPHA:
        return text + " †"
    return text


def average_text(row: Mapping[str, Any], *, marks: bool = True) -> Text:
    """A row's average, with (where the family tests its average) bold for the best, † where the paired
    test finds no difference from it, = on a tie."""
    if row.get("average") is None:
        return DASH
    text = fmt(row["average"])
    if row.get("average_mostly_failed"):
        text += f" ({row['average_mostly_failed']})"
    if not marks:
        return text
    return _marked(text, row.get("average_best"), row.get("average_tied"), row.get("average_vs_best"))


def column_name(data: Mapping[str, Any], cell: str, metric: str | None = None) -> str:
    """A column's heading: its cell, metric and direction."""
    name = metric or data["shown"][cell]
    return f"{cell}: {name} ({_direction(_higher(data, cell, name))})"


def _higher(data: Mapping[str, Any], cell: str, name: str) -> bool:
    """Whether higher is better for metric `name` of `cell` (the headline's direction where the cell has
    no metric at all)."""
    directions = {m["name"]: m["higher_is_better"] for m in data["cell_metrics"][cell]}
    return directions.get(name, data["higher_is_better"])


def _average_name(average: Mapping[str, Any]) -> str:
    return f"average {average['metric']} ({_direction(average['higher_is_better'])})"


def _label(row: Mapping[str, Any]) -> str:
    label = row["label"].replace("\n", " ")
    return label + (" (provisional)" if row.get("provisional") else "") + (" ⚠" if row.get("warning") else "")


def heading(data: Mapping[str, Any]) -> str:
    """The section's heading: the family, and its metric where every main column shows one; a family's
    comparable sets (``--allow-mixed``) are numbered, with their split and build."""
    names = {data["shown"][cell] for cell in data["main_cells"]}
    title = data["title"]
    if data.get("number") is not None:
        build = (data.get("dataset_fingerprint") or "unknown")[:12]
        title += f", table {data['number']} (split {data.get('split')}, build {build})"
    if len(names) == 1:
        (name,) = names
        return f"{title}: {name} ({_direction(_higher(data, data['main_cells'][0], name))})"
    return f"{title} (each column names its metric and direction)"


def main_grid(data: Mapping[str, Any]) -> Grid:
    """The compact main table: runs × main cells (the shown metric), and the average where one applies."""
    average = data.get("average")
    header = ["run", *(column_name(data, cell) for cell in data["main_cells"])]
    if average is not None:
        header.append(_average_name(average))
    rows = []
    for row in data["rows"]:
        shown = [value_text(row["cells"].get(cell), data["shown"][cell]) for cell in data["main_cells"]]
        if average is not None:
            shown.append(average_text(row))
        rows.append([_label(row), *shown])
    references = _hook(get(data["task"]), "reference_rows")
    if references is not None:
        for reference in references(data):
            rows.append(list(reference if average is not None else reference[:-1]))
    return Grid(header, rows, css="board")


def notes(data: Mapping[str, Any]) -> list[Text]:
    """The notes under the main table: how to read it, and what it cannot say."""
    resamples = " / ".join(f"{n:,}" for n in data.get("n_resamples") or ())
    out: list[Text] = [
        f"95% bootstrap intervals over docs (by cluster where docs share one; {resamples} resamples). "
        "Bold: the best run of a cell; "
        f"†: not significantly different from it (paired test, p ≥ {ALPHA}); =: tied with the best (no "
        "bold). (n/N failed): docs without a usable answer; all N failed: no doc answered; –: not run. "
        "(answered n/N): the metric covers the answered docs only, so it is never marked best."
    ]
    few = data.get("too_few_docs") or {}
    if few:
        cells = ", ".join(f"{cell} ({n})" for cell, n in few.items())
        out.append(
            f"Too few docs to compare ({min(few.values())}): {cells}: a paired test on fewer than "
            f"{data['min_docs_to_compare']} docs never reaches p < {ALPHA}, so no run is marked best there; "
            "evaluate on more docs (--limit)."
        )
    flagged = [row for row in data["rows"] if row.get("warning")]
    out += [f"⚠ {row['label']}: {row['warning']}; never marked best." for row in flagged]
    undetected = data.get("undetected") or []
    if undetected:
        out.append(
            f"No bold in {', '.join(undetected)}: the best's lead over the runner-up is below the smallest "
            "difference these docs detect, and the paired test does not tell them apart."
        )
    out += leak_notes(data)
    average = data.get("average")
    if average is not None:
        what = "every cell" if average.get("over") == "cells" else "one metric, each subset's docs once"
        tested = (
            " Marked like a cell's best: its paired test runs on each doc's mean over the cells."
            if _hook(get(data["task"]), "paired_average") is not None
            else ""
        )
        out.append(
            f"Average: the mean {average['metric']} over {', '.join(average['cells'])} ({what}); a run "
            f"without all of them has none.{tested}"
        )
    elif len(data["main_cells"]) > 1:
        out.append(no_average_reason(data))
    family_notes = _hook(get(data["task"]), "notes")
    if family_notes is not None:
        out += family_notes(data)
    return out


def leak_notes(data: Mapping[str, Any]) -> list[str]:
    """One line per cell the family's leak check flagged (`Task.leak_check`).

    >>> leak = {"inside": 9, "answered": 10, "expected": 0.0, "what": "made of X", "fix": "answer Y"}
    >>> leak_notes({"rows": [{"label": "mine", "cells": {"s/s": {"leak": leak}}}]})[0][:85]
    'Leak (mine, s/s): 9 of 10 answers are made of X, where chance would give 0: answer Y.'
    """
    return [
        f"Leak ({row['label']}, {cell}): {leak['inside']:,} of {leak['answered']:,} answers are "
        f"{leak['what']}, where chance would give {leak['expected']:g}: {leak['fix']}. Marked (leak): never "
        "best, no average for its row."
        for row in data["rows"]
        for cell, entry in row["cells"].items()
        if (leak := entry.get("leak"))
    ]


def metrics_grid(data: Mapping[str, Any], cell: str) -> Grid:
    """One cell's every metric, each run a row, each value with its interval (no marks)."""
    metrics = data["cell_metrics"][cell]
    names = [f"{m['name']} ({_direction(m['higher_is_better'])})" for m in metrics]
    header = ["run", "docs", "failed", *names]
    rows = []
    for row in data["rows"]:
        entry = row["cells"].get(cell)
        if entry is None:
            continue
        rows.append([
            _label(row), str(entry["num_docs"]), str(entry["num_failed"]),
            *(value_text(entry, m["name"], marks=False) for m in metrics),
        ])  # fmt: skip
    return Grid(header, rows)


def counts_lines(data: Mapping[str, Any]) -> list[str]:
    counted = [row for row in data["rows"] if row.get("answer_counts")]
    lines = []
    for row in counted:
        cells = "; ".join(
            f"{cell}: " + ", ".join(f"{key.replace('_', ' ')} {n:,}" for key, n in counts.items())
            for cell, counts in row["answer_counts"].items()
        )
        lines.append(f"- {row['label']}: {cells}")
    return lines


COST_HEADER = ["run", "requests", "from cache", "wall s", "requests/s", "prompt tokens", "answer tokens"]


def cost_grid(data: Mapping[str, Any]) -> Grid | None:
    """What each run's last invocation cost (run.json's ``cost``), or None when no run recorded one."""

    def count(value: Any) -> str:
        return DASH if value is None else f"{value:,}"

    rows = []
    for row in data["rows"]:
        cost = row.get("cost")
        if cost:
            rate = cost.get("requests_per_second")
            rows.append([
                _label(row), count(cost.get("requests")), count(cost.get("cache_hits")),
                f"{cost.get('wall_seconds', 0):.1f}", DASH if rate is None else f"{rate:.2f}",
                count(cost.get("prompt_tokens")), count(cost.get("answer_tokens")),
            ])  # fmt: skip
    return Grid(COST_HEADER, rows) if rows else None


def section_blocks(data: Mapping[str, Any], *, plots: Sequence[Any] = (), level: int = 2) -> list[Block]:
    """A section as blocks: heading, main table, notes, plots, per-cell metrics, the family's own."""
    blocks: list[Block] = [Heading(level, heading(data)), main_grid(data)]
    guide, *rest = notes(data)
    blocks += [Para(guide, "legend"), *(Para(text) for text in rest)]
    lines = counts_lines(data)
    if lines:
        blocks.append(Para("Counted in the parsed answers (summed over each cell's requests):"))
        blocks += [Para(line) for line in lines]
    hooks = _hooks(get(data["task"]))
    # a family that places its own pictures under its tables (`ReportHooks.places_plots`) leaves only the
    # shared cell charts here
    shown = [p for p in plots if p.kind == "cells"] if getattr(hooks, "places_plots", False) else list(plots)
    if shown:
        blocks.append(Images(shown))
    blocks.append(Heading(level + 1, "Every metric of each cell (95% intervals where the metric has one)"))
    for cell in data["main_cells"]:  # the others' in leaderboard.csv / .json and the family's own tables
        blocks += [Para((Code(cell),), css="cell"), metrics_grid(data, cell)]
    task = get(data["task"])
    hooks = _hooks(task)
    if hooks is not None and hasattr(hooks, "blocks"):
        blocks += hooks.blocks(data)
    costs = cost_grid(data)
    if costs is not None:
        blocks += [Heading(level + 1, "Cost (each run's last invocation)"), costs]
    if data.get("published"):
        blocks += from_markdown(task.published_rows.markdown(data["published"]))
    return blocks


def markdown(data: Mapping[str, Any]) -> str:
    """A section as the table `evaluate`, `score` and `report` print: heading, main table, notes."""
    lines = [f"## {heading(data)}", "", *_grid_lines(main_grid(data))]
    for text in notes(data):
        lines += ["", markdown_text(text)]
    counted = counts_lines(data)
    if counted:
        lines += ["", "Counted in the parsed answers (summed over each cell's requests):", "", *counted]
    if data.get("published"):
        lines += ["", *get(data["task"]).published_rows.markdown(data["published"])]
    return "\n".join(lines) + "\n"


def _grid_lines(grid: Grid) -> list[str]:
    lines = ["| " + " | ".join(grid.header) + " |", "|---|" + "---:|" * (len(grid.header) - 1)]
    lines += [
        "| " + " | ".join(markdown_text(cell).replace("|", "\\|") for cell in row) + " |" for row in grid.rows
    ]
    return lines


def title_of(sections: Sequence[Mapping[str, Any]]) -> str:
    """The report's title: its families, each once."""
    return " · ".join(dict.fromkeys(data["title"] for data in sections)) or "Report"


def section_key(data: Mapping[str, Any]) -> str:
    """A section's key among a report's sections (its family, and its number for ``--allow-mixed``)."""
    return data["task"] + (f"-{data['number']}" if data.get("number") is not None else "")


def document(
    sections: Sequence[Mapping[str, Any]],
    plots: Mapping[str, Sequence[Any]] | None = None,
    *,
    lead: Sequence[Block] = (),
) -> list:
    """The report as blocks: a title, `lead` (a suite's summary), and one section per family."""
    blocks: list[Block] = [Heading(1, f"{title_of(sections)} leaderboard"), *lead]
    for data in sections:
        blocks += section_blocks(data, plots=(plots or {}).get(section_key(data), ()))
    blocks.append(Para((
        "Files: ", Code("leaderboard.md"), ", ", Code("leaderboard.json"), " (every value), ",
        Code("leaderboard.csv"), " (one line per run, cell and metric), ", Code("leaderboard.tex"),
        " (the main tables), ", Code("plots/"), ".",
    )))  # fmt: skip
    return blocks


# ---------------------------------------------------------------------------------------------- files

CSV_FIELDS = (
    "task table run_dir label provisional subset protocol metric higher_is_better value ci_low ci_high "
    "num_docs num_failed num_engine_errors answered_only shown best tied diff_vs_best p_vs_best"
).split()


def csv_text(sections: Sequence[Mapping[str, Any]]) -> str:
    """leaderboard.csv: one line per (run, cell, metric)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for data in sections:
        for row in data["rows"]:
            for cell, entry in row["cells"].items():
                subset, _, protocol = cell.partition("/")
                directions = {m["name"]: m["higher_is_better"] for m in data["cell_metrics"][cell]}
                for name, value in entry["metrics"].items():
                    test = value.get("vs_best") or {}
                    writer.writerow({
                        "task": data["task"], "table": data.get("number"), "run_dir": row["path"],
                        "label": row["label"],
                        "provisional": row.get("provisional", False), "subset": subset, "protocol": protocol,
                        "metric": name, "higher_is_better": directions.get(name), "value": value["value"],
                        "ci_low": value["ci_low"], "ci_high": value["ci_high"], "num_docs": entry["num_docs"],
                        "num_failed": entry["num_failed"], "num_engine_errors": entry["num_engine_errors"],
                        "answered_only": bool(value.get("answered_only")),
                        "shown": name == data["shown"][cell], "best": bool(value.get("best")),
                        "tied": bool(value.get("tied")), "diff_vs_best": test.get("difference"),
                        "p_vs_best": test.get("p_value"),
                    })  # fmt: skip
            average = data.get("average")
            if average is not None and row.get("average") is not None:
                test = row.get("average_vs_best") or {}
                writer.writerow({
                    "task": data["task"], "table": data.get("number"), "run_dir": row["path"],
                    "label": row["label"], "provisional": row.get("provisional", False), "subset": "all",
                    "protocol": "average", "metric": average["metric"],
                    "higher_is_better": average["higher_is_better"], "value": row["average"],
                    "best": bool(row.get("average_best")), "tied": bool(row.get("average_tied")),
                    "diff_vs_best": test.get("difference"), "p_vs_best": test.get("p_value"),
                })  # fmt: skip
    return buffer.getvalue()


def latex(sections: Sequence[Mapping[str, Any]]) -> str:
    """leaderboard.tex: each section's main table (booktabs), the best in bold, intervals in brackets."""
    parts = ["% one table per family; needs \\usepackage{booktabs}"]
    for data in sections:
        grid = main_grid(data)
        parts += [
            "\\begin{table}[t]",
            "\\centering",
            "\\small",
            f"\\caption{{{latex_escape(heading(data))}}}",
            "\\begin{tabular}{l" + "r" * (len(grid.header) - 1) + "}",
            "\\toprule",
            " & ".join(latex_escape(name) for name in grid.header) + " \\\\",
            "\\midrule",
        ]
        for row in grid.rows:
            cells = []
            for cell in row:
                if isinstance(cell, tuple) and cell and isinstance(cell[0], Strong):
                    cells.append(f"\\textbf{{{latex_escape(str(cell[0]))}}}")
                else:
                    cells.append(latex_escape(markdown_text(cell)))
            parts.append(" & ".join(cells) + " \\\\")
        parts += ["\\bottomrule", "\\end{tabular}", "\\end{table}", ""]
    return "\n".join(parts) + "\n"


def draw(sections: Sequence[Mapping[str, Any]], out: Path) -> dict[str, list[Any]]:
    """Every section's pictures into ``out/plots/``: per shown metric, a bar chart of the main cells with
    intervals; then the family's own (`ReportHooks.plots`)."""
    from perrec_eval.leaderboard import plots

    drawn: dict[str, list[Any]] = {}
    for number, data in enumerate(sections, start=1):
        prefix = f"t{number}_"
        pictures = plots.cell_bars(data, out, prefix)
        hooks = _hooks(get(data["task"]))
        if hooks is not None and hasattr(hooks, "plots"):
            pictures += hooks.plots(data, out, prefix)
        drawn[section_key(data)] = pictures
    return drawn


def load_runs(folders: Sequence[str | os.PathLike]) -> list[FamilyRun]:
    """The runs in `folders` (a folder of runs stands for all of them), each folder once, in order."""
    found: list[Path] = []
    for folder in folders:
        for run in rundir.run_folders(folder):
            if run.resolve() not in {f.resolve() for f in found}:
                found.append(run)
    return [load(run) for run in found]


def sections_of(
    runs: Sequence[FamilyRun],
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    base: str | os.PathLike | None = None,
    allow_mixed: bool = False,
) -> list[dict]:
    """One section per family of `runs`; with `allow_mixed`, one per comparable set of a family (runs
    over other builds, splits or doc sets in their own numbered table) instead of a refusal."""
    families: dict[str, list[FamilyRun]] = {}
    for run in runs:
        families.setdefault(run.task, []).append(run)
    out = []
    for name, members in families.items():
        sets = partition(members) if allow_mixed else [members]
        for number, comparable in enumerate(sets, start=1):
            out.append(
                section(
                    get(name),
                    comparable,
                    n_resamples=n_resamples,
                    seed=seed,
                    base=base,
                    number=number if len(sets) > 1 else None,
                )
            )
    return out


def report(
    folders: Sequence[str | os.PathLike],
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    base: str | os.PathLike | None = None,
    allow_mixed: bool = False,
) -> list[dict]:
    """One section per family of the runs in `folders` (a folder of runs stands for all of them)."""
    return sections_of(
        load_runs(folders), n_resamples=n_resamples, seed=seed, base=base, allow_mixed=allow_mixed
    )


def write(
    sections: Sequence[dict[str, Any]],
    out: str | os.PathLike,
    *,
    plots: bool = True,
    lead: Callable[[Path], Sequence[Block]] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """The report folder of `sections` (leaderboard.md/.json/.csv/.tex, plots/*.png, index.html), written
    through the rule every report follows (`perrec_eval.leaderboard.folder.write`); returns index.html.

    Args:
        lead: blocks that open the report (a suite's summary), drawn into the report folder first.
        extra: what leaderboard.json holds beside the sections (a suite's summary), if anything.
    """
    from perrec_eval.leaderboard import document as doc
    from perrec_eval.leaderboard import folder

    def fill(tmp: Path) -> None:
        opening = list(lead(tmp)) if lead is not None else []
        drawn = draw(sections, tmp) if plots else {}
        listed = [
            {**data, "plots": [p.to_json() for p in drawn.get(section_key(data), ())]} for data in sections
        ]
        blocks = document(listed, drawn, lead=opening)
        fileio.write_text(tmp / "leaderboard.md", doc.markdown(blocks))
        listing = listed if extra is None else {**extra, "sections": listed}
        fileio.write_json(tmp / "leaderboard.json", listing)
        fileio.write_text(tmp / "leaderboard.csv", csv_text(sections))
        fileio.write_text(tmp / "leaderboard.tex", latex(sections))
        fileio.write_text(tmp / "index.html", doc.page(blocks, f"{title_of(sections)} leaderboard"))

    return folder.write(out, fill)
