"""A report as text: leaderboard.md, leaderboard.csv, leaderboard.tex and leaderboard.json.

Every format is drawn from the same `assemble.Report`; the HTML page (`html.py`) too.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from perrec_eval.leaderboard.board import ALPHA, CELLS, Entry, Row, Table
from perrec_eval.leaderboard.published import PublishedRow
from perrec_eval.report import (
    CLUSTERED_NOTE,
    COLD_START_NOTE,
    MOSTLY_FAILED_NOTE,
    cold_start,
    failure_note,
    mostly_failed,
    provisional_note,
)

if TYPE_CHECKING:
    from perrec_eval.leaderboard.assemble import Report

SHORT = {"pointwise": "point", "pairwise": "pair", "listwise": "list"}
DASH = "–"
TextTable = tuple[list[str], list[list[str]]]  # (header, rows), rendered as markdown or HTML


def number(value: float | None, spec: str = ".2f") -> str:
    """`value` formatted, or a dash for a missing one.

    >>> number(0.1234), number(None), number(0.5, ".0%")
    ('0.12', '–', '50%')
    """
    return DASH if value is None else format(value, spec)


def p_text(p: float | None) -> str:
    """A p-value for reading.

    >>> p_text(0.00001), p_text(0.0312), p_text(None)
    ('<0.001', '0.031', '–')
    """
    if p is None:
        return DASH
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def row_name(row: Row) -> str:
    return row.label + (" (provisional)" if row.provisional else "")


def legend(report: Report) -> str:
    """What the numbers of the leaderboard are, in a few sentences."""
    metrics = sorted({row.run.variant for table in report.tables for row in table.rows})
    names = {
        "tau_b": "Kendall tau-b between predicted and true per-user scores",
        "paper": "the paper's tau between best-first index lists (paper mode)",
    }
    resamples = sorted({row.run.scores.n_resamples for table in report.tables for row in table.rows})
    text = (
        f"PTC = {'; '.join(names.get(m, m) for m in metrics)}, mean over groups (-1 to 1, higher is better); "
        "brackets: each run's 95% interval over groups (percentile bootstrap, "
        f"{' / '.join(f'{n:,}' for n in resamples)} resamples). **Bold**: best in the column; "
        f"`*`: below that best at p < {ALPHA}; `≈`: tested against that best and not found different "
        "(p ≥ 0.05): the two are not ordered by this benchmark (paired sign-flip permutation test on the "
        "groups both runs share; per cell the metric's `paired_test`, for Avg. the same test on each group's "
        'mean over the cells; not corrected for multiple comparisons). Row "min. detectable Δ": the '
        "smallest true difference such a test finds with power 0.8 on the table's groups (normal "
        'approximation with the null tau variance, `ptc.expected_resolution`). Row "floor": the '
        "pointwise PTC of answering the same rating for every user on these groups, which pointwise scoring "
        "(rating minus the user's average) turns into a ranking by minus the users' averages, so it is not "
        "0; fixed answers score exactly 0 in all-pairs pairwise and balanced listwise. Avg. is over all the "
        "table's cells and only for rows that have them all. Runs are compared only on the same dataset "
        "fingerprint, split and group set."
    )
    runs = [row.run for table in report.tables for row in table.rows]
    if note := provisional_note([{**run.scores.to_json(), "complete": run.complete} for run in runs]):
        text += " " + note
    if any(table.clustered for table in report.tables):
        text += " " + CLUSTERED_NOTE
    if any(row.failed_cells for table in report.tables for row in table.rows):
        text += " " + MOSTLY_FAILED_NOTE
    return text


def entry_text(entry: Entry | None, *, ci: bool = True, marks: bool = True) -> str:
    """One cell of the leaderboard: PTC, interval, best / significance marks."""
    if entry is None or entry.ptc is None:
        return DASH
    text = f"{entry.ptc:.2f}"
    if marks and entry.best:
        text = f"**{text}**"
    if marks and entry.significant:
        text += "*"
    if marks and entry.tied:
        text += " ≈"
    if ci and entry.scores.get("ptc_ci_low") is not None:
        text += f" [{entry.scores['ptc_ci_low']:.2f}, {entry.scores['ptc_ci_high']:.2f}]"
    return text + failure_note(entry.scores)


def average_text(row: Row, table: Table, *, marks: bool = True) -> str:
    if row.average is None:
        have = len(table.columns) - len(row.missing)
        return f"{DASH} ({have} of {len(table.columns)} cells)"
    text = f"{row.average:.2f}"
    if marks and row.best:
        text = f"**{text}**"
    if marks and row.significant:
        text += "*"
    if marks and row.tied:
        text += " ≈"
    if row.failed_cells:
        text += f" ({len(row.failed_cells)} of {len(row.entries)} cells mostly failed)"
    return text


def column_names(columns: Sequence[tuple[str, str]]) -> list[str]:
    return [f"{level} {SHORT.get(method, method)}" for level, method in columns]


def table_heading(table: Table, count: int) -> str:
    fingerprint = (table.fingerprint or "unknown")[:12]
    return (
        f"Table {table.number}: split {table.split}, {table.num_groups} groups, build {fingerprint} "
        f"({count} run{'s' if count != 1 else ''})"
    )


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def leaderboard_rows(table: Table) -> TextTable:
    """The Table-1 layout: one row per run, a column per cell, groups and Avg.; under the runs, the
    pointwise floor and the table's resolution."""
    header = ["System", "Groups", *column_names(table.columns), "Avg."]
    rows = [
        [row_name(row), str(len(row.run.group_ids))]
        + [entry_text(row.entries.get(cell)) for cell in table.columns]
        + [average_text(row, table)]
        for row in table.rows
    ]
    if any(value is not None for value in table.floors.values()):
        rows.append(
            ["floor: constant rating", str(table.num_groups)]
            + [number(table.floors.get(cell)) for cell in table.columns]
            + [DASH]
        )
    rows.append(
        ["min. detectable Δ", str(table.num_groups)]
        + [number(table.resolution.get(cell)) for cell in table.columns]
        + [number(table.average_resolution)]
    )
    return header, rows


