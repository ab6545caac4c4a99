"""PerRecBench's numbers did not move when its scores took the shared layout and its report the shared
renderer: on a tiny benchmark, the runs' predictions and samples are byte for byte those the code before
(2026-11-29) wrote, every score and interval is the same, and so is every p-value of the report.

The golden (`fixtures/perrecbench_golden_2026-11-29.json`) was written by that code from the same runs:
each file's sha256, its scores.json (the older layout, which `legacy_scores` still reads) and its
leaderboard's tests against the best.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from perrec_eval.engines.fake import FakeEngine, constant
from perrec_eval.leaderboard import family
from perrec_eval.registry import get
from perrec_eval.results import read_family_scores
from perrec_eval.tasks.perrecbench.baselines import BASELINES
from perrec_eval.tasks.perrecbench.config import EvalConfig
from perrec_eval.tasks.perrecbench.results import Scores, legacy_scores
from perrec_eval.tasks.perrecbench.run import evaluate, evaluate_baselines
from tests.benchmark_fixture import write_tiny_benchmark

GOLDEN = json.loads((Path(__file__).parent / "fixtures" / "perrecbench_golden_2026-11-29.json").read_text())


def hashy(request, params, sample_index):
    """Answers fixed by a hash of the request: well-formed, varied, one in 13 unreadable."""
    content = "\n".join(message["content"] for message in request.messages)
    h = int(hashlib.sha256(content.encode()).hexdigest(), 16)
    answer = constant(request, params, sample_index)
    if not isinstance(answer, str):
        return answer
    if h % 13 == 0:
        return "I cannot tell."
    if "predicted_rating" in answer:
        return json.dumps({"predicted_rating": 1 + h % 5})
    if "predicted_ranking" in answer:
        ranking = json.loads(answer)["predicted_ranking"]
        shuffled = sorted(ranking, key=lambda u: hashlib.sha256(f"{h}:{u}".encode()).hexdigest())
        return json.dumps({"predicted_ranking": shuffled})
    if answer.strip() in ("[User A]", "[User B]"):
        return "[User A]" if h % 2 else "[User B]"
    return answer


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("golden")
    bench = write_tiny_benchmark(root / "bench", n_test=24)
    for name, extra in (("hashy", {}), ("paper", {"paper_mode": True})):
        config = EvalConfig(
            data=str(bench), engine="fake", model="hashy", label=name, out=str(root / "runs" / name), **extra
        )
        evaluate(config, FakeEngine(hashy, model="hashy"))
    config = EvalConfig(data=str(bench), engine="fake", model="constant", out=str(root / "runs" / "constant"))
    evaluate(config, FakeEngine(constant, model="constant"))
    baselines = EvalConfig(
        data=str(bench), engine="baseline", model="all", out=str(root / "runs" / "baselines")
    )
    evaluate_baselines(baselines, BASELINES)
    return root / "runs"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("name", sorted(GOLDEN["runs"]))
def test_golden_predictions_and_samples_are_byte_identical(runs, name):
    golden = GOLDEN["runs"][name]
    assert _sha(runs / name / "predictions.jsonl") == golden["predictions_sha256"]
    if "samples_sha256" in golden:
        assert _sha(runs / name / "samples.jsonl") == golden["samples_sha256"]


@pytest.mark.parametrize("name", sorted(GOLDEN["runs"]))
def test_golden_scores_are_the_same_numbers_in_the_shared_layout(runs, name):
    written = read_family_scores(runs / name / "scores.json", "perrecbench")
    assert written.task == "perrecbench" and written.headline == "ptc"
    assert Scores.from_family(written).to_json() == GOLDEN["runs"][name]["scores"]


@pytest.mark.parametrize("name", sorted(GOLDEN["runs"]))
def test_golden_older_layout_reads_into_the_shared_one(runs, name):
    older = legacy_scores(GOLDEN["runs"][name]["scores"])
    assert older == read_family_scores(runs / name / "scores.json", "perrecbench")


def test_golden_report_p_values_are_the_same(runs):
    loaded = family.load_runs([runs / "hashy", runs / "paper", runs / "constant", runs / "baselines"])
    section = family.section(get("perrecbench"), loaded, base=runs)
    rows = {row["path"]: row for row in section["rows"]}
    compared = 0
    for name, golden in GOLDEN["report"].items():
        row = rows[name]
        for cell, test in golden["cells"].items():
            if test is None:
                continue
            mine = row["cells"][cell]["metrics"]["ptc"].get("vs_best")
            assert mine is not None and mine["p_value"] == test["p_value"], (name, cell)
            # recorded as the best minus the run now (the run minus the best before)
            assert mine["difference"] == pytest.approx(-test["difference"], abs=1e-15)
            compared += 1
        if golden["average_vs_best"] is not None:
            assert row["average_vs_best"]["p_value"] == golden["average_vs_best"]["p_value"], name
            compared += 1
        assert row["average"] == golden["average"]
    assert compared == 24  # every test the report ran before, the average's included
