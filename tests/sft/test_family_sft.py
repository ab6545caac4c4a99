"""Fine-tuning a family on the general path (the toy family made in the tests): examples, training, card."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from perrec_eval import registry
from perrec_eval.cli import main
from perrec_eval.engines.fake import FakeEngine
from perrec_eval.errors import ConfigError, DataError
from perrec_eval.evaluation import TaskEvalConfig, evaluate
from sft.examples import INFO_FILE
from sft.train import parse, train
from tests.perrec_eval.tasks import toy
from tests.sft.conftest import tiny_args

pytestmark = pytest.mark.slow

# What `sft train` and the card read from every examples folder, whichever family wrote it.
SHARED_FACTS = {
    *("format", "examples", "examples_per_format", "answers", "length_unit", "lengths", "total_length")
}


@pytest.fixture(scope="module")
def toy_registered():
    registry.register(toy.TASK, replace=True)
    yield
    registry.unregister("toy")


@pytest.fixture(scope="module")
def toy_trained(toy_registered, tiny_model_dir, tmp_path_factory):
    """(working folder, examples folder, adapter folder, sft_train.json) of two steps on the toy's examples;
    paths are relative to the working folder, as a user would give them."""
    import os

    root = tmp_path_factory.mktemp("toy_sft")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        toy.write_data(Path("toy-data"), n=4)
        assert main(["sft", "data", "--task", "toy", "--data", "toy-data", "--out", "examples"]) == 0
        argv = tiny_args(tiny_model_dir, Path("examples"), Path("adapters") / "toy", "--max_steps", "2")
        info = train(*parse([*argv, "--base_model_id", "org/tiny-base"]))
    finally:
        os.chdir(cwd)
    return root, root / "examples", root / "adapters" / "toy", info


def test_family_examples_hold_the_facts_every_examples_folder_has(toy_trained, pairwise_data):
    _, examples, _, _ = toy_trained
    toy_facts = json.loads((examples / INFO_FILE).read_text())
    perrecbench_facts = json.loads((pairwise_data / INFO_FILE).read_text())
    assert SHARED_FACTS <= toy_facts.keys() and SHARED_FACTS <= perrecbench_facts.keys()
    assert toy_facts["task"] == "toy" and toy_facts["docs"] == 8 and toy_facts["source"]["split"] == "train"
    assert set(toy_facts["lengths"]) == {"toy-rate", "toy-check"}
    assert sum(toy_facts["answers"]["toy-rate"].values()) == toy_facts["examples_per_format"]["toy-rate"]


def test_sft_train_trains_on_a_family_examples_folder(toy_trained):
    _, _, adapter, info = toy_trained
    assert (adapter / "adapter_model.safetensors").is_file()
    assert info["steps"] == 2 and info["data"]["task"] == "toy" and info["train_examples"] == 16
    assert json.loads((adapter / "sft_train.json").read_text())["data"]["sha256"] == info["data"]["sha256"]
    card = (adapter / "README.md").read_text()
    assert "# toy: Toy fine-tuning of org/tiny-base" in card
    assert "trained on Toy's **mixed** format" in card and "PerRecBench" not in card
    assert "by `perrecbench sft data --task toy --format mixed`. Every example comes from the train" in card
    assert "perrecbench evaluate --task toy --data BENCHMARK_DIR" in card


class ScriptedAsHf(FakeEngine):
    """A scripted engine that run.json records as the hf engine: publishing refuses runs of the fake engine,
    and the random tiny model answers nothing the toy can parse (this test is about the card, not the model).
    """

    def info(self) -> dict:
        return {**super().info(), "name": "hf"}


@pytest.fixture(scope="module")
def toy_runs(toy_trained, tiny_model_dir):
    """Runs of the trained adapter (answering the truth) and of its base model alone (answering 3)."""
    import os

    root, model = toy_trained[0], str(tiny_model_dir)
    cwd = os.getcwd()
    os.chdir(root)
    try:
        for out, adapter, responder in (
            ("runs/toy", ("adapters/toy",), toy.oracle),
            ("runs/base", (), lambda request, params, i: toy.constant_answer(request)),
        ):
            config = TaskEvalConfig(
                task="toy", data="toy-data", engine="hf", model=model, adapter=adapter, out=out, max_docs=2
            )
            evaluate(config, engine=ScriptedAsHf(responder, model=model, adapter=(adapter or (None,))[0]))
    finally:
        os.chdir(cwd)
    return root


def test_sft_push_card_shows_the_family_headline_metric_per_cell(toy_runs, monkeypatch):
    monkeypatch.chdir(toy_runs)
    push = ["sft", "push", "adapters/toy", "--repo", "org/toy", "--run", "runs/toy"]
    assert main([*push, "--base-run", "runs/base", "--dry-run", "--stage", "staged"]) == 0
    text = ModelCard.load(Path("staged") / "README.md").text
    assert "Toy, accuracy per cell (size × protocol; higher is better; 95% interval in brackets)." in text
    assert "| size | protocol | `base (org/tiny-base)` | `toy` |" in text
    assert "| small | toy-rate | " in text and " | 1.000 [1.000, 1.000] |" in text  # the truth, every time
    rows = [line for line in text.splitlines() if line.startswith(("| small |", "| large |"))]
    assert [row.split(" | ")[:2] for row in rows] == [
        ["| small", "toy-rate"],
        ["| small", "toy-check"],
        ["| large", "toy-rate"],
        ["| large", "toy-check"],
    ]


def test_sft_push_refuses_a_run_of_another_family_and_dataset_entries(toy_runs, monkeypatch, tmp_path):
    from sft.config import PushConfig
    from sft.push import adapter_upload

    monkeypatch.chdir(toy_runs)
    other = tmp_path / "other"
    other.mkdir()
    run = json.loads(Path("runs/toy/run.json").read_text())
    run["config"]["task"] = "perrecbench"
    (other / "run.json").write_text(json.dumps(run))
    with pytest.raises(DataError, match="is a run of task perrecbench; the adapter was trained on task toy"):
        adapter_upload(PushConfig(adapter="adapters/toy", repo="org/toy", run=str(other)))
    with pytest.raises(ConfigError, match="push this adapter of task toy without --dataset"):
        adapter_upload(
            PushConfig(
                adapter="adapters/toy", repo="org/toy", run="runs/toy", dataset="org/d", dataset_revision="r"
            )
        )
