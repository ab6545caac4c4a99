"""PerRecBench's own tables of a report section: what only it records of a run and cell (diagnostics, the
test of each cell and of the average against the best, profiles, cost, cold start), the paper's analyses
and its published tables.

Each table is JSON-ready (`grid`: a heading, a note, a header and rows of text), kept in the section's
``extras`` so that leaderboard.json, leaderboard.md and index.html show the same values
(`perrec_eval.leaderboard.family`); the main table is the shared one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from perrec_eval.leaderboard.document import DASH, number
from perrec_eval.tasks.perrecbench.leaderboard.board import Row, Table
from perrec_eval.tasks.perrecbench.leaderboard.published import CELLS, Published, PublishedRow

SHORT = {"pointwise": "point", "pairwise": "pair", "listwise": "list"}
MAX_DIFFERENCE = 2.0  # two PTCs lie in [-1, 1]


def grid(
    heading: str, header: Sequence[str], rows: Sequence[Sequence[str]], *, note: str = "", images: str = ""
) -> dict[str, Any]:
    """A table as a section keeps it: `images` names the kind of plots shown under it."""
    return {"heading": heading, "note": note, "header": list(header), "rows": [list(r) for r in rows]} | (
        {"images": images} if images else {}
    )


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


def groups(n: int) -> str:
    """A count of groups, singular for one.

    >>> groups(1), groups(12)
    ('1 group', '12 groups')
    """
    return f"{n:,} group" + ("" if n == 1 else "s")


def column_names(columns: Sequence[tuple[str, str]]) -> list[str]:
    return [f"{level} {SHORT.get(method, method)}" for level, method in columns]


def row_name(row: Row) -> str:
    return row.label + (" (provisional)" if row.provisional else "")


def _below_best(test: Mapping[str, Any] | None) -> str:
    """Δ vs best as a run minus the best (the shared test records the best minus the run)."""
    return DASH if not test or test.get("difference") is None else number(-test["difference"], "+.3f")


CELL_HEADER = (
    "System|cell|PTC|95% CI|Δ vs best|p vs best|groups|invalid|parse failures|engine errors|"
    "min. detectable Δ|floor|[User A] share|both orders agree|list: first shown ranked first|"
    "list: first shown truly first|cut at limit|prompt tokens|answer tokens|MAE|RMSE"
).split("|")


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
            vs = "best" if entry.best else (entry.untested and "not tested") or _below_best(t)
            requests = scored[cell].num_requests
            errors = number(scored[cell].engine_error_rate, ".1%")
            if requests:
                errors += f" ({scored[cell].num_engine_errors} of {requests})"
            out.append([
                row_name(row), f"{cell[0]} {cell[1]}", number(entry.ptc, ".3f"), ci, vs,
                p_text(t.get("p_value")), str(s.get("num_groups", DASH)), str(s.get("num_invalid", DASH)),
                number(s.get("parse_failure_rate"), ".1%"), errors,
                resolution_text(table.resolution.get(cell), ".3f"), number(table.floors.get(cell), ".3f"),
                number(d.get("position_bias"), ".0%"), number(d.get("order_consistency"), ".0%"),
                number(s.get("first_shown_first"), ".1%"), number(s.get("first_shown_truly_first"), ".1%"),
                number(d.get("truncated_rate"), ".1%"), number(d.get("prompt_tokens_mean"), ".0f"),
                number(d.get("completion_tokens_mean"), ".1f"), number(s.get("mae"), ".3f"),
                number(s.get("rmse"), ".3f"),
            ])  # fmt: skip
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
        ci = DASH if t.get("ci_low") is None else f"[{-t['ci_high']:+.3f}, {-t['ci_low']:+.3f}]"
        vs = "best" if row.best else (row.untested and "not tested") or _below_best(t)
        out.append([
            row_name(row), number(row.average, ".3f"), vs, ci, p_text(t.get("p_value")),
            str(t.get("num_compared", DASH)),
        ])  # fmt: skip
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
        out.append([
            row_name(row), profiles.get("source", DASH), str(profiles.get("max_tokens", DASH)),
            str(quality.get("flagged", 0)), str(quality.get("cut", 0)), str(quality.get("copied", 0)),
            str(quality.get("repetitive", 0)),
            "failed" if profiles.get("degenerate_policy") == "fail" else "used",
        ])  # fmt: skip
    return out


COLD_START_HEADER = ["System", "level", "method", "cold query items", "fallback users"]
COLD_START_NOTE = (
    "Cold start of the classic recommenders (run.json `cf.cells`): groups whose query item had no rating "
    "before the window (all their users tie), and users the model could not score; both get the user's "
    "average (relative prediction 0)."
)


def cold_start_rows(table: Table) -> list[list[str]]:
    """Per CF row and cell: cold query items and fallback users (run.json `cf.cells`)."""
    out = []
    for row in table.rows:
        for key, c in ((row.run.info.cf or {}).get("cells") or {}).items():
            level, method = key.split("/", 1)
            out.append([
                row_name(row), level, method, f"{c['cold_query_items']} of {c['groups']}",
                f"{c['fallback_users']} of {c['users']}",
            ])  # fmt: skip
    return out


def published_rows(rows: Sequence[PublishedRow]) -> list[list[str]]:
    return [
        [row.label + (f" ({row.note})" if row.note else "")]
        + [number(row.cells[cell]) for cell in CELLS]
        + [number(row.average)]
        for row in rows
    ]


def published_grid(published: Published, table: int, heading: str = "") -> dict[str, Any]:
    header = ["System", *column_names(CELLS), "Avg."]
    return grid(heading, header, published_rows(published.table(table)), note=published.caption(table))


def versus_rows(records: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """The rows of "LLM runs against the baselines" (`perrec_eval.tasks.perrecbench.leaderboard.versus`)."""
    rows = []
    for r in records:
        ci = DASH if r.get("ci_low") is None else f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"
        rows.append([
            r["model"], r["baseline"], f"{r['level']} {r['method']}", number(r["model_ptc"]),
            number(r["baseline_ptc"]), number(r["difference"], "+.3f"), ci, p_text(r["p_value"]),
            str(r["num_compared"]),
        ])  # fmt: skip
    return rows


def run_tables(table: Table) -> list[dict[str, Any]]:
    """The tables behind the main one: the paper-mode published rows beside paper-mode runs, the test of
    each average and cell against the best, and the runs' profiles and cold start."""
    out = []
    if table.paper_variant:
        from perrec_eval.tasks.perrecbench.leaderboard.published import load

        heading = "Published (paper-mode metric, the paper's build; reference only, never tested)"
        out.append(published_grid(load(), 1, heading))
    if len(table.rows) > 1 and any(row.average is not None for row in table.rows):
        out.append(grid("Average against the best", AVERAGE_HEADER, average_rows(table)))
    out.append(grid("Cells", CELL_HEADER, cell_rows(table)))
    if suspect := profile_rows(table):
        heading = "Profiles (suspect ones: cut at the budget, mostly copied history, repetitive)"
        out.append(grid(heading, PROFILE_HEADER, suspect))
    if cold := cold_start_rows(table):
        out.append(grid("Cold start (classic recommenders)", COLD_START_HEADER, cold, note=COLD_START_NOTE))
    return out


