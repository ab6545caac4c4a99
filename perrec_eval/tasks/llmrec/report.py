"""What LLMRec adds to its report section (`Task.report`, `perrec_eval.leaderboard.family.ReportHooks`):
the ranking tasks' HR and NDCG at each list length, as a table and as a picture (LLMRec's and P5's tables
report them at 1, 5 and 10)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

AT_K = {"hr": ("hr@1", "hr@5", "hr@10"), "ndcg": ("ndcg@5", "ndcg@10")}


def _ranking_cells(section: Mapping[str, Any]) -> list[str]:
    return [
        cell
        for cell in section["cells"]
        if {m["name"] for m in section["cell_metrics"][cell]} >= {*AT_K["hr"], *AT_K["ndcg"]}
    ]


def blocks(section: Mapping[str, Any]) -> list[Any]:
    """HR@k and NDCG@k of each ranking cell, one row per run (higher is better)."""
    from perrec_eval.leaderboard.document import Grid, Heading
    from perrec_eval.leaderboard.family import value_text

    cells = _ranking_cells(section)
    if not cells:
        return []
    names = [*AT_K["hr"], *AT_K["ndcg"]]
    out: list[Any] = [Heading(3, "Ranking at k: HR@1/5/10 and NDCG@5/10 (higher is better)")]
    for cell in cells:
        rows = [
            [row["label"], *(value_text(row["cells"][cell], name, marks=False) for name in names)]
            for row in section["rows"]
            if cell in row["cells"]
        ]
        out.append(Grid([cell, *names], rows))
    return out


def plots(section: Mapping[str, Any], out: Path, prefix: str) -> list[Any]:
    """HR@k and NDCG@k of each ranking cell, one line per run, each point with its interval."""
    from perrec_eval.leaderboard import plots as drawing

    cells = _ranking_cells(section)
    if not cells:
        return []
    plt = drawing.pyplot()
    fig, axes = plt.subplots(2, len(cells), figsize=(4.0 * len(cells) + 2, 6.6), squeeze=False)
    drawn: list[str] = []
    for column, cell in enumerate(cells):
        for line, (family, names) in enumerate(AT_K.items()):
            ax = axes[line][column]
            series = {}
            for row in section["rows"]:  # every run of the table that has the cell
                entry = row["cells"].get(cell)
                if entry is None or entry["num_failed"] == entry["num_docs"]:
                    continue
                series[row["label"]] = [entry["metrics"].get(name) for name in names]
            drawn += [name for name in drawing.lines(ax, [n.partition("@")[2] for n in names], series)]
            ax.set_title(f"{cell}: {family.upper()}@k")
            ax.set_xlabel("k (list length)")
            ax.set_ylabel(f"{family.upper()}@k (higher is better)")
    drawn = list(dict.fromkeys(drawn))
    drawing.panels_legend(list(axes.flat))
    fig.suptitle("LLMRec: HR and NDCG at k (error bars: 95% bootstrap interval; no line: not run)")
    fig.tight_layout()
    title = "LLMRec: HR and NDCG at k"
    return [drawing.save(fig, out, f"{prefix}llmrec_at_k.png", title, "at_k", series=drawn)]
