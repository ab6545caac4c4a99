"""The leaderboard of a family run through the general path: runs × cells, intervals, tests against the best.

Each family gets its own section: runs of different families never share a table. Within a family,
runs are compared only on one build (dataset fingerprint), split and doc set; each cell shows the headline
metric with its interval, and the best run of each cell is tested against every other run on the same
docs with the metric's paired test (sign-flip for per-doc means, paired bootstrap for corpus metrics).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perrec_eval import fileio, rundir
from perrec_eval.docrecords import read_predictions
from perrec_eval.errors import DataError
from perrec_eval.results import FamilyScores, RunInfo, read_family_scores, read_run_info
from perrec_eval.stats import resampled_docs
from perrec_eval.tasks import Cell, Task, get

ALPHA = 0.05


@dataclass(frozen=True, slots=True)
class FamilyRun:
    """A finished general-path run folder, loaded for comparison."""

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


def load(folder: str | os.PathLike) -> FamilyRun:
    """A general-path run folder (run.json, scores.json, predictions.jsonl)."""
    path = Path(folder)
    info = read_run_info(path)
    label = info.label or info.engine.get("model") or path.name
    scores = read_family_scores(path / "scores.json")
    return FamilyRun(path, str(label), info, scores, tuple(read_predictions(path)))


def task_of(folder: str | os.PathLike) -> str:
    """The task family of a finished run folder (runs written before families existed: PerRecBench's)."""
    return read_run_info(folder).task


def check_comparable(runs: Sequence[FamilyRun]) -> None:
    """Refuse runs of one family over different builds, splits or doc sets (one line naming the fix)."""
    if not runs:
        return
    first = runs[0]
    for run in runs[1:]:
        # a run may answer only some cells (a baseline of one task): doc sets are compared where both answer
        shared = {(s, p) for s, p, _ in first.doc_ids()} & {(s, p) for s, p, _ in run.doc_ids()}
        for what, a, b in (
            ("builds (dataset fingerprints)", first.info.dataset_fingerprint, run.info.dataset_fingerprint),
            ("splits", first.info.config.get("split"), run.info.config.get("split")),
            ("doc sets", _in_cells(first, shared), _in_cells(run, shared)),
        ):
            if a != b:
                raise DataError(
                    f"runs {first.path} and {run.path} of task {first.task} differ in their {what}: compare "
                    "runs of one build, split and doc set (same --data, --split, --max-docs and --seed)"
                )


def _in_cells(run: FamilyRun, cells: set[tuple[str, str]]) -> frozenset[tuple[str, str, str]]:
    return frozenset(key for key in run.doc_ids() if key[:2] in cells)


def _per_doc(task: Task, run: FamilyRun, cell: Cell, metric: Any) -> tuple[list[str], list[Any], list[Any]]:
    records = sorted((p for p in run.predictions if p.cell == cell), key=lambda p: p.id)
    items = [task.score_doc(metric.name, p.prediction, p.truth) for p in records]
    return [p.id for p in records], items, [p.cluster for p in records]


def section(
    task: Task, runs: Sequence[FamilyRun], *, n_resamples: int = 10_000, seed: int = 0
) -> dict[str, Any]:
    """One family's leaderboard as data: per run and cell the headline metric, its interval and the paired
    test against the cell's best run."""
    check_comparable(runs)
    present = {Cell(c.subset, c.protocol) for run in runs for c in run.scores.cells}
    cells = [cell for cell in task.cells() if cell in present]
    shown = {cell: _cell_metric(task, runs, cell) for cell in cells}
    rows = []
    for run in runs:
        by_cell = {Cell(c.subset, c.protocol): c for c in run.scores.cells}
        rows.append({"label": run.label, "path": str(run.path), "cells": {}, "average": run.scores.average})
        counts = {str(cell): dict(by_cell[cell].answer_counts) for cell in cells
                  if cell in by_cell and by_cell[cell].answer_counts}  # fmt: skip
        if counts:
            rows[-1]["answer_counts"] = counts
        for cell in cells:
            value = by_cell[cell].metrics[shown[cell].name] if cell in by_cell else None
            rows[-1]["cells"][str(cell)] = (
                None
                if value is None
                else {"value": value.value, "ci_low": value.ci_low, "ci_high": value.ci_high}
            )
    for cell in cells:
        metric = shown[cell]
        sign = 1 if metric.higher_is_better else -1
        scored = [
            (row, run)
            for row, run in zip(rows, runs, strict=True)
            if (row["cells"][str(cell)] or {}).get("value") is not None
        ]
        if len(scored) < 2:
            continue
        best_row, best_run = max(scored, key=lambda pair: sign * pair[0]["cells"][str(cell)]["value"])
        best_row["cells"][str(cell)]["best"] = True
        _, best_items, clusters = _per_doc(task, best_run, cell, metric)
        shared = clusters if len(set(clusters)) < len(clusters) and None not in clusters else None
        for row, run in scored:
            if run is best_run:
                continue
            _, items, _ = _per_doc(task, run, cell, metric)
            keep = sorted(set(resampled_docs(metric, best_items)) & set(resampled_docs(metric, items)))
            if not keep:  # no doc on which both runs have the metric: nothing to test
                continue
            test = metric.paired_test(
                [best_items[i] for i in keep],
                [items[i] for i in keep],
                [shared[i] for i in keep] if shared is not None else None,
                n_resamples=n_resamples,
                seed=seed,
            )
            row["cells"][str(cell)]["vs_best"] = {"difference": test.difference, "p_value": test.p_value}
    return {
        "task": task.name,
        "title": task.title,
        "headline": task.headline.name,
        "higher_is_better": task.headline.higher_is_better,
        "cells": [str(cell) for cell in cells],
        # a cell without the headline (a family whose cells are different tasks) shows its first metric
        "cell_metrics": {
            str(cell): {"name": m.name, "higher_is_better": m.higher_is_better}
            for cell, m in shown.items()
            if m is not task.headline
        },
        "rows": rows,
        **_published(task, [str(cell) for cell in cells]),
    }


def _published(task: Task, cells: list[str]) -> dict[str, Any]:
    """The family's published rows (another dataset) where the runs answer their config, apart from rows."""
    data = None if task.published_rows is None else task.published_rows.for_cells(cells)
    return {} if data is None else {"published": data}


def _cell_metric(task: Task, runs: Sequence[FamilyRun], cell: Cell) -> Any:
    """The metric a cell shows: the headline, or where no run has it there, the family's first one it has."""
    for metric in task.metrics:
        for run in runs:
            for scored in run.scores.cells:
                value = scored.metrics[metric.name].value
                if Cell(scored.subset, scored.protocol) == cell and value is not None:
                    return metric
    return task.headline


def _fmt(value: float | None) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.3f}"


