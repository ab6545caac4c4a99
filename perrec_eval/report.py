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


Marks = Mapping[str, Mapping[str, str]]  # system name -> {"easy/pointwise" | "average": mark}


def _cell(cell: Mapping[str, Any] | None, with_ci: bool, mark: str = "") -> str:
    if cell is None or cell.get("ptc") is None:
        return "–"
    text = f"{cell['ptc']:.2f}{mark}"
    if with_ci and cell.get("ptc_ci_low") is not None:
        text += f" [{cell['ptc_ci_low']:.2f}, {cell['ptc_ci_high']:.2f}]"
    return text + failure_note(cell)


def table(
    systems: Sequence[tuple[str, Mapping[str, Any]]], *, with_ci: bool = True, marks: Marks | None = None
) -> str:
    """Markdown table: rows = systems, columns = easy/medium/hard × pointwise/pairwise/listwise + Avg.

    `marks` (from `significance_marks`) follow a system's value in a cell or its average.

    >>> s = {"cells": [{"level": "easy", "method": "pairwise", "ptc": 0.5}], "average": 0.5}
    >>> print(table([("m", s)], with_ci=False).splitlines()[2])
    | m | – | 0.50 | – | – | – | – | – | – | – | 0.50 |
    """
    header = ["System"] + [f"{lv} {_SHORT[m]}" for lv in LEVELS for m in METHODS] + ["Avg."]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, scores in systems:
        cells, mark = _cells(scores), (marks or {}).get(name, {})
        row = [_label(name, scores)] + [
            _cell(cells.get((lv, m)), with_ci, mark.get(f"{lv}/{m}", "")) for lv in LEVELS for m in METHODS
        ]
        avg = scores.get("average")
        row.append("–" if avg is None else f"{avg:.2f}{mark.get('average', '')}")
        lines.append("| " + " | ".join(row) + " |")
    lines += [_reference_row(name, key, systems) for name, key in _REFERENCE_ROWS]
    return "\n".join(line for line in lines if line)


# Rows under the systems: the same for every system of a report, whose systems share their groups.
_REFERENCE_ROWS = (
    ("floor: constant rating", "constant_floor"),
    ("min. detectable Δ", "min_detectable_difference"),
)


def _cells(scores: Mapping[str, Any]) -> dict[tuple[str, str], Mapping[str, Any]]:
    return {(c["level"], c["method"]): c for c in scores["cells"]}


