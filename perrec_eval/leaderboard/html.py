"""index.html: the leaderboard and its plots on one static page (no server, no external assets).

Images are referenced relatively (``plots/*.png`` next to the page), styles are inline, and there is no
script: the folder can be opened from disk, zipped, or served as it is.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from perrec_eval.leaderboard import render
from perrec_eval.leaderboard.board import CELLS, Table

if TYPE_CHECKING:
    from perrec_eval.leaderboard.assemble import Report

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px auto;
       max-width: 1500px; padding: 0 16px; color: #1d1d1f; background: #fff; line-height: 1.45; }
h1 { font-size: 1.7em; margin-bottom: 0.2em; } h2 { margin-top: 1.8em; border-bottom: 2px solid #ddd; }
h3 { margin-top: 1.4em; } p.legend { color: #444; font-size: 0.92em; max-width: 1100px; }
table { border-collapse: collapse; margin: 0.6em 0 1em; font-size: 0.85em; }
th, td { border: 1px solid #d0d0d0; padding: 3px 7px; text-align: right; white-space: nowrap; }
th { background: #f3f4f6; position: sticky; top: 0; }
td:first-child, th:first-child { text-align: left; }
tr:nth-child(even) td { background: #fafafa; }
table.board td:first-child { font-weight: 600; }
td.provisional { color: #9a3412; } .missing { color: #888; }
img { max-width: 100%; border: 1px solid #eee; margin: 0.4em 0 1em; display: block; }
details { margin: 0.6em 0; } summary { cursor: pointer; font-weight: 600; }
code { background: #f3f4f6; padding: 0 3px; border-radius: 3px; }
.note { color: #555; font-size: 0.9em; }
""".strip()


def inline(text: str) -> str:
    """Escape `text` for HTML, then turn markdown's **bold** and `code` into tags.

    >>> inline("**0.42** <b> `x`")
    '<strong>0.42</strong> &lt;b&gt; <code>x</code>'
    """
    escaped = html.escape(text, quote=False)
    escaped = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", escaped)


def table_html(header: Sequence[str], rows: Iterable[Sequence[str]], css: str = "") -> str:
    """An HTML table; cells are markdown-ish text (see `inline`)."""
    head = "".join(f"<th>{inline(cell)}</th>" for cell in header)
    body = "\n".join("<tr>" + "".join(f"<td>{inline(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    attribute = f' class="{css}"' if css else ""
    return f"<table{attribute}>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def _images(report: Report, key: str, kind: str | None = None) -> str:
    return "\n".join(
        f'<img src="{html.escape(plot.path)}" alt="{html.escape(plot.title)}">'
        for plot in report.plots.get(key, [])
        if kind is None or plot.kind == kind
    )


def _leaderboard(table: Table) -> str:
    return table_html(*render.leaderboard_rows(table), "board")


def _published(report: Report, number: int) -> str:
    header = ["System", *render.column_names(CELLS), "Avg."]
    caption = f'<p class="note"><em>{html.escape(report.published.caption(number))}</em></p>'
    return caption + table_html(header, render.published_rows(report.published.table(number)), "published")


def _analyses(report: Report, table: Table, analyses: Mapping[str, Any]) -> list[str]:
    key = f"t{table.number}"
    parts = []
    by_domain = render.domain_table(analyses)
    if by_domain is not None:
        parts += [
            "<h3>By domain (paper Fig. 4)</h3>",
            table_html(*by_domain),
            _images(report, key, "by_domain"),
        ]
    parts += [
        "<h3>By group size (paper Fig. 7)</h3>",
        table_html(*render.group_size_table(analyses)),
        _images(report, key, "by_group_size"),
    ]
    parts += [
        "<h3>By ranking method (mean over levels)</h3>",
        table_html(*render.method_table(analyses)),
        _images(report, key, "by_method"),
    ]
    for block in analyses["prompting"]:
        parts += [
            f"<h3>Prompting variants of {html.escape(block['model'])} (paper Table 2)</h3>",
            table_html(*render.prompting_table(table, block)),
        ]
    parts.append(_images(report, key, "prompting"))
    if analyses["k_shots"]:
        parts += ["<h3>k × shots (paper Fig. 6)</h3>", _images(report, key, "k_shots")]
    errors = analyses["rating_errors"]
    if errors["points"]:
        r_mae, r_rmse = errors["ptc_vs_mae"], errors["ptc_vs_rmse"]
        parts += [
            "<h3>PTC against rating error (paper Figs. 1 and 3)</h3>",
            f'<p class="note">Pearson r over {r_mae["n"]} cells with predicted ratings: PTC vs MAE '
            f"{render.number(r_mae['r'])}, PTC vs RMSE {render.number(r_rmse['r'])}. The paper found these "
            "correlations weak (Fig. 3): a low rating error need not mean a model ranks users by "
            "preference.</p>",
            _images(report, key, "rating_errors"),
        ]
    return parts


def page(report: Report) -> str:
    """The whole index.html."""
    runs = sum(len(table.rows) for table in report.tables)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>PerRecBench leaderboard</title>",
        f"<style>\n{_STYLE}\n</style></head><body>",
        "<h1>PerRecBench leaderboard</h1>",
        f'<p class="note">{runs} run{"s" if runs != 1 else ""} in {len(report.tables)} '
        f"table{'s' if len(report.tables) != 1 else ''}; data: <code>leaderboard.json</code>, "
        "<code>leaderboard.csv</code>, <code>leaderboard.tex</code>, <code>leaderboard.md</code>.</p>",
        f'<p class="legend">{inline(render.legend(report))}</p>',
    ]
    for table, analyses in zip(report.tables, report.analyses, strict=True):
        differing = ", ".join(table.differing) if table.differing else "none (rows differ by model only)"
        parts += [
            f'<h2 id="table-{table.number}">{html.escape(render.table_heading(table, len(table.rows)))}</h2>',
            f'<p class="note">Settings that differ between these runs: {html.escape(differing)}.</p>',
            _leaderboard(table),
            _images(report, f"t{table.number}", "leaderboard"),
        ]
        if table.paper_variant:
            parts += [
                "<h3>Published (paper-mode metric, the paper's build; reference only)</h3>",
                _published(report, 1),
            ]
        parts += [
            "<details><summary>Average against the best, and every cell (tests, failures, diagnostics)"
            "</summary>",
            table_html(
                ["System", "Avg.", "Δ vs best", "95% CI of Δ", "p", "groups compared"],
                render.average_rows(table),
            ),
            table_html(render.CELL_HEADER, render.cell_rows(table)),
            "</details>",
        ]
        parts += _analyses(report, table, analyses)
    for n, stats in enumerate(report.stats, start=1):
        where = f"{stats['data']}, split {stats['split']}"
        parts.append(f"<h2>Benchmark statistics (paper Fig. 5): {html.escape(where)}</h2>")
        parts.append(html.escape(stats["missing"]) if "missing" in stats else _images(report, f"stats{n}"))
    parts += [
        "<h2>Published results (arXiv 2501.13391)</h2>",
        '<p class="note">Facts from the paper, scored with its metric (paper mode) on its own build of the '
        "benchmark: reference values, never tested against the runs above.</p>",
    ]
    parts += [_published(report, number) for number in (1, 2, 3)]
    parts.append("</body></html>")
    return "\n".join(part for part in parts if part) + "\n"
