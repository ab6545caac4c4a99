"""Report pictures (matplotlib, Agg backend), every family's: each PNG readable on its own, with a title,
axis labels and a legend. Family plots (`Task.report`) draw with these helpers.

The rules every chart keeps: it draws every run its table has (a chart that leaves one out says which and
why), its legend lists only the runs it draws, a value of 0 is drawn visibly and a cell not run is absent,
a bar whose cell had failed docs is hatched, and every bar carries its 95% interval or the chart's caption
says why it has none. Labels are drawn as plain text (a ``$`` in a run's name is not math).

matplotlib is the ``report`` extra (``pip install 'perrecbench[report]'``); it is imported only here, when
plots are drawn.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DPI = 110
MAX_LABEL = 60  # characters of a run's name in a legend (the table has it whole)
MAX_WIDTH = 28.0  # inches: a chart of many runs and cells gets thinner bars, not a wider picture
ZERO = 1e-12  # a bar this close to 0 is drawn as a line at 0, so a zero is never mistaken for "not run"


@dataclass(frozen=True, slots=True)
class Plot:
    """A written picture: its path relative to the report folder, what it shows, its kind, and the runs
    (or other series) it draws, as its legend lists them."""

    path: str
    title: str
    kind: str
    series: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "title": self.title, "kind": self.kind, "series": list(self.series)}


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


def save(fig, out: Path, name: str, title: str, kind: str, series: Sequence[str] = ()) -> Plot:
    """Write `fig` as ``out/plots/NAME`` and close it; `series`: what it draws (its legend's entries)."""
    plt = pyplot()
    path = out / "plots" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return Plot(path=f"plots/{name}", title=title, kind=kind, series=tuple(series))


def plain(text: str, limit: int = MAX_LABEL) -> str:
    r"""`text` as matplotlib draws it literally: ``$`` escaped (no math), cut to `limit` characters.

    A leading ``_`` gets a space before it: matplotlib leaves every artist whose label starts with ``_``
    out of the legend, so such a run's bar would stand there without a name.

    >>> print(plain("pb$x^2$"), plain("x" * 70)[-3:])
    pb\$x^2\$ xx…
    >>> plain("_mine"), plain("gpt-4o")
    (' _mine', 'gpt-4o')
    """
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = text.replace("$", r"\$")
    return f" {text}" if text.startswith("_") else text


def width(groups: int, series: int, *, each: float = 0.22, least: float = 6.0) -> float:
    """A chart's width in inches for `groups` × `series` bars (at most `MAX_WIDTH`)."""
    return min(MAX_WIDTH, max(least, each * groups * max(1, series) + 3.5))


def _arm(upper: float | None, lower: float | None) -> float:
    """One arm of an error bar, upper - lower (NaN: no bar; never below 0)."""
    return math.nan if upper is None or lower is None else max(0.0, upper - lower)


def bars(
    ax,
    groups: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    errors: Mapping[str, tuple[Sequence[float | None], Sequence[float | None]]] | None = None,
    failed: Mapping[str, Sequence[float | None]] | None = None,
) -> None:
    """Grouped bars: one group per x label, one bar per series and its interval (`errors`: lows, highs).

    A missing value (a cell not run) draws nothing; a value of 0 draws a line at 0 in the series' colour;
    a bar whose cell had failed docs (`failed`: the share) is hatched.
    """
    n = max(1, len(series))
    bar_width = 0.8 / n
    colours = colours_for(n)
    for i, (name, values) in enumerate(series.items()):
        xs = [g + (i - (n - 1) / 2) * bar_width for g in range(len(groups))]
        heights = [math.nan if v is None else v for v in values]
        yerr = None
        if errors is not None and name in errors:
            low, high = errors[name]
            # an interval of 0 width may end a rounding error past its value: an arm is never below 0
            yerr = [
                [_arm(v, lo) for v, lo in zip(values, low, strict=True)],
                [_arm(hi, v) for v, hi in zip(values, high, strict=True)],
            ]
        drawn = ax.bar(
            xs, heights, width=bar_width, label=plain(name), yerr=yerr, capsize=2 if yerr else 0,
            color=colours[i],
        )  # fmt: skip
        colour = drawn.patches[0].get_facecolor() if drawn.patches else None
        shares = (failed or {}).get(name) or [None] * len(values)
        for x, value, share, patch in zip(xs, values, shares, drawn.patches, strict=True):
            if value is not None and abs(value) < ZERO:
                ax.hlines(0, x - bar_width / 2, x + bar_width / 2, colors=[colour], linewidth=3, zorder=3)
            if value is not None and share:
                patch.set_hatch("///")
                patch.set_edgecolor("black")
    # Long labels side by side overlap: slant them.
    crowded = any(len(line) > 12 for group in groups for line in group.split("\n"))
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(
        [plain(g, 40) for g in groups], rotation=30 if crowded else 0, ha="right" if crowded else "center"
    )
    ax.axhline(0, color="black", linewidth=0.8)
    ax.grid(axis="y", alpha=0.3)


def colours_for(n: int) -> list[Any]:
    """`n` distinct colours: matplotlib's ten, or twenty for more series (no two runs share one up to 20)."""
    plt = pyplot()
    cmap = plt.get_cmap("tab10" if n <= 10 else "tab20")
    return [cmap(i % cmap.N) for i in range(n)]


def legend(ax, count: int = 0, title: str = "run") -> None:
    """The legend beside the axes: the drawn series only (matplotlib lists the labelled artists)."""
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), title=title, title_fontsize=8)


