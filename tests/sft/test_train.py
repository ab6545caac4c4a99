"""`perrecbench sft train`: TRL SFT with LoRA on a tiny model (CPU), the paper's recipe as defaults."""

from __future__ import annotations

import json

import pytest

from perrec_eval.errors import ConfigError, DataError
from sft.train import parse, train
from tests.sft.conftest import tiny_args

pytestmark = pytest.mark.slow


def test_sft_train_saves_an_adapter_and_lowers_the_loss(trained):
    out, info = trained
    assert (out / "adapter_model.safetensors").is_file() and (out / "adapter_config.json").is_file()
    assert json.loads((out / "sft_train.json").read_text())["steps"] == 10
    losses = [entry["loss"] for entry in info["log_history"] if "loss" in entry]
    assert len(losses) == 10
    assert sum(losses[-3:]) / 3 < 0.5 * sum(losses[:3]) / 3  # the answer format is learned
    assert info["train_tokens"] > 0 and info["data"]["format"] == "pairwise"


def test_sft_train_records_the_fingerprint_of_its_examples(trained, pairwise_data):
    from sft.train import examples_fingerprint

    _, info = trained
    assert info["data"]["sha256"] == examples_fingerprint(pairwise_data) is not None


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


def test_sft_train_defaults_are_the_papers_recipe():
    script, args, model = parse(["--model_name_or_path", "m", "--data", "d", "--output_dir", "o"])
    assert args.num_train_epochs == 2 and args.learning_rate == 1e-5 and args.lr_scheduler_type == "cosine"
    assert (
        args.warmup_steps == 0.1 and args.completion_only_loss is True and args.assistant_only_loss is False
    )
    assert args.per_device_train_batch_size * args.gradient_accumulation_steps == 32
    assert args.bf16 is False and args.fp16 is False  # CPU: TRL's bf16 default would fail (PITFALLS 7)
    assert args.use_cpu is True  # so that torchrun processes on a CPU-only machine train as one DDP job
    assert (args.max_length, args.save_total_limit, args.seed) == (8192, 1, 0)
    assert (model.use_peft, model.lora_r, model.lora_alpha, model.lora_dropout) == (True, 16, 16, 0.05)
    assert model.lora_target_modules == "all-linear" and model.dtype == "auto"
    assert (script.data, script.drop_long, script.overwrite) == ("d", False, False)


def test_sft_train_takes_any_trl_setting_from_flags_and_a_config_file(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("learning_rate: 3.0e-4\nlora_r: 8\noptim: adafactor\nmax_grad_norm: 0.5\n")
    argv = ["--config", str(recipe), "--model_name_or_path", "m", "--data", "d", "--output_dir", "o"]
    _, args, model = parse([*argv, "--max_grad_norm", "0.3", "--lora-alpha", "8"])
    assert (args.learning_rate, args.optim, args.max_grad_norm) == (3e-4, "adafactor", 0.3)  # flags win
    assert (model.lora_r, model.lora_alpha, model.lora_dropout) == (8, 8, 0.05)  # the rest: the recipe


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--no_such_setting", "1"], "unknown setting.*--no_such_setting"),
        (["--learning_rate", "fast"], "invalid float value"),
        (["--trl-arg", "optim=adafactor"], "use the setting's own flag"),
        (["--model", "m"], "use --model_name_or_path"),
        (["--use_peft", "false"], "LoRA adapter"),
        (["--hub_token", "hf_abcdefghijklmnopqrstuvwxyz"], "HF_TOKEN"),
        (["--base-model-id", "/models/base"], "Hub id ORG/NAME"),
        (["--resume", "--overwrite"], "exclude each other"),
        (["--learning_rate", "nan"], "--learning_rate must be a finite number"),
        (["--learning_rate", "-1"], "--learning_rate must be positive"),
        (["--per_device_train_batch_size", "0"], "--per_device_train_batch_size must be at least 1"),
        (["--lora_r", "0"], "--lora_r must be at least 1"),
        (["--lora_dropout", "1.5"], "--lora_dropout must be in"),
    ],
)
def test_sft_train_bad_settings_are_one_config_error(argv, says):
    with pytest.raises(ConfigError, match=says):
        parse(["--model_name_or_path", "m", "--data", "d", "--output_dir", "o", *argv])


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("lr: [1,\n", "while parsing"),
        ("- a list\n", "YAML mapping"),
        ("epochs: 2\n", "unknown setting.*--epochs"),
        ("learning_rate: &a 0.001\nweight_decay: *a\n", "aliases"),
        ("learning_rate: 0.001\nlearning_rate: 0.002\n", "twice"),
        ("lora_r: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper"),
        (b"\xff\xfe lora_r: 4\n", "not UTF-8"),
    ],
)
def test_sft_train_bad_config_file_is_one_config_error(tmp_path, text, says):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError, match=says):
        parse(["--config", str(recipe), "--model_name_or_path", "m", "--data", "d", "--output_dir", "o"])


