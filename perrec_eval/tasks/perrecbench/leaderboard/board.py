"""PerRecBench's view of a report section and the statistics only it has: its PTC paired tests, the
min. detectable Δ and the constant-rating floor of each column.

The section itself (rows, cells, best marks, the average) is the shared one
(`perrec_eval.leaderboard.family`); `table_view` reads it, with the runs' prediction records, as a `Table`
of `Row`s and `Entry`s for the paper's analyses (`analyses`, `versus`) and PerRecBench's own tables
(`tables`).

- The cell test of PTC is `perrec_eval.ptc.paired_test` (sign-flip permutation test on per-group tau
  differences, on the groups both runs scored); the average's is the same test on each group's mean
  difference over the averaged cells. Rows scored with another metric (variant or failed-group policy) than
  the best are not tested against it.
- Clustered runs (a level holds several groups of one query item: large-preset builds) are tested per query
  item: the cell tests flip signs and resample per item, the average test runs on each item's share of the
  average (`item_differences`), and min. detectable Δ carries the design effect observed on the runs
  (`scoring.observed_design_effect`, the largest of the table's runs per column); its bound Σm²/Σm gives
  the worst case, shown in the notes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perrec_eval import ptc, stats
from perrec_eval.tasks.perrecbench import scoring
from perrec_eval.tasks.perrecbench.leaderboard.diagnostics import cell_diagnostics
from perrec_eval.tasks.perrecbench.leaderboard.runs import Cell, Run, differing_settings
from perrec_eval.tasks.perrecbench.records import clusters_of
from perrec_eval.tasks.perrecbench.vocabulary import LEVELS, METHODS

ALPHA = 0.05
# A paired sign-flip test on n groups cannot go below p = 2 / 2**n: under 6 groups nothing is ever told apart
# at ALPHA, so a table of fewer marks no best.
MIN_GROUPS_TO_COMPARE = 6
N_RESAMPLES = 10_000
_AVERAGE_DRAWS = 1_000_000  # signs drawn at once by the Avg. test (`stats.signflip_test`'s max_draws)
CELLS: tuple[Cell, ...] = tuple((level, method) for level in LEVELS for method in METHODS)
_SCORE_FIELDS = (
    "ptc",
    "ptc_ci_low",
    "ptc_ci_high",
    "num_groups",
    "num_invalid",
    "parse_failure_rate",
    "engine_error_rate",
    "num_engine_errors",
    "mae",
    "rmse",
    "first_shown_first",
    "first_shown_truly_first",
    "num_listwise_answers",
)

# A cell is "mostly failed" when more than this share of its groups got no usable ranking (no answer
# parsed, or engine errors): its PTC is then mostly the failure policy's, not the model's. Every table
# shows such a cell with its failure share, and it is never marked best.
MOSTLY_FAILED = 0.5


def failed_share(cell: Mapping[str, Any]) -> float | None:
    """The share of a cell's groups that got no usable ranking, or None without groups.

    >>> failed_share({"num_groups": 4, "num_invalid": 3}), failed_share({"num_groups": 0})
    (0.75, None)
    """
    groups = cell.get("num_groups")
    return cell.get("num_invalid", 0) / groups if groups else None


def mostly_failed(cell: Mapping[str, Any] | None) -> bool:
    """Whether more than `MOSTLY_FAILED` of the cell's groups failed.

    >>> mostly_failed({"num_groups": 4, "num_invalid": 3}), mostly_failed({"num_groups": 4, "num_invalid": 2})
    (True, False)
    """
    share = None if cell is None else failed_share(cell)
    return share is not None and share > MOSTLY_FAILED


@dataclass(slots=True)
class Entry:
    """One cell of one row: its scores, diagnostics and the test against the column's best."""

    level: str
    method: str
    scores: dict[str, Any]
    diagnostics: dict[str, Any] | None
    best: bool = False
    vs_best: dict[str, Any] | None = None
    untested: str | None = None

    @property
    def ptc(self) -> float | None:
        return self.scores.get("ptc")

    @property
    def significant(self) -> bool:
        """Below the column's best at level `ALPHA`."""
        return _below(self.vs_best)

    @property
    def tied(self) -> bool:
        """Tested against the column's best and not found below it: their order is not established."""
        return _tied(self.vs_best)

    def to_json(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "method": self.method,
            **self.scores,
            "best": self.best,
            "vs_best": self.vs_best,
            "tied_with_best": self.tied,
            "untested": self.untested,
            "diagnostics": self.diagnostics,
        }


