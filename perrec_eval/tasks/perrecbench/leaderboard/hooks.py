"""What PerRecBench adds to its report section (`Task.report`, `perrec_eval.leaderboard.family.ReportHooks`).

The section itself is the shared one: rows, cells, intervals, the bold rule, the average of every cell (the
paper's Avg.). PerRecBench adds its PTC paired tests (`perrec_eval.ptc.paired_test` on the groups both runs
scored, per query item on clustered builds; the average's on each group's mean over the cells), each
column's min. detectable Δ (a best that leads by less and that the test does not tell apart is not bold),
the settings that tell runs of one model apart, the constant-rating floor and min. detectable Δ rows under
the runs, its own tables (`tables`), the paper's analyses and figures (`analyses`, `plots`) and the
published tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perrec_eval.leaderboard.document import DASH, Code, Grid, Heading, Images, Para, Text, number

rank_rows = True  # rows are listed by their Avg., best first, as the paper's Table 1
places_plots = True  # its blocks show each of its pictures under its table


def _view(run: Any) -> Any:
    from perrec_eval.tasks.perrecbench.leaderboard.runs import view

    return view(run)


def settings(run: Any) -> dict[str, Any]:
    """The settings that can tell two runs of one model apart (`runs.SETTINGS`)."""
    from perrec_eval.tasks.perrecbench.leaderboard.runs import settings_of

    return settings_of(run.info, [p.prediction.record for p in run.predictions])


def _untested(best: Any, other: Any) -> dict[str, str] | None:
    if (best.variant, best.invalid) != (other.variant, other.invalid):
        return {"untested": f"scored with another metric than the best ({best.model})"}
    return None


def _oriented(test: Mapping[str, Any], best: Any) -> dict[str, Any]:
    """A test of other - best as the shared sections record it: best - other (the same p-value)."""
    out = dict(test)
    for name in ("difference",):
        if out.get(name) is not None:
            out[name] = -out[name]
    if out.get("ci_low") is not None and out.get("ci_high") is not None:
        out["ci_low"], out["ci_high"] = -test["ci_high"], -test["ci_low"]
    return out | {"against": best.model}


def paired_test(metric: Any, best: Any, other: Any, cell: Any, *, n_resamples: int, seed: int) -> Any:
    """PTC's paired test of `other` against the best in `cell` (`board.paired_cell`)."""
    if metric.name != "ptc":
        return None
    from perrec_eval.tasks.perrecbench.leaderboard.board import paired_cell

    a, b = _view(best), _view(other)
    untested = _untested(a, b)
    if untested is not None:
        return untested
    test = paired_cell(b, a, (cell.subset, cell.protocol), n_resamples=n_resamples, seed=seed)
    return _oriented(test, a)


def paired_average(best: Any, other: Any, cells: Sequence[Any], *, n_resamples: int, seed: int) -> Any:
    """The paired test of the Avg. column on each group's mean difference over the cells."""
    from perrec_eval.tasks.perrecbench.leaderboard.board import paired_average as test_average

    a, b = _view(best), _view(other)
    untested = _untested(a, b)
    if untested is not None:
        return untested
    columns = [(cell.subset, cell.protocol) for cell in cells]
    return _oriented(test_average(b, a, columns, n_resamples=n_resamples, seed=seed), a)


def resolution(runs: Sequence[Any], cells: Sequence[Any]) -> float | None:
    """The min. detectable Δ of one column, or of the average over `cells`."""
    from perrec_eval.tasks.perrecbench.leaderboard.board import resolution as detectable

    return detectable([_view(run) for run in runs], [(cell.subset, cell.protocol) for cell in cells])


def extras(section: Mapping[str, Any], runs: Sequence[Any], *, n_resamples: int, seed: int) -> dict[str, Any]:
    """PerRecBench's numbers of the section: per column the min. detectable Δ, the floor and the design
    effect; its own tables, the paper's analyses and the benchmark's statistics."""
    from perrec_eval.tasks.perrecbench.leaderboard import analyses, tables
    from perrec_eval.tasks.perrecbench.leaderboard.board import table_view

    views = [_view(run) for run in runs]
    table = table_view(section, views)
    analysed = analyses.analyse(table, n_resamples=n_resamples, seed=seed)

    def by_cell(values: Mapping[tuple[str, str], Any]) -> dict[str, Any]:
        return {f"{level}/{method}": value for (level, method), value in values.items()}

    return {
        "num_groups": table.num_groups,
        "differing_settings": table.differing,
        "paper_variant": table.paper_variant,
        "metric_variants": sorted({view.variant for view in views}),
        "n_resamples": sorted({view.scores.n_resamples for view in views}),
        "permanent_errors": any(view.scores.num_permanent_errors for view in views),
        "min_detectable_difference": by_cell(table.resolution),
        "average_min_detectable_difference": table.average_resolution,
        "constant_floor": by_cell(table.floors),
        "clustered": table.clustered,
        "design_effect": by_cell(table.design_effects),
        "design_effect_bound": by_cell(table.design_effect_bounds),
        "worst_case_min_detectable_difference": by_cell(table.worst_resolution),
        "tables": tables.run_tables(table),
        "analyses": analysed,
        "analysis_tables": tables.analysis_tables(table, analysed),
        "benchmark_stats": analyses.benchmark_stats(views),
    }


