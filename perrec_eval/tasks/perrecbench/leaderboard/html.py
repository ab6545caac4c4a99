"""index.html: the leaderboard document (`render.document`) on one static page (no server, no external
assets).

The page is the package-data template ``index.html`` (a `string.Template`) around the document's blocks.
Images are referenced relatively (``plots/*.png`` next to the page), styles are inline, and there is no
script: the folder can be opened from disk, zipped, or served as it is.
"""

from __future__ import annotations

import html
import re
from importlib import resources
from string import Template

from perrec_eval.tasks.perrecbench.leaderboard.board import Report
from perrec_eval.tasks.perrecbench.leaderboard.render import (
    Block,
    Code,
    Em,
    Grid,
    Heading,
    Images,
    Para,
    Strong,
    Text,
    document,
)

_TAGS = {Code: "code", Strong: "strong", Em: "em"}


def text_html(text: Text) -> str:
    """`Text` escaped for HTML, its code, bold and emphasised pieces as tags.

    >>> text_html(("<b> ", Code("x"), " ", Strong("0.42")))
    '&lt;b&gt; <code>x</code> <strong>0.42</strong>'
    """
    pieces = (text,) if isinstance(text, str) else text
    out = []
    for piece in pieces:
        escaped = html.escape(piece, quote=False)
        tag = _TAGS.get(type(piece))
        out.append(f"<{tag}>{escaped}</{tag}>" if tag and piece else escaped)
    return "".join(out)


def anchor(heading: Heading) -> str:
    """The heading's id: its own anchor, or a slug of its text (a link target of the contents).

    >>> anchor(Heading(2, "Benchmark statistics (paper Fig. 5): demo, split test"))
    'benchmark-statistics-paper-fig-5-demo-split-test'
    """
    return heading.anchor or "-".join(re.findall(r"[a-z0-9]+", heading.text.lower()))


def block_html(block: Block) -> str:
    if isinstance(block, Heading):
        ident = f' id="{anchor(block)}"' if block.level == 2 or block.anchor else ""
        return f"<h{block.level}{ident}>{html.escape(block.text, quote=False)}</h{block.level}>"
    if isinstance(block, Para):
        if block.css == "legend":  # long: folded under one line, the tables come first on screen
            return (
                '<details class="legend"><summary>How to read these tables</summary>'
                f"<p>{text_html(block.text)}</p></details>"
            )
        return f'<p class="{block.css}">{text_html(block.text)}</p>'
    if isinstance(block, Images):
        return "\n".join(
            f'<img src="{html.escape(plot.path)}" alt="{html.escape(plot.title)}">' for plot in block.plots
        )
    assert isinstance(block, Grid)
    head = "".join(f"<th>{html.escape(cell, quote=False)}</th>" for cell in block.header)
    body = "\n".join(
        "<tr>" + "".join(f"<td>{text_html(cell)}</td>" for cell in row) + "</tr>" for row in block.rows
    )
    attribute = f' class="{block.css}"' if block.css else ""
    # a wide table scrolls inside its own box instead of widening the page
    return (
        f'<div class="scroll"><table{attribute}>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n'
        "</tbody>\n</table></div>"
    )


def contents(blocks: list[Block]) -> str:
    """The page's contents: a link to each section (level-2 heading)."""
    links = [
        f'<li><a href="#{anchor(b)}">{html.escape(b.text, quote=False)}</a></li>'
        for b in blocks
        if isinstance(b, Heading) and b.level == 2
    ]
    return f'<nav class="contents"><strong>Contents</strong><ul>{"".join(links)}</ul></nav>' if links else ""


def page(report: Report) -> str:
    """The whole index.html."""
    template = Template(resources.files(__package__).joinpath("index.html").read_text(encoding="utf-8"))
    blocks = document(report)
    html_blocks = [text for text in map(block_html, blocks) if text]
    if html_blocks and html_blocks[0].startswith("<h1"):  # the contents right under the title
        html_blocks.insert(1, contents(blocks))
    return template.substitute(body="\n".join(html_blocks))
