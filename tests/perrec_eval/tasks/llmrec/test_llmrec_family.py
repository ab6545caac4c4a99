"""LLMRec end to end on a small synthetic build: an oracle, the baselines, the fake engine, report, sft."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perrec_eval.cli import main
from perrec_eval.engines.fake import FakeEngine
from perrec_eval.evaluation import TaskEvalConfig, evaluate
from perrec_eval.tasks.llmrec import data
from perrec_eval.tasks.llmrec.task import TASK
from tests.dataset_builder.llmrec.fixture import read, synth_build


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth_build(tmp_path_factory.mktemp("llmrec_eval"))


def _metrics(folder: Path) -> dict[str, dict[str, float | None]]:
    scores = json.loads((folder / "scores.json").read_text())
    return {c["subset"]: {k: v["value"] for k, v in c["metrics"].items()} for c in scores["cells"]}


def _oracle(build: Path):
    """A responder that answers every request of the build's test docs with its true answer."""
    answers = {}
    for cell in TASK.cells():
        protocol = TASK.protocols[cell.protocol]
        for doc in data.load_docs(str(build), cell.subset, "test"):
            (slot,) = protocol.runner(doc).pending()
            text = protocol.render(doc, slot)[-1]["content"]
            answers[text] = protocol.format_answer(protocol.true_answer(doc, slot), slot)
    return lambda request, params, i: answers[request.messages[-1]["content"]]


def test_llmrec_family_oracle_scores_hits_one_and_errors_zero(build, tmp_path) -> None:
    config = TaskEvalConfig(
        task="llmrec", data=str(build), engine="fake", model="oracle", out=str(tmp_path / "o")
    )
    scores = evaluate(config, engine=FakeEngine(_oracle(build), model="oracle"))
    values = {c.subset: {k: v.value for k, v in c.metrics.items()} for c in scores.cells}
    for kind in ("sequential", "direct"):
        assert all(values[kind][m] == 1.0 for m in ("hr@1", "hr@5", "hr@10", "ndcg@5", "ndcg@10"))
        assert values[kind]["rmse"] is None
    assert values["rating"]["rmse"] == 0.0 and values["rating"]["mae"] == 0.0
    assert values["rating"]["ndcg@10"] is None
    assert all(c.num_failed == 0 for c in scores.cells)


def test_llmrec_family_baselines_constant_report_and_sft_data(build, tmp_path, capsys) -> None:
    runs, argv = tmp_path / "runs", ["--task", "llmrec", "--data", str(build), "--no-progress"]
    assert main(["evaluate", *argv, "--engine", "baseline", "--model", "all", "--out", str(runs / "b")]) == 0
    assert main(["evaluate", *argv, "--engine", "fake", "--model", "constant", "--out", str(runs / "f")]) == 0
    baselines = {name: _metrics(runs / "b" / name) for name in TASK.baselines}
    assert set(baselines["random"]) == {"rating", "sequential", "direct"}
    assert set(baselines["popularity"]) == {"sequential", "direct"}
    assert set(baselines["global-mean"]) == set(baselines["user-mean"]) == {"rating"}
    test = read(build, "direct", "test")
    constant = _metrics(runs / "f")
    # `constant` ranks the first 10 candidates as listed: a hit wherever the target was put among them
    assert constant["direct"]["hr@10"] == pytest.approx(
        sum(r["target_position"] < 10 for r in test) / len(test)
    )
    ratings = [r["rating"] for r in read(build, "rating", "test")]
    assert constant["rating"]["mae"] == pytest.approx(sum(abs(4 - r) for r in ratings) / len(ratings))
    train = [r["rating"] for r in read(build, "interactions", "train")]
    mean = sum(train) / len(train)
    expected = (sum((mean - r) ** 2 for r in ratings) / len(ratings)) ** 0.5
    assert baselines["global-mean"]["rating"]["rmse"] == pytest.approx(expected)

    assert (
        main(["report", str(runs / "b"), str(runs / "f"), "--out", str(tmp_path / "p"), "--no-progress"]) == 0
    )
    board = (tmp_path / "p" / "leaderboard.md").read_text()
    assert "| popularity |" in board and "| fake:constant |" in board
    assert "## LLMRec (each column names its metric and direction)" in board  # not ndcg@10 over RMSE
    assert "rating/rating: rmse (lower is better)" in board  # the rating cell shows its own metric

    out = tmp_path / "sft"
    assert main(["sft", "data", *argv, "--format", "direct", "--out", str(out)]) == 0
    info = json.loads((out / "sft_data.json").read_text())
    assert info["examples_per_format"] == {"direct": len(read(build, "direct", "train"))}


