"""A test-made family runs through evaluate, score, report and sft data; general code never names it."""

from __future__ import annotations

import json

import pytest

from perrec_eval import registry
from perrec_eval.cli import main
from perrec_eval.engines.fake import FakeEngine
from perrec_eval.evaluation import TaskEvalConfig, evaluate
from tests.perrec_eval.tasks import toy


@pytest.fixture
def toy_family(tmp_path):
    registry.register(toy.TASK, replace=True)
    data = toy.write_data(tmp_path / "toy-data")
    yield data
    registry.unregister("toy")


def _scores(folder):
    return json.loads((folder / "scores.json").read_text())


def _cell(scores, cell):
    return next(c for c in scores["cells"] if f"{c['subset']}/{c['protocol']}" == cell)


def test_toy_family_is_listed_with_its_own_axes(toy_family, capsys):
    assert main(["tasks"]) == 0
    out = capsys.readouterr().out
    assert "toy: Toy" in out and "size (small, large) × protocol (toy-rate, toy-check)" in out
    assert "rmse (lower is better, corpus)" in out


def test_toy_family_oracle_scores_accuracy_one_and_rmse_zero(toy_family, tmp_path):
    config = TaskEvalConfig(
        task="toy", data=str(toy_family), engine="fake", model="oracle", out=str(tmp_path / "r")
    )
    engine = FakeEngine(toy.oracle, model="oracle")
    scores = evaluate(config, engine=engine)
    assert len(scores.cells) == 4 and scores.complete
    for cell in scores.cells:
        assert cell.metrics["accuracy"].value == 1.0 and cell.metrics["rmse"].value == 0.0
        assert cell.num_docs == 12 and cell.num_failed == 0
    # one engine call per lockstep step and cell: toy-rate 1 step, toy-check 2 steps, 2 subsets
    assert engine.calls == 2 * (1 + 2)


def test_toy_family_constant_and_baseline_score_the_share_of_threes(toy_family, tmp_path, capsys):
    runs = tmp_path / "runs"
    argv = ["--task", "toy", "--data", str(toy_family)]
    assert (
        main(["evaluate", *argv, "--engine", "fake", "--model", "constant", "--out", str(runs / "fake")]) == 0
    )
    assert (
        main(["evaluate", *argv, "--engine", "baseline", "--model", "always-3", "--out", str(runs / "b")])
        == 0
    )
    truth = [
        json.loads(line)["rating"] for line in (toy_family / "small" / "test.jsonl").read_text().splitlines()
    ]
    share = sum(r == 3 for r in truth) / len(truth)
    fake, baseline = _scores(runs / "fake"), _scores(runs / "b")
    assert _cell(fake, "small/toy-rate")["metrics"]["accuracy"]["value"] == pytest.approx(share)
    assert _cell(baseline, "small/toy-rate")["metrics"]["accuracy"]["value"] == pytest.approx(share)
    rmse = (sum((3 - r) ** 2 for r in truth) / len(truth)) ** 0.5
    assert _cell(fake, "small/toy-rate")["metrics"]["rmse"]["value"] == pytest.approx(rmse)
    low, high = (_cell(fake, "small/toy-rate")["metrics"]["accuracy"][k] for k in ("ci_low", "ci_high"))
    assert low <= share <= high
    # `constant` answers "yes", then 3 within 3-5: the toy-check cell scores the same docs right
    assert _cell(fake, "small/toy-check")["metrics"]["accuracy"]["value"] == pytest.approx(share)


def test_toy_family_score_recomputes_the_saved_scores(toy_family, tmp_path, capsys):
    out = tmp_path / "r"
    argv = ["--task", "toy", "--data", str(toy_family), "--engine", "fake", "--model", "constant"]
    assert main(["evaluate", *argv, "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["score", str(out), "--task", "toy", "--json"]) == 0
    printed = capsys.readouterr().out
    assert json.loads(printed) == _scores(out)


def test_toy_family_report_has_its_own_section_with_tests_against_the_best(toy_family, tmp_path, capsys):
    runs = tmp_path / "runs"
    config = TaskEvalConfig(
        task="toy", data=str(toy_family), engine="fake", model="oracle", out=str(runs / "o")
    )
    evaluate(config, engine=FakeEngine(toy.oracle, model="oracle"))
    argv = ["--task", "toy", "--data", str(toy_family)]
    assert main(["evaluate", *argv, "--engine", "baseline", "--model", "all", "--out", str(runs / "b")]) == 0
    assert main(["report", str(runs / "o"), str(runs / "b"), "--out", str(tmp_path / "report")]) == 0
    board = (tmp_path / "report" / "leaderboard.md").read_text()
    assert "## Toy: accuracy (higher is better)" in board
    assert "| oracle | 1.000" in board  # the fake engine's script: never a column's best beside real runs
    (section,) = json.loads((tmp_path / "report" / "leaderboard.json").read_text())
    oracle = next(row for row in section["rows"] if row["label"] == "oracle")
    assert oracle["cells"]["small/toy-rate"]["metrics"]["accuracy"]["vs_best"]["p_value"] < 0.05
    assert any(
        row["cells"]["small/toy-rate"]["metrics"]["accuracy"].get("best") for row in section["rows"]
    )  # one of the baselines


def test_toy_family_sft_data_answers_read_back_to_the_truth(toy_family, tmp_path, capsys):
    import datasets

    out = tmp_path / "sft"
    assert main(["sft", "data", "--task", "toy", "--data", str(toy_family), "--out", str(out)]) == 0
    info = json.loads((out / "sft_data.json").read_text())
    assert info["examples_per_format"] == {"toy-rate": 24, "toy-check": 24}
    rows = datasets.load_dataset("parquet", data_files=str(out / info["file"]), split="train")
    for row in rows:
        protocol = toy.TASK.protocols[row["format"]]
        slot = "high?" if "yes or no" in row["prompt"][-1]["content"] else "rating"
        parsed = protocol.parse(row["completion"][0]["content"], slot)
        assert parsed.ok and parsed.value == json.loads(row["answer"])


def test_toy_family_refuses_perrecbench_options_in_one_line(toy_family, capsys):
    argv = ["evaluate", "--task", "toy", "--data", str(toy_family), "--engine", "fake", "--model", "constant"]
    with pytest.raises(SystemExit):
        main([*argv, "--out", "x", "--methods", "pointwise"])
    assert "unrecognized arguments: --methods" in capsys.readouterr().err


def test_toy_family_a_cell_where_every_doc_failed_scores_none_not_a_crash(toy_family, tmp_path):
    config = TaskEvalConfig(
        task="toy", data=str(toy_family), engine="fake", model="m", out=str(tmp_path / "r"), max_docs=2
    )
    scores = evaluate(config, engine=FakeEngine(lambda request, params, i: "no idea", model="m"))
    for cell in scores.cells:
        assert cell.num_failed == 2
        assert cell.metrics["accuracy"].value == 0.0  # a failed doc scores 0
        assert cell.metrics["rmse"].value is None  # no error to average
