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
from collections.abc import Mapping, Sequence
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
    markdown_text,
)
from perrec_eval.results import FamilyScores, RunInfo, read_family_scores, read_run_info
from perrec_eval.stats import resampled_docs
from perrec_eval.tasks import Cell, Task, get

ALPHA = 0.05
MIN_DOCS_TO_COMPARE = 6  # `Task.min_docs_to_compare`'s default
MOSTLY_FAILED = 0.5


class ReportHooks(Protocol):
    """What a family adds to its report section (`Task.report`); every method is optional.

    - ``main_cells(cells) -> cells``: the cells of the compact main table (default: all; the others are
      shown in the per-cell metrics tables and the family's own blocks);
    - ``blocks(section) -> list[Block]``: the family's own tables and notes, after the per-cell metrics;
    - ``plots(section, out, prefix) -> list[Plot]``: the family's own pictures, drawn with
      `perrec_eval.leaderboard.plots` into ``out/plots/`` under names starting with `prefix`.
    """


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


def _selection(run: FamilyRun) -> str:
    """How a run chose its docs, as the flags that choose them."""
    config = run.info.config
    max_docs = config.get("max_docs")
    parts = [f"--max-docs {max_docs}" if max_docs is not None else "all docs (no --max-docs)"]
    parts.append(f"--seed {config.get('seed', 0)}")
    return " ".join(parts)


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
        ):
            if a != b:
                raise DataError(
                    f"runs {first.path} and {run.path} of task {first.task} differ in their {what}: compare "
                    "runs of one build and split (same --data and --split)"
                )
        if _in_cells(first, shared) != _in_cells(run, shared):
            raise DataError(
                f"runs {first.path} ({_selection(first)}) and {run.path} ({_selection(run)}) of task "
                f"{first.task} differ in their doc sets: evaluate or score them with the same --max-docs and "
                "--seed (`perrecbench score --predictions` takes them too)"
            )


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


def section(
    task: Task, runs: Sequence[FamilyRun], *, n_resamples: int = 10_000, seed: int = 0
) -> dict[str, Any]:
    """The comparison of `runs` (one family) as a JSON-ready section.

    Raises:
        DataError: the runs are not comparable (`check_comparable`).
    """
    check_comparable(runs)
    order = {cell: i for i, cell in enumerate(task.cells())}
    answered = {
        Cell(c.subset, c.protocol) for run in runs for c in run.scores.cells
    }
    cells = sorted(answered, key=lambda cell: order.get(cell, len(order)))
    defined = {cell: _defined(task, runs, cell) for cell in cells}
    shown = {cell: (defined[cell] or [task.headline])[0] for cell in cells}
    hooks = _hooks(task)
    names = [str(cell) for cell in cells]
    main = list(hooks.main_cells(names)) if hooks is not None and hasattr(hooks, "main_cells") else names
    main = main or names  # runs of none of the main cells: their own cells are the main table
    rows = [_row(task, run, cells, defined) for run in runs]
    too_few: dict[str, int] = {}
    ties: list[str] = []
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
    average = _average(task, cells, shown, main)
    for row in rows:
        row["average"] = _row_average(row, average)
    data = {
        "task": task.name,
        "title": task.title,
        "headline": task.headline.name,
        "higher_is_better": task.headline.higher_is_better,
        "subset_axis": task.subset_axis,
        "protocol_axis": task.protocol_axis,
        "min_docs_to_compare": task.min_docs_to_compare,
        "cells": names,
        "main_cells": [cell for cell in names if cell in main],
        "cell_metrics": {
            str(cell): [{"name": m.name, "higher_is_better": m.higher_is_better} for m in defined[cell]]
            for cell in cells
        },
        "shown": {str(cell): shown[cell].name for cell in cells},
        "average": average,
        "too_few_docs": too_few,
        "tied": ties,
        "rows": rows,
        **_published(task, names),
    }
    return data


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


