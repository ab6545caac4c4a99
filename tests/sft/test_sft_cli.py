"""`perrecbench sft ...` from the command line: help with defaults, one-line errors, the data command."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from perrec_eval.cli import main
from perrec_eval.engines import MissingExtraError
from perrec_eval.extras import require


def help_text(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_sft_help_lists_the_subcommands_and_the_loop(capsys):
    out = help_text(capsys, "sft")
    for command in ("data", "train", "merge", "push", "perrecbench sft merge adapters/F1 adapters/F2"):
        assert command in out


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        (
            "data",
            ["--format {pointwise,pairwise,listwise,mixed}", "(default: easy,medium,hard)", "(default: 4)"],
        ),
        (
            "train",
            [
                "--lora_r LORA_R",
                "LoRA R value. (default: 16)",
                "(default: 1e-05)",
                "`SchedulerType` for all possible values. (default: cosine)",
            ],
        ),
        ("merge", ["{cat,linear,factor-mean,ties,svd}", "(default: cat)", "(default: equal)"]),
        ("push", ["ORG/NAME", "--dry-run", "--run RUN"]),
    ],
)
def test_sft_subcommand_help_shows_defaults(capsys, command, shown):
    out = " ".join(help_text(capsys, "sft", command).split())
    for text in shown:
        assert text in out


def test_sft_data_without_a_profile_choice_is_one_line(capsys, sft_bench, tmp_path):
    code = main(
        ["sft", "data", "--data", str(sft_bench), "--format", "pairwise", "--out", str(tmp_path / "d")]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--no-profile" in err


def test_sft_data_command_writes_the_folder(capsys, sft_bench, tmp_path):
    out = tmp_path / "listwise"
    argv = ["--no-progress", "sft", "data", "--data", str(sft_bench), "--format", "listwise", "--no-profile"]
    assert main([*argv, "--out", str(out)]) == 0
    info = json.loads((out / "sft_data.json").read_text())
    assert f"{info['examples']} examples (listwise {info['examples']})" in capsys.readouterr().out


def test_sft_missing_train_extra_is_one_line_naming_the_pip_command(capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "trl", None)  # import trl now fails as if it were not installed
    with pytest.raises(MissingExtraError, match=r'pip install "perrecbench\[train\]"'):
        require("trl", "train", by="fine-tuning")
    argv = ["--model_name_or_path", "m", "--data", str(tmp_path), "--output_dir", str(tmp_path / "o")]
    code = main(["sft", "train", *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and 'pip install -e ".[train]"' in err


def test_sft_lora_yaml_is_the_default_recipe():
    from sft.train import parse

    root = Path(__file__).resolve().parents[2]
    argv = ["--model_name_or_path", "m", "--data", "d", "--output_dir", "o"]
    assert parse(["--config", str(root / "sft/configs/lora.yaml"), *argv]) == parse(argv)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--model", "m", "--data", "d", "--out", "o"], "--model is gone (sft train takes TRL's settings"),
        (["--trl-arg", "optim=adafactor"], "--trl-arg is gone"),
        (["--model_name_or_path", "m", "--data", "d", "--output_dir", "o", "--lr", "x"], "--lr"),
        (["--data", "d", "--config", "missing.yaml"], "missing.yaml"),
    ],
)
def test_sft_train_bad_arguments_are_one_line(capsys, argv, says):
    assert main(["sft", "train", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err


def test_sft_train_help_is_trls_with_perrecbenchs_own_first(capsys):
    out = help_text(capsys, "sft", "train")
    assert out.startswith("usage: perrecbench sft train --model_name_or_path MODEL --data EXAMPLES")
    options = out[out.index("options:") :]
    assert options.index("--data DATA") < options.index("--output_dir") < options.index("--lora_r")
    assert "--config FILE.yaml" in out and "sft/configs/lora.yaml" in out


@pytest.mark.parametrize(("name", "kind"), [("ddp", "MULTI_GPU"), ("zero3", "DEEPSPEED"), ("fsdp", "FSDP")])
def test_sft_accelerate_configs_name_their_strategy(name, kind):
    config = yaml.safe_load((Path(__file__).resolve().parents[2] / f"sft/configs/{name}.yaml").read_text())
    assert config["distributed_type"] == kind and config["mixed_precision"] == "bf16"
    assert config.get("deepspeed_config", {}).get("zero_stage", 3) == 3


@pytest.mark.parametrize("command", ["data", "merge"])
def test_sft_data_and_merge_refuse_a_second_process_on_one_out(capsys, tmp_path, command):
    from tests.lock_holder import held_by_another_process

    out = tmp_path / "out"
    argv = {
        "data": ["sft", "data", "--data", str(tmp_path / "bench"), "--format", "pairwise", "--no-profile"],
        "merge": ["sft", "merge", str(tmp_path / "a"), str(tmp_path / "b")],
    }[command]
    with held_by_another_process(out, "file") as pid:
        assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "in use by another perrecbench process" in err and str(pid) in err
    assert not out.exists()


def test_sft_train_keeps_perrecbenchs_own_flags_and_hands_the_rest_to_trl():
    from perrec_eval.cli import build_parser

    argv = ["--model_name_or_path", "m", "--no-progress", "--run_name", "", "--warmup_steps", "-1", "-v"]
    args = build_parser().parse_args(["sft", "train", *argv])
    assert args.argv == ("--model_name_or_path", "m", "--run_name", "", "--warmup_steps", "-1")
    assert args.no_progress is True and args.verbose is True


def test_sft_train_no_progress_switch_hides_the_trainers_bars():
    from perrec_eval import progress
    from sft.train import parse

    progress.disable()
    try:
        _, args, _ = parse(["--model_name_or_path", "m", "--data", "d", "--output_dir", "o"])
    finally:
        progress.enable()
    assert args.disable_tqdm is True
