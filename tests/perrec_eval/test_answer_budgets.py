"""Answer budgets: each family's defaults in `evaluate --help`; one warning per cell whose answers hit it."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from perrec_eval.cli import main
from perrec_eval.engines.fake import FakeEngine
from perrec_eval.evaluation import TaskEvalConfig, evaluate
from perrec_eval.types import Completion
from tests.dataset_builder.llmrec.fixture import synth_build


@pytest.mark.parametrize(
    ("task", "shown"),
    [
        ("llmrec", "rating=64, sequential=512, direct=512, sequential-candidates=512, explanation=96"),
        ("recbench-plus", "recommend=512, recommend-k=256"),
        ("perrecbench", "pointwise=800, pairwise=512, listwise=800"),
    ],
)
def test_evaluate_help_states_each_protocols_default_budget(task, shown, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["evaluate", "--task", task, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"default answer budgets of {task}" in text and shown in text


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth_build(tmp_path_factory.mktemp("budgets"))


def _run(build: Path, out: Path, finish: str) -> None:
    def respond(request, params, index):
        text = "Based on the user's history, I would"
        return Completion(texts=(text,), extra={"finish_reasons": [finish]})

    config = TaskEvalConfig(
        task="llmrec", data=str(build), engine="fake", model="m", out=str(out), subsets=("rating",),
        max_docs=4,
    )  # fmt: skip
    evaluate(config, engine=FakeEngine(respond, model="m"))


def test_answers_cut_at_the_budget_are_warned_about_in_one_line(build, tmp_path, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="perrec_eval.evaluation"):
        _run(build, tmp_path / "cut", "length")
    (line,) = [r.getMessage() for r in caplog.records if "budget" in r.getMessage()]
    assert line.startswith("rating/rating: 4 of 4 answers stopped at the 64-token budget")
    assert "--max-new-tokens rating=N" in line and "\n" not in line
    info = json.loads((tmp_path / "cut" / "run.json").read_text())
    assert info["generation"]["max_new_tokens"]["rating"] == 64


def test_answers_that_end_on_their_own_raise_no_budget_warning(build, tmp_path, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="perrec_eval.evaluation"):
        _run(build, tmp_path / "stop", "stop")
    assert not [r for r in caplog.records if "budget" in r.getMessage()]
