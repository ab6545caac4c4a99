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


def _legacy(run: Path) -> dict:
    """The run's scores.json rewritten in the layout of runs written before 2026-11-29 (and returned)."""
    data = read_scores(run / "scores.json").to_json()
    (run / "scores.json").write_text(json.dumps(data))
    return data


def test_results_scores_read_back_to_the_file_they_came_from(run):
    written = json.loads((run / "scores.json").read_text())  # the shared layout of every family
    assert written["task"] == "perrecbench" and written["headline"] == "ptc"
    assert read_scores(run / "scores.json").to_family().to_json() == written
    legacy = _legacy(run)
    assert read_scores(run / "scores.json").to_json() == legacy
    assert list(Scores.from_json(legacy).to_json()) == list(legacy)  # the keys in the file's order


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
    data = _legacy(run)
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
    ("legacy", "edit", "message"),
    [
        (True, lambda d: d["cells"][0].update(ptc="abc"), "ptc='abc', not a number"),
        (True, lambda d: d["cells"][0].pop("num_groups"), "not a run's scores"),
        (True, lambda d: d.pop("variant"), "not a run's scores"),
        (False, lambda d: d["cells"][0]["metrics"]["ptc"].update(value="abc"), "ptc='abc', not a number"),
        (False, lambda d: d["cells"][0].pop("num_docs"), "not a run's scores"),
        (False, lambda d: d.update(task="llmrec"), "holds the scores of task 'llmrec'"),
    ],
)
def test_results_damaged_scores_name_the_file_and_the_fix(run, legacy, edit, message):
    data = _legacy(run) if legacy else json.loads((run / "scores.json").read_text())
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
