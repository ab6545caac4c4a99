"""PerRecBench's report pictures, drawn with the helpers every report uses
(`perrec_eval.leaderboard.plots`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perrec_eval.leaderboard import plots as shared
from perrec_eval.leaderboard.plots import Plot
from perrec_eval.tasks.perrecbench.leaderboard.board import Report, Table
from perrec_eval.tasks.perrecbench.leaderboard.render import SHORT, groups


def leaderboard(table: Table, out: Path, prefix: str) -> Plot:
    plt = shared.pyplot()
    keep, suffix = shared.shown([row.label for row in table.rows])
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
    shared.bars(ax, groups, series, errors)
    ax.set_title(f"PTC per level and method, table {table.number}: {table.num_groups} groups{suffix}")
    ax.set_xlabel("level / ranking method (error bars: 95% bootstrap interval)")
    ax.set_ylabel("PTC (Kendall tau, -1 to 1)")
    shared.legend(ax, len(series))
    return shared.save(fig, out, f"{prefix}leaderboard.png", "PTC per level and method", "leaderboard")


def by_domain(data: Mapping[str, Any], out: Path, prefix: str) -> Plot | None:
    if not data["rows"]:
        return None
    plt = shared.pyplot()
    keep, suffix = shared.shown([r["label"] for r in data["rows"]])
    domains = data["domains"]
    series = {data["rows"][i]["label"]: [data["rows"][i]["ptc"][d] for d in domains] for i in keep}
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(domains) + 3), 4))
    shared.bars(ax, [f"{d}\n({groups(data['num_groups'][d])})" for d in domains], series)
    ax.set_title(f"PTC by domain (paper Fig. 4){suffix}")
    ax.set_xlabel("domain of the query item")
    ax.set_ylabel("mean PTC over the table's cells")
    shared.legend(ax, len(series))
    return shared.save(fig, out, f"{prefix}by_domain.png", "PTC by domain (Fig. 4)", "by_domain")


def by_group_size(data: Mapping[str, Any], out: Path, prefix: str) -> Plot:
    plt = shared.pyplot()
    methods = data["methods"]
    keep, suffix = shared.shown([r["label"] for r in data["rows"]])
    fig, axes = plt.subplots(1, len(methods), figsize=(4 * len(methods) + 2, 3.8), sharey=True, squeeze=False)
    for ax, method in zip(axes[0], methods, strict=True):
        for i in keep:
            row = data["rows"][i]
            values = [row["ptc"][method][lv] for lv in data["levels"]]
            ys = [math.nan if v is None else v for v in values]
            ax.plot(data["sizes"], ys, marker="o", label=shared.legend_label(row["label"]))
        ax.set_title(method)
        ax.set_xticks(data["sizes"])
        ax.set_xlabel("users per group (easy / medium / hard)")
        ax.axhline(0, color="black", linewidth=0.8)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("PTC (Kendall tau)")
    shared.legend(axes[0][-1], len(keep))
    fig.suptitle(f"PTC by group size and method (paper Fig. 7){suffix}")
    fig.tight_layout()
    return shared.save(fig, out, f"{prefix}by_group_size.png", "PTC by group size (Fig. 7)", "by_group_size")


def by_method(data: Mapping[str, Any], out: Path, prefix: str) -> Plot:
    plt = shared.pyplot()
    keep, suffix = shared.shown([r["label"] for r in data["rows"]])
    series = {data["rows"][i]["label"]: [data["rows"][i]["ptc"][m] for m in data["methods"]] for i in keep}
    fig, ax = plt.subplots(figsize=(max(6, 1.5 * len(data["methods"]) + 3), 4))
    shared.bars(ax, data["methods"], series)
    ax.set_title(f"PTC by ranking method, mean over levels{suffix}")
    ax.set_xlabel("ranking method")
    ax.set_ylabel("PTC (Kendall tau)")
    shared.legend(ax, len(series))
    return shared.save(fig, out, f"{prefix}by_method.png", "PTC by ranking method", "by_method")


def prompting(blocks: Sequence[Mapping[str, Any]], columns, out: Path, prefix: str) -> list[Plot]:
    plt = shared.pyplot()
    plots = []
    for n, block in enumerate(blocks, start=1):
        groups = [f"{lv}\n{SHORT[m]}" for lv, m in columns] + ["Avg."]
        series = {r["prompting"]: [*r["cells"].values(), r["average"]] for r in block["rows"]}
        fig, ax = plt.subplots(figsize=(max(7, 0.9 * len(groups) + 3), 4))
        shared.bars(ax, groups, series)
        ax.set_title(f"Prompting variants of {block['model']} (paper Table 2)")
        ax.set_xlabel("level / ranking method")
        ax.set_ylabel("PTC (Kendall tau)")
        ax.legend(
            fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="prompting", title_fontsize=8
        )
        plots.append(
            shared.save(
                fig, out, f"{prefix}prompting_{n}.png", f"Prompting variants: {block['model']}", "prompting"
            )
        )
    return plots


def k_shots(grids: Sequence[Mapping[str, Any]], out: Path, prefix: str) -> list[Plot]:
    plt = shared.pyplot()
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
        name = f"{prefix}k_shots_{n}.png"
        plots.append(shared.save(fig, out, name, f"k x shots: {grid['model']}", "k_shots"))
    return plots


def rating_errors(data: Mapping[str, Any], out: Path, prefix: str) -> Plot | None:
    if not data["points"]:
        return None
    plt = shared.pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    systems = data["systems"]
    shared.bars(
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
            xs, ys = [p[metric] for p in points], [p["ptc"] for p in points]
            ax.scatter(xs, ys, label=shared.legend_label(label), s=25)
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
    return shared.save(
        fig, out, f"{prefix}rating_errors.png", "PTC against rating error (Figs. 1 and 3)", "rating_errors"
    )


_STATS_PANELS = (
    ("rating", "actual rating", "rating (stars)"),
    ("relative_rating", "relative rating", "rating minus the user's average (bin)"),
    ("history_length", "history length", "reviews before the query (bin)"),
    ("query_year", "purchase date", "year of the review of the query item"),
)


def benchmark_stats(stats: Mapping[str, Any], out: Path, n: int) -> Plot:
    plt = shared.pyplot()
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
    title = f"Benchmark statistics: {stats['data']}"
    return shared.save(fig, out, f"benchmark_stats_{n}.png", title, "stats")


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
