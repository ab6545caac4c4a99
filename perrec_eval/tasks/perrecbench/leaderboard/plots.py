"""PerRecBench's report pictures (the paper's figures), drawn from its section's extras with the helpers
every report uses (`perrec_eval.leaderboard.plots`): every run the table has, intervals where the figure's
values have one (and a caption saying why where they have none)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perrec_eval.leaderboard import plots as shared
from perrec_eval.leaderboard.plots import Plot, plain
from perrec_eval.tasks.perrecbench.leaderboard.tables import SHORT, groups


def _errors(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> dict[str, tuple[list, list]]:
    return {
        row["label"]: (
            [(row.get("interval") or {}).get(key, [None, None])[0] for key in keys],
            [(row.get("interval") or {}).get(key, [None, None])[1] for key in keys],
        )
        for row in rows
    }


def _drawn(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> list[Mapping[str, Any]]:
    """The rows with a value in some of `keys` (a row with none gets no bar slot nor legend entry)."""
    return [row for row in rows if any(row["ptc"].get(key) is not None for key in keys)]


def by_domain(data: Mapping[str, Any], out: Path, prefix: str) -> Plot | None:
    domains = data["domains"]
    rows = _drawn(data["rows"], domains)
    if not rows:
        return None
    plt = shared.pyplot()
    series = {row["label"]: [row["ptc"][d] for d in domains] for row in rows}
    fig, ax = plt.subplots(figsize=(shared.width(len(domains), len(series), least=6), 4.2))
    shared.bars(
        ax, [f"{d}\n({groups(data['num_groups'][d])})" for d in domains], series, _errors(rows, domains)
    )
    ax.set_title("PTC by domain (paper Fig. 4): runs with every cell")
    ax.set_xlabel(
        "domain of the query item; error bars: 95% bootstrap interval over the domain's groups (none for a "
        "paper-mode run); a line at 0: a score of 0"
    )
    ax.set_ylabel("mean PTC over the table's cells")
    shared.legend(ax)
    return shared.save(
        fig, out, f"{prefix}by_domain.png", "PTC by domain (Fig. 4)", "by_domain", list(series)
    )


def by_group_size(data: Mapping[str, Any], out: Path, prefix: str) -> Plot | None:
    methods, levels = data["methods"], data["levels"]
    rows = [
        row for row in data["rows"] if any(row["ptc"][m][lv] is not None for m in methods for lv in levels)
    ]
    if not rows:
        return None
    plt = shared.pyplot()
    fig, axes = plt.subplots(1, len(methods), figsize=(4 * len(methods) + 2, 3.8), sharey=True, squeeze=False)
    drawn: list[str] = []
    for ax, method in zip(axes[0], methods, strict=True):
        series = {
            row["label"]: [
                None
                if row["ptc"][method][lv] is None
                else {
                    "value": row["ptc"][method][lv],
                    "ci_low": row["interval"][method][lv][0],
                    "ci_high": row["interval"][method][lv][1],
                }
                for lv in levels
            ]
            for row in rows
        }
        drawn += [
            name for name in shared.lines(ax, [str(n) for n in data["sizes"]], series) if name not in drawn
        ]
        ax.set_title(method)
        ax.set_xlabel("users per group (easy / medium / hard)")
        ax.axhline(0, color="black", linewidth=0.8)
    axes[0][0].set_ylabel("PTC (Kendall tau)")
    shared.panels_legend(list(axes[0]))
    fig.suptitle("PTC by group size and method (paper Fig. 7); error bars: 95% bootstrap interval")
    fig.tight_layout()
    name = f"{prefix}by_group_size.png"
    return shared.save(fig, out, name, "PTC by group size (Fig. 7)", "by_group_size", drawn)


def by_method(data: Mapping[str, Any], out: Path, prefix: str) -> Plot | None:
    methods = data["methods"]
    rows = _drawn(data["rows"], methods)
    if not rows:
        return None
    plt = shared.pyplot()
    series = {row["label"]: [row["ptc"][m] for m in methods] for row in rows}
    fig, ax = plt.subplots(figsize=(shared.width(len(methods), len(series)), 4.2))
    shared.bars(ax, methods, series, _errors(rows, methods))
    ax.set_title("PTC by ranking method, mean over levels")
    ax.set_xlabel(
        "ranking method; error bars: 95% bootstrap interval (each level's groups resampled; none for a "
        "paper-mode run); a line at 0: a score of 0"
    )
    ax.set_ylabel("PTC (Kendall tau)")
    shared.legend(ax)
    return shared.save(fig, out, f"{prefix}by_method.png", "PTC by ranking method", "by_method", list(series))


def prompting(
    blocks: Sequence[Mapping[str, Any]], columns: Sequence[str], out: Path, prefix: str
) -> list[Plot]:
    plt = shared.pyplot()
    plots = []
    for n, block in enumerate(blocks, start=1):
        labels = [f"{cell.split('/')[0]}\n{SHORT.get(cell.split('/')[1], cell)}" for cell in columns] + [
            "Avg."
        ]
        series, errors = {}, {}
        for r in block["rows"]:
            series[r["prompting"]] = [*(r["cells"][c] for c in columns), r["average"]]
            intervals = [*(r["intervals"][c] for c in columns), r["average_interval"]]
            errors[r["prompting"]] = ([i[0] for i in intervals], [i[1] for i in intervals])
        fig, ax = plt.subplots(figsize=(shared.width(len(labels), len(series)), 4.2))
        shared.bars(ax, labels, series, errors)
        ax.set_title(plain(f"Prompting variants of {block['model']} (paper Table 2)", 120))
        ax.set_xlabel("level / ranking method; error bars: 95% bootstrap interval; a line at 0: a score of 0")
        ax.set_ylabel("PTC (Kendall tau)")
        shared.legend(ax, title="prompting")
        title = f"Prompting variants: {block['model']}"
        plots.append(shared.save(fig, out, f"{prefix}prompting_{n}.png", title, "prompting", list(series)))
    return plots


def k_shots(grids: Sequence[Mapping[str, Any]], out: Path, prefix: str) -> list[Plot]:
    plt = shared.pyplot()
    plots = []
    for n, grid in enumerate(grids, start=1):
        names = list(grid["ptc"])
        fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names) + 1, 3.6), squeeze=False)
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
            plain(
                f"{grid['model']}: PTC by k and shots (paper Fig. 6; levels {', '.join(grid['levels'])}); a "
                "heat map of means, no intervals: each grid point's run has its intervals in the tables",
                200,
            )
        )
        fig.tight_layout()
        name = f"{prefix}k_shots_{n}.png"
        plots.append(shared.save(fig, out, name, f"k x shots: {grid['model']}", "k_shots", [grid["model"]]))
    return plots


def rating_errors(data: Mapping[str, Any], out: Path, prefix: str) -> Plot | None:
    if not data["points"]:
        return None
    plt = shared.pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    systems = data["systems"]
    shared.bars(
        axes[0],
        [s["label"] for s in systems],
        {"MAE": [s["mae"] for s in systems], "RMSE": [s["rmse"] for s in systems]},
    )
    axes[0].set_title("Rating error per system (paper Fig. 1)")
    axes[0].set_xlabel("system (no error bars: errors over the users' ratings, not per doc)")
    axes[0].set_ylabel("error of the predicted rating (stars)")
    axes[0].legend(fontsize=8, title="metric")
    labels = [s["label"] for s in systems]  # the table's order, so colours match the other plots
    for ax, metric in zip(axes[1:], ("mae", "rmse"), strict=True):
        for label in labels:
            points = [p for p in data["points"] if p["label"] == label]
            ax.scatter([p[metric] for p in points], [p["ptc"] for p in points], label=plain(label), s=25)
        r = data[f"ptc_vs_{metric}"]
        shown = "n/a" if r["r"] is None else f"{r['r']:.2f}"
        ax.set_title(f"PTC vs {metric.upper()} (Fig. 3): Pearson r = {shown}, n = {r['n']}")
        ax.set_xlabel(
            f"{metric.upper()} of the predicted ratings (a point per cell; intervals in the tables)"
        )
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
        fig,
        out,
        f"{prefix}rating_errors.png",
        "PTC against rating error (Figs. 1 and 3)",
        "rating_errors",
        labels,
    )


_STATS_PANELS = (
    ("rating", "actual rating", "rating (stars)"),
    ("relative_rating", "relative rating", "rating minus the user's average (bin)"),
    ("history_length", "history length", "reviews before the query (bin)"),
    ("query_year", "purchase date", "year of the review of the query item"),
)


def benchmark_stats(stats: Mapping[str, Any], out: Path, n: str) -> Plot:
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
    fig.suptitle(f"Benchmark statistics (paper Fig. 5): {stats['data']}, split {stats['split']} (counts)")
    fig.tight_layout()
    title = f"Benchmark statistics: {stats['data']}"
    return shared.save(fig, out, f"benchmark_stats_{n}.png", title, "stats")


def draw(section: Mapping[str, Any], out: Path, prefix: str) -> list[Plot]:
    """The paper's figures of a PerRecBench section under ``out/plots/`` (names starting with `prefix`)."""
    extra = section.get("extras") or {}
    analyses = extra.get("analyses")
    if not analyses:
        return []
    found = [
        by_domain(analyses["by_domain"], out, prefix),
        by_group_size(analyses["by_group_size"], out, prefix),
        by_method(analyses["by_method"], out, prefix),
        *prompting(analyses["prompting"], section["cells"], out, prefix),
        *k_shots(analyses["k_shots"], out, prefix),
        rating_errors(analyses["rating_errors"], out, prefix),
    ]
    for n, stats in enumerate(extra.get("benchmark_stats") or [], start=1):
        if "distributions" in stats:
            found.append(benchmark_stats(stats, out, f"{prefix}{n}"))
    return [plot for plot in found if plot is not None]