def reference_rows(section: Mapping[str, Any]) -> list[list[Text]]:
    """The constant-rating floor of each pointwise column and each column's min. detectable Δ."""
    from perrec_eval.tasks.perrecbench.leaderboard.tables import resolution_text

    extra = section.get("extras") or {}
    cells = section["main_cells"]
    rows: list[list[Text]] = []
    floors = extra.get("constant_floor") or {}
    if any(value is not None for value in floors.values()):
        rows.append(["floor: constant rating", *(number(floors.get(cell), ".3f") for cell in cells), DASH])
    resolution = extra.get("min_detectable_difference") or {}
    rows.append([
        "min. detectable Δ", *(resolution_text(resolution.get(cell), ".3f") for cell in cells),
        resolution_text(extra.get("average_min_detectable_difference"), ".3f"),
    ])  # fmt: skip
    return rows


_METRICS = {
    "tau_b": "Kendall tau-b between predicted and true per-user scores",
    "paper": "the paper's tau between best-first index lists (paper mode)",
}


def notes(section: Mapping[str, Any]) -> list[Text]:
    """What PTC, the floor and the min. detectable Δ are, and what clustering and failures change."""
    extra = section.get("extras") or {}
    variants = extra.get("metric_variants") or ["tau_b"]
    out: list[Text] = [
        (
            f"PTC = {'; '.join(_METRICS.get(m, m) for m in variants)}, mean over groups (-1 to 1, higher is "
            "better); the paired tests are sign-flip permutation tests on the groups both runs share (per "
            "cell the metric's ",
            Code("paired_test"),
            '), not corrected for multiple comparisons. Row "min. detectable Δ": the smallest true '
            "difference a paired test at p < 0.05 finds with power 0.8 on these groups (normal "
            "approximation with the null tau variance, ",
            Code("ptc.expected_resolution"),
            '); closer systems are not told apart here. Row "floor": the pointwise PTC of answering the '
            "same rating for every user on these groups, which pointwise scoring (rating minus the user's "
            "average) turns into a ranking by minus the users' averages, so it is not 0; a pointwise cell "
            "must beat it (fixed answers score exactly 0 in all-pairs pairwise and balanced listwise).",
        )
    ]
    if extra.get("permanent_errors"):
        out.append(
            (
                "(provisional) = some requests failed: those that fail on every try (e.g. a prompt over "
                "the model's context) need the fix ",
                Code("perrecbench evaluate"),
                " printed; a re-run retries the others.",
            )
        )
    if extra.get("clustered"):
        out.append(_clustered_note(extra))
    return out


def _clustered_note(extra: Mapping[str, Any]) -> str:
    effects = list((extra.get("design_effect") or {}).values()) or [1.0]
    worse = [
        (extra["worst_case_min_detectable_difference"][cell], bound)
        for cell, bound in (extra.get("design_effect_bound") or {}).items()
        if round(extra["worst_case_min_detectable_difference"][cell], 2)
        > round(extra["min_detectable_difference"][cell], 2)
    ]
    low, high = f"{min(effects):.1f}", f"{max(effects):.1f}"
    note = (
        "Clustered by query item: where a level has several groups of one query item (large-preset builds), "
        "the CI resamples whole items (cluster bootstrap) and paired tests flip signs per item; the min. "
        "detectable Δ carries the design effect observed on the runs (the cluster bootstrap's variance over "
        f"the plain one, per cell: {low if low == high else f'{low}–{high}'})."
    )
    if worse:
        note += (
            f" Were one item's groups perfectly correlated (design effect Σm²/Σm up to "
            f"{max(b for _, b in worse):.1f}, m = groups per item), it would be up to "
            f"{max(w for w, _ in worse):.2f}."
        )
    return note


def _images(section: Mapping[str, Any], kind: str) -> list[Any]:
    from perrec_eval.leaderboard.plots import Plot

    found = [Plot(**plot) for plot in section.get("plots") or () if plot["kind"] == kind]
    return [Images(found)] if found else []


def _grid_blocks(section: Mapping[str, Any], tables: Sequence[Mapping[str, Any]]) -> list[Any]:
    out: list[Any] = []
    for table in tables:
        if table["heading"]:
            out.append(Heading(3, table["heading"]))
        if table["note"]:
            out.append(Para(table["note"]))
        out.append(Grid(table["header"], table["rows"]))
        if table.get("images"):
            out += _images(section, table["images"])
    return out


def blocks(section: Mapping[str, Any]) -> list[Any]:
    """PerRecBench's own tables and the paper's analyses, each picture under its table; the benchmark's
    statistics and the published tables last."""
    extra = section.get("extras") or {}
    out = _grid_blocks(section, extra.get("tables") or [])
    out += _grid_blocks(section, extra.get("analysis_tables") or [])
    for stats in extra.get("benchmark_stats") or []:
        out.append(Heading(3, f"Benchmark statistics (paper Fig. 5): split {stats['split']}"))
        out += [Para(stats["missing"])] if "missing" in stats else _images(section, "stats")
    return out + published_blocks()


def published_blocks() -> list[Any]:
    """The paper's published tables, after the runs' analyses."""
    from perrec_eval.tasks.perrecbench.leaderboard import tables
    from perrec_eval.tasks.perrecbench.leaderboard.published import load

    published = load()
    out: list[Any] = [
        Heading(3, "Published results (arXiv 2501.13391)"),
        Para(
            (
                "Facts from the paper, scored with its metric (paper mode) on its own build of the "
                "benchmark: reference values, never tested against the runs above and comparable only in "
                "spirit with runs scored with ",
                Code("--paper-mode"),
                " (variant paper).",
            )
        ),
    ]
    for number_ in sorted(published.titles):
        out += _grid_blocks({}, [tables.published_grid(published, number_)])
    return out


def plots(section: Mapping[str, Any], out: Path, prefix: str) -> list[Any]:
    """The paper's figures of the section (`tasks/perrecbench/leaderboard/plots.py`)."""
    from perrec_eval.tasks.perrecbench.leaderboard import plots as drawing

    return drawing.draw(section, out, prefix)