def test_llmrec_family_refuses_a_protocol_that_cannot_ask_the_subset(build, tmp_path, capsys) -> None:
    argv = ["evaluate", "--task", "llmrec", "--data", str(build), "--engine", "fake", "--model", "constant"]
    assert main([*argv, "--subsets", "rating", "--protocols", "direct", "--out", str(tmp_path / "x")]) == 2
    assert "choose --subsets and --protocols that meet" in capsys.readouterr().err


def test_llmrec_family_answer_formats_accept_the_true_answers(build) -> None:
    import re

    doc = data.load_docs(str(build), "direct", "test", max_docs=1)[0]
    protocol = TASK.protocols["direct"]
    (slot,) = protocol.runner(doc).pending()
    answer = protocol.format_answer(protocol.true_answer(doc, slot), slot)
    assert re.fullmatch(TASK.answer_regex("direct"), answer)
    rating = TASK.answer_regex("rating")
    assert all(re.fullmatch(rating, text) for text in ("4", "1.5", "5", "5.0"))
    assert not any(re.fullmatch(rating, text) for text in ("6", "5.5", "0.5", "1993", "4 stars"))
    assert TASK.json_schema("rating") == {"type": "number", "minimum": 1, "maximum": 5}


def test_llmrec_family_seen_before_is_every_earlier_item_and_never_the_target(build) -> None:
    train: dict[str, set[str]] = {}
    for row in read(build, "interactions", "train"):
        train.setdefault(row["user_id"], set()).add(row["parent_asin"])
    for doc in data.load_docs(str(build), "sequential", "test"):
        seen = data.seen_before(str(build), doc)
        history = {item["parent_asin"] for item in doc.history}
        assert doc.truth not in seen and seen == train[doc.user_id] | history
    for doc in data.load_docs(str(build), "sequential", "train", max_docs=50):
        assert doc.truth not in data.seen_before(str(build), doc)


def test_llmrec_family_is_listed_with_its_cells(capsys) -> None:
    assert main(["tasks"]) == 0
    assert (
        "task/protocol: rating/rating, sequential/sequential, sequential/sequential-candidates, direct/direct"
        in capsys.readouterr().out
    )
    assert main(["tasks", "--json"]) == 0
    (llmrec,) = [t for t in json.loads(capsys.readouterr().out) if t["name"] == "llmrec"]
    assert (
        llmrec["protocols"]
        == ["rating", "sequential", "direct", "sequential-candidates", "explanation", "summarization"]
        and llmrec["metrics"][0]["name"] == "ndcg@10"
    )


def test_llmrec_family_mostly_failed_ratings_score_with_an_interval_and_compare(build, tmp_path) -> None:
    docs = data.load_docs(str(build), "rating", "test", max_docs=30)
    rated = {doc.user_id for doc in docs[:2]}  # two answers parse; 28 are out of range

    def answer(request, params, i):
        return "4" if any(f"user {u} " in request.messages[-1]["content"] for u in rated) else "9"

    runs = tmp_path / "runs"
    argv = dict(task="llmrec", data=str(build), subsets=("rating",), protocols=("rating",), max_docs=30)
    config = TaskEvalConfig(**argv, engine="fake", model="weak", out=str(runs / "weak"))
    (cell,) = evaluate(config, engine=FakeEngine(answer, model="weak")).cells
    truth = [doc.truth for doc in docs if doc.user_id in rated]
    expected = (sum((4 - r) ** 2 for r in truth) / 2) ** 0.5
    assert cell.num_failed == 28 and cell.metrics["rmse"].value == pytest.approx(expected)
    assert cell.metrics["rmse"].ci_low is not None  # resampled over the two rated docs: no crash
    constant = TaskEvalConfig(**argv, engine="fake", model="constant", out=str(runs / "constant"))
    evaluate(constant)
    assert main(["report", str(runs), "--out", str(tmp_path / "p"), "--no-progress"]) == 0
