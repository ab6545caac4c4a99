"""Reports in the paper's Table 1 layout: one row per system, 9 cells (level × method) and the average."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perrec_eval import fileio
from perrec_eval.types import LEVELS, METHODS

_SHORT = {"pointwise": "point", "pairwise": "pair", "listwise": "list"}

# A cell is "mostly failed" when more than this share of its groups got no usable ranking (no answer
# parsed, or engine errors): its PTC is then mostly the failure policy's, not the model's. Every table
# (console, report.md, leaderboard, model card) shows such a cell with its failure share and never as best.
MOSTLY_FAILED = 0.5
MOSTLY_FAILED_NOTE = (
    "(N% failed) = more than half of the cell's groups got no usable ranking (answers that did not parse, "
    "or engine errors); those groups score 0 (or are dropped in paper mode), so the number says little "
    "about the model and is never marked best."
)


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


def failure_note(cell: Mapping[str, Any] | None) -> str:
    """`` (N% failed)`` for a mostly failed cell, else nothing.

    >>> failure_note({"num_groups": 3, "num_invalid": 3}), failure_note({"num_groups": 3, "num_invalid": 0})
    (' (100% failed)', '')
    """
    return f" ({failed_share(cell):.0%} failed)" if mostly_failed(cell) else ""


def _cell(cell: Mapping[str, Any] | None, with_ci: bool) -> str:
    if cell is None or cell.get("ptc") is None:
        return "–"
    text = f"{cell['ptc']:.2f}"
    if with_ci and cell.get("ptc_ci_low") is not None:
        text += f" [{cell['ptc_ci_low']:.2f}, {cell['ptc_ci_high']:.2f}]"
    return text + failure_note(cell)


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
    if any(s.get("num_permanent_errors") for _, s in systems):
        text += (
            " (provisional) = some requests failed: those that fail on every try (e.g. a prompt over the "
            "model's context) need the fix `perrecbench evaluate` printed; a re-run retries the others."
        )
    elif any(not s.get("complete", True) for _, s in systems):
        text += " (provisional) = some requests failed: run the same command again to retry them."
    if any(mostly_failed(cell) for _, s in systems for cell in s["cells"]):
        text += " " + MOSTLY_FAILED_NOTE
    return text


def render(systems: Sequence[tuple[str, Mapping[str, Any]]], *, title: str = "PerRecBench results") -> str:
    return f"# {title}\n\n{legend(systems)}\n\n{table(systems)}\n\n## Details\n\n{details(systems)}\n"


def write_report(out: Path, systems: Sequence[tuple[str, Mapping[str, Any]]]) -> Path:
    """Write `out/report.md` (atomically) for the given (name, scores) systems."""
    path = Path(out) / "report.md"
    fileio.write_text(path, render(systems))
    return path
