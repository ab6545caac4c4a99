"""PerRecBench's rows in the shared leaderboard: averages over complete rows only, its PTC paired tests
against the best (each Δ recorded as the best minus the run), its floor and min. detectable Δ rows."""

from __future__ import annotations

import pytest

from perrec_eval import stats
from perrec_eval.tasks.perrecbench.leaderboard.board import build_table, paired_average, paired_cell
from perrec_eval.tasks.perrecbench.leaderboard.runs import load_run, load_runs
from tests.perrec_eval.tasks.perrecbench.leaderboard.synthetic import coin_flips, pointwise_records, write_run

GROUPS = [f"Books:{i:04d}" for i in range(40)]


def test_board_average_only_for_rows_with_every_cell(runs):
    table = build_table(load_runs([runs["truth"], runs["always_a"]]))
    rows = {row.run.path.name: row for row in table.rows}
    assert len(table.columns) == 9
    assert rows["truth"].average == pytest.approx(1.0)
    assert rows["always_a"].average is None
    assert [f"{lv}/{m}" for lv, m in rows["always_a"].missing] == [
        f"{lv}/{m}" for lv in ("easy", "medium", "hard") for m in ("pointwise", "listwise")
    ]


def test_board_rows_sorted_by_average_and_best_marked(runs):
    table = build_table(load_runs([runs["reverse"], runs["truth"]]))
    assert [row.run.path.name for row in table.rows] == ["truth", "reverse"]
    assert table.rows[0].best and all(entry.best for entry in table.rows[0].entries.values())


def test_board_truth_beats_reverse_in_every_cell(runs):
    table = build_table(load_runs([runs["truth"], runs["reverse"]]))
    worse = table.rows[1]
    for entry in worse.entries.values():
        # 6 groups, every difference 2: exact sign-flip p = 2 / 2**6
        assert entry.vs_best["difference"] == pytest.approx(2.0)
        assert entry.vs_best["p_value"] == pytest.approx(2 / 64)
        assert entry.significant
    assert worse.significant and worse.vs_best["num_compared"] == 6


def test_board_provisional_run_is_marked(bench, tmp_path, runs):
    from perrec_eval.engines.fake import FakeEngine
    from perrec_eval.tasks.perrecbench.run import evaluate
    from perrec_eval.types import Completion
    from tests.perrec_eval.tasks.perrecbench.leaderboard.conftest import eval_config

    def fails_pairwise(request, params, i):
        if "pair of users" in request.messages[0]["content"]:
            return Completion(texts=(), error="HTTP 500")
        return "[User A]"

    evaluate(eval_config(bench, tmp_path / "flaky", methods=("pairwise",)), FakeEngine(fails_pairwise))
    table = build_table(load_runs([runs["truth"], tmp_path / "flaky"]))
    flaky = next(row for row in table.rows if row.run.path.name == "flaky")
    assert flaky.provisional
    assert all(entry.scores["engine_error_rate"] == 1.0 for entry in flaky.entries.values())


def test_board_paired_test_finds_a_planted_difference(tmp_path):
    good = write_run(tmp_path / "good", pointwise_records(GROUPS, coin_flips(40, 0.9, seed=1)), model="good")
    coin = write_run(tmp_path / "coin", pointwise_records(GROUPS, coin_flips(40, 0.5, seed=2)), model="coin")
    result = paired_cell(load_run(coin), load_run(good), ("easy", "pointwise"))
    assert result["difference"] < -0.5 and result["p_value"] < 0.01
    assert result["num_compared"] == 40
    table = build_table(load_runs([good, coin]))
    assert table.rows[1].entries[("easy", "pointwise")].significant
    assert table.rows[1].vs_best is None  # one column: the section has no average column to test


def test_board_paired_test_finds_no_difference_between_equals(tmp_path):
    a = write_run(tmp_path / "a", pointwise_records(GROUPS, coin_flips(40, 0.7, seed=3)), model="a")
    b = write_run(tmp_path / "b", pointwise_records(GROUPS, coin_flips(40, 0.7, seed=4)), model="b")
    result = paired_cell(load_run(a), load_run(b), ("easy", "pointwise"))
    assert result["p_value"] > 0.05
    average = paired_average(load_run(a), load_run(b), [("easy", "pointwise")])
    assert average["p_value"] == pytest.approx(result["p_value"], abs=0.02)  # one cell: the same test
    assert not build_table(load_runs([a, b])).rows[1].significant


