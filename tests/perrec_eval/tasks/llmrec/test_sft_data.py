"""`perrecbench sft data --task llmrec`: examples from the train split only, no validation or test target."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from perrec_eval.cli import main
from tests.dataset_builder.llmrec.fixture import read, synth_build


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth_build(tmp_path_factory.mktemp("llmrec_sft"))


def _examples(build: Path, out: Path, fmt: str) -> list[dict]:
    argv = ["sft", "data", "--task", "llmrec", "--data", str(build), "--format", fmt, "--out", str(out)]
    assert main(argv) == 0
    info = json.loads((out / "sft_data.json").read_text())
    return pq.read_table(out / info["file"]).to_pylist()


@pytest.mark.parametrize("fmt", ["rating", "sequential", "direct", "mixed"])
def test_sft_data_examples_hold_no_validation_or_test_target(build, tmp_path, fmt) -> None:
    rows = _examples(build, tmp_path / fmt, fmt)
    train_ids = {
        row["id"]
        for config in ("rating", "sequential", "direct", "explanation", "summarization")
        for row in read(build, config, "train")
    }
    assert rows and {row["id"] for row in rows} <= train_ids
    titles = Counter(item["title"] for item in read(build, "items", "train"))
    held_out: dict[str, set[str]] = {}  # per user: titles only a validation or test target has
    for split in ("validation", "test"):
        for row in read(build, "sequential", split):
            if titles[row["title"]] == 1:
                held_out.setdefault(row["user_id"], set()).add(row["title"])
    assert held_out
    for row in rows:
        user = row["id"].split(":")[1]
        text = json.dumps([*row["prompt"], *row["completion"]], ensure_ascii=False)
        assert not any(
            json.dumps(title, ensure_ascii=False)[1:-1] in text for title in held_out.get(user, ())
        )


def test_sft_data_formats_count_their_train_rows(build, tmp_path) -> None:
    rows = _examples(build, tmp_path / "mixed", "mixed")
    configs = ("rating", "sequential", "direct", "explanation", "summarization")
    train = {config: len(read(build, config, "train")) for config in configs}
    assert Counter(row["format"] for row in rows) == train


def test_sft_data_writes_p5_templates_and_evaluate_asks_with_them(build, tmp_path) -> None:
    from perrec_eval.engines.fake import FakeEngine
    from perrec_eval.evaluation import TaskEvalConfig, evaluate
    from perrec_eval.tasks.llmrec import data
    from perrec_eval.tasks.llmrec.task import TASK

    rows = _examples(build, tmp_path / "p5", "mixed")
    assert json.loads((tmp_path / "p5" / "sft_data.json").read_text())["prompts"] == "p5"
    starts = {
        "rating": "What star rating do you think user ",
        "sequential": "Here is the purchase history list of user ",
        "direct": "Which item of the following to recommend for user ",
        "explanation": "Help user ",
        "summarization": "Write a short sentence to summarize the following product review from user ",
    }
    assert all(row["prompt"][-1]["content"].startswith(starts[row["format"]]) for row in rows)
    answers = {}  # the truth, keyed by the P5 prompt of each test doc
    for cell in TASK.cells():
        protocol = TASK.protocols[cell.protocol]
        for doc in data.load_docs(str(build), cell.subset, "test", max_docs=20):
            (slot,) = protocol.runner(doc).pending()
            text = protocol.render(doc, slot, variant="p5")[-1]["content"]
            answers[text] = protocol.format_answer(protocol.true_answer(doc, slot), slot)
    config = TaskEvalConfig(
        task="llmrec", data=str(build), engine="fake", model="p5", out=str(tmp_path / "run"), max_docs=20,
        prompts="p5",
    )  # fmt: skip
    engine = FakeEngine(lambda request, params, i: answers[request.messages[-1]["content"]], model="p5")
    cells = evaluate(config, engine=engine).cells
    assert all(c.num_failed == 0 for c in cells)
    headline = {"rating": "rmse", "explanation": "rouge-l", "summarization": "rouge-l"}
    assert {c.subset: c.metrics[headline.get(c.subset, "hr@1")].value for c in cells} == {
        "rating": 0.0, "sequential": 1.0, "direct": 1.0, "explanation": 100.0, "summarization": 100.0,
    }  # fmt: skip


def test_sft_data_and_evaluate_refuse_an_unknown_prompt_variant_in_one_line(build, tmp_path, capsys) -> None:
    argv = ["--task", "llmrec", "--data", str(build), "--prompts", "p6"]
    assert main(["sft", "data", *argv, "--out", str(tmp_path / "s")]) == 2
    fake = ["--engine", "fake", "--model", "constant"]
    assert main(["evaluate", *argv, *fake, "--out", str(tmp_path / "e")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("must be one of its variants (default, p5)" in line for line in err)