def _header(data: dict[str, Any], cell: str) -> str:
    other = data["cell_metrics"].get(cell)
    if other is None:
        return cell
    return f"{cell}: {other['name']} ({'higher' if other['higher_is_better'] else 'lower'} is better)"


def markdown(data: dict[str, Any]) -> str:
    """A section as a markdown table: the best of each cell in bold, a dagger where it is not significantly
    better (paired test at 5%)."""
    direction = "higher" if data["higher_is_better"] else "lower"
    lines = [
        f"## {data['title']}: {data['headline']} ({direction} is better)",
        "",
        "| run | " + " | ".join(_header(data, cell) for cell in data["cells"]) + " | average |",
        "|---|" + "---:|" * (len(data["cells"]) + 1),
    ]
    for row in data["rows"]:
        shown = []
        for cell in data["cells"]:
            value = row["cells"].get(cell)
            if value is None:
                shown.append("–")
                continue
            text = f"{_fmt(value['value'])} [{_fmt(value['ci_low'])}, {_fmt(value['ci_high'])}]"
            if value.get("best"):
                text = f"**{text}**"
            test = value.get("vs_best")
            if test is not None and not test["p_value"] < ALPHA:
                text += " †"
            shown.append(text)
        label = row["label"].replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {label} | " + " | ".join(shown) + f" | {_fmt(row['average'])} |")
    lines += [
        "",
        "95% bootstrap intervals over docs. Bold: the best run of a cell; †: not significantly different "
        f"from it (paired test, p ≥ {ALPHA}).",
    ]
    counted = [row for row in data["rows"] if row.get("answer_counts")]
    if counted:
        lines += ["", "Counted in the parsed answers (summed over each cell's requests):", ""]
        for row in counted:
            cells = "; ".join(
                f"{cell}: " + ", ".join(f"{key.replace('_', ' ')} {n:,}" for key, n in counts.items())
                for cell, counts in row["answer_counts"].items()
            )
            lines.append(f"- {row['label']}: {cells}")
    if data.get("published"):
        lines += ["", *get(data["task"]).published_rows.markdown(data["published"])]
    return "\n".join(lines) + "\n"


def report(folders: Sequence[str | os.PathLike], *, n_resamples: int = 10_000, seed: int = 0) -> list[dict]:
    """One section per family of the runs in `folders` (a folder of runs stands for all of them)."""
    runs = [load(run) for folder in folders for run in rundir.run_folders(folder)]
    families: dict[str, list[FamilyRun]] = {}
    for run in runs:
        families.setdefault(run.task, []).append(run)
    return [
        section(get(name), members, n_resamples=n_resamples, seed=seed) for name, members in families.items()
    ]


def write(sections: Sequence[dict[str, Any]], out: str | os.PathLike) -> Path:
    """leaderboard.md and leaderboard.json of the sections into `out` (each file written atomically)."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    fileio.write_text(folder / "leaderboard.md", "\n".join(markdown(s) for s in sections))
    fileio.write_json(folder / "leaderboard.json", list(sections))
    return folder / "leaderboard.md"