@dataclass(slots=True)
class Row:
    """One run in a table."""

    label: str
    run: Run
    entries: dict[Cell, Entry]
    missing: list[Cell]
    average: float | None
    best: bool = False
    vs_best: dict[str, Any] | None = None
    untested: str | None = None

    @property
    def provisional(self) -> bool:
        return not self.run.complete

    @property
    def failed_cells(self) -> list[Cell]:
        """The row's mostly failed cells (`MOSTLY_FAILED`): its average cannot be the best."""
        return [cell for cell, entry in self.entries.items() if mostly_failed(entry.scores)]

    @property
    def significant(self) -> bool:
        return _below(self.vs_best)

    @property
    def tied(self) -> bool:
        return _tied(self.vs_best)

    def to_json(self, differing: Sequence[str]) -> dict[str, Any]:
        return {
            "label": self.label,
            "model": self.run.model,
            "run_dir": str(self.run.path),
            "settings": dict(self.run.settings),
            "differing_settings": {name: self.run.settings.get(name) for name in differing},
            "provisional": self.provisional,
            "num_groups": len(self.run.group_ids),
            "cost": self.run.info.cost,
            "average": self.average,
            "average_cells": len(self.entries) if self.average is not None else None,
            "missing_cells": [f"{level}/{method}" for level, method in self.missing],
            "best_average": self.best,
            "average_vs_best": self.vs_best,
            "average_tied_with_best": self.tied,
            "average_untested": self.untested,
            "cells": [entry.to_json() for entry in self.entries.values()],
        }


@dataclass(slots=True)
class Table:
    """A leaderboard over one comparable set of runs (same fingerprint, split and group set)."""

    number: int
    rows: list[Row]
    columns: list[Cell]
    differing: list[str]
    paper_variant: bool = False
    resolution: dict[Cell, float] = field(default_factory=dict)
    average_resolution: float | None = None
    floors: dict[Cell, float | None] = field(default_factory=dict)
    clustered: bool = False
    # the design effect each column's min. detectable Δ carries (observed on the runs), its bound Σm²/Σm
    # (one item's groups perfectly correlated, docs of equal variance) and the min. detectable Δ at the
    # larger of the two; 1s unclustered
    design_effects: dict[Cell, float] = field(default_factory=dict)
    design_effect_bounds: dict[Cell, float] = field(default_factory=dict)
    worst_resolution: dict[Cell, float] = field(default_factory=dict)

    @property
    def fingerprint(self) -> str | None:
        return self.rows[0].run.fingerprint

    @property
    def split(self) -> str:
        return self.rows[0].run.split

    @property
    def num_groups(self) -> int:
        return len(self.rows[0].run.group_ids)

    @property
    def too_few_groups(self) -> bool:
        """Too few groups for any paired test to tell two runs apart (`MIN_GROUPS_TO_COMPARE`)."""
        return self.num_groups < MIN_GROUPS_TO_COMPARE

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.number,
            "dataset_fingerprint": self.fingerprint,
            "split": self.split,
            "num_groups": self.num_groups,
            "columns": [f"{level}/{method}" for level, method in self.columns],
            "differing_settings": self.differing,
            "min_detectable_difference": {f"{lv}/{m}": v for (lv, m), v in self.resolution.items()},
            "average_min_detectable_difference": self.average_resolution,
            "resolution_basis": scoring.RESOLUTION_BASIS,
            "constant_floor": {f"{lv}/{m}": v for (lv, m), v in self.floors.items()},
            "rows": [row.to_json(self.differing) for row in self.rows],
        } | (self._clustering() if self.clustered else {})

    def _clustering(self) -> dict[str, Any]:
        return {
            "clustered_by": scoring.CLUSTERED_BY,
            "design_effect": {f"{lv}/{m}": v for (lv, m), v in self.design_effects.items()},
            "design_effect_bound": {f"{lv}/{m}": v for (lv, m), v in self.design_effect_bounds.items()},
            "worst_case_min_detectable_difference": {
                f"{lv}/{m}": v for (lv, m), v in self.worst_resolution.items()
            },
        }


