"""Reports in the paper's Table 1 layout: one row per system, 9 cells (level × method) and the average."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perrec_eval import fileio
from perrec_eval.types import LEVELS, METHODS

_SHORT = {"pointwise": "point", "pairwise": "pair", "listwise": "list"}


def _cell(cell: Mapping[str, Any] | None, with_ci: bool) -> str:
    if cell is None or cell.get("ptc") is None:
        return "–"
    text = f"{cell['ptc']:.2f}"
    if with_ci and cell.get("ptc_ci_low") is not None:
        text += f" [{cell['ptc_ci_low']:.2f}, {cell['ptc_ci_high']:.2f}]"
    return text


def table(systems: Sequence[tuple[str, Mapping[str, Any]]], *, with_ci: bool = True) -> str:
    """Markdown table: rows = systems, columns = easy/medium/hard × pointwise/pairwise/listwise + Avg.

    >>> s = {"cells": [{"level": "easy", "method": "pairwise", "ptc": 0.5}], "average": 0.5}
    >>> print(table([("m", s)], with_ci=False).splitlines()[2])
    | m | – | 0.50 | – | – | – | – | – | – | – | 0.50 |
    """
    header = ["System"] + [f"{lv} {_SHORT[m]}" for lv in LEVELS for m in METHODS] + ["Avg."]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, scores in systems:
        cells = {(c["level"], c["method"]): c for c in scores["cells"]}
        row = [_label(name, scores)] + [_cell(cells.get((lv, m)), with_ci) for lv in LEVELS for m in METHODS]
        avg = scores.get("average")
        row.append("–" if avg is None else f"{avg:.2f}")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def _label(name: str, scores: Mapping[str, Any]) -> str:
    return name if scores.get("complete", True) else f"{name} (provisional)"


def _number(value: float | None, spec: str = ".3f") -> str:
    return "–" if value is None else format(value, spec)


def details(systems: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """Per-cell counts behind the table: groups, invalid groups, engine errors, parse failures, errors."""
    lines = [
        "| System | level | method | PTC | 95% CI | groups | invalid | engine errors | parse failures "
        "| MAE | RMSE |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, scores in systems:
        for c in scores["cells"]:
            ci = "–" if c.get("ptc_ci_low") is None else f"[{c['ptc_ci_low']:.3f}, {c['ptc_ci_high']:.3f}]"
            errors = (
                f"{c.get('num_engine_errors', 0)} of {c['num_requests']}" if c.get("num_requests") else "–"
            )
            lines.append(
                f"| {_label(name, scores)} | {c['level']} | {c['method']} | {_number(c['ptc'])} | {ci} | "
                f"{c['num_groups']} | {c['num_invalid']} | {errors} | {c['parse_failure_rate']:.1%} | "
                f"{_number(c.get('mae'))} | {_number(c.get('rmse'))} |"
            )
    return "\n".join(lines)


_METRIC_NAMES = {
    "tau_b": "Kendall tau-b between predicted and true per-user scores",
    "paper": "the paper's tau between best-first index lists",
}


def legend(systems: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """What the numbers of `table` are, in two sentences.

    >>> print(legend([("m", {"variant": "tau_b", "cells": []})]))  # doctest: +NORMALIZE_WHITESPACE
    PTC = Kendall tau-b between predicted and true per-user scores, mean over groups (-1 to 1, higher is
    better); brackets: 95% bootstrap CI over groups; – = not run.
    """
    variants = sorted({s.get("variant") or "tau_b" for _, s in systems})
    metric = "; ".join(_METRIC_NAMES.get(v, v) for v in variants)
    text = (
        f"PTC = {metric}, mean over groups (-1 to 1, higher is better); "
        "brackets: 95% bootstrap CI over groups; – = not run."
    )
    if any(not s.get("complete", True) for _, s in systems):
        text += " (provisional) = some requests failed: run the same command again to retry them."
    return text


COLD_START_NOTE = (
    "Cold start of the classic recommenders (run.json `cf.cells`): groups whose query item had no rating "
    "before the window (all their users tie), and users the model could not score; both get the user's "
    "average (relative prediction 0)."
)


def cold_start(cf_cells: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """Per CF system and cell: cold query items and fallback users ("" without CF systems).

    >>> cell = {"groups": 10, "users": 50, "cold_query_items": 2, "fallback_users": 13}
    >>> print(cold_start({"mf": {"easy/pointwise": cell}}).splitlines()[-1])
    | mf | easy | pointwise | 2 of 10 | 13 of 50 |
    """
    lines = [
        "| System | level | method | cold query items | fallback users |",
        "|---|---|---|---|---|",
    ]
    for name, cells in cf_cells.items():
        for key, c in cells.items():
            level, method = key.split("/", 1)
            lines.append(
                f"| {name} | {level} | {method} | {c['cold_query_items']} of {c['groups']} | "
                f"{c['fallback_users']} of {c['users']} |"
            )
    return "\n".join(lines) if len(lines) > 2 else ""


def render(
    systems: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    title: str = "PerRecBench results",
    cf_cells: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
) -> str:
    """The report; ``cf_cells`` (system → run.json ``cf.cells``) adds the cold-start counts."""
    text = f"# {title}\n\n{legend(systems)}\n\n{table(systems)}\n\n## Details\n\n{details(systems)}\n"
    if cold := cold_start(cf_cells or {}):
        text += f"\n## Cold start\n\n{COLD_START_NOTE}\n\n{cold}\n"
    return text


def write_report(
    out: Path,
    systems: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    cf_cells: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
) -> Path:
    """Write `out/report.md` (atomically) for the given (name, scores) systems."""
    path = Path(out) / "report.md"
    fileio.write_text(path, render(systems, cf_cells=cf_cells))
    return path
