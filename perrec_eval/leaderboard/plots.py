"""Report pictures (matplotlib, Agg backend), every family's: each PNG readable on its own, with a title,
axis labels and a legend. Family plots (`Task.report`) draw with these helpers.

matplotlib is the ``report`` extra (``pip install 'perrecbench[report]'``); it is imported only here, when
plots are drawn.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_BARS = 12  # rows drawn in a bar chart; the table has them all
DPI = 110


@dataclass(frozen=True, slots=True)
class Plot:
    """A written picture: its path relative to the report folder, what it shows, and its kind."""

    path: str
    title: str
    kind: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "title": self.title, "kind": self.kind}


def pyplot():
    try:
        import matplotlib
    except ImportError as err:
        from perrec_eval.engines import MissingExtraError

        raise MissingExtraError(
            "report plots need matplotlib: pip install 'perrecbench[report]' (from a clone: pip install -e "
            "'.[report]'), or pass --no-plots"
        ) from err
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, out: Path, name: str, title: str, kind: str) -> Plot:
    plt = pyplot()
    path = out / "plots" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return Plot(path=f"plots/{name}", title=title, kind=kind)


def shown(labels: Sequence[str]) -> tuple[list[int], str]:
    """The indices drawn (at most `MAX_BARS`) and a title suffix saying how many were left out."""
    keep = list(range(min(len(labels), MAX_BARS)))
    return keep, "" if len(labels) <= MAX_BARS else f" (top {MAX_BARS} of {len(labels)} rows)"


def bars(ax, groups: Sequence[str], series: Mapping[str, Sequence[float | None]], errors=None) -> None:
    """Grouped bars: one group per x label, one bar per series; missing values drawn as nothing."""
    n = max(1, len(series))
    width = 0.8 / n
    for i, (name, values) in enumerate(series.items()):
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
        heights = [math.nan if v is None else v for v in values]
        yerr = None
        if errors is not None:
            low, high = errors[name]
            yerr = [
                [math.nan if v is None or lo is None else v - lo for v, lo in zip(values, low, strict=True)],
                [math.nan if v is None or hi is None else hi - v for v, hi in zip(values, high, strict=True)],
            ]
        ax.bar(xs, heights, width=width, label=legend_label(name), yerr=yerr, capsize=2 if yerr else 0)
    # Long labels side by side overlap: slant them.
    crowded = any(len(line) > 12 for group in groups for line in group.split("\n"))
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=30 if crowded else 0, ha="right" if crowded else "center")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.grid(axis="y", alpha=0.3)


def legend_label(name: str) -> str:
    """`name` as an artist's label: matplotlib leaves out of the legend every label that starts with
    ``_``, so such a run's label gets a leading space (its bar would stand there without a name).

    >>> legend_label("_mine"), legend_label("gpt-4o")
    (' _mine', 'gpt-4o')
    """
    return f" {name}" if name.startswith("_") else name


def legend(ax, count: int) -> None:
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="run", title_fontsize=8)




def slug(text: str) -> str:
    """A file-name-safe form of a metric's or cell's name.

    >>> slug("ndcg@10"), slug("rouge-l/p5")
    ('ndcg-10', 'rouge-l-p5')
    """
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in text).strip("-")


def cell_bars(data: Mapping, out: Path, prefix: str) -> list[Plot]:
    """A family section's main cells as grouped bars with their 95% intervals, one chart per metric shown
    (metrics of other scales never share an axis); a cell where every doc failed draws no bar."""
    plt = pyplot()
    keep, suffix = shown([row["label"] for row in data["rows"]])
    by_metric: dict[str, list[str]] = {}
    for cell in data["main_cells"]:
        by_metric.setdefault(data["shown"][cell], []).append(cell)
    drawn = []
    for metric, cells in by_metric.items():
        directions = {m["name"]: m["higher_is_better"] for m in data["cell_metrics"][cells[0]]}
        higher = directions.get(metric, data["higher_is_better"])
        series, errors = {}, {}
        for i in keep:
            row = data["rows"][i]
            values = [_value(row["cells"].get(cell), metric) for cell in cells]
            if not any(values):  # a run that answers none of these cells gets no bar slot nor legend entry
                continue
            series[row["label"]] = [v["value"] if v else None for v in values]
            errors[row["label"]] = (
                [v["ci_low"] if v else None for v in values],
                [v["ci_high"] if v else None for v in values],
            )
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(cells) * max(1, len(series)) / 3 + 3), 4.2))
        bars(ax, cells, series, errors)
        direction = "higher" if higher else "lower"
        ax.set_title(f"{data['title']}: {metric} per cell ({direction} is better){suffix}")
        ax.set_xlabel(f"{data['subset_axis']} / {data['protocol_axis']} (error bars: 95% bootstrap interval)")
        ax.set_ylabel(metric)
        legend(ax, len(series))
        name = f"{prefix}{slug(data['task'])}_{slug(metric)}.png"
        drawn.append(save(fig, out, name, f"{data['title']}: {metric} per cell", "cells"))
    return drawn


def _value(entry: Mapping | None, metric: str) -> Mapping | None:
    """A cell's value of `metric` for a plot: none where not run or every doc failed."""
    if entry is None or entry["num_failed"] == entry["num_docs"]:
        return None
    value = entry["metrics"].get(metric)
    return value if value is not None and value["value"] is not None else None


def lines(ax, xs: Sequence[Any], series: Mapping[str, Sequence[Mapping | None]]) -> None:
    """One line per series over `xs`, each point with its interval; missing points drawn as gaps."""
    for name, points in series.items():
        ys = [math.nan if p is None else p["value"] for p in points]
        low = [0 if p is None else p["value"] - p["ci_low"] for p in points]
        high = [0 if p is None else p["ci_high"] - p["value"] for p in points]
        label = legend_label(name)
        ax.errorbar(list(range(len(xs))), ys, yerr=[low, high], marker="o", capsize=2, label=label)
    ax.set_xticks(range(len(xs)))
    ax.set_xticklabels([str(x) for x in xs])
    ax.grid(alpha=0.3)
