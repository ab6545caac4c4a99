"""A report as a document (headings, paragraphs, tables, images) and as text: leaderboard.md, a run's
report.md, leaderboard.csv, leaderboard.tex and leaderboard.json.

Every format is drawn from the same `board.Report`: `document` lays out the leaderboard once, `markdown`
writes it as leaderboard.md and `html.page` as index.html; `run_document` is the part of it a run folder's
report.md shows (the same Table 1, its notes and its per-cell tables).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

from perrec_eval.leaderboard.document import (  # noqa: F401 (re-exported: the blocks every report uses)
    DASH,
    Block,
    Code,
    Em,
    Grid,
    Heading,
    Images,
    Para,
    Strong,
    Text,
    latex_escape,
    markdown,
    markdown_block,
    markdown_text,
    number,
)
from perrec_eval.tasks.perrecbench.leaderboard.board import (
    ALPHA,
    CELLS,
    MIN_GROUPS_TO_COMPARE,
    Entry,
    Report,
    Row,
    Table,
    failed_share,
    mostly_failed,
)
from perrec_eval.tasks.perrecbench.leaderboard.published import PublishedRow
from perrec_eval.tasks.perrecbench.results import CellScore

SHORT = {"pointwise": "point", "pairwise": "pair", "listwise": "list"}
MAX_DIFFERENCE = 2.0  # two PTCs lie in [-1, 1]


def resolution_text(value: float | None, spec: str = ".2f") -> str:
    """A min. detectable Δ for reading: past the widest possible difference of two PTCs it is only that.

    >>> resolution_text(0.123), resolution_text(2.8), resolution_text(None)
    ('0.12', '> 2', '–')
    """
    return "> 2" if value is not None and value > MAX_DIFFERENCE else number(value, spec)


def p_text(p: float | None) -> str:
    """A p-value for reading.

    >>> p_text(0.00001), p_text(0.0312), p_text(None)
    ('<0.001', '0.031', '–')
    """
    if p is None:
        return DASH
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def failure_note(cell: Mapping[str, Any] | None) -> str:
    """`` (N% failed)`` for a cell where any group failed (as every family's report shows it), else nothing.

    >>> failure_note({"num_groups": 3, "num_invalid": 3}), failure_note({"num_groups": 3, "num_invalid": 0})
    (' (100% failed)', '')
    >>> failure_note({"num_groups": 400, "num_invalid": 1}), failure_note({"num_groups": 4, "num_invalid": 1})
    (' (<1% failed)', ' (25% failed)')
    """
    share = None if cell is None else failed_share(cell)
    if not share:
        return ""
    return " (<1% failed)" if share < 0.005 else f" ({share:.0%} failed)"


def any_failed(rows: Sequence[Row]) -> bool:
    """Whether a group of any cell of `rows` failed (the failure note then explains the shares)."""
    return any(failed_share(entry.scores) for row in rows for entry in row.entries.values())


def row_name(row: Row) -> str:
    return row.label + (" (provisional)" if row.provisional else "")


_METRICS = {
    "tau_b": "Kendall tau-b between predicted and true per-user scores",
    "paper": "the paper's tau between best-first index lists (paper mode)",
}
MOSTLY_FAILED_NOTE = (
    "(N% failed) = the share of the cell's groups that got no usable ranking (answers that did not parse, "
    "or engine errors); those groups score 0 (or are dropped in paper mode). A cell where more than half "
    "failed says little about the model and is never marked best."
)


def too_few_note(tables: Sequence[Table]) -> str:
    """The tables on too few groups to compare anything (`Table.too_few_groups`); "" when none."""
    few = [table for table in tables if table.too_few_groups]
    if not few:
        return ""
    which = "This table" if len(tables) == 1 else "Table " + ", ".join(str(table.number) for table in few)
    return (
        f"{which}: too few groups to compare ({', '.join(str(t.num_groups) for t in few)}): a paired test "
        f"on fewer than {MIN_GROUPS_TO_COMPARE} groups never reaches p < {ALPHA}, so no system is marked "
        "best; evaluate on more groups (--max-groups) before ordering systems."
    )


def clustered_note(tables: Sequence[Table]) -> str:
    """What clustering by query item changes, with the design effects the min. detectable Δ carries and,
    where it would read differently, the worst case at the bound Σm²/Σm; "" when no table is clustered."""
    clustered = [table for table in tables if table.clustered]
    if not clustered:
        return ""
    effects = [effect for table in clustered for effect in table.design_effects.values()]
    worse = [
        (table.worst_resolution[cell], bound)
        for table in clustered
        for cell, bound in table.design_effect_bounds.items()
        if round(table.worst_resolution[cell], 2) > round(table.resolution[cell], 2)
    ]
    note = (
        "Clustered by query item: where a level has several groups of one query item (large-preset builds), "
        "the CI resamples whole items (cluster bootstrap) and paired tests flip signs per item; the min. "
        "detectable Δ carries the design effect observed on the runs (the cluster bootstrap's variance over "
        f"the plain one, per cell: {_span(effects)})."
    )
    if worse:
        note += (
            f" Were one item's groups perfectly correlated (design effect Σm²/Σm up to "
            f"{max(b for _, b in worse):.1f}, m = groups per item), it would be up to "
            f"{max(w for w, _ in worse):.2f}."
        )
    return note


def _span(values: Sequence[float]) -> str:
    """The range of `values` to one decimal (one number where they agree).

    >>> _span([1.04, 1.31, 1.2]), _span([1.0])
    ('1.0–1.3', '1.0')
    """
    low, high = f"{min(values, default=1.0):.1f}", f"{max(values, default=1.0):.1f}"
    return low if low == high else f"{low}–{high}"

COLD_START_NOTE = (
    "Cold start of the classic recommenders (run.json ",
    Code("cf.cells"),
    "): groups whose query item had no rating before the window (all their users tie), and users the model "
    "could not score; both get the user's average (relative prediction 0).",
)


def provisional_note(report: Report) -> Text:
    """What "(provisional)" means for the report's runs, or "" when every run completed."""
    runs = [row.run for table in report.tables for row in table.rows]
    if any(run.scores.num_permanent_errors for run in runs):
        return (
            "(provisional) = some requests failed: those that fail on every try (e.g. a prompt over the "
            "model's context) need the fix ",
            Code("perrecbench evaluate"),
            " printed; a re-run retries the others.",
        )
    if any(not run.complete for run in runs):
        return "(provisional) = some requests failed: run the same command again to retry them."
    return ""


def legend(report: Report) -> Text:
    """What the numbers of the leaderboard are, in a few sentences."""
    rows = [row for table in report.tables for row in table.rows]
    metrics = sorted({row.run.variant for row in rows})
    resamples = sorted({row.run.scores.n_resamples for row in rows})
    text: tuple[str, ...] = (
        f"PTC = {'; '.join(_METRICS.get(m, m) for m in metrics)}, mean over groups (-1 to 1, higher is "
        "better); brackets: each run's 95% interval over groups (percentile bootstrap, "
        f"{' / '.join(f'{n:,}' for n in resamples)} resamples); – = not run. ",
    )
    # a table of one run, or on too few groups, has nothing to compare
    if any(len(table.rows) > 1 and not table.too_few_groups for table in report.tables):
        text += (
            Strong("Bold"),
            ": best in the column; ",
            Code("*"),
            f": below that best at p < {ALPHA}; ",
            Code("≈"),
            ": tested against that best and not found different (p ≥ 0.05): the two are not ordered by this "
            "benchmark (paired sign-flip permutation test on the groups both runs share; per cell the "
            "metric's ",
            Code("paired_test"),
            ", for Avg. the same test on each group's mean over the cells; not corrected for multiple "
            "comparisons). ",
        )
    text += (
        'Row "min. detectable Δ": the smallest true difference a paired test at p < 0.05 finds with power '
        "0.8 on the table's groups (normal approximation with the null tau variance, ",
        Code("ptc.expected_resolution"),
        '); closer systems are not told apart here. Row "floor": the pointwise PTC of answering the same '
        "rating for every user on these groups, which pointwise scoring (rating minus the user's average) "
        "turns into a ranking by minus the users' averages, so it is not 0; a pointwise cell must beat it "
        "(fixed answers score exactly 0 in all-pairs pairwise and balanced listwise). Avg. is over all the "
        "table's cells and only for rows that have them all. Runs are compared only on the same dataset "
        "fingerprint, split and group set.",
    )
    notes = [
        provisional_note(report),
        too_few_note(report.tables),
        clustered_note(report.tables),
        MOSTLY_FAILED_NOTE if any_failed(rows) else "",
    ]
    for note in filter(None, notes):
        text += (" ", *((note,) if isinstance(note, str) else note))
    return text


def _marked(value: float, tested: Entry | Row, marks: bool) -> Text:
    text = f"{value:.2f}"
    if not marks:
        return text
    return (
        Strong(text) if tested.best else text,
        "*" if tested.significant else "",
        " ≈" if tested.tied else "",
    )


def entry_text(entry: Entry | None, *, marks: bool = True) -> Text:
    """One cell of the leaderboard: PTC, best / significance marks, interval, failure share."""
    if entry is None or entry.ptc is None:
        return DASH
    ci = ""
    if entry.scores.get("ptc_ci_low") is not None:
        ci = f" [{entry.scores['ptc_ci_low']:.2f}, {entry.scores['ptc_ci_high']:.2f}]"
    return (*_marked(entry.ptc, entry, marks), ci + failure_note(entry.scores))


def average_text(row: Row, table: Table, *, compact: bool = False) -> Text:
    if row.average is None:
        have = len(table.columns) - len(row.missing)
        return DASH if compact else f"{DASH} ({have} of {len(table.columns)} cells)"
    if compact:
        return _marked(row.average, row, False)
    failed = (
        f" ({len(row.failed_cells)} of {len(row.entries)} cells mostly failed)" if row.failed_cells else ""
    )
    return (*_marked(row.average, row, len(table.rows) > 1), failed)


def column_names(columns: Sequence[tuple[str, str]]) -> list[str]:
    return [f"{level} {SHORT.get(method, method)}" for level, method in columns]


def table_heading(table: Table, count: int) -> str:
    fingerprint = (table.fingerprint or "unknown")[:12]
    return (
        f"Table {table.number}: split {table.split}, {table.num_groups} groups, build {fingerprint} "
        f"({count} run{'s' if count != 1 else ''})"
    )


def leaderboard_rows(table: Table, *, compact: bool = False) -> Grid:
    """The Table-1 layout: one row per run, a column per cell, groups and Avg.; under the runs, the
    pointwise floor and the table's resolution.

    ``compact`` is the console's and the model card's form: no Groups column, no best / significance
    marks. A table of one run has no marks either. Either form shows the cells some run of the table
    scored, and Avg. is over all of them.
    """
    columns = table.columns
    groups = [] if compact else [str(table.num_groups)]
    marks = not compact and len(table.rows) > 1
    rows = [
        [row_name(row), *([] if compact else [str(len(row.run.group_ids))])]
        + [entry_text(row.entries.get(cell), marks=marks) for cell in columns]
        + [average_text(row, table, compact=compact)]
        for row in table.rows
    ]
    if any(value is not None for value in table.floors.values()):
        floors = [number(table.floors.get(cell)) for cell in columns]
        rows.append(["floor: constant rating", *groups, *floors, DASH])
    resolution = [resolution_text(table.resolution.get(cell)) for cell in columns]
    rows.append(["min. detectable Δ", *groups, *resolution, resolution_text(table.average_resolution)])
    header = ["System", *(["Groups"] if groups else []), *column_names(columns), "Avg."]
    return Grid(header, rows, "board")


def leaderboard_markdown(table: Table, *, compact: bool = False) -> str:
    """The leaderboard of `table` as markdown (`leaderboard_rows`)."""
    return markdown_block(leaderboard_rows(table, compact=compact))


CELL_HEADER = (
    "System|cell|PTC|95% CI|Δ vs best|p vs best|groups|invalid|parse failures|engine errors|"
    "min. detectable Δ|floor|[User A] share|both orders agree|list: first shown ranked first|"
    "list: first shown truly first|cut at limit|prompt tokens|answer tokens|MAE|RMSE"
).split("|")


def _engine_errors(cell: CellScore) -> str:
    """The engine error rate, with the count of failed requests where the run recorded it."""
    rate = number(cell.engine_error_rate, ".1%")
    return f"{rate} ({cell.num_engine_errors} of {cell.num_requests})" if cell.num_requests else rate


def cell_rows(table: Table) -> list[list[str]]:
    """Per row and cell: everything behind the number (test against the best, failures, diagnostics)."""
    out = []
    for row in table.rows:
        scored = row.run.cell_scores()
        for cell in table.columns:
            entry = row.entries.get(cell)
            if entry is None:
                continue
            s, d, t = entry.scores, entry.diagnostics or {}, entry.vs_best or {}
            ci = DASH if s.get("ptc_ci_low") is None else f"[{s['ptc_ci_low']:.3f}, {s['ptc_ci_high']:.3f}]"
            vs = (
                "best"
                if entry.best
                else (entry.untested and "not tested") or number(t.get("difference"), "+.3f")
            )
            out.append(
                [
                    row_name(row),
                    f"{cell[0]} {cell[1]}",
                    number(entry.ptc, ".3f"),
                    ci,
                    vs,
                    p_text(t.get("p_value")),
                    str(s.get("num_groups", DASH)),
                    str(s.get("num_invalid", DASH)),
                    number(s.get("parse_failure_rate"), ".1%"),
                    _engine_errors(scored[cell]),
                    resolution_text(table.resolution.get(cell), ".3f"),
                    number(table.floors.get(cell), ".3f"),
                    number(d.get("position_bias"), ".0%"),
                    number(d.get("order_consistency"), ".0%"),
                    number(s.get("first_shown_first"), ".1%"),
                    number(s.get("first_shown_truly_first"), ".1%"),
                    number(d.get("truncated_rate"), ".1%"),
                    number(d.get("prompt_tokens_mean"), ".0f"),
                    number(d.get("completion_tokens_mean"), ".1f"),
                    number(s.get("mae"), ".3f"),
                    number(s.get("rmse"), ".3f"),
                ]
            )
    return out


PROFILE_HEADER = ["System", "profiles", "budget", "suspect", "cut", "copied", "repetitive", "suspect ones"]


def profile_rows(table: Table) -> list[list[str]]:
    """Per row whose run wrote or read profiles with quality counts: how many looked degenerate."""
    out = []
    for row in table.rows:
        profiles = row.run.info.profiles or {}
        quality = profiles.get("quality")
        if not quality:
            continue
        out.append(
            [
                row_name(row),
                profiles.get("source", DASH),
                str(profiles.get("max_tokens", DASH)),
                str(quality.get("flagged", 0)),
                str(quality.get("cut", 0)),
                str(quality.get("copied", 0)),
                str(quality.get("repetitive", 0)),
                "failed" if profiles.get("degenerate_policy") == "fail" else "used",
            ]
        )
    return out


AVERAGE_HEADER = ["System", "Avg.", "Δ vs best", "95% CI of Δ", "p", "groups compared"]


def average_rows(table: Table) -> list[list[str]]:
    out = []
    for row in table.rows:
        t = row.vs_best or {}
        if row.average is None:
            missing = ", ".join(f"{lv} {m}" for lv, m in row.missing)
            out.append([row_name(row), DASH, f"missing: {missing}", DASH, DASH, DASH])
            continue
        ci = DASH if t.get("ci_low") is None else f"[{t['ci_low']:+.3f}, {t['ci_high']:+.3f}]"
        vs = "best" if row.best else (row.untested and "not tested") or number(t.get("difference"), "+.3f")
        out.append(
            [
                row_name(row),
                number(row.average, ".3f"),
                vs,
                ci,
                p_text(t.get("p_value")),
                str(t.get("num_compared", DASH)),
            ]
        )
    return out


COST_HEADER = ["System", "requests", "from cache", "wall s", "requests/s", "prompt tokens", "answer tokens"]


def cost_rows(table: Table) -> list[list[str]]:
    """What each run's last invocation cost (run.json `cost`); runs that recorded none are left out."""

    def count(value: int | None) -> str:
        return DASH if value is None else f"{value:,}"

    out = []
    for row in table.rows:
        cost = row.run.info.cost
        if cost:
            out.append(
                [
                    row_name(row),
                    count(cost["requests"]),
                    count(cost.get("cache_hits")),
                    number(cost["wall_seconds"], ".1f"),
                    number(cost.get("requests_per_second"), ".2f"),
                    count(cost.get("prompt_tokens")),
                    count(cost.get("answer_tokens")),
                ]
            )
    return out


COLD_START_HEADER = ["System", "level", "method", "cold query items", "fallback users"]


def cold_start_rows(table: Table) -> list[list[str]]:
    """Per CF row and cell: cold query items and fallback users (run.json `cf.cells`)."""
    out = []
    for row in table.rows:
        for key, c in ((row.run.info.cf or {}).get("cells") or {}).items():
            level, method = key.split("/", 1)
            out.append(
                [
                    row_name(row),
                    level,
                    method,
                    f"{c['cold_query_items']} of {c['groups']}",
                    f"{c['fallback_users']} of {c['users']}",
                ]
            )
    return out


def published_rows(rows: Sequence[PublishedRow]) -> list[list[str]]:
    return [
        [row.label + (f" ({row.note})" if row.note else "")]
        + [number(row.cells[cell]) for cell in CELLS]
        + [number(row.average)]
        for row in rows
    ]


def _published(report: Report, number_: int) -> list[Block]:
    header = ["System", *column_names(CELLS), "Avg."]
    rows = published_rows(report.published.table(number_))
    return [Para((Em(report.published.caption(number_)),)), Grid(header, rows, "published")]


def _images(report: Report, key: str, kind: str) -> Images:
    return Images([plot for plot in report.plots.get(key, []) if plot.kind == kind])


def groups(n: int) -> str:
    """A count of groups, singular for one.

    >>> groups(1), groups(12)
    ('1 group', '12 groups')
    """
    return f"{n:,} group" + ("" if n == 1 else "s")


def domain_table(analyses: Mapping[str, Any]) -> Grid | None:
    """PTC per domain (paper Fig. 4), or None when no row has every domain."""
    dom = analyses["by_domain"]
    if not dom["rows"]:
        return None
    header = ["System"] + [f"{d} ({groups(dom['num_groups'][d])})" for d in dom["domains"]]
    return Grid(header, [[r["label"]] + [number(r["ptc"][d]) for d in dom["domains"]] for r in dom["rows"]])


def group_size_table(analyses: Mapping[str, Any]) -> Grid:
    """PTC per group size and method (paper Fig. 7)."""
    size = analyses["by_group_size"]
    header = ["System", "method"] + [
        f"{lv} ({n} users)" for lv, n in zip(size["levels"], size["sizes"], strict=True)
    ]
    rows = [
        [r["label"], m] + [number(r["ptc"][m][lv]) for lv in size["levels"]]
        for r in size["rows"]
        for m in size["methods"]
    ]
    return Grid(header, rows)


def method_table(analyses: Mapping[str, Any]) -> Grid:
    """PTC per ranking method, mean over levels."""
    meth = analyses["by_method"]
    rows = [[r["label"]] + [number(r["ptc"][m]) for m in meth["methods"]] for r in meth["rows"]]
    return Grid(["System", *meth["methods"]], rows)


def prompting_table(table: Table, block: Mapping[str, Any]) -> Grid:
    """One model's prompting variants side by side (paper Table 2)."""
    header = ["Prompting", *column_names(table.columns), "Avg."]
    rows = [
        [r["prompting"]] + [number(v) for v in r["cells"].values()] + [number(r["average"])]
        for r in block["rows"]
    ]
    return Grid(header, rows)


def versus_rows(records: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """The rows of "LLM runs against the baselines" (`perrec_eval.tasks.perrecbench.leaderboard.versus`)."""
    rows = []
    for r in records:
        ci = DASH if r.get("ci_low") is None else f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"
        rows.append(
            [
                r["model"],
                r["baseline"],
                f"{r['level']} {r['method']}",
                number(r["model_ptc"]),
                number(r["baseline_ptc"]),
                number(r["difference"], "+.3f"),
                ci,
                p_text(r["p_value"]),
                str(r["num_compared"]),
            ]
        )
    return rows


def _analysis_blocks(report: Report, table: Table, analyses: Mapping[str, Any]) -> list[Block]:
    key = f"t{table.number}"
    blocks: list[Block] = []
    by_domain = domain_table(analyses)
    if by_domain is not None:
        blocks += [
            Heading(3, "By domain (paper Fig. 4)"),
            Para(
                "Mean PTC over the table's cells, on each domain's groups "
                '(domain = the group id before ":"); complete rows only.'
            ),
            by_domain,
            _images(report, key, "by_domain"),
        ]
    blocks += [
        Heading(3, "By group size (paper Fig. 7)"),
        group_size_table(analyses),
        _images(report, key, "by_group_size"),
        Heading(3, "By method (mean over levels)"),
        method_table(analyses),
        _images(report, key, "by_method"),
    ]
    for block in analyses["prompting"]:
        blocks += [
            Heading(3, f"Prompting variants of {block['model']} (paper Table 2)"),
            prompting_table(table, block),
        ]
    blocks.append(_images(report, key, "prompting"))
    for grid in analyses["k_shots"]:
        blocks.append(
            Heading(3, f"k × shots for {grid['model']} (paper Fig. 6; levels: {', '.join(grid['levels'])})")
        )
        for name, values in grid["ptc"].items():
            header = [f"{name}: k \\ shots", *map(str, grid["shots"])]
            rows = [[str(k)] + [number(v) for v in line] for k, line in zip(grid["ks"], values, strict=True)]
            blocks.append(Grid(header, rows))
    blocks.append(_images(report, key, "k_shots"))
    if analyses["versus_baselines"]:
        blocks += [
            Heading(3, "LLM runs against the baselines"),
            Para(
                (
                    "Every LLM run against every no-LLM baseline (the floors and the collaborative-filtering "
                    "rows ",
                    Code("mf"),
                    ", ",
                    Code("item-knn"),
                    ") in each cell both scored: Δ = PTC(run) - PTC(baseline), the paired sign-flip test on "
                    "the groups both scored (not corrected for multiple comparisons).",
                )
            ),
            Grid(
                ["Run", "Baseline", "cell", "PTC run", "PTC baseline", "Δ", "95% CI of Δ", "p", "groups"],
                versus_rows(analyses["versus_baselines"]),
            ),
        ]
    errors = analyses["rating_errors"]
    if errors["points"]:
        r_mae, r_rmse = errors["ptc_vs_mae"], errors["ptc_vs_rmse"]
        rows = [
            [s["label"], number(s["mae"], ".3f"), number(s["rmse"], ".3f"), number(s["ptc"]), str(s["cells"])]
            for s in errors["systems"]
        ]
        blocks += [
            Heading(3, "PTC against rating error (paper Figs. 1 and 3)"),
            Para(
                f"Pearson r over {r_mae['n']} cells with predicted ratings: PTC vs MAE {number(r_mae['r'])}, "
                f"PTC vs RMSE {number(r_rmse['r'])}. The paper found these correlations weak (Fig. 3): a low "
                "rating error need not mean a model ranks users by preference."
            ),
            Grid(["System", "MAE", "RMSE", "PTC", "cells"], rows),
            _images(report, key, "rating_errors"),
        ]
    return blocks


def table_blocks(report: Report, table: Table) -> list[Block]:
    """One table's section: Table 1, the published rows beside paper-mode runs, the test of each average
    and each cell against the best, and the runs' profiles, cost and cold start."""
    differing = ", ".join(table.differing) if table.differing else "none (rows differ by model only)"
    blocks: list[Block] = [
        Heading(2, table_heading(table, len(table.rows)), f"table-{table.number}"),
        Para(f"Settings that differ between these runs: {differing}."),
        leaderboard_rows(table),
        _images(report, f"t{table.number}", "leaderboard"),
    ]
    if table.paper_variant:
        blocks += [
            Heading(3, "Published (paper-mode metric, the paper's build; reference only, never tested)"),
            *_published(report, 1),
        ]
    if len(table.rows) > 1:
        blocks += [Heading(3, "Average against the best"), Grid(AVERAGE_HEADER, average_rows(table))]
    blocks += [
        Heading(3, "Cells"),
        Grid(CELL_HEADER, cell_rows(table)),
    ]
    if suspect := profile_rows(table):
        blocks += [
            Heading(3, "Profiles (suspect ones: cut at the budget, mostly copied history, repetitive)"),
            Grid(PROFILE_HEADER, suspect),
        ]
    if costs := cost_rows(table):
        blocks += [Heading(3, "Cost (each run's last invocation)"), Grid(COST_HEADER, costs)]
    if cold := cold_start_rows(table):
        blocks += [
            Heading(3, "Cold start (classic recommenders)"),
            Para(COLD_START_NOTE),
            Grid(COLD_START_HEADER, cold),
        ]
    return blocks


def _files_note(report: Report) -> Para:
    runs, tables = sum(len(table.rows) for table in report.tables), len(report.tables)
    files = [piece for ext in ("json", "csv", "tex", "md") for piece in (", ", Code(f"leaderboard.{ext}"))]
    count = f"{runs} run{'s' if runs != 1 else ''} in {tables} table{'s' if tables != 1 else ''}"
    return Para((f"{count}; data: ", *files[1:], "."))


def document(report: Report) -> list[Block]:
    """The leaderboard: legend, each table with its details and analyses, statistics, published numbers."""
    blocks: list[Block] = [
        Heading(1, "PerRecBench leaderboard"),
        _files_note(report),
        Para(legend(report), "legend"),
    ]
    for table, analyses in zip(report.tables, report.analyses, strict=True):
        blocks += table_blocks(report, table) + _analysis_blocks(report, table, analyses)
    for n, stats in enumerate(report.stats, start=1):
        blocks.append(
            Heading(2, f"Benchmark statistics (paper Fig. 5): {stats['data']}, split {stats['split']}")
        )
        blocks.append(Para(stats["missing"]) if "missing" in stats else _images(report, f"stats{n}", "stats"))
    blocks += [
        Heading(2, "Published results (arXiv 2501.13391)"),
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
    for number_ in (1, 2, 3):
        blocks += _published(report, number_)
    return blocks


def run_document(report: Report) -> list[Block]:
    """A run folder's report.md: the leaderboard of its run(s), without analyses, plots or published
    tables (those are `perrecbench report`'s)."""
    blocks: list[Block] = [
        Heading(1, "PerRecBench results"),
        Para(
            (
                *legend(report),
                " Significance against other runs, the paper's analyses and plots: ",
                Code("perrecbench report"),
                ".",
            )
        ),
    ]
    for table in report.tables:
        blocks += table_blocks(report, table)
    return blocks


CSV_FIELDS = (
    "table source row model run_dir provisional settings level method ptc ci_low ci_high num_groups "
    "num_invalid best diff_vs_best p_vs_best diff_ci_low diff_ci_high num_compared parse_failure_rate "
    "engine_error_rate num_engine_errors tied_with_best min_detectable_difference constant_floor "
    "position_bias order_consistency first_shown_first first_shown_truly_first truncated_rate "
    "prompt_tokens_mean completion_tokens_mean mae rmse"
).split()
# CSV column <- key of a cell's scores / diagnostics / test against the best
_CSV_SCORES = {"ci_low": "ptc_ci_low", "ci_high": "ptc_ci_high"} | {
    name: name
    for name in "ptc num_groups num_invalid parse_failure_rate engine_error_rate num_engine_errors "
    "first_shown_first first_shown_truly_first mae rmse".split()
}
_CSV_DIAGNOSTICS = "position_bias order_consistency truncated_rate prompt_tokens_mean completion_tokens_mean"
_CSV_TEST = {
    "diff_vs_best": "difference",
    "p_vs_best": "p_value",
    "diff_ci_low": "ci_low",
    "diff_ci_high": "ci_high",
    "num_compared": "num_compared",
}


def csv_text(report: Report) -> str:
    """leaderboard.csv: one line per (table, row, cell), plus an ``average`` line per row; then the
    published rows (source ``published``)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for table in report.tables:
        for row in table.rows:
            base = {
                "table": table.number,
                "source": "run",
                "row": row.label,
                "model": row.run.model,
                "run_dir": str(row.run.path),
                "provisional": row.provisional,
                "settings": "; ".join(f"{k}={v}" for k, v in row.run.settings.items() if v is not None),
            }
            for cell in table.columns:
                entry = row.entries.get(cell)
                if entry is not None:
                    extra = {
                        "min_detectable_difference": table.resolution.get(cell),
                        "constant_floor": table.floors.get(cell),
                    }
                    writer.writerow({**base, **_csv_entry(entry), **extra})
            average = {"level": "all", "method": "average", "ptc": row.average, "best": row.best}
            extra = {"tied_with_best": row.tied, "min_detectable_difference": table.average_resolution}
            writer.writerow({**base, **average, **extra, **_csv_test(row.vs_best)})
    for row in report.published.rows:
        base = {
            "table": f"published-{row.table}",
            "source": "published",
            "row": row.label,
            "model": row.model,
            "settings": "metric=paper; failed=skip",
        }
        for (level, method), value in row.cells.items():
            writer.writerow({**base, "level": level, "method": method, "ptc": value})
        writer.writerow({**base, "level": "all", "method": "average", "ptc": row.average})
    return buffer.getvalue()


def _csv_entry(entry: Entry) -> dict[str, Any]:
    s, d = entry.scores, entry.diagnostics or {}
    return {
        "level": entry.level,
        "method": entry.method,
        "best": entry.best,
        "tied_with_best": entry.tied,
        **{name: s.get(key) for name, key in _CSV_SCORES.items()},
        **{name: d.get(name) for name in _CSV_DIAGNOSTICS.split()},
        **_csv_test(entry.vs_best),
    }


def _csv_test(test: Mapping[str, Any] | None) -> dict[str, Any]:
    return {name: (test or {}).get(key) for name, key in _CSV_TEST.items()}


def _latex_value(
    value: float | None,
    rank: int | None,
    *,
    star: bool = False,
    tied: bool = False,
    ci: tuple | None = None,
) -> str:
    if value is None:
        return "--"
    text = f"{value:.2f}"
    text = rf"\textbf{{{text}}}" if rank == 1 else rf"\underline{{{text}}}" if rank == 2 else text
    if star:
        text += "$^{*}$"
    if tied:
        text += r"$^{\approx}$"
    if ci is not None and ci[0] is not None:
        text += rf"\,{{\scriptsize[{ci[0]:.2f}, {ci[1]:.2f}]}}"
    return text


def _ranks(values: Sequence[float | None]) -> list[int | None]:
    """1 for the best value, 2 for the second best (the paper's bold and underline), else None."""
    distinct = sorted({v for v in values if v is not None}, reverse=True)
    return [None if v is None else (distinct.index(v) + 1 if distinct.index(v) < 2 else None) for v in values]


def _latex_header(columns: Sequence[tuple[str, str]]) -> list[str]:
    levels = [lv for lv in dict.fromkeys(level for level, _ in columns)]
    spans = [(lv, sum(1 for c in columns if c[0] == lv)) for lv in levels]
    first = ["System", "Groups"] + [rf"\multicolumn{{{n}}}{{c}}{{{lv}}}" for lv, n in spans] + ["Avg."]
    rules, start = [], 3
    for _, n in spans:
        rules.append(rf"\cmidrule(lr){{{start}-{start + n - 1}}}")
        start += n
    second = ["", ""] + [method for _, method in columns] + [""]
    return [" & ".join(first) + r" \\", "".join(rules), " & ".join(second) + r" \\"]


def latex(report: Report) -> str:
    """leaderboard.tex: each table in the paper's Table 1 layout (booktabs), best bold, second underlined."""
    blocks = [
        "% perrecbench report: needs \\usepackage{booktabs}. PTC (Kendall tau, -1 to 1), 95% bootstrap "
        "intervals in brackets."
    ]
    for table in report.tables:
        spec = "lr" + "c" * len(table.columns) + "r"
        lines = [
            r"\begin{table*}[t]",
            r"\centering",
            r"\scriptsize",
            rf"\begin{{tabular}}{{{spec}}}",
            r"\toprule",
        ]
        lines += _latex_header(table.columns)
        lines.append(r"\midrule")
        # A mostly failed cell (or a row with one, for the average) is never ranked best or second.
        ranks = {
            cell: _ranks(
                [
                    None
                    if row.entries.get(cell) is None or mostly_failed(row.entries[cell].scores)
                    else _entry_ptc(row, cell)
                    for row in table.rows
                ]
            )
            for cell in table.columns
        }
        average_ranks = _ranks([None if row.failed_cells else row.average for row in table.rows])
        for i, row in enumerate(table.rows):
            values = []
            for cell in table.columns:
                entry = row.entries.get(cell)
                ci = (entry.scores.get("ptc_ci_low"), entry.scores.get("ptc_ci_high")) if entry else None
                star = entry is not None and entry.significant
                tied = entry is not None and entry.tied
                value = _latex_value(_entry_ptc(row, cell), ranks[cell][i], star=star, tied=tied, ci=ci)
                values.append(value + latex_escape(failure_note(entry.scores if entry else None)))
            values.append(_latex_value(row.average, average_ranks[i], star=row.significant, tied=row.tied))
            name = latex_escape(row.label) + (r"$^{\dagger}$" if row.provisional else "")
            lines.append(" & ".join([name, str(len(row.run.group_ids)), *values]) + r" \\")
        lines.append(r"\midrule")
        floors = any(value is not None for value in table.floors.values())
        references = [("floor: constant rating", table.floors, None)] if floors else []
        references.append((r"min. detectable $\Delta$", table.resolution, table.average_resolution))
        for title, values_by_cell, average in references:
            values = [_latex_value(values_by_cell.get(cell), None) for cell in table.columns]
            row_text = [title, str(table.num_groups), *values, _latex_value(average, None)]
            lines.append(" & ".join(row_text) + r" \\")
        if table.paper_variant and list(table.columns) == list(CELLS):
            lines += [
                r"\midrule",
                rf"\multicolumn{{{len(CELLS) + 3}}}{{l}}{{\textit{{"
                + latex_escape(report.published.caption(1))
                + r"}} \\",
            ]
            for row in report.published.table(1):
                values = [_latex_value(row.cells[cell], None) for cell in CELLS]
                lines.append(
                    " & ".join([latex_escape(row.model), "200", *values, _latex_value(row.average, None)])
                    + r" \\"
                )
        lines += [r"\bottomrule", r"\end{tabular}"]
        caption = (
            f"PerRecBench results, split {table.split}, {table.num_groups} groups, build "
            f"{(table.fingerprint or 'unknown')[:12]}. PTC (Kendall tau, $-1$ to 1; higher is better) with "
            "95\\% bootstrap intervals; best in bold, second best underlined; $^{*}$ below the best of the "
            "column at "
            f"$p<{ALPHA}$, $^{{\\approx}}$ not found different from it (paired sign-flip permutation test); "
            "$^{\\dagger}$ provisional (engine errors). Floor: the pointwise PTC of answering one rating "
            "for every user; min. detectable $\\Delta$: the smallest difference a paired test finds with "
            "power 0.8 on these groups."
        )
        lines += [rf"\caption{{{caption}}}", rf"\label{{tab:perrecbench-{table.number}}}", r"\end{table*}"]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def _entry_ptc(row: Row, cell: tuple[str, str]) -> float | None:
    entry = row.entries.get(cell)
    return None if entry is None else entry.ptc


def json_data(report: Report) -> dict[str, Any]:
    """leaderboard.json: every table (rows, cells, tests, diagnostics), its analyses, statistics, plots and
    the published tables."""
    return {
        "alpha": ALPHA,
        "n_resamples": report.n_resamples,
        "tables": [
            {
                **table.to_json(),
                "analyses": analyses,
                "plots": [p.to_json() for p in report.plots.get(f"t{table.number}", [])],
            }
            for table, analyses in zip(report.tables, report.analyses, strict=True)
        ],
        "benchmark_stats": report.stats,
        "published": {
            "source": dict(report.published.source),
            "tables": {
                str(n): {
                    "title": report.published.titles[n],
                    "rows": [r.to_json() for r in report.published.table(n)],
                }
                for n in sorted(report.published.titles)
            },
        },
    }