def analysis_tables(table: Table, analyses: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The paper's analyses of the section: by domain, group size and method, prompting variants,
    k × shots, the LLM runs against the baselines, PTC against rating error."""
    out = []
    dom = analyses["by_domain"]
    if dom["rows"]:
        header = ["System"] + [f"{d} ({groups(dom['num_groups'][d])})" for d in dom["domains"]]
        rows = [[r["label"]] + [number(r["ptc"][d]) for d in dom["domains"]] for r in dom["rows"]]
        note = (
            "Mean PTC over the table's cells, on each domain's groups (domain = the group id before \":\"); "
            "complete rows only; the picture's error bars: 95% bootstrap intervals over the domain's groups."
        )
        out.append(grid("By domain (paper Fig. 4)", header, rows, note=note, images="by_domain"))
    size = analyses["by_group_size"]
    header = ["System", "method"] + [
        f"{lv} ({n} users)" for lv, n in zip(size["levels"], size["sizes"], strict=True)
    ]
    rows = [
        [r["label"], m] + [number(r["ptc"][m][lv]) for lv in size["levels"]]
        for r in size["rows"]
        for m in size["methods"]
    ]
    out.append(grid("By group size (paper Fig. 7)", header, rows, images="by_group_size"))
    meth = analyses["by_method"]
    rows = [[r["label"]] + [number(r["ptc"][m]) for m in meth["methods"]] for r in meth["rows"]]
    out.append(grid("By method (mean over levels)", ["System", *meth["methods"]], rows, images="by_method"))
    for block in analyses["prompting"]:
        header = ["Prompting", *column_names(table.columns), "Avg."]
        rows = [
            [r["prompting"]] + [number(v) for v in r["cells"].values()] + [number(r["average"])]
            for r in block["rows"]
        ]
        out.append(grid(f"Prompting variants of {block['model']} (paper Table 2)", header, rows))
    if analyses["prompting"]:
        out[-1]["images"] = "prompting"
    for number_, k_grid in enumerate(analyses["k_shots"]):
        heading = f"k × shots for {k_grid['model']} (paper Fig. 6; levels: {', '.join(k_grid['levels'])})"
        for name, values in k_grid["ptc"].items():
            header = [f"{name}: k \\ shots", *map(str, k_grid["shots"])]
            rows = [
                [str(k)] + [number(v) for v in line] for k, line in zip(k_grid["ks"], values, strict=True)
            ]
            out.append(grid(heading, header, rows))
            heading = ""
        if number_ == len(analyses["k_shots"]) - 1:
            out[-1]["images"] = "k_shots"
    if analyses["versus_baselines"]:
        note = (
            "Every LLM run against every no-LLM baseline (the floors and the collaborative-filtering rows "
            "`mf`, `item-knn`) in each cell both scored: Δ = PTC(run) - PTC(baseline), the paired sign-flip "
            "test on the groups both scored (not corrected for multiple comparisons)."
        )
        header = ["Run", "Baseline", "cell", "PTC run", "PTC baseline", "Δ", "95% CI of Δ", "p", "groups"]
        out.append(
            grid(
                "LLM runs against the baselines", header, versus_rows(analyses["versus_baselines"]), note=note
            )
        )
    errors = analyses["rating_errors"]
    if errors["points"]:
        r_mae, r_rmse = errors["ptc_vs_mae"], errors["ptc_vs_rmse"]
        rows = [
            [s["label"], number(s["mae"], ".3f"), number(s["rmse"], ".3f"), number(s["ptc"]), str(s["cells"])]
            for s in errors["systems"]
        ]
        note = (
            f"Pearson r over {r_mae['n']} cells with predicted ratings: PTC vs MAE {number(r_mae['r'])}, "
            f"PTC vs RMSE {number(r_rmse['r'])}. The paper found these correlations weak (Fig. 3): a low "
            "rating error need not mean a model ranks users by preference."
        )
        header = ["System", "MAE", "RMSE", "PTC", "cells"]
        out.append(
            grid(
                "PTC against rating error (paper Figs. 1 and 3)",
                header,
                rows,
                note=note,
                images="rating_errors",
            )
        )
    return out