def _reference_row(title: str, key: str, systems: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """A row of per-cell reference values (the first system's value of `key` in each cell), or ""."""
    values = {}
    for _, scores in systems:
        for cell, data in _cells(scores).items():
            if data.get(key) is not None:
                values.setdefault(cell, data[key])
    if not values:
        return ""
    row = [title] + [_number(values.get((lv, m)), ".2f") for lv in LEVELS for m in METHODS]
    average = next((s.get("average_min_detectable_difference") for _, s in systems), None)
    row.append(_number(average, ".2f") if key == "min_detectable_difference" else "–")
    return "| " + " | ".join(row) + " |"


def _label(name: str, scores: Mapping[str, Any]) -> str:
    return name if scores.get("complete", True) else f"{name} (provisional)"


def _number(value: float | None, spec: str = ".3f") -> str:
    return "–" if value is None else format(value, spec)


def details(systems: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """Per-cell counts behind the table: groups, invalid groups, engine errors, parse failures, errors."""
    lines = [
        "| System | level | method | PTC | 95% CI | min. detectable Δ | floor | groups | invalid "
        "| engine errors | parse failures | first shown ranked first | first shown truly first "
        "| MAE | RMSE |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, scores in systems:
        for c in scores["cells"]:
            ci = "–" if c.get("ptc_ci_low") is None else f"[{c['ptc_ci_low']:.3f}, {c['ptc_ci_high']:.3f}]"
            errors = (
                f"{c.get('num_engine_errors', 0)} of {c['num_requests']}" if c.get("num_requests") else "–"
            )
            lines.append(
                f"| {_label(name, scores)} | {c['level']} | {c['method']} | {_number(c['ptc'])} | {ci} | "
                f"{_number(c.get('min_detectable_difference'))} | {_number(c.get('constant_floor'))} | "
                f"{c['num_groups']} | {c['num_invalid']} | {errors} | {c['parse_failure_rate']:.1%} | "
                f"{_number(c.get('first_shown_first'), '.1%')} | "
                f"{_number(c.get('first_shown_truly_first'), '.1%')} | "
                f"{_number(c.get('mae'))} | {_number(c.get('rmse'))} |"
            )
    return "\n".join(lines)


_METRIC_NAMES = {
    "tau_b": "Kendall tau-b between predicted and true per-user scores",
    "paper": "the paper's tau between best-first index lists",
}


def significance_marks(folders: Mapping[str, Path]) -> dict[str, dict[str, str]]:
    """Per system (name -> its run folder) and cell, how it stands against the best of the column.

    The leaderboard's own comparison (`perrec_eval.leaderboard.board.build_table`: the paired sign-flip test
    of `perrec_eval.ptc`): ``" (best)"``, ``"*"`` below the best at p < 0.05, ``" ≈"`` not found different
    from it (their order is not established).
    """
    from perrec_eval.leaderboard.board import build_table
    from perrec_eval.leaderboard.runs import load_run

    names = {Path(folder).resolve(): name for name, folder in folders.items()}
    table = build_table([load_run(folder) for folder in folders.values()])
    marks: dict[str, dict[str, str]] = {}
    for row in table.rows:
        tests = [(f"{lv}/{m}", entry) for (lv, m), entry in row.entries.items()] + [("average", row)]
        marks[names[row.run.path.resolve()]] = {
            key: " (best)" if item.best else "*" if item.significant else " ≈" if item.tied else ""
            for key, item in tests
        }
    return marks


def legend(systems: Sequence[tuple[str, Mapping[str, Any]]], *, marks: Marks | None = None) -> str:
    """What the numbers of `table` are.

    >>> print(legend([("m", {"variant": "tau_b", "n_resamples": 10000, "cells": []})]))
    ... # doctest: +NORMALIZE_WHITESPACE +ELLIPSIS
    PTC = Kendall tau-b between predicted and true per-user scores, mean over groups (-1 to 1, higher is
    better); brackets: 95% CI over groups (percentile bootstrap, 10,000 resamples); – = not run. ...
    """
    variants = sorted({s.get("variant") or "tau_b" for _, s in systems})
    metric = "; ".join(_METRIC_NAMES.get(v, v) for v in variants)
    resamples = sorted({s.get("n_resamples", 1000) for _, s in systems})
    text = (
        f"PTC = {metric}, mean over groups (-1 to 1, higher is better); brackets: 95% CI over groups "
        f"(percentile bootstrap, {' / '.join(f'{n:,}' for n in resamples)} resamples); – = not run. "
        'Row "floor": the pointwise PTC of a model that answers the same rating for every user, on these '
        "groups: pointwise ranks by rating minus the user's average, so a constant ranks users by minus "
        "their averages, which is not 0; a pointwise cell must beat it (a fixed answer scores exactly 0 in "
        'all-pairs pairwise and in balanced listwise). Row "min. detectable Δ": the smallest true PTC '
        "difference a paired test at p < 0.05 finds with power 0.8 on this many groups (normal "
        "approximation with the null tau variance, `ptc.expected_resolution`); closer systems are not told "
        "apart here. Significance between runs: `perrecbench report`."
    )
    if any(s.get("clustered_by") for _, s in systems):
        text += " " + CLUSTERED_NOTE
    if marks:
        text += (
            " (best): best of the column; `*`: below it at p < 0.05; ≈: not found different from it, so "
            "their order is not established (paired sign-flip permutation test on the groups, not corrected "
            "for multiple comparisons)."
        )
    if note := provisional_note([s for _, s in systems]):
        text += " " + note
    if any(mostly_failed(cell) for _, s in systems for cell in s["cells"]):
        text += " " + MOSTLY_FAILED_NOTE
    return text


CLUSTERED_NOTE = (
    "Clustered by query item: where a level has several groups of one query item (large-preset builds), "
    "the CI resamples whole items (cluster bootstrap), paired tests flip signs per item and the min. "
    "detectable Δ carries the design-effect bound Σm²/Σm (m = groups per item)."
)


def provisional_note(scores: Sequence[Mapping[str, Any]]) -> str:
    """What "(provisional)" means for these runs' scores, or "" when every run completed.

    >>> provisional_note([{"complete": True}])
    ''
    >>> provisional_note([{"complete": False}])
    '(provisional) = some requests failed: run the same command again to retry them.'
    """
    if any(s.get("num_permanent_errors") for s in scores):
        return (
            "(provisional) = some requests failed: those that fail on every try (e.g. a prompt over the "
            "model's context) need the fix `perrecbench evaluate` printed; a re-run retries the others."
        )
    if any(not s.get("complete", True) for s in scores):
        return "(provisional) = some requests failed: run the same command again to retry them."
    return ""


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
    marks: Marks | None = None,
    cf_cells: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
) -> str:
    """The report; ``cf_cells`` (system → run.json ``cf.cells``) adds the cold-start counts."""
    text = (
        f"# {title}\n\n{legend(systems, marks=marks)}\n\n{table(systems, marks=marks)}\n\n"
        f"## Details\n\n{details(systems)}\n"
    )
    if cold := cold_start(cf_cells or {}):
        text += f"\n## Cold start\n\n{COLD_START_NOTE}\n\n{cold}\n"
    return text


def write_report(
    out: Path,
    systems: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    marks: Marks | None = None,
    cf_cells: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
) -> Path:
    """Write `out/report.md` (atomically) for the given (name, scores) systems."""
    path = Path(out) / "report.md"
    fileio.write_text(path, render(systems, marks=marks, cf_cells=cf_cells))
    return path
