"""The paper's analyses of a leaderboard table, as data (the plots and pages draw from these).

- `by_domain` (paper Fig. 4): PTC per domain (the prefix of the group id before ":").
- `by_group_size` (Fig. 7): PTC per method across easy / medium / hard (2 / 3 / 4 users).
- `by_method`: PTC per method, mean over the table's levels.
- `prompting` (Table 2): runs of one model that differ only in prompting (profile, CoT, shots, samples).
- `k_shots` (Fig. 6): runs of one model that cover several retrieved-history sizes k and/or shot counts.
- `rating_errors` (Figs. 1 and 3): PTC against MAE / RMSE of the predicted ratings, with Pearson r.
- `versus_baselines`: every LLM run against every no-LLM baseline (floors, ``mf``, ``item-knn``), one
  paired test per shared cell (:mod:`perrec_eval.tasks.perrecbench.leaderboard.versus`).
- `benchmark_stats` (Fig. 5): the distributions of ``stats.json`` of the benchmark folder the runs read.

Only complete rows (a score in every column of the table) enter the averages over cells, as in the table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perrec_eval import fileio, ptc
from perrec_eval.task import Cell as TaskCell
from perrec_eval.tasks.perrecbench.leaderboard.board import N_RESAMPLES, Row, Table
from perrec_eval.tasks.perrecbench.leaderboard.runs import PROMPTING, SETTINGS, Cell, Run
from perrec_eval.tasks.perrecbench.leaderboard.versus import against_baselines
from perrec_eval.tasks.perrecbench.vocabulary import LEVEL_SIZES, LEVELS, METHODS

NO_DOMAIN = "(no domain)"


def domain_of(group_id: str) -> str:
    """The domain of a group: its id's prefix before ":" (the builder names groups ``Domain:asin``).

    >>> domain_of("Books:0100937745"), domain_of("t0001")
    ('Books', '(no domain)')
    """
    domain, sep, _ = group_id.partition(":")
    return domain if sep else NO_DOMAIN


def subset_ptc(run: Run, cell: Cell, group_ids: set[str] | frozenset[str]) -> float | None:
    """The run's PTC in `cell` over the groups in `group_ids` (its own metric variant and failure policy)."""
    records = [record for gid, record in run.by_cell.get(cell, {}).items() if gid in group_ids]
    if not records:
        return None
    result = ptc.compute_ptc(
        [record.references for record in records],
        [record.prediction for record in records],
        prediction_format=records[0].format,
        variant=run.variant,
        invalid=run.invalid,
    )
    return None if math.isnan(result["ptc"]) else result["ptc"]


def _complete(table: Table) -> list[Row]:
    return [row for row in table.rows if row.average is not None]


def interval(
    run: Run, cells: Sequence[Cell], groups: set[str] | frozenset[str] | None = None, *, seed: int = 0
) -> list[float | None]:
    """The 95% interval of the run's mean PTC over `cells` on `groups` (None: all), each level's groups
    resampled together (`perrec_eval.leaderboard.family.mean_interval`); [None, None] for a paper-mode
    run, whose failed groups leave the cells' group sets unaligned, or a run held only in memory."""
    if run.source is None:
        return [None, None]
    from perrec_eval.leaderboard.family import mean_interval
    from perrec_eval.registry import get

    task_cells = [TaskCell(level, method) for level, method in cells]
    low, high = mean_interval(
        get("perrecbench"), run.source, "ptc", task_cells, docs=groups, n_resamples=N_RESAMPLES, seed=seed
    )
    return [low, high]


def by_domain(table: Table, *, seed: int = 0) -> dict[str, Any]:
    """Per complete row and domain: the mean over the table's cells of PTC on that domain's groups, with
    its 95% interval (each level's groups of the domain resampled)."""
    groups: dict[str, set[str]] = {}
    for gid in table.rows[0].run.group_ids:
        groups.setdefault(domain_of(gid), set()).add(gid)
    domains = sorted(groups)
    rows = []
    for row in _complete(table):
        values, intervals = {}, {}
        for domain in domains:
            cells = [subset_ptc(row.run, cell, groups[domain]) for cell in table.columns]
            values[domain] = None if None in cells else sum(cells) / len(cells)
            intervals[domain] = [None, None]
            if values[domain] is not None:
                intervals[domain] = interval(row.run, table.columns, groups[domain], seed=seed)
        rows.append({"label": row.label, "ptc": values, "interval": intervals})
    return {"domains": domains, "num_groups": {d: len(groups[d]) for d in domains}, "rows": rows}


