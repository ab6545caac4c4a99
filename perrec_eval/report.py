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
        row = [name] + [_cell(cells.get((lv, m)), with_ci) for lv in LEVELS for m in METHODS]
        avg = scores.get("average")
        row.append("–" if avg is None else f"{avg:.2f}")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def details(systems: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """Per-cell counts behind the table: groups, invalid groups, parse failures, rating errors."""
    lines = [
        "| System | level | method | PTC | 95% CI | groups | invalid | parse failures | MAE | RMSE |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, scores in systems:
        for c in scores["cells"]:
            ci = "–" if c.get("ptc_ci_low") is None else f"[{c['ptc_ci_low']:.3f}, {c['ptc_ci_high']:.3f}]"
            mae = f"{c['mae']:.3f}" if "mae" in c else "–"
            rmse = f"{c['rmse']:.3f}" if "rmse" in c else "–"
            lines.append(
                f"| {name} | {c['level']} | {c['method']} | {c['ptc']:.3f} | {ci} | {c['num_groups']} | "
                f"{c['num_invalid']} | {c['parse_failure_rate']:.1%} | {mae} | {rmse} |"
            )
    return "\n".join(lines)


def render(systems: Sequence[tuple[str, Mapping[str, Any]]], *, title: str = "PerRecBench results") -> str:
    variants = {s.get("variant") for _, s in systems}
    note = (
        "PTC = mean Kendall tau over groups (higher is better, -1 to 1); metric variant "
        f"{', '.join(sorted(v for v in variants if v))}; brackets: 95% bootstrap CI over groups; "
        "– = not run."
    )
    return f"# {title}\n\n{note}\n\n{table(systems)}\n\n## Details\n\n{details(systems)}\n"


def write_report(out: Path, systems: Sequence[tuple[str, Mapping[str, Any]]]) -> Path:
    """Write `out/report.md` (atomically) for the given (name, scores) systems."""
    path = Path(out) / "report.md"
    fileio.write_text(path, render(systems))
    return path
