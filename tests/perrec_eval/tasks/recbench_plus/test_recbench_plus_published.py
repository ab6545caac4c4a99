"""The RecBench+ published rows (released files, corrected scoring) equal benchmarks/RESULTS.md's table."""

import re
from pathlib import Path

import yaml

from perrec_eval import registry

ROOT = Path(__file__).resolve().parents[4]
DATA = ROOT / "perrec_eval" / "tasks" / "recbench_plus" / "published.yaml"


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


def test_published_rows_match_results_table():
    data = yaml.safe_load(DATA.read_text())
    assert data["source"]["config"] == "demographics"
    expected = _results_rows()
    assert [r["model"] for r in data["rows"]] == list(expected)
    for row in data["rows"]:
        got = [_cell(row[m]) for m in data["metrics"]]
        assert got == expected[row["model"]], row["model"]
        for metric in data["metrics"]:
            low, point, high = row[metric][1], row[metric][0], row[metric][2]
            assert low <= point <= high
    assert all(re.fullmatch(r"[\w.\-]+", r["model"]) for r in data["rows"])


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
    assert "| DeepSeek-R1 | 0.198 [0.170, 0.227] | 0.044 [0.037, 0.050] | 0.140 [0.119, 0.162] |" in published
    assert "**" not in published and "†" not in published
    assert "not with a rebuilt benchmark" in text