def _row(task: Task, run: FamilyRun, cells: Sequence[Cell], defined: Mapping[Cell, list[Any]]) -> dict:
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
        "label": run.label,
        "path": str(run.path),
        "engine": run.info.engine.get("name"),
        "provisional": not run.scores.complete,
        "cells": row_cells,
    }
    counts = {
        str(Cell(c.subset, c.protocol)): dict(c.answer_counts) for c in run.scores.cells if c.answer_counts
    }
    if counts:
        row["answer_counts"] = counts
    return row


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

    Returns the cell's doc (or cluster) count when too few to compare, ``"tie"`` when the best ties, else
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
    candidates = [
        (row, run, entry)
        for row, run, entry in scored
        if entry["num_failed"] <= MOSTLY_FAILED * entry["num_docs"]
        and not (entry["metrics"][metric.name].get("answered_only") and entry["num_failed"])
        and not entry.get("leak")
    ]
    if not candidates:
        return None
    best_row, best_run, best_entry = max(
        candidates, key=lambda c: sign * c[2]["metrics"][metric.name]["value"]
    )
    best_value = best_entry["metrics"][metric.name]["value"]
    tied = [
        c for c in scored if c[0] is not best_row and _same(c[2]["metrics"][metric.name]["value"], best_value)
    ]
    if tied:
        for _, _, entry in [(best_row, best_run, best_entry), *tied]:
            entry["metrics"][metric.name]["tied"] = True
        return "tie"
    best_entry["metrics"][metric.name]["best"] = True
    best_items, clusters = _per_doc(task, best_run, cell, metric)
    shared = clusters if len(set(clusters)) < len(clusters) and None not in clusters else None
    for _, run, entry in scored:
        if run is best_run:
            continue
        items, _ = _per_doc(task, run, cell, metric)
        if len(items) != len(best_items):
            continue
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
        entry["metrics"][metric.name]["vs_best"] = {"difference": test.difference, "p_value": test.p_value}
    return None


def _same(a: float, b: float) -> bool:
    """Equal as the table shows them (three decimals): a difference no reader can see is a tie."""
    return round(a, 3) == round(b, 3)


def _average(
    task: Task, cells: Sequence[Cell], shown: Mapping[Cell, Any], main: Sequence[str]
) -> dict | None:
    """What the average column averages: one metric over main cells of distinct subsets (each doc set
    once), the headline where it is shown in two or more, else the metric every main cell shows; None
    when no metric is shown in two such cells."""
    in_main = [cell for cell in cells if str(cell) in main]
    names = list(dict.fromkeys(shown[cell].name for cell in in_main))
    name = task.headline.name if task.headline.name in names else (names[0] if len(names) == 1 else None)
    if name is None:
        return None
    chosen: dict[str, Cell] = {}
    for cell in in_main:
        if shown[cell].name == name:
            chosen.setdefault(cell.subset, cell)  # one protocol per subset: its docs counted once
    if len(chosen) < 2:
        return None
    metric = next(m for m in task.metrics if m.name == name)
    return {
        "metric": name,
        "higher_is_better": metric.higher_is_better,
        "cells": [str(cell) for cell in chosen.values()],
    }


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
    """
    failed, docs = entry["num_failed"], entry["num_docs"]
    return f" ({failed}/{docs} failed, {failed / docs:.0%})" if failed and docs else ""


def value_text(entry: Mapping[str, Any] | None, metric: str, *, marks: bool = True) -> Text:
    """A cell's value of `metric`: ``v [lo, hi]``, with its coverage where it covers the answered docs
    only, its failed share, and (with `marks`) bold for the best, † where the paired test finds no
    difference from the best, = on a tie; ``all N failed`` where no doc answered; ``–`` not run."""
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
    text = f"{fmt(value['value'])} [{fmt(value['ci_low'])}, {fmt(value['ci_high'])}]"
    if value.get("answered_only") and failed:
        text += f" (answered {docs - failed}/{docs})"
    elif failed:
        text += failed_text(entry)
    if entry.get("leak"):
        text += " (leak)"
    if not marks:
        return text
    if value.get("best"):
        return (Strong(text),)
    if value.get("tied"):
        text += " ="
    test = value.get("vs_best")
    if test is not None and not test["p_value"] < ALPHA:
        text += " †"
    return text


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
    return label + (" (provisional)" if row.get("provisional") else "")


def heading(data: Mapping[str, Any]) -> str:
    """The section's heading: the family, and its metric where every main column shows one."""
    names = {data["shown"][cell] for cell in data["main_cells"]}
    if len(names) == 1:
        (name,) = names
        return f"{data['title']}: {name} ({_direction(_higher(data, data['main_cells'][0], name))})"
    return f"{data['title']} (each column names its metric and direction)"


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
            shown.append(fmt(row.get("average")))
        rows.append([_label(row), *shown])
    return Grid(header, rows, css="board")


def notes(data: Mapping[str, Any]) -> list[Text]:
    """The notes under the main table: how to read it, and what it cannot say."""
    out: list[Text] = [
        "95% bootstrap intervals over docs (by cluster where docs share one). Bold: the best run of a cell; "
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
            "evaluate on more docs (--max-docs)."
        )
    out += leak_notes(data)
    average = data.get("average")
    if average is not None:
        out.append(
            f"Average: the mean {average['metric']} over {', '.join(average['cells'])} (one metric, each "
            "subset's docs once); a run without all of them has none."
        )
    elif len(data["main_cells"]) > 1:
        out.append("No average: the columns' metrics differ in direction or scale.")
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


