"""What every report states besides PTC: the pointwise floor, the resolution, the CI method, and the
listwise first-position diagnostic."""

from __future__ import annotations

import json

import pytest

from perrec_eval import ptc
from perrec_eval.engines.fake import FakeEngine, constant
from perrec_eval.results import RunInfo
from perrec_eval.tasks.perrecbench.config import EvalConfig
from perrec_eval.tasks.perrecbench.report import family_run, render_report
from perrec_eval.tasks.perrecbench.results import Scores
from perrec_eval.tasks.perrecbench.run import evaluate, evaluate_baselines
from perrec_eval.tasks.perrecbench.scoring import N_RESAMPLES, cell_resolution
from tests.benchmark_fixture import truth_responder, write_tiny_benchmark, write_truth_profiles


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    folder = write_tiny_benchmark(tmp_path_factory.mktemp("bench") / "perrecbench", n_test=8)
    return folder, write_truth_profiles(folder, folder.parent / "profiles.jsonl")


def _fake(bench, out, responder, **kwargs):
    folder, profiles = bench
    config = EvalConfig(
        data=str(folder),
        engine="fake",
        model="scripted",
        out=str(out),
        profiles=str(profiles),
        **kwargs,
    )
    return evaluate(config, FakeEngine(responder))


def _cells(scores):
    return {(c.level, c.method): c for c in scores.cells}


@pytest.fixture(scope="module")
def baselines(bench, tmp_path_factory):
    folder, _ = bench
    out = tmp_path_factory.mktemp("baselines")
    config = EvalConfig(data=str(folder), engine="baseline", model="all", out=str(out))
    return dict(evaluate_baselines(config, ("constant", "history-affinity"))), out


def test_baselines_and_models_write_one_run_json_layout(bench, baselines, tmp_path):
    _fake(bench, tmp_path / "model", constant, methods=("pointwise",))
    _, out = baselines
    model = json.loads((tmp_path / "model" / "run.json").read_text())
    baseline = json.loads((out / "constant" / "run.json").read_text())
    assert list(baseline) == list(model)
    assert baseline["engine"] == {"name": "baseline", "model": "constant"}
    assert (baseline["cache"], baseline["cost"], baseline["cf"]) == (None, None, None)
    assert (tmp_path / "model" / "samples.jsonl").exists()
    assert not (out / "constant" / "samples.jsonl").exists()  # a baseline sends no request


def test_constant_baseline_scores_exactly_the_floor_of_each_pointwise_cell(baselines):
    systems, _ = baselines
    for cell in systems["constant"].cells:
        assert cell.ptc == pytest.approx(cell.constant_floor)
    assert any(cell.constant_floor != 0.0 for cell in systems["constant"].cells)  # not a free zero


def test_floor_is_the_same_for_every_system_on_the_same_groups(baselines):
    systems, _ = baselines
    floors = [[c.constant_floor for c in s.cells] for s in systems.values()]
    assert floors[0] == floors[1]


def test_report_shows_the_floor_row_and_resolution_row(baselines):
    systems, out = baselines
    text = (out / "report.md").read_text()
    floor_row = next(line for line in text.splitlines() if line.startswith("| floor: constant rating |"))
    constant_row = next(line for line in text.splitlines() if line.startswith("| constant |"))
    # The floor row's pointwise cells are the constant baseline's PTC (without its interval).
    values = [part.split()[0].strip("*") for part in constant_row.split(" | ")[1:4]]  # marks, CI off
    assert values == floor_row.split(" | ")[1:4]
    assert "| min. detectable Δ |" in text and "10,000 resamples" in text


def test_fake_constant_script_pointwise_sits_on_the_floor(bench, tmp_path):
    scores = _fake(bench, tmp_path, constant, methods=("pointwise",))
    for cell in scores.cells:
        assert cell.ptc == pytest.approx(cell.constant_floor)


def test_scores_record_the_ci_method_and_resample_count(bench, tmp_path):
    scores = _fake(bench, tmp_path, truth_responder(1.0), methods=("pointwise",), levels=("easy",))
    assert scores.n_resamples == N_RESAMPLES == 10_000
    assert scores.ci_method == "percentile bootstrap over groups"
    saved = json.loads((tmp_path / "scores.json").read_text())
    assert saved["n_resamples"] == 10_000 and saved["extras"]["resolution_basis"] == "null tau variance"


def test_min_detectable_difference_comes_from_expected_resolution(bench, tmp_path):
    scores = _fake(bench, tmp_path, truth_responder(1.0), methods=("listwise",))
    for cell in scores.cells:
        users = {"easy": 2, "medium": 3, "hard": 4}[cell.level]
        expected = ptc.expected_resolution(users, 8)["min_detectable_difference"]
        assert cell.min_detectable_difference == pytest.approx(expected)
    assert cell_resolution(2, 200) > cell_resolution(2, 800)
    mean_variance = sum(ptc.null_tau_variance(n) for n in (2, 3, 4)) / 9
    average = ptc.expected_resolution(2, 8, variance=mean_variance)["min_detectable_difference"]
    assert scores.average_min_detectable_difference == pytest.approx(average)


def test_listwise_position_bias_of_an_always_first_model(bench, tmp_path):
    def identity(request, params, i):
        return constant(request, params, i)

    cells = _cells(_fake(bench, tmp_path, identity, methods=("listwise",)))
    for cell in cells.values():
        assert cell.first_shown_first == 1.0 and cell.num_listwise_answers == 8
    # Balanced pairs of 2-user groups: the first-shown user is truly first in exactly one of each pair.
    assert cells[("easy", "listwise")].first_shown_truly_first == 0.5


def test_listwise_position_bias_of_a_perfect_model_matches_the_truth(bench, tmp_path):
    for cell in _fake(bench, tmp_path, truth_responder(1.0), methods=("listwise",)).cells:
        assert cell.first_shown_first == cell.first_shown_truly_first
    text = (tmp_path / "report.md").read_text()
    assert "first shown ranked first" in text


def test_report_render_keeps_old_scores_readable(tmp_path):
    cell = {"level": "easy", "method": "pointwise", "ptc": 0.5, "ptc_ci_low": 0.4, "ptc_ci_high": 0.6}
    cell |= {"num_groups": 4, "num_invalid": 0, "parse_failure_rate": 0.0}
    old = {"variant": "tau_b", "invalid": "zero", "confidence_level": 0.95, "average": 0.5}
    scores = Scores.from_json({**old, "cells": [cell]})
    info = RunInfo.from_json(
        {"config": {}, "engine": {"model": "m"}, "metric": {"variant": "tau_b", "invalid": "zero"}}
    )
    text = render_report([family_run(tmp_path, info, scores, [])])
    assert "1,000 resamples" in text and "floor: constant rating" not in text


def test_report_of_several_systems_marks_the_best_and_the_untold_orderings(baselines):
    _, out = baselines
    lines = (out / "report.md").read_text().splitlines()
    rows = [
        next(line for line in lines if line.startswith(f"| {name} |"))
        for name in ("constant", "history-affinity")
    ]
    cells = [[c for c in row.strip("| ").split(" | ")[1:]] for row in rows]  # after the run

    for column in zip(*cells, strict=True):
        if column[0] == "–":
            continue
        # The best of the column is bold, unless they tie (=) or its lead is below what the groups detect
        # while the test does not tell them apart (†); the other is below it (no mark) or not told apart (†).
        bold = [value.startswith("**") for value in column]
        tied = ["=" in value for value in column]
        untold = ["†" in value for value in column]
        assert sum(bold) == 1 or all(tied) or any(untold)
        assert not any(b and u for b, u in zip(bold, untold, strict=True))