def build_table(runs: Sequence[Run], *, n_resamples: int = N_RESAMPLES, seed: int = 0) -> Table:
    """The shared report section of loaded `runs` (`runs.load_runs`) as PerRecBench's `Table`, its rows in
    the section's order (best average first)."""
    from perrec_eval.leaderboard import family
    from perrec_eval.registry import get

    sources = [run.source for run in runs]
    data = family.section(get("perrecbench"), sources, n_resamples=n_resamples, seed=seed)
    by_path = {str(run.path): run for run in runs}
    ordered = [by_path[str(family_run.path)] for family_run in _section_runs(data, runs)]
    return table_view(data, ordered)


def _section_runs(data: Mapping[str, Any], runs: Sequence[Run]) -> list[Any]:
    """The runs in the order of the section's rows (matched by their row labels' source paths)."""
    from perrec_eval.leaderboard.family import shown_path

    by_shown = {shown_path(run.path, None): run.source for run in runs}
    return [by_shown[row["path"]] for row in data["rows"]]


def table_view(section: Mapping[str, Any], runs: Sequence[Run]) -> Table:
    """The shared `section` of `runs` (in its rows' order) as PerRecBench's `Table`: each row's entries
    with its scores, diagnostics and marks, and each column's min. detectable Δ, floor and design effect."""
    columns = [(cell.split("/", 1)[0], cell.split("/", 1)[1]) for cell in section["cells"]]
    rows = [_row(data, run, columns) for data, run in zip(section["rows"], runs, strict=True)]
    sizes = _cell_sizes(runs, columns)
    bounds = {cell: stats.design_effect(ids) for cell, ids in _cell_clusters(runs, columns).items()}
    effects = _observed_effects(runs, columns)
    return Table(
        number=section.get("number") or 1,
        rows=rows,
        columns=columns,
        differing=differing_settings(runs),
        paper_variant=any(run.variant == "paper" for run in runs),
        resolution={cell: scoring.cell_resolution(*size, effects[cell]) for cell, size in sizes.items()},
        average_resolution=scoring.average_resolution(
            list(sizes.values()), max(effects.values(), default=1.0)
        ),
        floors=_floors(runs, columns),
        clustered=any(bound > 1.0 for bound in bounds.values()),
        design_effects=effects,
        design_effect_bounds=bounds,
        worst_resolution={
            cell: scoring.cell_resolution(*size, max(bounds[cell], effects[cell]))
            for cell, size in sizes.items()
        },
    )


def resolution(runs: Sequence[Run], cells: Sequence[Cell]) -> float | None:
    """The min. detectable Δ of one column, or of the average over `cells` (`scoring.average_resolution`)."""
    sizes = _cell_sizes(runs, cells)
    effects = _observed_effects(runs, cells)
    if not sizes:
        return None
    if len(cells) == 1:
        (cell,) = sizes
        return scoring.cell_resolution(*sizes[cell], effects[cell])
    return scoring.average_resolution(list(sizes.values()), max(effects.values(), default=1.0))


def _row(data: Mapping[str, Any], run: Run, columns: Sequence[Cell]) -> Row:
    diagnostics = cell_diagnostics(run.samples())
    scored = run.cell_scores()
    entries = {}
    for cell in columns:
        if cell not in scored:
            continue
        marks = data["cells"][f"{cell[0]}/{cell[1]}"]["metrics"].get("ptc", {})
        test = marks.get("vs_best")
        entries[cell] = Entry(
            level=cell[0],
            method=cell[1],
            scores={name: getattr(scored[cell], name) for name in _SCORE_FIELDS},
            diagnostics=diagnostics.get(cell),
            best=bool(marks.get("best")),
            vs_best=None if test is None or "untested" in test else test,
            untested=None if test is None else test.get("untested"),
        )
    missing = [cell for cell in columns if cell not in entries or entries[cell].ptc is None]
    values = [entries[cell].ptc for cell in columns if cell not in missing]
    test = data.get("average_vs_best")
    return Row(
        label=data["label"],
        run=run,
        entries=entries,
        missing=missing,
        # the mean over every column for a complete row (the section has an average column from two)
        average=sum(values) / len(values) if values and not missing else None,
        best=bool(data.get("average_best")),
        vs_best=None if test is None or "untested" in test else test,
        untested=None if test is None else test.get("untested"),
    )