def test_sft_train_needs_a_model_and_an_output_folder():
    with pytest.raises(ConfigError, match="required: --output_dir.*--model_name_or_path"):
        parse(["--data", "d"])


def test_sft_train_refuses_examples_its_max_length_would_cut(tiny_model_dir, pairwise_data, tmp_path):
    with pytest.raises(ConfigError, match="--drop_long"):
        train(*parse(tiny_args(tiny_model_dir, pairwise_data, tmp_path, "--max_length", "64")))


def test_sft_train_needs_an_examples_folder(tiny_model_dir, sft_bench, tmp_path):
    with pytest.raises(DataError, match="perrecbench sft data") as err:
        train(*parse(tiny_args(tiny_model_dir, sft_bench, tmp_path)))
    assert f"is a benchmark: write examples from it with `perrecbench sft data --data {sft_bench} " in str(
        err.value
    )
    assert f"--out {sft_bench}" not in str(err.value)  # never into the benchmark itself


def _short(tiny_model_dir, data, out, *more: str):
    """Four steps, a checkpoint every two (the shape of an interrupted long run)."""
    steps = ("--max_steps", "4", "--save_strategy", "steps", "--save_steps", "2")
    return parse(tiny_args(tiny_model_dir, data, out, *steps, *more))


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
        train(*config)
    monkeypatch.undo()
    assert (out / "checkpoint-2").is_dir() and not (out / "sft_train.json").exists()

    steps = []
    step = trl.SFTTrainer.training_step
    monkeypatch.setattr(
        trl.SFTTrainer, "training_step", lambda self, *a, **k: steps.append(1) or step(self, *a, **k)
    )
    info = train(*_short(tiny_model_dir, pairwise_data, out))  # the same command
    assert len(steps) == 2 and info["steps"] == 4  # steps 3 and 4 only: resumed, not restarted
    assert (out / "adapter_model.safetensors").is_file()


def test_sft_train_refuses_to_replace_a_finished_adapter_silently(trained, tiny_model_dir, pairwise_data):
    out, info = trained
    before = (out / "adapter_model.safetensors").read_bytes()
    with pytest.raises(ConfigError, match="finished adapter.*--overwrite"):
        train(*_short(tiny_model_dir, pairwise_data, out))
    assert (out / "adapter_model.safetensors").read_bytes() == before


def test_sft_train_refuses_checkpoints_of_another_training(tiny_model_dir, pairwise_data, tmp_path):
    from sft.train import DATA_KEY, SETTINGS_FILE, examples_fingerprint, resume_point, settings_of

    out = tmp_path / "adapter"
    (out / "checkpoint-2").mkdir(parents=True)
    (out / "checkpoint-2" / "trainer_state.json").write_text("{}")
    config = _short(tiny_model_dir, pairwise_data, out)
    settings = {**settings_of(*config), DATA_KEY: examples_fingerprint(pairwise_data)}
    (out / SETTINGS_FILE).write_text(json.dumps(settings))
    assert resume_point(*config) == str(out / "checkpoint-2")
    resumed = _short(tiny_model_dir, pairwise_data, out, "--logging_steps", "7", "--report_to", "none")
    assert resume_point(*resumed) == str(out / "checkpoint-2")  # logging does not change what is trained
    with pytest.raises(ConfigError, match="another training.*learning_rate.*--overwrite"):
        resume_point(*_short(tiny_model_dir, pairwise_data, out, "--learning_rate", "1e-3"))
    again = _short(tiny_model_dir, pairwise_data, out, "--learning_rate", "1e-3", "--overwrite")
    assert resume_point(*again) is None
    assert not (out / "checkpoint-2").exists()