def test_board_average_test_uses_each_groups_mean_over_cells(tmp_path):
    records_a = pointwise_records(GROUPS, [True] * 40) + pointwise_records(GROUPS, [True] * 40, level="hard")
    records_b = pointwise_records(GROUPS, [False] * 40) + pointwise_records(GROUPS, [True] * 40, level="hard")
    a = write_run(tmp_path / "a", records_a, model="a")
    b = write_run(tmp_path / "b", records_b, model="b")
    result = paired_average(load_run(b), load_run(a), [("easy", "pointwise"), ("hard", "pointwise")])
    assert result["difference"] == pytest.approx(-1.0) and result["num_compared"] == 40
    assert result["p_value"] < 0.001


def test_board_runs_with_another_metric_are_not_tested_against_the_best(runs):
    table = build_table(load_runs([runs["reverse"], runs["paper"]]))
    assert table.rows[0].run.variant == "paper" and table.rows[0].best
    reverse = table.rows[1]
    assert all(
        entry.vs_best is None and "another metric" in entry.untested for entry in reverse.entries.values()
    )
    assert reverse.vs_best is None and "another metric" in reverse.untested


def test_board_average_test_is_exact_for_few_groups():
    result = stats.signflip_test([0.5, 0.5, 0.5])
    assert result.p_value == pytest.approx(2 / 8)


def test_board_rows_not_found_below_the_best_are_marked_tied(runs):
    from perrec_eval.leaderboard import family
    from perrec_eval.leaderboard.document import markdown_text
    from perrec_eval.registry import get

    section = family.section(get("perrecbench"), family.load_runs([runs["baselines"]]), n_resamples=500)
    entries = [row["cells"][cell]["metrics"]["ptc"] for row in section["rows"] for cell in row["cells"]]
    tested = [entry for entry in entries if entry.get("vs_best")]
    tied = [entry for entry in tested if entry["vs_best"]["p_value"] >= 0.05]
    assert tied
    for row in section["rows"]:
        for cell, entry in row["cells"].items():
            value = entry["metrics"]["ptc"]
            test = value.get("vs_best")
            shown = markdown_text(family.value_text(entry, "ptc"))
            if value.get("tied"):  # a tie with the best is "=" alone
                assert shown.endswith(" =") and "†" not in shown, (row["label"], cell)
                continue
            assert ("†" in shown) == (test is not None and test["p_value"] >= 0.05), (row["label"], cell)


def test_board_table_states_floor_and_resolution_per_column(runs):
    from perrec_eval import ptc
    from perrec_eval.leaderboard import family
    from perrec_eval.registry import get

    table = build_table(load_runs([runs["baselines"], runs["truth"]]))
    constant = next(row for row in table.rows if row.label == "constant")
    for cell, floor in table.floors.items():
        assert cell[1] == "pointwise" and floor == pytest.approx(constant.entries[cell].ptc)
    users = {"easy": 2, "medium": 3, "hard": 4}
    for (level, _), value in table.resolution.items():
        assert value == pytest.approx(ptc.expected_resolution(users[level], 6)["min_detectable_difference"])
    section = family.section(
        get("perrecbench"), family.load_runs([runs["baselines"], runs["truth"]]), n_resamples=200
    )
    text = family.markdown(section)
    assert "| floor: constant rating | 0.17 | – |" in text or "| floor: constant rating |" in text
    assert "| min. detectable Δ |" in text
    floor_row = next(line for line in text.splitlines() if line.startswith("| floor: constant rating"))
    assert floor_row.count("|") == len(section["main_cells"]) + 3  # its label, every column, the average


def test_board_listwise_first_position_columns(runs):
    from perrec_eval.tasks.perrecbench.leaderboard.tables import CELL_HEADER, cell_rows

    table = build_table(load_runs([runs["constant"]]))
    column = CELL_HEADER.index("list: first shown ranked first")
    listwise = [line for line in cell_rows(table) if line[1].endswith("listwise")]
    assert listwise and all(line[column] == "100.0%" for line in listwise)