def _observed_effects(runs: Sequence[Run], columns: Sequence[Cell]) -> dict[Cell, float]:
    """Each column's design effect: the largest `scoring.observed_design_effect` of the table's runs in it
    (1 where the groups are not clustered)."""
    effects = {}
    for cell in columns:
        observed = [
            scoring.observed_design_effect(
                list(run.by_cell[cell].values()), variant=run.variant, invalid=run.invalid
            )
            for run in runs
            if run.by_cell.get(cell)
        ]
        effects[cell] = max((effect or 1.0 for effect in observed), default=1.0)
    return effects


def _cell_clusters(runs: Sequence[Run], columns: Sequence[Cell]) -> dict[Cell, list[str] | None]:
    """The cluster ids (`records.clusters_of`) of each column's groups, from the first run that scored it."""
    clusters = {}
    for cell in columns:
        records = next((run.by_cell[cell] for run in runs if run.by_cell.get(cell)), None)
        if records:
            clusters[cell] = clusters_of(list(records.values()))
    return clusters


def _cell_sizes(runs: Sequence[Run], columns: Sequence[Cell]) -> dict[Cell, tuple[int, int]]:
    """(users per group, groups) of each column, from the first run that scored it (a table's runs share
    their groups)."""
    sizes = {}
    for cell in columns:
        records = next((run.by_cell[cell] for run in runs if run.by_cell.get(cell)), None)
        if records:
            sizes[cell] = (len(next(iter(records.values())).references), len(records))
    return sizes


def _floors(runs: Sequence[Run], columns: Sequence[Cell]) -> dict[Cell, float | None]:
    """The constant-rating floor of each pointwise column (`scoring.constant_floor`), with the metric of
    the first run that scored it."""
    floors = {}
    for cell in columns:
        run = next((run for run in runs if cell[1] == "pointwise" and run.by_cell.get(cell)), None)
        if run is not None:
            records = list(run.by_cell[cell].values())
            floors[cell] = scoring.constant_floor(records, variant=run.variant, invalid=run.invalid)
    return floors


def _aligned(a: Run, b: Run, cell: Cell):
    """The groups of `cell` both runs scored: references, each run's predictions and formats, clusters."""
    records_a, records_b = a.by_cell[cell], b.by_cell[cell]
    shared = sorted(records_a.keys() & records_b.keys())
    references = [records_a[g].references for g in shared]
    predictions_a = [records_a[g].prediction for g in shared]
    predictions_b = [records_b[g].prediction for g in shared]
    formats = (records_a[shared[0]].format, records_b[shared[0]].format) if shared else ("scores", "scores")
    clusters = clusters_of([records_a[g] for g in shared])
    return shared, references, predictions_a, predictions_b, formats, clusters


