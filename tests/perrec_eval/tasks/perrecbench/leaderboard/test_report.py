"""`perrecbench report` end to end: the report folder, refusals on the command line, published rows."""

from __future__ import annotations

import csv
import io
import json
import struct

import pytest

from perrec_eval.cli import main


@pytest.fixture(scope="module")
def baselines_report(runs, tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "report"
    assert main(["report", str(runs["baselines"]), "--out", str(out), "--resamples", "2000"]) == 0
    return out


def _png_size(path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", header[16:24])


def test_report_writes_every_file(baselines_report):
    names = {p.name for p in baselines_report.iterdir()}
    assert {"leaderboard.md", "leaderboard.json", "leaderboard.csv", "leaderboard.tex", "index.html"} <= names


def test_report_plots_are_non_empty_pngs(baselines_report):
    import matplotlib.image

    plots = sorted((baselines_report / "plots").glob("*.png"))
    kinds = {p.name for p in plots}
    assert {"t1_perrecbench_ptc.png", "t1_by_domain.png", "t1_by_group_size.png", "t1_by_method.png"} <= kinds
    assert {"t1_rating_errors.png", "benchmark_stats_t1_1.png"} <= kinds
    for plot in plots:
        width, height = _png_size(plot)
        assert width > 300 and height > 200
        pixels = matplotlib.image.imread(plot)
        assert pixels.std() > 0.01, f"{plot.name} is blank"


def test_report_json_has_rows_tests_and_analyses(baselines_report):
    (section,) = json.loads((baselines_report / "leaderboard.json").read_text())
    assert section["task"] == "perrecbench" and section["extras"]["num_groups"] == 6
    assert section["cells"] == ["easy/pointwise", "medium/pointwise", "hard/pointwise"]
    assert section["average"]["cells"] == section["cells"]
    assert len(section["rows"]) == 5 and sum(bool(row.get("average_best")) for row in section["rows"]) <= 1
    for row in section["rows"]:
        assert row["average"] is not None
        for cell in row["cells"].values():
            ptc = cell["metrics"]["ptc"]
            assert {"value", "ci_low", "ci_high"} <= set(ptc) and cell["num_docs"] == 6
            assert (
                ptc.get("best") or ptc.get("tied") or ptc.get("vs_best") is not None or section["undetected"]
            )
    extras = section["extras"]
    assert set(extras["analyses"]) >= {"by_domain", "by_group_size", "by_method", "rating_errors", "k_shots"}
    assert set(extras["min_detectable_difference"]) == set(section["cells"])
    assert {plot["kind"] for plot in section["plots"]} >= {"cells", "by_domain", "rating_errors"}


def test_report_csv_has_a_line_per_cell_metric_and_average(baselines_report):
    rows = list(csv.DictReader(io.StringIO((baselines_report / "leaderboard.csv").read_text())))
    ptc = [row for row in rows if row["metric"] == "ptc" and row["protocol"] == "pointwise"]
    assert len(ptc) == 5 * 3
    assert len([row for row in rows if row["protocol"] == "average"]) == 5
    assert {row["task"] for row in rows} == {"perrecbench"}


def test_report_latex_has_the_main_table(baselines_report):
    tex = (baselines_report / "leaderboard.tex").read_text()
    assert "\\toprule" in tex and "\\bottomrule" in tex and "history-affinity" in tex
    assert "min. detectable" in tex


def test_report_markdown_names_the_test_and_the_published_tables(baselines_report):
    text = (baselines_report / "leaderboard.md").read_text()
    assert "| run | easy/pointwise: ptc (higher is better) |" in text
    assert "sign-flip permutation tests" in text
    assert "### Published results (arXiv 2501.13391)" in text
    assert "### Published (paper-mode metric" not in text  # no paper-variant run in this table


def test_report_prints_the_leaderboard_and_the_page(runs, tmp_path, capsys):
    assert (
        main(["report", str(runs["truth"]), str(runs["reverse"]), "--out", str(tmp_path / "r"), "--no-plots"])
        == 0
    )
    printed = capsys.readouterr().out
    assert "| fake [truth] | **1.000 [1.000, 1.000]** |" in printed
    assert str(tmp_path / "r" / "index.html") in printed
    assert not (tmp_path / "r" / "plots").exists()


def test_report_shows_published_rows_next_to_paper_variant_runs(runs, tmp_path):
    out = tmp_path / "paper"
    assert main(["report", str(runs["paper"]), "--out", str(out), "--no-plots"]) == 0
    text = (out / "leaderboard.md").read_text()
    inline = text.index("### Published (paper-mode metric")
    assert text.index("## PerRecBench") < inline < text.index("### Cells")
    assert "Claude-3.5-Sonnet" in text[inline:] and "published, paper-mode metric" in text


def test_report_refusal_is_one_line_with_exit_2(runs, capsys):
    assert main(["report", str(runs["truth"]), str(runs["few4"])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "differ in their doc sets" in err and "--allow-mixed" in err


def test_report_row_missing_cells_says_so(runs, tmp_path, capsys):
    assert main(["report", str(runs["truth"]), str(runs["always_a"]), "--no-plots"]) == 0
    printed = capsys.readouterr().out
    always_a = next(line for line in printed.splitlines() if line.startswith("| fake [always_a]"))
    assert always_a.endswith("| – |")  # no average without every cell


def test_report_without_matplotlib_names_the_extra(runs, tmp_path, monkeypatch, capsys):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    assert main(["report", str(runs["truth"]), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "perrecbench[report]" in err and "--no-plots" in err


def test_report_run_report_is_the_leaderboard_of_its_runs(baselines_report, runs):
    from perrec_eval.leaderboard import family
    from perrec_eval.tasks.perrecbench import report

    board = (baselines_report / "leaderboard.md").read_text()
    run_md = report.render_report(family.load_runs([runs["baselines"]]))
    # One renderer: the run folder's report.md shows the leaderboard's main table, notes and cell tables.
    for line in ("| run | easy/pointwise: ptc (higher is better) |", "### Cells"):
        assert line in board and line in run_md
    assert "![" not in run_md  # no pictures in a run's report


def test_report_page_and_markdown_are_one_document(baselines_report):
    import html as html_lib
    import re

    page = (baselines_report / "index.html").read_text()
    board = (baselines_report / "leaderboard.md").read_text()
    headings = re.findall(r"^#+ (.+)$", board, flags=re.M)
    shown = [html_lib.unescape(h) for h in re.findall(r"<h\d[^>]*>(.+?)</h\d>", page)]
    assert headings == shown
    assert "<strong>" in page and "<code>ptc.expected_resolution</code>" in page
    assert "**" not in page and "`" not in page  # markdown marks became tags, none left over


def test_report_table_of_one_run_has_no_marks(runs):
    from perrec_eval.leaderboard import family
    from perrec_eval.tasks.perrecbench import report

    text = report.table(family.load_runs([runs["truth"]]))
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert not any("**" in line or "†" in line or "[truth]" in line for line in rows)
    assert rows[2].count("|") == 12  # run, the nine cells, the average


def test_report_of_one_run_compares_it_with_nothing(runs, tmp_path):
    # one run: no "against the best" table (there is nothing to test)
    assert main(["report", str(runs["truth"]), "--out", str(tmp_path / "one"), "--no-plots"]) == 0
    alone = (tmp_path / "one" / "leaderboard.md").read_text()
    assert "**" not in alone.split("### Every metric")[0] and "### Average against the best" not in alone
    two = ["report", str(runs["truth"]), str(runs["reverse"]), "--out", str(tmp_path / "two"), "--no-plots"]
    assert main(two) == 0
    both = (tmp_path / "two" / "leaderboard.md").read_text()
    assert "**1.000" in both and "### Average against the best" in both


@pytest.mark.parametrize(("field", "value"), [("resamples", 10**20), ("resamples", 0), ("seed", -1)])
def test_report_config_refuses_resamples_memory_cannot_hold_and_a_negative_seed(field, value):
    from perrec_eval.errors import ConfigError
    from perrec_eval.leaderboard.cli import ReportConfig

    with pytest.raises(ConfigError, match=f"--{field} must"):
        ReportConfig(run_dirs=("run",), **{field: value})
