"""The published tables (package data) are whole and agree with themselves."""

from __future__ import annotations

import pytest

from perrec_eval.tasks.perrecbench.leaderboard.published import CELLS, load


def test_published_table_1_has_the_papers_19_models():
    rows = load().table(1)
    assert len(rows) == 19
    best = max(rows, key=lambda row: row.average)
    assert (best.model, best.average) == ("Claude-3.5-Sonnet", 0.18)
    gpt = next(row for row in rows if row.model == "GPT-4o-mini")
    assert gpt.cells[("easy", "listwise")] == 0.41  # the best cell of Table 1


def test_published_tables_2_and_3_are_present():
    assert len(load().table(2)) == 6 and len(load().table(3)) == 12
    assert load().table(2)[0].cells == load().table(1)[-2].cells  # zero-shot GPT-4o-mini = Table 1's row


@pytest.mark.parametrize("row", [r for r in load().rows if r.average is not None and r.note is None], ids=str)
def test_published_averages_match_their_cells(row):
    values = [row.cells[cell] for cell in CELLS]
    assert abs(sum(values) / len(values) - row.average) <= 0.0101, row.label
