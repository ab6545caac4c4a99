"""The RecBench+ published rows: computed from the released files by today's code (never typed), the same
numbers in benchmarks/RESULTS.md and docs/reproducing-recbench-plus.md, and shown apart in a report.

The released files are not redistributable, so CI cannot compute the rows again: there, a test compares the
digest of the code that computes them (`published.code_digest`) with the one `published.yaml` was written by,
and fails when that code changed without the rows being computed again. Where a checkout of the release is at
hand (``PERRECBENCH_RECASSISTBENCH=PATH``), a second test computes the rows and compares every number.
"""

import os
import re
from pathlib import Path

import pytest

from perrec_eval import registry
from perrec_eval.tasks.recbench_plus import published

ROOT = Path(__file__).resolve().parents[4]
DATA = ROOT / "perrec_eval" / "tasks" / "recbench_plus" / "published.yaml"
RELEASE = os.environ.get("PERRECBENCH_RECASSISTBENCH")
FIX = "compute them again: python benchmarks/recbench_released.py --released PATH/RecAssistBench --write"


def test_published_rows_were_computed_by_todays_code():
    assert published.load()["code"] == published.code_digest(), (
        f"the code that computes published.yaml changed since it was written: {FIX}"
    )


def test_the_code_digest_ignores_comments_and_docstrings_but_not_code(tmp_path, monkeypatch):
    module = tmp_path / "digested.py"
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(published, "COMPUTED_BY", ("digested",))
    module.write_text('"""Doc."""\nX = 1  # one\n')
    first = published.code_digest()
    module.write_text('"""Other doc."""\n\nX = 1  # another comment\n')
    assert published.code_digest() == first
    module.write_text('"""Doc."""\nX = 2\n')
    assert published.code_digest() != first


@pytest.mark.skipif(RELEASE is None, reason="needs the released files: PERRECBENCH_RECASSISTBENCH=PATH")
def test_published_rows_equal_what_todays_code_computes_from_the_released_files():
    assert published.compute(Path(RELEASE)) == published.load(), FIX


def test_published_rows_hold_intervals_and_both_protocols():
    data = published.load()
    assert data["source"]["config"] == "demographics" and data["source"]["queries"] == 279
    assert len(data["rows"]) == 7 and "DeepSeek-R1" in [row["model"] for row in data["fixed_k"]["rows"]]
    for row in (*data["rows"], *data["fixed_k"]["rows"]):
        assert re.fullmatch(r"[\w.\-]+", row["model"])
        for metric in data["metrics"]:
            value, low, high = row[metric]
            assert low <= value <= high


def _results_rows() -> dict[str, list[str]]:
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    section = text.split("## RecBench+ released files", 1)[1]
    table = section.split("| model | recall | precision | NDCG |", 1)[1].split("\n\n", 1)[0]
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = cells[1:4]
    return rows


def _cell(values: list[float]) -> str:
    return f"{values[0]:.3f} [{values[1]:.3f}, {values[2]:.3f}]"


def test_results_and_the_reproduction_page_show_the_published_rows():
    data = published.load()
    expected = _results_rows()
    assert [r["model"] for r in data["rows"]] == list(expected)
    for row in data["rows"]:
        assert [_cell(row[m]) for m in data["metrics"]] == expected[row["model"]], row["model"]
    for page in ("docs/reproducing-recbench-plus.md", "README.md"):  # both written by the script
        text = (ROOT / page).read_text()
        shown = text.split("<!-- published rows -->\n", 1)[1].split("<!-- /published rows -->", 1)[0]
        assert shown == published.doc_table(data), page


def _section(cells: list[str]) -> dict:
    from perrec_eval.leaderboard import family

    def entry(value: float) -> dict:
        interval = {"value": value, "ci_low": value - 0.1, "ci_high": value + 0.1}
        return {"num_docs": 20, "num_failed": 0, "num_engine_errors": 0, "num_clusters": None,
                "metrics": {"recall": interval}}  # fmt: skip

    rows = [
        {"label": label, "path": label, "average": None, "cells": {cell: entry(value) for cell in cells}}
        for label, value in (("popularity", 0.5), ("bm25", 0.3))
    ]
    rows[0]["cells"][cells[0]]["metrics"]["recall"]["best"] = True
    metrics = {cell: [{"name": "recall", "higher_is_better": True}] for cell in cells}
    return {"task": "recbench-plus", "title": "RecBench+", "headline": "recall", "higher_is_better": True,
            "cells": cells, "main_cells": cells, "cell_metrics": metrics,
            "shown": dict.fromkeys(cells, "recall"), "average": None, "too_few_docs": {},
            "min_docs_to_compare": family.MIN_DOCS_TO_COMPARE, "rows": rows,
            **family._published(registry.get("recbench-plus"), cells)}  # fmt: skip


def test_report_shows_published_rows_apart_for_demographics_only():
    from perrec_eval.leaderboard import family

    assert "published" not in _section(["explicit/free-length", "interest/fixed-k"])
    assert family._published(registry.get("llmrec"), ["demographics/free-length"]) == {}
    section = _section(["explicit/free-length", "demographics/free-length"])
    assert [row["label"] for row in section["rows"]] == ["popularity", "bm25"]  # never ranked with runs
    text = family.markdown(section)
    runs, published = text.split("### published rows (the released queries and answers, corrected scoring", 1)
    assert "DeepSeek-R1" not in runs and "popularity" not in published
    row = next(row for row in registry.get("recbench-plus").published_rows.load()["rows"])
    cells = " | ".join(_cell(row[metric]) for metric in ("recall", "precision", "ndcg"))
    assert f"| {row['model']} | {cells} |" in published
    assert "**" not in published and "†" not in published
    assert "\\|" not in published
    assert "not with a rebuilt benchmark" in text


def test_published_tables_have_no_separator_row_among_their_rows():
    from perrec_eval.leaderboard.document import Grid, from_markdown, markdown_block

    blocks = from_markdown(published.markdown(published.load()))
    grids = [block for block in blocks if isinstance(block, Grid)]
    assert len(grids) == 2  # free-length and fixed K
    for grid in grids:
        assert all(not set("".join(row)) <= set("-:| ") for row in grid.rows)
        assert "\\|" not in markdown_block(grid)