def paired_cell(
    a: Run, b: Run, cell: Cell, *, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> dict[str, Any]:
    """`perrec_eval.ptc.paired_test` of PTC(a) - PTC(b) in `cell`, on the groups both runs scored."""
    shared, references, predictions_a, predictions_b, (format_a, format_b), clusters = _aligned(a, b, cell)
    if not shared:
        return {"difference": None, "p_value": math.nan, "num_compared": 0}
    result = ptc.paired_test(
        references,
        predictions_a,
        predictions_b,
        prediction_format=format_a,
        prediction_format_b=format_b,
        variant=a.variant,
        invalid=a.invalid,
        n_resamples=n_resamples,
        seed=seed,
        clusters=clusters,
    )
    keep = ("difference", "p_value", "ci_low", "ci_high", "num_compared")
    return {name: _finite(result[name]) for name in keep}


def group_differences(a: Run, b: Run, columns: Sequence[Cell]) -> np.ndarray:
    """Per group both runs scored in every column: the mean over the columns of tau(a) - tau(b).

    Failed groups count as tau 0 (policy ``zero``) or leave that cell out of the group's mean when either
    run failed it (policy ``skip``), as in `ptc.paired_test`.
    """
    per_group: dict[str, list[float]] = {}
    shared_everywhere: set[str] | None = None
    for cell in columns:
        shared, *_ = _aligned(a, b, cell)
        shared_everywhere = set(shared) if shared_everywhere is None else shared_everywhere & set(shared)
        for group, difference in _kept_differences(a, b, cell):
            per_group.setdefault(group, []).append(difference)
    groups = sorted((shared_everywhere or set()) & per_group.keys())
    return np.array([sum(per_group[g]) / len(per_group[g]) for g in groups], dtype=np.float64)


def _kept_differences(a: Run, b: Run, cell: Cell) -> list[tuple[str, float]]:
    """(group, tau(a) - tau(b)) of the groups of `cell` both runs scored and the failure policy keeps."""
    shared, references, predictions_a, predictions_b, (format_a, format_b), _ = _aligned(a, b, cell)
    if not shared:
        return []
    taus_a, valid_a = ptc.group_taus(references, predictions_a, prediction_format=format_a, variant=a.variant)
    taus_b, valid_b = ptc.group_taus(references, predictions_b, prediction_format=format_b, variant=a.variant)
    keep = valid_a & valid_b if a.invalid == "skip" else np.ones(len(shared), dtype=bool)
    return [
        (group, ta - tb)
        for group, ta, tb, kept in zip(shared, taus_a.tolist(), taus_b.tolist(), keep.tolist(), strict=True)
        if kept
    ]


def item_differences(a: Run, b: Run, columns: Sequence[Cell]) -> np.ndarray | None:
    """Per query item, its share of avg(a) - avg(b) over `columns`, times the number of items; None when
    no column is clustered.

    Avg. is the mean over the columns of each column's mean over its groups, so it is the sum over items of
    their groups' differences, each weighted by 1 / (columns x groups of its column): the item's share.
    Large-preset levels hold different groups of the same items, so the items, not the groups, are what
    the columns share; the mean of these values is avg(a) - avg(b) on the compared groups.
    """
    clusters = {cell: _aligned(a, b, cell)[5] for cell in columns}
    if all(ids is None for ids in clusters.values()):
        return None
    share: dict[str, float] = {}
    for cell in columns:
        kept = _kept_differences(a, b, cell)
        cluster_of = dict(zip(_aligned(a, b, cell)[0], clusters[cell] or [], strict=False))
        for group, difference in kept:
            item = cluster_of.get(group, group)
            share[item] = share.get(item, 0.0) + difference / (len(columns) * len(kept))
    return np.array([share[item] * len(share) for item in sorted(share)], dtype=np.float64)


def paired_average(
    a: Run, b: Run, columns: Sequence[Cell], *, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> dict[str, Any]:
    """`stats.signflip_test` of avg(a) - avg(b) on per-group mean differences over `columns`; on
    clustered tables on the query items' shares of it (`item_differences`), flipped per item.

    The interval is the (1 - `ALPHA`) one; signs are drawn a million at a time and the difference is
    numpy's mean, as the leaderboard has always reported them.
    """
    items = item_differences(a, b, columns)
    d = items if items is not None else group_differences(a, b, columns)
    if d.size == 0:
        return {"difference": None, "p_value": math.nan, "ci_low": None, "ci_high": None, "num_compared": 0}
    result = stats.signflip_test(d, n_resamples=n_resamples, alpha=ALPHA, seed=seed, max_draws=_AVERAGE_DRAWS)
    keep = ("p_value", "ci_low", "ci_high", "num_compared")
    return {"difference": float(d.mean())} | {name: getattr(result, name) for name in keep}


def _below(test: Mapping[str, Any] | None) -> bool:
    """Whether a test against the best found a difference at level `ALPHA`."""
    return test is not None and test.get("p_value") is not None and test["p_value"] < ALPHA


def _tied(test: Mapping[str, Any] | None) -> bool:
    """Whether a test against the best ran and found no difference at level `ALPHA`."""
    return test is not None and test.get("p_value") is not None and test["p_value"] >= ALPHA


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else value