def section_blocks(data: Mapping[str, Any], *, plots: Sequence[Any] = (), level: int = 2) -> list[Block]:
    """A section as blocks: heading, main table, notes, plots, per-cell metrics, the family's own."""
    blocks: list[Block] = [Heading(level, heading(data)), main_grid(data)]
    blocks += [Para(text) for text in notes(data)]
    lines = counts_lines(data)
    if lines:
        blocks.append(Para("Counted in the parsed answers (summed over each cell's requests):"))
        blocks += [Para(line) for line in lines]
    if plots:
        blocks.append(Images(plots))
    blocks.append(Heading(level + 1, "Every metric of each cell (95% intervals)"))
    for cell in data["main_cells"]:  # the others' in leaderboard.csv / .json and the family's own tables
        blocks += [Para((Code(cell),), css="cell"), metrics_grid(data, cell)]
    task = get(data["task"])
    hooks = _hooks(task)
    if hooks is not None and hasattr(hooks, "blocks"):
        blocks += hooks.blocks(data)
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


def document(sections: Sequence[Mapping[str, Any]], plots: Mapping[str, Sequence[Any]] | None = None) -> list:
    """The report as blocks: a title and one section per family."""
    title = " · ".join(data["title"] for data in sections) or "Report"
    blocks: list[Block] = [Heading(1, f"{title} leaderboard")]
    for data in sections:
        blocks += section_blocks(data, plots=(plots or {}).get(data["task"], ()))
    blocks.append(Para((
        "Files: ", Code("leaderboard.md"), ", ", Code("leaderboard.json"), " (every value), ",
        Code("leaderboard.csv"), " (one line per run, cell and metric), ", Code("leaderboard.tex"),
        " (the main tables), ", Code("plots/"), ".",
    )))  # fmt: skip
    return blocks


# ---------------------------------------------------------------------------------------------- files

CSV_FIELDS = (
    "task run_dir label provisional subset protocol metric higher_is_better value ci_low ci_high num_docs "
    "num_failed num_engine_errors answered_only shown best tied diff_vs_best p_vs_best"
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
                        "task": data["task"], "run_dir": row["path"], "label": row["label"],
                        "provisional": row.get("provisional", False), "subset": subset, "protocol": protocol,
                        "metric": name, "higher_is_better": directions.get(name), "value": value["value"],
                        "ci_low": value["ci_low"], "ci_high": value["ci_high"], "num_docs": entry["num_docs"],
                        "num_failed": entry["num_failed"], "num_engine_errors": entry["num_engine_errors"],
                        "answered_only": bool(value.get("answered_only")),
                        "shown": name == data["shown"][cell], "best": bool(value.get("best")),
                        "tied": bool(value.get("tied")), "diff_vs_best": test.get("difference"),
                        "p_vs_best": test.get("p_value"),
                    })  # fmt: skip
    return buffer.getvalue()


def latex_escape(text: str) -> str:
    """`text` safe in LaTeX.

    >>> latex_escape("a_b & 50%")
    'a\\\\_b \\\\& 50\\\\%'
    """
    out = text
    for char in "\\&%$#_{}":
        out = out.replace(char, "\\" + char if char != "\\" else "\\textbackslash{}")
    return out.replace("~", "\\textasciitilde{}").replace("^", "\\textasciicircum{}")


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
        drawn[data["task"]] = pictures
    return drawn


def report(folders: Sequence[str | os.PathLike], *, n_resamples: int = 10_000, seed: int = 0) -> list[dict]:
    """One section per family of the runs in `folders` (a folder of runs stands for all of them)."""
    runs = [load(run) for folder in folders for run in rundir.run_folders(folder)]
    families: dict[str, list[FamilyRun]] = {}
    for run in runs:
        families.setdefault(run.task, []).append(run)
    return [
        section(get(name), members, n_resamples=n_resamples, seed=seed) for name, members in families.items()
    ]


def write(sections: Sequence[dict[str, Any]], out: str | os.PathLike, *, plots: bool = True) -> Path:
    """The report folder of `sections` (leaderboard.md/.json/.csv/.tex, plots/*.png, index.html), written
    through the rule every report follows (`perrec_eval.leaderboard.folder.write`); returns index.html."""
    from perrec_eval.leaderboard import document as doc
    from perrec_eval.leaderboard import folder

    def fill(tmp: Path) -> None:
        drawn = draw(sections, tmp) if plots else {}
        blocks = document(sections, drawn)
        fileio.write_text(tmp / "leaderboard.md", doc.markdown(blocks))
        listed = [
            {**data, "plots": [p.to_json() for p in drawn.get(data["task"], ())]} for data in sections
        ]
        fileio.write_json(tmp / "leaderboard.json", listed)
        fileio.write_text(tmp / "leaderboard.csv", csv_text(sections))
        fileio.write_text(tmp / "leaderboard.tex", latex(sections))
        title = " · ".join(data["title"] for data in sections)
        fileio.write_text(tmp / "index.html", doc.page(blocks, f"{title} leaderboard"))

    return folder.write(out, fill)