def panels_legend(axes: Sequence[Any], title: str = "run") -> None:
    """One legend beside the last of several panels: every series drawn in any of them, each once."""
    handles = {h.get_label(): h for ax in axes for h in ax.get_legend_handles_labels()[0]}
    if handles:
        axes[-1].legend(
            list(handles.values()), list(handles), fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0),
            title=title, title_fontsize=8,
        )  # fmt: skip




def slug(text: str) -> str:
    """A file-name-safe form of a metric's or cell's name.

    >>> slug("ndcg@10"), slug("rouge-l/p5")
    ('ndcg-10', 'rouge-l-p5')
    """
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in text).strip("-")


def cell_bars(data: Mapping, out: Path, prefix: str) -> list[Plot]:
    """A family section's main cells as grouped bars with their 95% intervals, one chart per metric shown
    (metrics of other scales never share an axis), every run of the table that has a value in them; a cell
    where every doc failed draws no bar (its run's legend entry says so when it draws none at all)."""
    plt = pyplot()
    by_metric: dict[str, list[str]] = {}
    for cell in data["main_cells"]:
        by_metric.setdefault(data["shown"][cell], []).append(cell)
    drawn = []
    for metric, cells in by_metric.items():
        directions = {m["name"]: m["higher_is_better"] for m in data["cell_metrics"][cells[0]]}
        higher = directions.get(metric, data["higher_is_better"])
        series, errors, failed, none = {}, {}, {}, []
        for row in data["rows"]:
            entries = [row["cells"].get(cell) for cell in cells]
            values = [_value(entry, metric) for entry in entries]
            if not any(value is not None for value in values):
                if any(entry is not None for entry in entries):  # it ran them, and every doc failed
                    none.append(row["label"])
                continue  # a run of none of these cells gets no bar slot nor legend entry
            series[row["label"]] = [v["value"] if v else None for v in values]
            errors[row["label"]] = (
                [v["ci_low"] if v else None for v in values],
                [v["ci_high"] if v else None for v in values],
            )
            failed[row["label"]] = [_failed(entry) for entry in entries]
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(width(len(cells), len(series)), 4.4))
        bars(ax, cells, series, errors, failed)
        direction = "higher" if higher else "lower"
        ax.set_title(plain(f"{data['title']}: {metric} per cell ({direction} is better)", 120))
        ax.set_xlabel(_caption(data, series, errors, failed, none))
        ax.set_ylabel(plain(metric))
        legend(ax)
        name = f"{prefix}{slug(data['task'])}_{slug(metric)}.png"
        title = f"{data['title']}: {metric} per cell"
        drawn.append(save(fig, out, name, title, "cells", series=list(series)))
    return drawn


def _caption(data: Mapping, series: Mapping, errors: Mapping, failed: Mapping, none: Sequence[str]) -> str:
    """What the chart's marks mean, and what it could not draw."""
    parts = [f"{data['subset_axis']} / {data['protocol_axis']}"]
    bare = [
        name
        for name, values in series.items()
        if any(
            v is not None and (lo is None or hi is None)
            for v, lo, hi in zip(values, *errors[name], strict=True)
        )
    ]
    parts.append(
        "error bars: 95% bootstrap interval"
        + (f" (none where the metric has no interval: {', '.join(map(plain, bare[:3]))})" if bare else "")
    )
    if any(share for shares in failed.values() for share in shares):
        parts.append("hatched: some docs failed (the table gives the share)")
    parts.append("a line at 0: a score of 0; no bar: not run")
    if none:
        parts.append(f"every doc failed, not drawn: {', '.join(map(plain, none[:3]))}")
    return plain("; ".join(parts), 400)


def _failed(entry: Mapping | None) -> float | None:
    """The share of a cell's docs that failed (None where not run)."""
    if entry is None or not entry["num_docs"]:
        return None
    return entry["num_failed"] / entry["num_docs"]


def _value(entry: Mapping | None, metric: str) -> Mapping | None:
    """A cell's value of `metric` for a plot: none where not run or every doc failed."""
    if entry is None or entry["num_failed"] == entry["num_docs"]:
        return None
    value = entry["metrics"].get(metric)
    return value if value is not None and value["value"] is not None else None


def lines(ax, xs: Sequence[Any], series: Mapping[str, Sequence[Mapping | None]]) -> list[str]:
    """One line per series over `xs`, each point with its interval; missing points drawn as gaps, a series
    without any point left out of the chart and its legend. Returns the series drawn."""
    drawn = []
    for name, points in series.items():
        if all(p is None for p in points):
            continue
        ys = [math.nan if p is None else p["value"] for p in points]
        low = [0 if p is None or p["ci_low"] is None else p["value"] - p["ci_low"] for p in points]
        high = [0 if p is None or p["ci_high"] is None else p["ci_high"] - p["value"] for p in points]
        ax.errorbar(list(range(len(xs))), ys, yerr=[low, high], marker="o", capsize=2, label=plain(name))
        drawn.append(name)
    ax.set_xticks(range(len(xs)))
    ax.set_xticklabels([plain(str(x), 40) for x in xs])
    ax.grid(alpha=0.3)
    return drawn
