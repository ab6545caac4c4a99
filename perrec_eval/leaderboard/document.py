"""A report as a document (headings, paragraphs, tables, images) and its two texts: markdown and one static
HTML page. Every family's report is laid out as these blocks (`perrec_eval.leaderboard.family`, and
PerRecBench's tables in `tasks/perrecbench/leaderboard/render.py`), so every report reads and looks alike.

The page is the package-data template ``index.html`` (a `string.Template`) around the blocks. Images are
referenced relatively (``plots/*.png`` next to the page), styles are inline, and there is no script: the
folder can be opened from disk, zipped, or served as it is.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from string import Template
from typing import Any

DASH = "–"
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


class Code(str):
    """Inline code in a `Text`."""


class Strong(str):
    """Bold text in a `Text`."""


class Em(str):
    """Emphasised text in a `Text`."""


Text = str | tuple[str, ...]  # plain text, or pieces of which some are `Code`, `Strong` or `Em`


@dataclass(frozen=True, slots=True)
class Heading:
    level: int
    text: str
    anchor: str = ""


@dataclass(frozen=True, slots=True)
class Para:
    text: Text
    css: str = "note"


@dataclass(frozen=True, slots=True)
class Grid:
    """A table: a header and rows of `Text` cells."""

    header: Sequence[str]
    rows: Sequence[Sequence[Text]]
    css: str = ""


@dataclass(frozen=True, slots=True)
class Images:
    plots: Sequence[Any]  # `plots.Plot`s: each has a `path` (relative to the page) and a `title`


Block = Heading | Para | Grid | Images


def number(value: float | None, spec: str = ".2f") -> str:
    """`value` formatted, or a dash for a missing one.

    >>> number(0.1234), number(None), number(0.5, ".0%")
    ('0.12', '–', '50%')
    """
    return DASH if value is None else format(value, spec)


_MARKS = {Code: "`", Strong: "**", Em: "*"}


def markdown_text(text: Text) -> str:
    """`Text` as markdown.

    >>> markdown_text(("a ", Code("b"), " ", Strong("c"), " ", Em("d")))
    'a `b` **c** *d*'
    """
    pieces = (text,) if isinstance(text, str) else text
    return "".join(f"{mark}{p}{mark}" if (mark := _MARKS.get(type(p))) and p else p for p in pieces)


def markdown_block(block: Block) -> str:
    if isinstance(block, Heading):
        return f"{'#' * block.level} {block.text}"
    if isinstance(block, Para):
        return markdown_text(block.text)
    if isinstance(block, Images):
        return "\n".join(f"![{plot.title}]({plot.path})" for plot in block.plots)
    lines = ["| " + " | ".join(block.header) + " |", "|" + "---|" * len(block.header)]
    lines += [
        "| " + " | ".join(markdown_text(cell).replace("|", "\\|") for cell in row) + " |"
        for row in block.rows
    ]
    return "\n".join(lines)


def markdown(blocks: Iterable[Block]) -> str:
    """Blocks as one markdown file (empty blocks left out)."""
    return "\n\n".join(text for text in map(markdown_block, blocks) if text) + "\n"


def from_markdown(lines: Sequence[str]) -> list[Block]:
    """Blocks of simple markdown lines (``#`` headings, ``|`` tables, paragraphs), for a family hook that
    writes its section as markdown (`Task.published_rows`).

    >>> lines = ["### t", "", "| a | b |", "|---|---|", "| 1 | 2 |", "", "x"]
    >>> [type(block).__name__ for block in from_markdown(lines)]
    ['Heading', 'Grid', 'Para']
    """
    blocks: list[Block] = []
    table: list[list[str]] = []
    para: list[str] = []

    def flush() -> None:
        if table:
            rows = [row for row in table[1:] if not all(set(cell) <= set("-: ") for cell in row)]
            blocks.append(Grid(table[0], rows))
            table.clear()
        if para:
            blocks.append(Para(" ".join(para)))
            para.clear()

    for line in lines:
        stripped = line.strip()
        if stripped.startswith("#"):
            flush()
            marks = len(stripped) - len(stripped.lstrip("#"))
            blocks.append(Heading(marks, stripped[marks:].strip()))
        elif stripped.startswith("|"):
            if para:
                flush()
            table.append([cell.strip() for cell in stripped.strip("|").split(" | ")])
        elif not stripped:
            flush()
        else:
            if table:
                flush()
            para.append(stripped)
    flush()
    return blocks


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


def contents(blocks: Sequence[Block]) -> str:
    """The page's contents: a link to each section (level-2 heading)."""
    links = [
        f'<li><a href="#{anchor(b)}">{html.escape(b.text, quote=False)}</a></li>'
        for b in blocks
        if isinstance(b, Heading) and b.level == 2
    ]
    return f'<nav class="contents"><strong>Contents</strong><ul>{"".join(links)}</ul></nav>' if links else ""


def page(blocks: Sequence[Block], title: str) -> str:
    """The whole index.html of `blocks`, `title` in the browser's tab."""
    template = Template(resources.files(__package__).joinpath("index.html").read_text(encoding="utf-8"))
    html_blocks = [text for text in map(block_html, blocks) if text]
    if html_blocks and html_blocks[0].startswith("<h1"):  # the contents right under the title
        html_blocks.insert(1, contents(blocks))
    return template.substitute(body="\n".join(html_blocks), title=html.escape(title))


def latex_escape(text: str) -> str:
    r"""`text` safe inside a LaTeX table: each special character replaced once (a backslash's
    ``\textbackslash{}`` keeps its braces).

    >>> latex_escape("k=4, 50% of a_b")
    'k=4, 50\\% of a\\_b'
    >>> print(latex_escape("a\\b{c}"))
    a\textbackslash{}b\{c\}
    """
    return "".join(_LATEX_SPECIAL.get(char, char) for char in text)