def by_group_size(table: Table) -> dict[str, Any]:
    """Per row and method: PTC at each level of the table (group sizes 2 / 3 / 4), with its interval."""
    levels = [level for level in LEVELS if any(cell[0] == level for cell in table.columns)]
    methods = [method for method in METHODS if any(cell[1] == method for cell in table.columns)]
    rows = []
    for row in table.rows:
        rows.append(
            {
                "label": row.label,
                "ptc": {
                    method: {level: _ptc(row, (level, method)) for level in levels} for method in methods
                },
                "interval": {
                    method: {level: _ci(row, (level, method)) for level in levels} for method in methods
                },
            }
        )
    return {
        "levels": levels,
        "sizes": [LEVEL_SIZES[level] for level in levels],
        "methods": methods,
        "rows": rows,
    }


def by_method(table: Table, *, seed: int = 0) -> dict[str, Any]:
    """Per row and method: the mean PTC over the table's levels (None if a level is missing), with its
    95% interval (each level's groups resampled on their own)."""
    methods = [method for method in METHODS if any(cell[1] == method for cell in table.columns)]
    rows = []
    for row in table.rows:
        values, intervals = {}, {}
        for method in methods:
            columns = [cell for cell in table.columns if cell[1] == method]
            cells = [_ptc(row, cell) for cell in columns]
            values[method] = None if None in cells or not cells else sum(cells) / len(cells)
            ran = values[method] is not None
            intervals[method] = interval(row.run, columns, seed=seed) if ran else [None, None]
        rows.append({"label": row.label, "ptc": values, "interval": intervals})
    return {"methods": methods, "rows": rows}


def _ptc(row: Row, cell: Cell) -> float | None:
    entry = row.entries.get(cell)
    return None if entry is None else entry.ptc


def _ci(row: Row, cell: Cell) -> list[float | None]:
    entry = row.entries.get(cell)
    if entry is None:
        return [None, None]
    return [entry.scores.get("ptc_ci_low"), entry.scores.get("ptc_ci_high")]


def prompting_name(settings: Mapping[str, Any]) -> str:
    """The paper's Table 2 name of a run's prompting.

    >>> prompting_name({"prompt": "no_profile", "shots": 2, "samples": 1})
    'few-shot (2) w/o profile'
    >>> prompting_name({"prompt": "cot", "shots": 0, "samples": 5, "aggregate": "mean"})
    'chain-of-thought, self-consistency (5, mean)'
    """
    prompt = settings.get("prompt") or "default"
    shots = settings.get("shots") or 0
    samples = settings.get("samples") or 1
    parts = []
    if prompt.startswith("cot"):
        parts.append("chain-of-thought" + (f", few-shot ({shots})" if shots else ""))
    else:
        parts.append(f"few-shot ({shots})" if shots else "zero-shot")
    if samples > 1:
        aggregate = settings.get("aggregate")
        parts.append(f"self-consistency ({samples}{', ' + aggregate if aggregate else ''})")
    name = ", ".join(parts)
    return name + " w/o profile" if "no_profile" in prompt else name


def _families(table: Table, varying: Sequence[str]) -> list[list[Row]]:
    """Rows of one model that agree on every setting outside `varying` (and on the metric), in order."""
    families: dict[tuple, list[Row]] = {}
    for row in table.rows:
        fixed = tuple(row.run.settings.get(name) for name in SETTINGS if name not in varying)
        families.setdefault((row.run.model, fixed), []).append(row)
    return list(families.values())


def prompting(table: Table) -> list[dict[str, Any]]:
    """Table 2 blocks: for each model with runs that differ only in prompting, one row per prompting."""
    blocks = []
    for rows in _families(table, (*PROMPTING, "profiles", "seed")):
        names = [prompting_name(row.run.settings) for row in rows]
        if len(set(names)) < 2 or rows[0].run.is_baseline:
            continue
        blocks.append(
            {
                "model": rows[0].run.model,
                "rows": [
                    {
                        "prompting": name,
                        "label": row.label,
                        "cells": {f"{lv}/{m}": _ptc(row, (lv, m)) for lv, m in table.columns},
                        "intervals": {f"{lv}/{m}": _ci(row, (lv, m)) for lv, m in table.columns},
                        "average": row.average,
                        "average_interval": (
                            [None, None] if row.average is None else interval(row.run, table.columns)
                        ),
                    }
                    for name, row in zip(names, rows, strict=True)
                ],
            }
        )
    return blocks


