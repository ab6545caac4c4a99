"""Trips of the reports that a newcomer or the reliability audit met: a secret in a PerRecBench label (H6),
labels matplotlib cannot draw (H15), the row name of `score RUN_DIR`, the reason a table has no average,
and the report's path as the user gave it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from perrec_eval.cli import main
from perrec_eval.leaderboard import family
from tests.benchmark_fixture import write_tiny_benchmark

SECRET = "LABELSECRET22"


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    return write_tiny_benchmark(tmp_path_factory.mktemp("trips") / "perrecbench")


def _evaluate(bench: Path, out: Path, *extra: str) -> list[str]:
    return ["--no-progress", "evaluate", "--data", str(bench), "--levels", "easy", "--out", str(out), *extra]


def test_h6_a_secret_in_the_label_reaches_no_report_and_no_printed_table(bench, tmp_path, capsys):
    out = tmp_path / "r22"
    argv = _evaluate(bench, out, "--engine", "fake", "--model", "constant", "--label", f"api_key={SECRET}")
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert SECRET not in printed and "<redacted>" in printed
    for name in ("run.json", "report.md"):
        assert SECRET not in (out / name).read_text(), name
    assert main(["--no-progress", "score", str(out)]) == 0
    assert SECRET not in capsys.readouterr().out


@pytest.mark.parametrize("label", ["pb$\\frac{$", "gpt$\\foo$", "L" * 20_000])
def test_h15_report_plots_draw_any_label_as_plain_text(bench, tmp_path, label):
    out = tmp_path / "run"
    assert main(_evaluate(bench, out, "--engine", "fake", "--model", "constant", "--label", label)) == 0
    assert main(["--no-progress", "report", str(out), "--out", str(tmp_path / "report")]) == 0
    assert list((tmp_path / "report" / "plots").glob("*.png"))


def test_score_of_a_perrecbench_run_names_its_row_by_its_label(bench, tmp_path, capsys):
    out = tmp_path / "labelled"
    assert main(_evaluate(bench, out, "--engine", "fake", "--model", "constant", "--label", "smol")) == 0
    capsys.readouterr()
    assert main(["--no-progress", "score", str(out)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert rows[1].startswith("| smol | ") and "constant |" not in rows[1]


def test_report_says_why_two_columns_of_one_subset_have_no_average():
    data = {"main_cells": ["explicit/recommend", "explicit/recommend-k"]}
    data["shown"] = dict.fromkeys(data["main_cells"], "recall")
    assert "ask the same docs" in family.no_average_reason(data)
    data = {"main_cells": ["rating/rating", "direct/direct"], "shown": {"rating/rating": "rmse"}}
    data["shown"]["direct/direct"] = "ndcg@10"
    assert family.no_average_reason(data) == "No average: the columns' metrics differ in direction or scale."


def test_report_prints_its_page_as_the_user_named_the_folder(bench, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(_evaluate(bench, Path("runs/fake"), "--engine", "fake", "--model", "constant")) == 0
    capsys.readouterr()
    assert main(["--no-progress", "report", "runs/fake", "--out", "report", "--no-plots"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("open report/index.html")
    (section,) = json.loads(Path("report/leaderboard.json").read_text())
    assert section["rows"][0]["path"] == "../runs/fake"  # relative to the report: no local absolute path


def test_bars_draw_an_interval_that_ends_a_rounding_error_past_its_value(tmp_path):
    """Two identical runs give a 0-width interval whose end may be 1e-16 past the mean: still drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from perrec_eval.leaderboard import plots

    fig, ax = plt.subplots()
    value = 0.37037037037037046
    plots.bars(ax, ["a", "b"], {"run": [value, 0.0]}, {"run": ([value + 1e-16, 0.0], [value - 1e-16, 0.0])})
    fig.savefig(tmp_path / "chart.png")
    plt.close(fig)
    assert (tmp_path / "chart.png").stat().st_size > 0


def test_bars_draw_a_zero_visibly_leave_a_cell_not_run_empty_and_hatch_failed_shares():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from perrec_eval.leaderboard import plots

    fig, ax = plt.subplots()
    plots.bars(ax, ["a", "b", "c"], {"run": [0.0, None, 0.5]}, failed={"run": [None, None, 0.25]})
    zero_lines = [c for c in ax.collections if c.get_linewidth()[0] == 3]
    assert len(zero_lines) == 1  # the bar of height 0 is a thick line at 0
    patches = ax.patches
    assert len(patches) == 3 and math.isnan(patches[1].get_height())  # not run: no bar
    assert patches[2].get_hatch() == "///" and not patches[0].get_hatch()
    plt.close(fig)
