"""`perrecbench sft train`: TRL SFT with LoRA on a tiny model (CPU), the paper's recipe as defaults."""

from __future__ import annotations

import json

import pytest

from perrec_eval.errors import ConfigError, DataError
from sft.config import TrainConfig
from sft.train import lora_config, sft_config, train, trl_overrides

pytestmark = pytest.mark.slow


def test_sft_train_saves_an_adapter_and_lowers_the_loss(trained):
    out, info = trained
    assert (out / "adapter_model.safetensors").is_file() and (out / "adapter_config.json").is_file()
    assert json.loads((out / "sft_train.json").read_text())["steps"] == 10
    losses = [entry["loss"] for entry in info["log_history"] if "loss" in entry]
    assert len(losses) == 10
    assert sum(losses[-3:]) / 3 < 0.5 * sum(losses[:3]) / 3  # the answer format is learned
    assert info["train_tokens"] > 0 and info["data"]["format"] == "pairwise"


def test_sft_train_records_the_recipe_and_writes_a_card(trained):
    out, info = trained
    recipe = info["recipe"]
    assert (recipe["lora_r"], recipe["lora_alpha"], recipe["lora_dropout"]) == (16, 16, 0.05)
    assert set(recipe["target_modules"]) == {
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    }
    assert (recipe["precision"], recipe["completion_only_loss"]) == ("fp32", True)
    assert (recipe["batch_size"], recipe["gradient_accumulation"], recipe["world_size"]) == (4, 1, 1)
    card = (out / "README.md").read_text()
    assert "pairwise" in card and "r 16, alpha 16, dropout 0.05" in card and "Not evaluated yet" in card


def test_sft_config_defaults_are_the_papers_recipe():
    import torch

    config = TrainConfig(model="m", data="d", out="o")
    args = sft_config(config, world_size=1, torch=torch)
    assert args.num_train_epochs == 2 and args.learning_rate == 1e-5 and args.lr_scheduler_type == "cosine"
    assert (
        args.warmup_steps == 0.1 and args.completion_only_loss is True and args.assistant_only_loss is False
    )
    assert args.per_device_train_batch_size * args.gradient_accumulation_steps == 32
    assert args.bf16 is False and args.fp16 is False  # CPU: TRL's bf16 default would fail (PITFALLS 7)
    assert args.use_cpu is True  # so that torchrun processes on a CPU-only machine train as one DDP job
    assert sft_config(config, world_size=4, torch=torch).gradient_accumulation_steps == 2  # still 32 in all
    lora = lora_config(config)
    assert (lora.r, lora.lora_alpha, lora.lora_dropout, lora.target_modules) == (16, 16, 0.05, "all-linear")


def test_sft_config_takes_other_trl_fields_but_not_its_own_twice():
    fields = {"optim", "max_grad_norm", "learning_rate"}
    assert trl_overrides(["optim=paged_adamw_32bit", "max_grad_norm=0.3"], fields) == {
        "optim": "paged_adamw_32bit",
        "max_grad_norm": 0.3,
    }
    with pytest.raises(ConfigError, match="--learning-rate"):
        trl_overrides(["learning_rate=1"], fields)
    with pytest.raises(ConfigError, match="no such field"):
        trl_overrides(["no_such_thing=1"], fields)
    with pytest.raises(ConfigError, match="multiple"):
        TrainConfig(model="m", data="d", out="o", batch_size=30, per_device_batch_size=4)
    with pytest.raises(ConfigError, match="processes"):
        TrainConfig(model="m", data="d", out="o", batch_size=4).gradient_accumulation(3)


def test_sft_train_refuses_examples_its_max_length_would_cut(tiny_model_dir, pairwise_data, tmp_path):
    config = TrainConfig(model=str(tiny_model_dir), data=str(pairwise_data), out=str(tmp_path), max_length=64)
    with pytest.raises(ConfigError, match="--drop-long"):
        train(config)


def test_sft_train_needs_an_examples_folder(tiny_model_dir, sft_bench, tmp_path):
    with pytest.raises(DataError, match="perrecbench sft data"):
        train(TrainConfig(model=str(tiny_model_dir), data=str(sft_bench), out=str(tmp_path)))


def _short(tiny_model_dir, data, out, **overrides) -> TrainConfig:
    """Four steps, a checkpoint every two (the shape of an interrupted long run)."""
    values = dict(
        model=str(tiny_model_dir),
        data=str(data),
        out=str(out),
        max_steps=4,
        batch_size=4,
        per_device_batch_size=4,
        warmup=0.0,
        activation_checkpointing=False,
        save_strategy="steps",
        trl_args=("save_steps=2",),
        progress=False,
    )
    return TrainConfig(**{**values, **overrides})