def test_sft_train_refuses_to_resume_on_replaced_examples(tiny_model_dir, pairwise_data, tmp_path):
    import shutil

    import datasets

    from sft.train import resume_point

    data, out = tmp_path / "data", tmp_path / "adapter"
    shutil.copytree(pairwise_data, data)
    config = _short(tiny_model_dir, data, out)
    assert resume_point(*config) is None  # a new training: its settings and examples are recorded
    (out / "checkpoint-2").mkdir()
    (out / "checkpoint-2" / "trainer_state.json").write_text("{}")
    assert resume_point(*config) == str(out / "checkpoint-2")
    (examples,) = data.glob("*.parquet")
    fewer = datasets.Dataset.from_parquet(str(examples)).select(range(2))
    examples.unlink()
    fewer.to_parquet(str(examples))  # `sft data` wrote the folder again, with other examples
    with pytest.raises(ConfigError, match="its examples were not these in --data: data_sha256.*--overwrite"):
        resume_point(*config)


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
        resume_point(*_short(tiny_model_dir, pairwise_data, out))


def test_sft_train_refuses_a_folder_it_did_not_write(tiny_model_dir, pairwise_data, tmp_path):
    from sft.train import resume_point

    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="did not write"):
        resume_point(*_short(tiny_model_dir, pairwise_data, tmp_path, "--overwrite"))
    assert (tmp_path / "notes.txt").exists()


def test_sft_train_refuses_a_token_in_a_config_file(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("hub_token: hf_abcdefghijklmnopqrstuvwxyz\n")
    with pytest.raises(ConfigError, match="--hub_token is refused.*HF_TOKEN") as err:
        parse(["--config", str(recipe), "--model_name_or_path", "m", "--data", "d", "--output_dir", "o"])
    assert "hf_abcdefghijklmnopqrstuvwxyz" not in str(err.value)


@pytest.mark.parametrize("where", ["flag", "config"])
def test_sft_train_refuses_push_to_hub_that_skips_the_publish_scan(tmp_path, where):
    argv = ["--model_name_or_path", "m", "--data", "d", "--output_dir", "ad/x16", "--hub_model_id", "org/x"]
    if where == "flag":
        argv.append("--push_to_hub")
    else:
        (tmp_path / "recipe.yaml").write_text("push_to_hub: true\n")
        argv += ["--config", str(tmp_path / "recipe.yaml")]
    with pytest.raises(ConfigError, match="--push_to_hub is refused.*perrecbench push adapter ad/x16"):
        parse(argv)


def test_sft_train_refuses_a_merged_adapter_folder(tiny_model_dir, pairwise_data, tmp_path):
    from sft.train import resume_point

    (tmp_path / "sft_merge.json").write_text("{}")
    (tmp_path / "adapter_config.json").write_text("{}")
    with pytest.raises(ConfigError, match="did not write"):
        resume_point(*_short(tiny_model_dir, pairwise_data, tmp_path, "--overwrite"))


def test_sft_train_second_process_on_one_out_is_refused(tiny_model_dir, pairwise_data, tmp_path):
    from tests.lock_holder import held_by_another_process

    out = tmp_path / "adapter"
    with (
        held_by_another_process(out),
        pytest.raises(DataError, match="in use by another perrecbench process"),
    ):
        train(*_short(tiny_model_dir, pairwise_data, out))


@pytest.mark.parametrize("out", [".", "~"])
def test_sft_train_refuses_the_current_or_home_folder_as_output_dir(
    tiny_model_dir, pairwise_data, tmp_path, monkeypatch, out
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ConfigError, match="--output_dir .* is the (current|home) folder"):
        train(*_short(tiny_model_dir, pairwise_data, out))
    assert list(tmp_path.iterdir()) == []  # not even a lock
