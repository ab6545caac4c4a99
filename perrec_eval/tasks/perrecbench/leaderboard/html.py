"""index.html: PerRecBench's leaderboard document (`render.document`) on the page every report uses
(`perrec_eval.leaderboard.document.page`)."""

from __future__ import annotations

from perrec_eval.leaderboard.document import anchor, block_html, contents, text_html
from perrec_eval.leaderboard.document import page as document_page
from perrec_eval.tasks.perrecbench.leaderboard.board import Report
from perrec_eval.tasks.perrecbench.leaderboard.render import document

__all__ = ["anchor", "block_html", "contents", "page", "text_html"]
TITLE = "PerRecBench leaderboard"


def page(report: Report) -> str:
    """The whole index.html."""
    return document_page(document(report), TITLE)
