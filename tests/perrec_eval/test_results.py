"""scores.json and run.json: written and read by `perrec_eval.results` alone, older files still read."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from perrec_eval.errors import DataError
from perrec_eval.results import RunInfo, read_run_info
from perrec_eval.tasks.perrecbench.results import Metric, Scores, read_scores
from perrec_eval.tasks.perrecbench.scoring import score_cells
from tests.perrec_eval.tasks.perrecbench.leaderboard.synthetic import coin_flips, pointwise_records, write_run

GROUPS = [f"g{i}" for i in range(20)]
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def run(tmp_path):
    return write_run(tmp_path / "run", pointwise_records(GROUPS, coin_flips(20, 0.8, seed=1)))


def test_results_scores_read_back_to_the_file_they_came_from(run):
    written = json.loads((run / "scores.json").read_text())
    assert read_scores(run / "scores.json").to_json() == written
    assert list(Scores.from_json(written).to_json()) == list(written)  # the keys in the file's order


def test_results_pointwise_cell_writes_its_floor_but_no_listwise_or_cluster_parts():
    (cell,) = score_cells(pointwise_records(GROUPS, coin_flips(20, 0.8, seed=1))).to_json()["cells"]
    assert "constant_floor" in cell and "mae" in cell
    assert not {"first_shown_first", "num_clusters", "design_effect", "ptc_missing"} & set(cell)


def test_results_run_info_of_an_older_baseline_reads_in_the_one_layout():
    # written by `evaluate --engine baseline --model mf --max-groups 2` before baselines shared the models'
    # run.json layout: only the parts that apply to a baseline, `cf` last
    written = json.loads((FIXTURES / "baseline_run_2026-11-26.json").read_text())
    info = RunInfo.from_json(written)
    assert info.is_baseline and info.metric == Metric("tau_b", "zero") and info.cf is not None
    assert (info.complete, info.cost, info.label) == (None, None, None)
    rewritten = info.to_json()
    assert list(rewritten) == [field.name for field in dataclasses.fields(RunInfo)]
    assert {name: rewritten[name] for name in written} == written
    assert RunInfo.from_json(rewritten) == info


def test_results_older_scores_read_with_the_values_of_their_time(run):
    data = json.loads((run / "scores.json").read_text())
    for key in ("ci_method", "n_resamples", "complete", "num_engine_errors", "num_permanent_errors"):
        del data[key]
    for key in ("min_detectable_difference", "num_requests", "engine_error_rate", "constant_floor"):
        del data["cells"][0][key]
    (run / "scores.json").write_text(json.dumps(data))
    scores = read_scores(run / "scores.json")
    assert (scores.n_resamples, scores.complete, scores.num_engine_errors) == (1000, True, 0)
    assert scores.cells[0].num_requests == 0 and scores.cells[0].min_detectable_difference is None


def test_results_older_run_info_reads_missing_parts_as_none(run):
    data = json.loads((run / "run.json").read_text())
    for key in ("complete", "groups", "label", "prompt_variant"):
        data.pop(key, None)
    (run / "run.json").write_text(json.dumps(data))
    info = read_run_info(run)
    assert (info.complete, info.groups, info.label, info.prompt_variant) == (None, None, None, None)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["cells"][0].update(ptc="abc"), "ptc='abc', not a number"),
        (lambda d: d["cells"][0].pop("num_groups"), "not a run's scores"),
        (lambda d: d.pop("variant"), "not a run's scores"),
    ],
)
def test_results_damaged_scores_name_the_file_and_the_fix(run, edit, message):
    data = json.loads((run / "scores.json").read_text())
    edit(data)
    (run / "scores.json").write_text(json.dumps(data))
    with pytest.raises(DataError, match=message) as err:
        read_scores(run / "scores.json")
    assert "perrecbench score" in str(err.value) and "scores.json" in str(err.value)


def test_results_run_info_without_a_metric_is_refused(run):
    data = json.loads((run / "run.json").read_text())
    del data["metric"]
    (run / "run.json").write_text(json.dumps(data))
    with pytest.raises(DataError, match="has no 'metric' part"):
        read_run_info(run)
