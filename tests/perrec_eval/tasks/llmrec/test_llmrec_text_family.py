"""LLMRec's text tasks end to end on a synthetic build: build → evaluate (oracle, baselines, constant) →
report, with both metric implementations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perrec_eval.cli import main
from perrec_eval.engines.fake import FakeEngine
from perrec_eval.evaluation import TaskEvalConfig, evaluate
from perrec_eval.tasks.llmrec import data, text, textmetrics
from perrec_eval.tasks.llmrec.task import TASK
from tests.dataset_builder.llmrec.fixture import read, synth_build

TEXT = ("explanation", "summarization")


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth_build(tmp_path_factory.mktemp("llmrec_text_eval"))


def _values(scores) -> dict[str, dict[str, float | None]]:
    return {c.subset: {k: v.value for k, v in c.metrics.items()} for c in scores.cells}


def _metrics(folder: Path) -> dict[str, dict[str, float | None]]:
    scores = json.loads((folder / "scores.json").read_text())
    return {c["subset"]: {k: v["value"] for k, v in c["metrics"].items()} for c in scores["cells"]}


def _oracle(build: Path):
    answers = {}
    for kind in TEXT:
        protocol = TASK.protocols[kind]
        for doc in data.load_docs(str(build), kind, "test"):
            (slot,) = protocol.runner(doc).pending()
            text_ = protocol.render(doc, slot)[-1]["content"]
            answers[text_] = protocol.format_answer(protocol.true_answer(doc, slot), slot)
    return lambda request, params, i: answers[request.messages[-1]["content"]]


def _maximum(metric: str) -> float:
    return 100 * 2 / (2 + 1e-8) if metric in ("rouge-1/p5", "rouge-2/p5") else 100.0


def _bigram_share(build: Path, kind: str, p5: bool) -> float:
    """The share of test references with a bigram: a one-word reference has ROUGE-2 0 whatever the answer."""
    from rouge_score import tokenize

    references = [next(iter(doc.truth.values())) for doc in data.load_docs(str(build), kind, "test")]
    words = [r.split(" ") if p5 else tokenize.tokenize(r, None) for r in references]
    return sum(len(w) >= 2 for w in words) / len(words)


def test_llmrec_text_oracle_scores_the_maximum_of_every_metric(build, tmp_path) -> None:
    config = TaskEvalConfig(
        task="llmrec", data=str(build), subsets=TEXT, protocols=TEXT, engine="fake", model="oracle",
        out=str(tmp_path / "o"),
    )  # fmt: skip
    scores = evaluate(config, engine=FakeEngine(_oracle(build), model="oracle"))
    values = _values(scores)
    for kind in TEXT:
        for metric in textmetrics.TEXT_METRICS:
            expected = _maximum(metric)
            if metric.startswith("rouge-2"):
                expected *= _bigram_share(build, kind, metric.endswith("/p5"))
            if kind == "summarization" and metric.startswith("bleu-4"):
                assert values[kind][metric] is None
            else:
                assert values[kind][metric] == pytest.approx(expected, abs=1e-9), (kind, metric)
        assert values[kind]["ndcg@10"] is None and values[kind]["rmse"] is None
    assert _bigram_share(build, "explanation", True) == 1.0  # explanations have 4+ words
    assert 0 < _bigram_share(build, "summarization", True) < 1  # synth writes "Perfect" and "Love it!"
    assert all(c.num_failed == 0 for c in scores.cells)


def test_llmrec_text_prompts_carry_the_rating_history_and_review(build) -> None:
    doc = data.load_docs(str(build), "explanation", "test", max_docs=1)[0]
    messages = TASK.protocols["explanation"].render(doc, None)
    assert (
        f'generate a {doc.rating:.1f}-star explanation about this product "{doc.title}"'
        in messages[-1]["content"]
    )
    assert doc.truth["explanation"] not in messages[-1]["content"]
    summary = data.load_docs(str(build), "summarization", "test", max_docs=1)[0]
    content = TASK.protocols["summarization"].render(summary, None)[-1]["content"]
    assert summary.review_text in content and "around 4 words" in content


def test_llmrec_text_baselines_constant_and_report(build, tmp_path) -> None:
    runs, argv = tmp_path / "runs", ["--task", "llmrec", "--data", str(build), "--no-progress"]
    cells = ["--subsets", ",".join(TEXT), "--protocols", ",".join(TEXT)]
    assert (
        main(["evaluate", *argv, *cells, "--engine", "baseline", "--model", "all", "--out", str(runs / "b")])
        == 0
    )
    assert (
        main(["evaluate", *argv, *cells, "--engine", "fake", "--model", "constant", "--out", str(runs / "f")])
        == 0
    )
    first = _metrics(runs / "b" / "first-words")["summarization"]
    common = _metrics(runs / "b" / "common-sentence")["explanation"]
    for values in (first, common):
        for metric in ("rouge-1", "rouge-l", "bleu-1", "rouge-1/p5", "bleu-1/p5"):
            assert 0 < values[metric] < _maximum(metric)
    # first-words answers the review's first 4 words
    predictions = [json.loads(line) for line in (runs / "b" / "first-words" / "predictions.jsonl").open()]
    reviews = {row["id"]: row["review_text"] for row in read(build, "summarization", "test")}
    assert all(p["prediction"] == " ".join(reviews[p["id"]].split()[:4]) for p in predictions)
    # common-sentence is a train explanation, never fitted on a test row
    train = [row["explanation"] for row in read(build, "explanation", "train")]
    sentence = max(sorted(set(train)), key=train.count)
    assert {
        p["prediction"]
        for p in map(json.loads, (runs / "b" / "common-sentence" / "predictions.jsonl").open())
    } == {sentence}
    constant = _metrics(runs / "f")
    assert set(constant) == set(TEXT)
    assert (
        main(["report", str(runs / "b"), str(runs / "f"), "--out", str(tmp_path / "p"), "--no-progress"]) == 0
    )
    board = (tmp_path / "p" / "leaderboard.md").read_text()
    assert "explanation/explanation: rouge-l (higher is better)" in board and "| first-words |" in board


def test_llmrec_text_answer_format_accepts_the_true_answer(build) -> None:
    import re

    doc = data.load_docs(str(build), "explanation", "test", max_docs=1)[0]
    assert re.fullmatch(TASK.answer_regex("explanation"), doc.truth["explanation"])
    assert text.TextProtocol("summarization", 32).answer_format(doc) == "summarization"


def test_llmrec_text_without_the_metric_libraries_fails_in_one_line_before_asking(
    build, tmp_path, monkeypatch, capsys
) -> None:
    import sys

    for module in ("rouge_score", "rouge_score.rouge_scorer"):  # as if never installed, even once imported
        monkeypatch.setitem(sys.modules, module, None)
    argv = ["evaluate", "--task", "llmrec", "--data", str(build), "--engine", "fake", "--model", "constant"]
    code = main(
        [*argv, "--subsets", "summarization", "--protocols", "summarization", "--out", str(tmp_path / "r")]
    )
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1 and 'pip install "perrecbench[text]"' in err
    assert not (tmp_path / "r" / "cache.jsonl").exists()
