"""The report's pictures (matplotlib, Agg backend): each PNG readable on its own, with a title, axis labels
and a legend.

matplotlib is the ``report`` extra (``pip install 'perrecbench[report]'``); it is imported only here, when
plots are drawn.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perrec_eval.tasks.perrecbench.leaderboard.board import Report, Table
from perrec_eval.tasks.perrecbench.leaderboard.render import SHORT, groups

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


def _pyplot():
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


def _save(fig, out: Path, name: str, title: str, kind: str) -> Plot:
    plt = _pyplot()
    path = out / "plots" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return Plot(path=f"plots/{name}", title=title, kind=kind)


def _shown(labels: Sequence[str]) -> tuple[list[int], str]:
    """The indices drawn (at most `MAX_BARS`) and a title suffix saying how many were left out."""
    keep = list(range(min(len(labels), MAX_BARS)))
    return keep, "" if len(labels) <= MAX_BARS else f" (top {MAX_BARS} of {len(labels)} rows)"


def _bars(ax, groups: Sequence[str], series: Mapping[str, Sequence[float | None]], errors=None) -> None:
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
        ax.bar(xs, heights, width=width, label=name, yerr=yerr, capsize=2 if yerr else 0)
    # Long labels side by side overlap: slant them.
    crowded = any(len(line) > 12 for group in groups for line in group.split("\n"))
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=30 if crowded else 0, ha="right" if crowded else "center")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.grid(axis="y", alpha=0.3)


def _legend(ax, count: int) -> None:
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="run", title_fontsize=8)


def leaderboard(table: Table, out: Path, prefix: str) -> Plot:
    plt = _pyplot()
    keep, suffix = _shown([row.label for row in table.rows])
    groups = [f"{lv}\n{SHORT[m]}" for lv, m in table.columns] + ["Avg."]
    series, errors = {}, {}
    for i in keep:
        row = table.rows[i]
        entries = [row.entries.get(cell) for cell in table.columns]
        series[row.label] = [e.ptc if e else None for e in entries] + [row.average]
        errors[row.label] = (
            [e.scores.get("ptc_ci_low") if e else None for e in entries] + [None],
            [e.scores.get("ptc_ci_high") if e else None for e in entries] + [None],
        )
    fig, ax = plt.subplots(figsize=(max(7, 0.9 * len(groups) + 3), 4.2))
    _bars(ax, groups, series, errors)
    ax.set_title(f"PTC per level and method, table {table.number}: {table.num_groups} groups{suffix}")
    ax.set_xlabel("level / ranking method (error bars: 95% bootstrap interval)")
    ax.set_ylabel("PTC (Kendall tau, -1 to 1)")
    _legend(ax, len(series))
    return _save(fig, out, f"{prefix}leaderboard.png", "PTC per level and method", "leaderboard")


def by_domain(data: Mapping[str, Any], out: Path, prefix: str) -> Plot | None:
    if not data["rows"]:
        return None
    plt = _pyplot()
    keep, suffix = _shown([r["label"] for r in data["rows"]])
    domains = data["domains"]
    series = {data["rows"][i]["label"]: [data["rows"][i]["ptc"][d] for d in domains] for i in keep}
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(domains) + 3), 4))
    _bars(ax, [f"{d}\n({groups(data['num_groups'][d])})" for d in domains], series)
    ax.set_title(f"PTC by domain (paper Fig. 4){suffix}")
    ax.set_xlabel("domain of the query item")
    ax.set_ylabel("mean PTC over the table's cells")
    _legend(ax, len(series))
    return _save(fig, out, f"{prefix}by_domain.png", "PTC by domain (Fig. 4)", "by_domain")


def by_group_size(data: Mapping[str, Any], out: Path, prefix: str) -> Plot:
    plt = _pyplot()
    methods = data["methods"]
    keep, suffix = _shown([r["label"] for r in data["rows"]])
    fig, axes = plt.subplots(1, len(methods), figsize=(4 * len(methods) + 2, 3.8), sharey=True, squeeze=False)
    for ax, method in zip(axes[0], methods, strict=True):
        for i in keep:
            row = data["rows"][i]
            values = [row["ptc"][method][lv] for lv in data["levels"]]
            ys = [math.nan if v is None else v for v in values]
            ax.plot(data["sizes"], ys, marker="o", label=row["label"])
        ax.set_title(method)
        ax.set_xticks(data["sizes"])
        ax.set_xlabel("users per group (easy / medium / hard)")
        ax.axhline(0, color="black", linewidth=0.8)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("PTC (Kendall tau)")
    _legend(axes[0][-1], len(keep))
    fig.suptitle(f"PTC by group size and method (paper Fig. 7){suffix}")
    fig.tight_layout()
    return _save(fig, out, f"{prefix}by_group_size.png", "PTC by group size (Fig. 7)", "by_group_size")


def by_method(data: Mapping[str, Any], out: Path, prefix: str) -> Plot:
    plt = _pyplot()
    keep, suffix = _shown([r["label"] for r in data["rows"]])
    series = {data["rows"][i]["label"]: [data["rows"][i]["ptc"][m] for m in data["methods"]] for i in keep}
    fig, ax = plt.subplots(figsize=(max(6, 1.5 * len(data["methods"]) + 3), 4))
    _bars(ax, data["methods"], series)
    ax.set_title(f"PTC by ranking method, mean over levels{suffix}")
    ax.set_xlabel("ranking method")
    ax.set_ylabel("PTC (Kendall tau)")
    _legend(ax, len(series))
    return _save(fig, out, f"{prefix}by_method.png", "PTC by ranking method", "by_method")


def prompting(blocks: Sequence[Mapping[str, Any]], columns, out: Path, prefix: str) -> list[Plot]:
    plt = _pyplot()
    plots = []
    for n, block in enumerate(blocks, start=1):
        groups = [f"{lv}\n{SHORT[m]}" for lv, m in columns] + ["Avg."]
        series = {r["prompting"]: [*r["cells"].values(), r["average"]] for r in block["rows"]}
        fig, ax = plt.subplots(figsize=(max(7, 0.9 * len(groups) + 3), 4))
        _bars(ax, groups, series)
        ax.set_title(f"Prompting variants of {block['model']} (paper Table 2)")
        ax.set_xlabel("level / ranking method")
        ax.set_ylabel("PTC (Kendall tau)")
        ax.legend(
            fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="prompting", title_fontsize=8
        )
        plots.append(
            _save(
                fig, out, f"{prefix}prompting_{n}.png", f"Prompting variants: {block['model']}", "prompting"
            )
        )
    return plots


def k_shots(grids: Sequence[Mapping[str, Any]], out: Path, prefix: str) -> list[Plot]:
    plt = _pyplot()
    plots = []
    for n, grid in enumerate(grids, start=1):
        names = list(grid["ptc"])
        fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names) + 1, 3.4), squeeze=False)
        for ax, name in zip(axes[0], names, strict=True):
            values = [[math.nan if v is None else v for v in line] for line in grid["ptc"][name]]
            image = ax.imshow(values, cmap="viridis", aspect="auto", origin="lower")
            for i, line in enumerate(values):
                for j, v in enumerate(line):
                    if not math.isnan(v):
                        ax.text(j, i, f"{v:.2f}", ha="center", va="center", color="white", fontsize=8)
            ax.set_xticks(range(len(grid["shots"])), [str(s) for s in grid["shots"]])
            ax.set_yticks(range(len(grid["ks"])), [str(k) for k in grid["ks"]])
            ax.set_xlabel("shots (few-shot demonstrations)")
            ax.set_ylabel("k (retrieved history items)")
            ax.set_title(name)
            fig.colorbar(image, ax=ax, label="PTC")
        fig.suptitle(
            f"{grid['model']}: PTC by k and shots (paper Fig. 6; levels {', '.join(grid['levels'])})"
        )
        fig.tight_layout()
        plots.append(_save(fig, out, f"{prefix}k_shots_{n}.png", f"k x shots: {grid['model']}", "k_shots"))
    return plots


def rating_errors(data: Mapping[str, Any], out: Path, prefix: str) -> Plot | None:
    if not data["points"]:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    systems = data["systems"]
    _bars(
        axes[0],
        [s["label"] for s in systems],
        {"MAE": [s["mae"] for s in systems], "RMSE": [s["rmse"] for s in systems]},
    )
    axes[0].set_title("Rating error per system (paper Fig. 1)")
    axes[0].set_xlabel("system")
    axes[0].set_ylabel("error of the predicted rating (stars)")
    axes[0].legend(fontsize=8, title="metric")
    labels = [s["label"] for s in systems]  # the table's order, so colours match the other plots
    for ax, metric in zip(axes[1:], ("mae", "rmse"), strict=True):
        for label in labels:
            points = [p for p in data["points"] if p["label"] == label]
            ax.scatter([p[metric] for p in points], [p["ptc"] for p in points], label=label, s=25)
        r = data[f"ptc_vs_{metric}"]
        shown = "n/a" if r["r"] is None else f"{r['r']:.2f}"
        ax.set_title(f"PTC vs {metric.upper()} (Fig. 3): Pearson r = {shown}, n = {r['n']}")
        ax.set_xlabel(f"{metric.upper()} of the predicted ratings")
        ax.set_ylabel("PTC (Kendall tau)")
        ax.grid(alpha=0.3)
    axes[2].legend(
        fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        title="system (a point per cell)",
        title_fontsize=8,
    )
    fig.tight_layout()
    return _save(
        fig, out, f"{prefix}rating_errors.png", "PTC against rating error (Figs. 1 and 3)", "rating_errors"
    )


_STATS_PANELS = (
    ("rating", "actual rating", "rating (stars)"),
    ("relative_rating", "relative rating", "rating minus the user's average (bin)"),
    ("history_length", "history length", "reviews before the query (bin)"),
    ("query_year", "purchase date", "year of the review of the query item"),
)


def benchmark_stats(stats: Mapping[str, Any], out: Path, n: int) -> Plot:
    plt = _pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(18, 3.8))
    for ax, (key, title, xlabel) in zip(axes, _STATS_PANELS, strict=True):
        counts = stats["distributions"].get(key, {})
        ax.bar(range(len(counts)), list(counts.values()), color="tab:blue")
        ax.set_xticks(range(len(counts)), list(counts), rotation=60 if len(counts) > 6 else 0, fontsize=7)
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("users (group members)")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(f"Benchmark statistics (paper Fig. 5): {stats['data']}, split {stats['split']}")
    fig.tight_layout()
    return _save(fig, out, f"benchmark_stats_{n}.png", f"Benchmark statistics: {stats['data']}", "stats")


def draw(report: Report, out: Path) -> dict[str, list[Plot]]:
    """Every plot of `report` under ``out/plots/``, keyed ``t<table>`` and ``stats<n>`` (n-th statistics)."""
    plots: dict[str, list[Plot]] = {}
    for table, analyses in zip(report.tables, report.analyses, strict=True):
        prefix = f"t{table.number}_"
        found = [
            leaderboard(table, out, prefix),
            by_domain(analyses["by_domain"], out, prefix),
            by_group_size(analyses["by_group_size"], out, prefix),
            by_method(analyses["by_method"], out, prefix),
            *prompting(analyses["prompting"], table.columns, out, prefix),
            *k_shots(analyses["k_shots"], out, prefix),
            rating_errors(analyses["rating_errors"], out, prefix),
        ]
        plots[f"t{table.number}"] = [plot for plot in found if plot is not None]
    for n, stats in enumerate(report.stats, start=1):
        if "distributions" in stats:
            plots[f"stats{n}"] = [benchmark_stats(stats, out, n)]
    return plots
