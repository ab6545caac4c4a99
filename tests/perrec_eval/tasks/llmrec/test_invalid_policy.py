"""`--invalid-policy p5`: P5's rule (ratings outside 1.0..4.9 dropped) as failures that are counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perrec_eval.cli import main
from perrec_eval.engines.fake import FakeEngine
from perrec_eval.evaluation import TaskEvalConfig, evaluate
from tests.dataset_builder.llmrec.fixture import synth_build


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth_build(tmp_path_factory.mktemp("llmrec_policy"))


def _rating_cell(build: Path, out: Path, answer: str, policy: str | None):
    config = TaskEvalConfig(
        task="llmrec", data=str(build), engine="fake", model=f"say-{answer}", out=str(out),
        subsets=("rating",), protocols=("rating",), max_docs=20, invalid_policy=policy,
    )  # fmt: skip
    (cell,) = evaluate(config, engine=FakeEngine(lambda request, params, i: answer, model="x")).cells
    return cell


def test_invalid_policy_p5_fails_and_counts_a_rating_of_five(build, tmp_path) -> None:
    strict = _rating_cell(build, tmp_path / "strict", "5", None)
    p5 = _rating_cell(build, tmp_path / "p5", "5", "p5")
    assert strict.num_failed == 0 and strict.metrics["rmse"].value is not None
    assert p5.num_failed == 20 and p5.metrics["rmse"].value is None
    reasons = {
        json.loads(line)["reason"] for line in (tmp_path / "p5" / "samples.jsonl").read_text().splitlines()
    }
    assert reasons == {"p5_dropped"}


def test_invalid_policy_p5_keeps_what_p5_kept(build, tmp_path) -> None:
    p5 = _rating_cell(build, tmp_path / "p5", "4.9", "p5")
    strict = _rating_cell(build, tmp_path / "strict", "4.9", None)
    assert p5.num_failed == 0 and p5.metrics["rmse"].value == strict.metrics["rmse"].value


def test_invalid_policy_unknown_ends_in_one_line(build, tmp_path, capsys) -> None:
    argv = ["evaluate", "--task", "llmrec", "--data", str(build), "--engine", "fake", "--model", "constant"]
    assert main([*argv, "--invalid-policy", "clip", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "must be one of its policies (strict, p5)" in err[0]
