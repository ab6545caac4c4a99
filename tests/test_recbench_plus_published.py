"""The RecBench+ published rows (released files, corrected scoring) equal benchmarks/RESULTS.md's table."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
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
