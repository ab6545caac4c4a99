"""What RecBench+ adds to its report section (`Task.report`, `perrec_eval.leaderboard.family.ReportHooks`):
the main table shows the query types, and the condition-count groups (the paper's Table 1 breakdown) get
their own table and the picture of recall by condition count and query type (the paper's Figure 4)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perrec_eval.tasks.recbench_plus.metrics import CONDITION_GROUPS

TYPES = ("explicit", "implicit", "misinformed", "interest")
CONDITION_TYPES = TYPES[:3]  # the types whose queries are grouped by condition count
METRIC = "recall"


GROUP_SUBSETS = frozenset(f"{kind}-{group}" for kind in CONDITION_TYPES for group in CONDITION_GROUPS)


def main_cells(cells: Sequence[str]) -> list[str]:
    """Every cell but the condition-count groups' (they get their own table): the query types', and any
    other subset a build has (a released-queries build's demographics)."""
    return [cell for cell in cells if cell.partition("/")[0] not in GROUP_SUBSETS]


def _protocols(section: Mapping[str, Any]) -> list[str]:
    return list(dict.fromkeys(cell.partition("/")[2] for cell in section["cells"]))


def _groups(section: Mapping[str, Any], protocol: str) -> list[tuple[str, str, str]]:
    """(type, group, cell) of the condition-count cells the runs answered in `protocol`."""
    return [
        (kind, group, f"{kind}-{group}/{protocol}")
        for kind in CONDITION_TYPES
        for group in CONDITION_GROUPS
        if f"{kind}-{group}/{protocol}" in section["cells"]
    ]


def blocks(section: Mapping[str, Any]) -> list[Any]:
    """Recall per run by query type and condition count, one table per protocol."""
    from perrec_eval.leaderboard.document import Grid, Heading, Para
    from perrec_eval.leaderboard.family import value_text

    out: list[Any] = []
    for protocol in _protocols(section):
        groups = _groups(section, protocol)
        if not groups:
            continue
        out.append(Heading(3, f"Recall by condition count ({protocol}; higher is better; paper Table 1)"))
        header = ["run", *(f"{kind}, {group} condition(s)" for kind, group, _ in groups)]
        rows = [
            [row["label"], *(value_text(row["cells"].get(c), METRIC, marks=False) for _, _, c in groups)]
            for row in section["rows"]
        ]
        out.append(Grid(header, rows))
    if out:
        out.append(
            Para(
                "A query is scored in its type's cell and in its condition-count group's: the groups split "
                "the type's queries by how many conditions they state (95% intervals by user)."
            )
        )
    return out


def plots(section: Mapping[str, Any], out: Path, prefix: str) -> list[Any]:
    """Recall by condition count, one panel per query type, one line per run (the paper's Figure 4)."""
    from perrec_eval.leaderboard import plots as drawing

    pictures = []
    for protocol in _protocols(section):
        groups = _groups(section, protocol)
        kinds = list(dict.fromkeys(kind for kind, _, _ in groups))
        if not kinds:
            continue
        plt = drawing.pyplot()
        fig, axes = plt.subplots(1, len(kinds), figsize=(4.2 * len(kinds) + 2, 3.8), squeeze=False)
        drawn: list[str] = []
        for ax, kind in zip(axes[0], kinds, strict=True):
            present = [(group, cell) for k, group, cell in groups if k == kind]
            series = {  # every run of the table; one with no point in this panel draws no line
                row["label"]: [_point(row["cells"].get(cell)) for _, cell in present]
                for row in section["rows"]
            }
            drawn += drawing.lines(ax, [group for group, _ in present], series)
            ax.set_title(kind)
            ax.set_xlabel("conditions in the query")
            ax.set_ylabel("recall (higher is better)")
        drawing.panels_legend(list(axes[0]))
        fig.suptitle(f"RecBench+: recall by condition count and query type ({protocol}; 95% intervals)")
        fig.tight_layout()
        name = f"{prefix}recbench-plus_conditions_{drawing.slug(protocol)}.png"
        title = f"Recall by condition count ({protocol})"
        pictures.append(drawing.save(fig, out, name, title, "conditions", series=list(dict.fromkeys(drawn))))
    return pictures


def _point(entry: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if entry is None or entry["num_failed"] == entry["num_docs"]:
        return None
    value = entry["metrics"].get(METRIC)
    return value if value is not None and value["value"] is not None else None
