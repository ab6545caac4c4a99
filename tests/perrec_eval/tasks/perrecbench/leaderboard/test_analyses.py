"""The paper's analyses as data: domains, group sizes, methods, prompting, k x shots, rating errors, stats."""

from __future__ import annotations

import json

import pytest

from perrec_eval.tasks.perrecbench.leaderboard import analyses
from perrec_eval.tasks.perrecbench.leaderboard.board import build_table
from perrec_eval.tasks.perrecbench.leaderboard.runs import load_runs
from tests.perrec_eval.tasks.perrecbench.leaderboard.synthetic import pointwise_records, write_run


def test_analyses_by_domain_splits_groups_by_their_id_prefix(tmp_path):
    books = [f"Books:{i}" for i in range(4)]
    shoes = [f"Clothing_Shoes_and_Jewelry:{i}" for i in range(6)]
    records = pointwise_records(books, [True] * 4) + pointwise_records(shoes, [False, True] * 3)
    table = build_table(load_runs([write_run(tmp_path / "run", records)]))
    result = analyses.by_domain(table)
    assert result["domains"] == ["Books", "Clothing_Shoes_and_Jewelry"]
    assert result["num_groups"] == {"Books": 4, "Clothing_Shoes_and_Jewelry": 6}
    assert result["rows"][0]["ptc"] == {"Books": 1.0, "Clothing_Shoes_and_Jewelry": 0.0}


def test_analyses_by_group_size_and_method_read_the_cells(runs):
    table = build_table(load_runs([runs["truth"], runs["reverse"]]))
    size = analyses.by_group_size(table)
    assert size["sizes"] == [2, 3, 4] and size["methods"] == ["pointwise", "pairwise", "listwise"]
    assert size["rows"][1]["ptc"]["listwise"] == {"easy": -1.0, "medium": -1.0, "hard": -1.0}
    method = analyses.by_method(table)
    assert method["rows"][0]["ptc"] == {"pointwise": 1.0, "pairwise": 1.0, "listwise": 1.0}


def test_analyses_prompting_groups_runs_of_one_model_that_differ_in_prompting(runs):
    table = build_table(load_runs([runs["constant"], runs["no_profile"]]))
    (block,) = analyses.prompting(table)
    assert [row["prompting"] for row in block["rows"]] == ["zero-shot", "zero-shot w/o profile"]


def test_analyses_prompting_ignores_runs_that_differ_otherwise(runs):
    assert analyses.prompting(build_table(load_runs([runs["truth"], runs["heapsort"]]))) == []


def test_analyses_rating_errors_correlate_ptc_with_mae_over_cells(runs):
    table = build_table(load_runs([runs["baselines"]]))
    errors = analyses.rating_errors(table)
    assert len(errors["points"]) == 5 * 3  # five baselines x three levels, pointwise
    assert {s["label"] for s in errors["systems"]} == {
        "random",
        "rating-bias",
        "item-quality",
        "constant",
        "history-affinity",
    }
    assert -1.0 <= errors["ptc_vs_mae"]["r"] <= 1.0 and errors["ptc_vs_mae"]["n"] == 15
    bias = next(s for s in errors["systems"] if s["label"] == "rating-bias")
    assert bias["ptc"] == 0.0 and bias["mae"] > 0


def test_analyses_benchmark_stats_come_from_the_data_folder(runs, bench):
    (stats,) = analyses.benchmark_stats(load_runs([runs["truth"]]))
    fingerprint = json.loads((runs["truth"] / "run.json").read_text())["dataset_fingerprint"]
    assert stats["data"] == f"build {fingerprint[:12]}" and stats["split"] == "test"  # no local path
    assert set(stats["distributions"]) == {"rating", "relative_rating", "history_length", "query_year"}
    assert stats["figures"]["groups"] == 6


def test_analyses_benchmark_stats_say_when_the_file_is_missing(tmp_path):
    run = write_run(
        tmp_path / "run", pointwise_records(["g1", "g2"], [True, False]), data=str(tmp_path / "nowhere")
    )
    (stats,) = analyses.benchmark_stats(load_runs([run]))
    assert "no stats.json" in stats["missing"]


@pytest.mark.parametrize(
    ("settings", "name"),
    [
        ({"prompt": "default", "shots": 0, "samples": 1}, "zero-shot"),
        ({"prompt": "default", "shots": 3, "samples": 1}, "few-shot (3)"),
        ({"prompt": "cot_no_profile", "shots": 0, "samples": 1}, "chain-of-thought w/o profile"),
        (
            {"prompt": "default", "shots": 0, "samples": 5, "aggregate": "mean"},
            "zero-shot, self-consistency (5, mean)",
        ),
    ],
)
def test_analyses_prompting_names_follow_table_2(settings, name):
    assert analyses.prompting_name(settings) == name