def test_sft_train_same_command_resumes_from_the_last_checkpoint(
    tiny_model_dir, pairwise_data, tmp_path, monkeypatch
):
    import trl

    out = tmp_path / "adapter"
    config = _short(tiny_model_dir, pairwise_data, out)
    original = trl.SFTTrainer._save_checkpoint

    def save_then_die(self, model, trial):  # kill -9 right after the first checkpoint is on disk
        original(self, model, trial)
        raise KeyboardInterrupt

    monkeypatch.setattr(trl.SFTTrainer, "_save_checkpoint", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        train(config)
    monkeypatch.undo()
    assert (out / "checkpoint-2").is_dir() and not (out / "sft_train.json").exists()

    steps = []
    step = trl.SFTTrainer.training_step
    monkeypatch.setattr(
        trl.SFTTrainer, "training_step", lambda self, *a, **k: steps.append(1) or step(self, *a, **k)
    )
    info = train(config)  # the same command
    assert len(steps) == 2 and info["steps"] == 4  # steps 3 and 4 only: resumed, not restarted
    assert (out / "adapter_model.safetensors").is_file()


def test_sft_train_refuses_to_replace_a_finished_adapter_silently(trained, tiny_model_dir, pairwise_data):
    out, info = trained
    before = (out / "adapter_model.safetensors").read_bytes()
    with pytest.raises(ConfigError, match="finished adapter.*--overwrite"):
        train(_short(tiny_model_dir, pairwise_data, out))
    assert (out / "adapter_model.safetensors").read_bytes() == before


def test_sft_train_refuses_checkpoints_of_another_training(tiny_model_dir, pairwise_data, tmp_path):
    from sft.train import SETTINGS_FILE, resume_point, train_settings

    out = tmp_path / "adapter"
    (out / "checkpoint-2").mkdir(parents=True)
    (out / "checkpoint-2" / "trainer_state.json").write_text("{}")
    config = _short(tiny_model_dir, pairwise_data, out)
    (out / SETTINGS_FILE).write_text(json.dumps(train_settings(config)))
    assert resume_point(config) == str(out / "checkpoint-2")
    with pytest.raises(ConfigError, match="another training.*learning_rate.*--overwrite"):
        resume_point(_short(tiny_model_dir, pairwise_data, out, learning_rate=1e-3))
    assert (
        resume_point(_short(tiny_model_dir, pairwise_data, out, learning_rate=1e-3, overwrite=True)) is None
    )
    assert not (out / "checkpoint-2").exists()


@pytest.mark.parametrize("where", ["model", "inside-model", "holds-model", "data"])
def test_sft_train_refuses_an_out_overlapping_its_inputs(tiny_model_dir, pairwise_data, where):
    from sft.train import resume_point

    out = {
        "model": tiny_model_dir,
        "inside-model": tiny_model_dir / "adapter",
        "holds-model": tiny_model_dir.parent,
        "data": pairwise_data,
    }[where]
    with pytest.raises(ConfigError, match="new folder outside"):
        resume_point(_short(tiny_model_dir, pairwise_data, out))


def test_sft_train_refuses_a_folder_it_did_not_write(tiny_model_dir, pairwise_data, tmp_path):
    from sft.train import resume_point

    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="did not write"):
        resume_point(_short(tiny_model_dir, pairwise_data, tmp_path, overwrite=True))
    assert (tmp_path / "notes.txt").exists()


def test_sft_train_refuses_a_token_as_a_trl_arg():
    with pytest.raises(ConfigError, match="HF_TOKEN"):
        trl_overrides(["hub_token=hf_abcdefghijklmnopqrstuvwxyz"], {"hub_token"})


def test_sft_train_refuses_a_merged_adapter_folder(tiny_model_dir, pairwise_data, tmp_path):
    from sft.train import resume_point

    (tmp_path / "sft_merge.json").write_text("{}")
    (tmp_path / "adapter_config.json").write_text("{}")
    with pytest.raises(ConfigError, match="did not write"):
        resume_point(_short(tiny_model_dir, pairwise_data, tmp_path, overwrite=True))


def test_sft_train_second_process_on_one_out_is_refused(tiny_model_dir, pairwise_data, tmp_path):
    from tests.lock_holder import held_by_another_process

    out = tmp_path / "adapter"
    with (
        held_by_another_process(out),
        pytest.raises(DataError, match="in use by another perrecbench process"),
    ):
        train(_short(tiny_model_dir, pairwise_data, out))