def leaderboard_markdown(table: Table) -> str:
    """The leaderboard of `table` as markdown (`leaderboard_rows`)."""
    return markdown_table(*leaderboard_rows(table))


CELL_HEADER = [
    "System",
    "cell",
    "PTC",
    "95% CI",
    "Δ vs best",
    "p vs best",
    "groups",
    "invalid",
    "parse failures",
    "engine errors",
    "min. detectable Δ",
    "floor",
    "[User A] share",
    "both orders agree",
    "list: first shown ranked first",
    "list: first shown truly first",
    "cut at limit",
    "prompt tokens",
    "answer tokens",
    "MAE",
    "RMSE",
]


def cell_rows(table: Table) -> list[list[str]]:
    """Per row and cell: everything behind the number (test against the best, failures, diagnostics)."""
    out = []
    for row in table.rows:
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
                    number(s.get("engine_error_rate"), ".1%"),
                    number(table.resolution.get(cell), ".3f"),
                    number(table.floors.get(cell), ".3f"),
                    number(d.get("position_bias"), ".0%"),
                    number(d.get("order_consistency"), ".0%"),
                    number(s.get("first_shown_first"), ".0%"),
                    number(s.get("first_shown_truly_first"), ".0%"),
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


def cold_start_markdown(table: Table) -> str:
    """The CF rows' per-cell cold-start counts (run.json `cf.cells`); "" when the table has none."""
    return cold_start({row_name(row): row.run.info.cf["cells"] for row in table.rows if _cf_cells(row)})


def _cf_cells(row: Row) -> bool:
    return bool((row.run.info.cf or {}).get("cells"))


def published_rows(rows: Sequence[PublishedRow]) -> list[list[str]]:
    return [
        [row.label + (f" ({row.note})" if row.note else "")]
        + [number(row.cells[cell]) for cell in CELLS]
        + [number(row.average)]
        for row in rows
    ]


def published_markdown(report: Report, number_: int) -> str:
    header = ["System", *column_names(CELLS), "Avg."]
    return f"*{report.published.caption(number_)}*\n\n" + markdown_table(
        header, published_rows(report.published.table(number_))
    )


def _images(report: Report, key: str, kind: str) -> str:
    return "\n".join(
        f"![{plot.title}]({plot.path})" for plot in report.plots.get(key, []) if plot.kind == kind
    )


def domain_table(analyses: Mapping[str, Any]) -> TextTable | None:
    """PTC per domain (paper Fig. 4), or None when no row has every domain."""
    dom = analyses["by_domain"]
    if not dom["rows"]:
        return None
    header = ["System"] + [f"{d} ({dom['num_groups'][d]} groups)" for d in dom["domains"]]
    return header, [[r["label"]] + [number(r["ptc"][d]) for d in dom["domains"]] for r in dom["rows"]]


