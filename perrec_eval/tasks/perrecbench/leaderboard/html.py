"""index.html: the leaderboard document (`render.document`) on one static page (no server, no external
assets).

The page is the package-data template ``index.html`` (a `string.Template`) around the document's blocks.
Images are referenced relatively (``plots/*.png`` next to the page), styles are inline, and there is no
script: the folder can be opened from disk, zipped, or served as it is.
"""

from __future__ import annotations

import html
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


def block_html(block: Block) -> str:
    if isinstance(block, Heading):
        anchor = f' id="{block.anchor}"' if block.anchor else ""
        return f"<h{block.level}{anchor}>{html.escape(block.text, quote=False)}</h{block.level}>"
    if isinstance(block, Para):
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
    return f"<table{attribute}>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def page(report: Report) -> str:
    """The whole index.html."""
    template = Template(resources.files(__package__).joinpath("index.html").read_text(encoding="utf-8"))
    body = "\n".join(text for text in map(block_html, document(report)) if text)
    return template.substitute(body=body)