def k_shots(table: Table) -> list[dict[str, Any]]:
    """Fig. 6 grids: for each model whose runs cover several k and/or shot counts, PTC per (k, shots).

    Each method's value is its mean over the table's levels; "average" is the row's Avg.
    """
    grids = []
    for rows in _families(table, ("k", "shots", "seed")):
        ks = sorted({row.run.settings.get("k") for row in rows} - {None})
        shots = sorted({row.run.settings.get("shots") or 0 for row in rows})
        if rows[0].run.is_baseline or len(rows) < 2 or (len(ks) < 2 and len(shots) < 2):
            continue
        methods = [m for m in METHODS if any(cell[1] == m for cell in table.columns)]
        values: dict[str, list[list[float | None]]] = {
            name: [[None] * len(shots) for _ in ks] for name in [*methods, "average"]
        }
        for row in rows:
            i = ks.index(row.run.settings.get("k"))
            j = shots.index(row.run.settings.get("shots") or 0)
            for method in methods:
                cells = [_ptc(row, cell) for cell in table.columns if cell[1] == method]
                if values[method][i][j] is None and cells and None not in cells:
                    values[method][i][j] = sum(cells) / len(cells)
            if values["average"][i][j] is None:
                values["average"][i][j] = row.average
        levels = sorted({cell[0] for cell in table.columns}, key=LEVELS.index)
        grids.append({"model": rows[0].run.model, "ks": ks, "shots": shots, "levels": levels, "ptc": values})
    return grids


def pearson(x: Sequence[float], y: Sequence[float]) -> dict[str, Any]:
    """Pearson r (and its p-value) between x and y; None when fewer than 3 points or a constant side.

    >>> pearson([1, 2, 3], [2, 4, 7])["r"] > 0.99
    True
    >>> pearson([1, 2], [2, 4])["r"] is None
    True
    """
    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return {"r": None, "p_value": None, "n": len(x)}
    from scipy import stats

    result = stats.pearsonr(x, y)
    return {"r": float(result.statistic), "p_value": float(result.pvalue), "n": len(x)}


def rating_errors(table: Table) -> dict[str, Any]:
    """Figs. 1 and 3: every cell with predicted ratings (pointwise runs and baselines) as a point
    (PTC, MAE, RMSE), per-row means, and Pearson r of PTC against MAE and against RMSE."""
    points = []
    for row in table.rows:
        for (level, method), entry in row.entries.items():
            mae, rmse = entry.scores.get("mae"), entry.scores.get("rmse")
            if mae is not None and rmse is not None and entry.ptc is not None:
                points.append(
                    {
                        "label": row.label,
                        "level": level,
                        "method": method,
                        "ptc": entry.ptc,
                        "mae": mae,
                        "rmse": rmse,
                    }
                )
    systems = []
    for row in table.rows:
        mine = [p for p in points if p["label"] == row.label]
        if mine:
            systems.append(
                {
                    "label": row.label,
                    "mae": sum(p["mae"] for p in mine) / len(mine),
                    "rmse": sum(p["rmse"] for p in mine) / len(mine),
                    "ptc": sum(p["ptc"] for p in mine) / len(mine),
                    "cells": len(mine),
                }
            )
    taus = [p["ptc"] for p in points]
    return {
        "points": points,
        "systems": systems,
        "ptc_vs_mae": pearson(taus, [p["mae"] for p in points]),
        "ptc_vs_rmse": pearson(taus, [p["rmse"] for p in points]),
    }


def benchmark_stats(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Fig. 5: the distributions in ``stats.json`` of each benchmark folder (and split) the runs read, each
    named by its build's fingerprint (a report holds no local path)."""
    out = []
    seen = set()
    for run in runs:
        if run.data is None or (run.data, run.split) in seen:
            continue
        seen.add((run.data, run.split))
        build = f"build {(run.fingerprint or 'unknown')[:12]}"
        path = Path(run.data) / "stats.json"
        if not path.is_file():
            found = "the Hub dataset" if not Path(run.data).exists() else "the build"
            missing = f"no stats.json in {found} {build}"
            out.append({"data": build, "split": run.split, "missing": missing})
            continue
        split = fileio.read_json(path).get("splits", {}).get(run.split)
        if not split:
            missing = f"the stats.json of {build} has no split {run.split!r}"
            out.append({"data": build, "split": run.split, "missing": missing})
            continue
        out.append(
            {
                "data": build,
                "split": run.split,
                "distributions": split.get("distributions", {}),
                "figures": split.get("all", {}),
            }
        )
    return out


def analyse(table: Table, *, n_resamples: int = N_RESAMPLES, seed: int = 0) -> dict[str, Any]:
    """Every analysis of one table (JSON-ready); the paired tests use `n_resamples` and `seed`."""
    return {
        "by_domain": by_domain(table, seed=seed),
        "by_group_size": by_group_size(table),
        "by_method": by_method(table, seed=seed),
        "prompting": prompting(table),
        "k_shots": k_shots(table),
        "rating_errors": rating_errors(table),
        "versus_baselines": against_baselines(table, n_resamples=n_resamples, seed=seed),
    }