def group_size_table(analyses: Mapping[str, Any]) -> TextTable:
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
    return header, rows


def method_table(analyses: Mapping[str, Any]) -> TextTable:
    """PTC per ranking method, mean over levels."""
    meth = analyses["by_method"]
    return ["System", *meth["methods"]], [
        [r["label"]] + [number(r["ptc"][m]) for m in meth["methods"]] for r in meth["rows"]
    ]


def prompting_table(table: Table, block: Mapping[str, Any]) -> TextTable:
    """One model's prompting variants side by side (paper Table 2)."""
    header = ["Prompting", *column_names(table.columns), "Avg."]
    rows = [
        [r["prompting"]] + [number(v) for v in r["cells"].values()] + [number(r["average"])]
        for r in block["rows"]
    ]
    return header, rows


def versus_rows(records: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """The rows of "LLM runs against the baselines" (`perrec_eval.leaderboard.versus`)."""
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


def _analysis_markdown(report: Report, table: Table, analyses: Mapping[str, Any]) -> list[str]:
    key = f"t{table.number}"
    parts = []
    by_domain = domain_table(analyses)
    if by_domain is not None:
        parts += [
            "### By domain (paper Fig. 4)",
            "Mean PTC over the table's cells, on each domain's groups "
            '(domain = the group id before ":"); complete rows only.',
            markdown_table(*by_domain),
            _images(report, key, "by_domain"),
        ]
    parts += [
        "### By group size (paper Fig. 7)",
        markdown_table(*group_size_table(analyses)),
        _images(report, key, "by_group_size"),
    ]
    parts += [
        "### By method (mean over levels)",
        markdown_table(*method_table(analyses)),
        _images(report, key, "by_method"),
    ]
    for block in analyses["prompting"]:
        parts += [
            f"### Prompting variants of {block['model']} (paper Table 2)",
            markdown_table(*prompting_table(table, block)),
        ]
    if analyses["prompting"]:
        parts.append(_images(report, key, "prompting"))
    for grid in analyses["k_shots"]:
        parts.append(f"### k × shots for {grid['model']} (paper Fig. 6; levels: {', '.join(grid['levels'])})")
        for name, values in grid["ptc"].items():
            header = [f"{name}: k \\ shots", *map(str, grid["shots"])]
            rows = [[str(k)] + [number(v) for v in line] for k, line in zip(grid["ks"], values, strict=True)]
            parts.append(markdown_table(header, rows))
    if analyses["k_shots"]:
        parts.append(_images(report, key, "k_shots"))
    if analyses["versus_baselines"]:
        parts += [
            "### LLM runs against the baselines",
            "Every LLM run against every no-LLM baseline (the floors and the collaborative-filtering rows "
            "`mf`, `item-knn`) in each cell both scored: Δ = PTC(run) - PTC(baseline), the paired sign-flip "
            "test on the groups both scored (not corrected for multiple comparisons).",
            markdown_table(
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
        parts += [
            "### PTC against rating error (paper Figs. 1 and 3)",
            f"Pearson r over {r_mae['n']} cells with predicted ratings: PTC vs MAE {number(r_mae['r'])}, "
            f"PTC vs RMSE {number(r_rmse['r'])}. The paper found these correlations weak (Fig. 3): a low "
            "rating error need not mean a model ranks users by preference.",
            markdown_table(["System", "MAE", "RMSE", "PTC", "cells"], rows),
            _images(report, key, "rating_errors"),
        ]
    return parts


def markdown(report: Report) -> str:
    """leaderboard.md: legend, each table with its details and analyses, statistics, published numbers."""
    parts = ["# PerRecBench leaderboard", legend(report)]
    for table, analyses in zip(report.tables, report.analyses, strict=True):
        parts.append(f"## {table_heading(table, len(table.rows))}")
        differing = ", ".join(table.differing) if table.differing else "none (rows differ by model only)"
        parts.append(f"Settings that differ between these runs: {differing}.")
        parts += [leaderboard_markdown(table), _images(report, f"t{table.number}", "leaderboard")]
        if table.paper_variant:
            parts += [
                "### Published (paper-mode metric, the paper's build; reference only, never tested)",
                published_markdown(report, 1),
            ]
        parts += [
            "### Average against the best",
            markdown_table(
                ["System", "Avg.", "Δ vs best", "95% CI of Δ", "p", "groups compared"], average_rows(table)
            ),
            "### Cells",
            markdown_table(CELL_HEADER, cell_rows(table)),
        ]
        suspect = profile_rows(table)
        if suspect:
            parts += [
                "### Profiles (suspect ones: cut at the budget, mostly copied history, repetitive)",
                markdown_table(PROFILE_HEADER, suspect),
            ]
        if costs := cost_rows(table):
            parts += ["### Cost (each run's last invocation)", markdown_table(COST_HEADER, costs)]
        if cold := cold_start_markdown(table):
            parts += ["### Cold start (classic recommenders)", COLD_START_NOTE, cold]
        parts += _analysis_markdown(report, table, analyses)
    for n, stats in enumerate(report.stats, start=1):
        parts.append(f"## Benchmark statistics (paper Fig. 5): {stats['data']}, split {stats['split']}")
        parts.append(stats.get("missing") or _images(report, f"stats{n}", "stats"))
    parts.append("## Published results (arXiv 2501.13391)")
    parts.append(
        "Facts from the paper, scored with its metric (paper mode) on its own build of the benchmark: "
        "reference values, comparable only in spirit with runs scored with `--paper-mode` (variant paper)."
    )
    for number_ in (1, 2, 3):
        parts.append(published_markdown(report, number_))
    return "\n\n".join(part for part in parts if part) + "\n"


CSV_FIELDS = [
    "table",
    "source",
    "row",
    "model",
    "run_dir",
    "provisional",
    "settings",
    "level",
    "method",
    "ptc",
    "ci_low",
    "ci_high",
    "num_groups",
    "num_invalid",
    "best",
    "diff_vs_best",
    "p_vs_best",
    "diff_ci_low",
    "diff_ci_high",
    "num_compared",
    "parse_failure_rate",
    "engine_error_rate",
    "num_engine_errors",
    "tied_with_best",
    "min_detectable_difference",
    "constant_floor",
    "position_bias",
    "order_consistency",
    "first_shown_first",
    "first_shown_truly_first",
    "truncated_rate",
    "prompt_tokens_mean",
    "completion_tokens_mean",
    "mae",
    "rmse",
]


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
            test = row.vs_best or {}
            writer.writerow(
                {
                    **base,
                    "level": "all",
                    "method": "average",
                    "ptc": row.average,
                    "best": row.best,
                    "tied_with_best": row.tied,
                    "min_detectable_difference": table.average_resolution,
                    "diff_vs_best": test.get("difference"),
                    "p_vs_best": test.get("p_value"),
                    "diff_ci_low": test.get("ci_low"),
                    "diff_ci_high": test.get("ci_high"),
                    "num_compared": test.get("num_compared"),
                }
            )
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
    s, d, t = entry.scores, entry.diagnostics or {}, entry.vs_best or {}
    return {
        "level": entry.level,
        "method": entry.method,
        "ptc": s.get("ptc"),
        "ci_low": s.get("ptc_ci_low"),
        "ci_high": s.get("ptc_ci_high"),
        "num_groups": s.get("num_groups"),
        "num_invalid": s.get("num_invalid"),
        "best": entry.best,
        "tied_with_best": entry.tied,
        "diff_vs_best": t.get("difference"),
        "p_vs_best": t.get("p_value"),
        "diff_ci_low": t.get("ci_low"),
        "diff_ci_high": t.get("ci_high"),
        "num_compared": t.get("num_compared"),
        "parse_failure_rate": s.get("parse_failure_rate"),
        "engine_error_rate": s.get("engine_error_rate"),
        "num_engine_errors": s.get("num_engine_errors"),
        "position_bias": d.get("position_bias"),
        "order_consistency": d.get("order_consistency"),
        "first_shown_first": s.get("first_shown_first"),
        "first_shown_truly_first": s.get("first_shown_truly_first"),
        "truncated_rate": d.get("truncated_rate"),
        "prompt_tokens_mean": d.get("prompt_tokens_mean"),
        "completion_tokens_mean": d.get("completion_tokens_mean"),
        "mae": s.get("mae"),
        "rmse": s.get("rmse"),
    }


_LATEX_SPECIAL = {
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "\\": r"\textbackslash{}",
}


def latex_escape(text: str) -> str:
    r"""Text safe inside a LaTeX table.

    >>> latex_escape("k=4, 50% of a_b")
    'k=4, 50\\% of a\\_b'
    """
    return "".join(_LATEX_SPECIAL.get(char, char) for char in text)


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
