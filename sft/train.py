r"""LoRA fine-tuning on a task family's examples, in the shape of TRL's `trl/scripts/sft.py`.

Train a LoRA adapter with TRL's SFTTrainer on an examples folder of `perrecbench sft data` (conversational
prompt-completion: the loss is on the answer only). The settings are TRL's own, parsed by trl.TrlParser: every
trl.SFTConfig and trl.ModelConfig field, as TRL documents it, beside perrecbench's --data, --base_model_id,
--drop_long, --resume and --overwrite (and -v, --debug, --no-progress). Defaults: the paper's recipe,
sft/configs/lora.yaml, with bf16 only on a GPU that has it; --config FILE.yaml (the same format) overrides
it, and flags override both. The output folder holds the adapter (PEFT), the tokenizer, sft_train.json
(data, recipe, metrics, log history) and a model card.

    perrecbench sft train --model_name_or_path Qwen/Qwen2.5-0.5B-Instruct --data sft_data/mixed \
        --output_dir adapters/mixed

On several GPUs, the same arguments through accelerate (zero3.yaml or fsdp.yaml for models that do not fit
on one); the effective batch is per-device batch x accumulation x processes (here 4 x 2 x 4 = 32):

    accelerate launch --config_file sft/configs/ddp.yaml --num_processes 4 -m sft.train \
        --model_name_or_path meta-llama/Llama-3.1-8B-Instruct --data sft_data/mixed \
        --output_dir adapters/mixed --gradient_accumulation_steps 2
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import math
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

from perrec_eval import fileio, outputs, progress
from perrec_eval.cliconfig import load_settings, safe_yaml
from perrec_eval.errors import ConfigError, DataError
from perrec_eval.extras import require
from perrec_eval.lock import folder_lock
from perrec_eval.secrets import is_secret_name, redact
from sft.card import MERGE_INFO, TRAIN_INFO, model_card, record_hub_base
from sft.config import TrainArguments
from sft.examples import INFO_FILE, token_ids
from sft.outdir import is_empty, refuse_overlap

logger = logging.getLogger(__name__)

# The settings of the training whose checkpoints the output folder holds (hidden: `sft push` leaves it out).
SETTINGS_FILE = ".sft_train_settings.json"
# Settings that do not change the trained weights: a resumed training may change them; the card omits them.
_RUN_ONLY = frozenset(
    "resume overwrite output_dir resume_from_checkpoint disable_tqdm report_to run_name logging_steps "
    "save_strategy save_steps save_total_limit activation_checkpointing gradient_checkpointing".split()
)
# sft_train.json's recipe (what the model card compares with the paper's) and the TRL setting of each entry.
RECIPE_KEYS = {
    "lora_r": "lora_r",
    "lora_alpha": "lora_alpha",
    "lora_dropout": "lora_dropout",
    "epochs": "num_train_epochs",
    "max_steps": "max_steps",
    "per_device_batch_size": "per_device_train_batch_size",
    "gradient_accumulation": "gradient_accumulation_steps",
    "learning_rate": "learning_rate",
    "lr_scheduler": "lr_scheduler_type",
    "warmup": "warmup_steps",
    "max_length": "max_length",
    "completion_only_loss": "completion_only_loss",
    "dtype": "dtype",
    "seed": "seed",
}
# The flags of `sft train` before it took TRL's, and what replaced each.
_RENAMED = {
    "--model": "--model_name_or_path",
    "--out": "--output_dir",
    "--epochs": "--num_train_epochs",
    "--batch-size": "--gradient_accumulation_steps (effective batch = per-device batch x it x processes)",
    "--per-device-batch-size": "--per_device_train_batch_size",
    "--lr-scheduler": "--lr_scheduler_type",
    "--warmup": "--warmup_steps (a fraction of the steps if < 1)",
    "--target-modules": "--lora_target_modules",
    "--precision": "--bf16 / --fp16 (fp32: --bf16 false)",
    "--no-activation-checkpointing": "--activation_checkpointing false",
    "--no-progress": "--disable_tqdm true (or `perrecbench --no-progress sft train`)",
    "--trl-arg": "the setting's own flag (--optim paged_adamw_32bit) or a key of --config FILE.yaml",
}
USAGE = (
    "perrecbench sft train --model_name_or_path MODEL --data EXAMPLES --output_dir ADAPTER "
    "[--config FILE.yaml] [any trl.SFTConfig / trl.ModelConfig flag]"
)


class _HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    def _get_help_string(self, action: argparse.Action) -> str | None:
        return f"{action.help} (required)" if action.required else super()._get_help_string(action)


def recipe_defaults(torch: Any) -> dict[str, Any]:
    """The paper's recipe (``sft/configs/lora.yaml``) for this machine: bf16 on a CUDA GPU that supports it,
    else fp32 (TRL's bf16 default fails on CPU, PITFALLS 7); without any accelerator `use_cpu`, so that
    several torchrun processes train as one CPU data-parallel job; progress bars as the process' switch."""
    recipe = safe_yaml(resources.files("sft").joinpath("configs/lora.yaml").read_text(encoding="utf-8"))
    return {
        "bf16": torch.cuda.is_available() and torch.cuda.is_bf16_supported(),
        "use_cpu": torch.accelerator.current_accelerator() is None,
        "disable_tqdm": not progress.enabled(),
        **recipe,
    }


def _split_config(arg: str) -> list[str]:
    """``--config=FILE`` as ``--config FILE`` (TRL looks for the separate form only)."""
    return arg.split("=", 1) if arg.startswith("--config=") else [arg]


def config_settings(path: str) -> dict[str, Any]:
    """The settings of ``sft train --config FILE.yaml`` (TRL's format: flag names as keys, optional ``env``),
    read with `perrec_eval.cliconfig.load_settings`; TRL's ``env`` mapping is set in the environment.

    Raises:
        ConfigError: the file is not a YAML mapping of settings (see `load_settings`), or ``env`` is no
            mapping of names to plain values.
    """
    settings = load_settings(path)
    if not isinstance(settings, dict):
        raise ConfigError(
            f"--config {path} must be a YAML mapping of settings, got {type(settings).__name__}"
        )
    env = settings.pop("env", {})
    if not isinstance(env, dict) or any(isinstance(v, dict | list) for v in env.values()):
        raise ConfigError(f"--config {path}: env must map variable names to values")
    for name, value in env.items():
        os.environ[str(name)] = str(value)
    return settings


def make_parser() -> Any:
    """TRL's `TrlParser` over `TrainArguments`, `trl.SFTConfig` and `trl.ModelConfig`, the recipe as defaults;
    a bad flag raises `ConfigError` (one line) instead of printing the usage."""
    torch, trl = require("torch", "train", by="fine-tuning"), require("trl", "train", by="fine-tuning")

    class Parser(trl.TrlParser):
        def error(self, message: str) -> NoReturn:
            raise ConfigError(f"{message} (see perrecbench sft train --help)")

        def parse_args_and_config(self, args: Sequence[str], **kwargs: Any) -> tuple[Any, ...]:
            # TRL reads --config with yaml.safe_load (aliases, duplicate keys, unbounded nesting): read it
            # with perrecbench's one settings loader instead, then let TRL parse the flags over it.
            args, in_file = [part for arg in args for part in _split_config(arg)], []
            if "--config" in args:
                at = args.index("--config")
                if at + 1 == len(args):
                    raise ConfigError("--config needs a FILE.yaml")
                settings = config_settings(args.pop(at + 1))
                del args[at]
                in_file = self.set_defaults_with_config(**settings)
            *parsed, _, in_flags = super().parse_args_and_config(args, **kwargs)
            return (*parsed, in_file, in_flags)

    parser = Parser(
        (TrainArguments, trl.SFTConfig, trl.ModelConfig),
        prog="perrecbench sft train",
        usage=USAGE,
        description=__doc__,
        formatter_class=_HelpFormatter,
    )
    # TrlParser reads --config itself before parsing; this entry only shows it in --help.
    parser.add_argument(
        "--config",
        default=argparse.SUPPRESS,
        metavar="FILE.yaml",
        help="settings in TRL's YAML format (the flags' names as keys, as in sft/configs/lora.yaml)",
    )
    parser.set_defaults_with_config(**recipe_defaults(torch))
    for action in parser._actions:  # optional in TRL's scripts; an adapter needs both
        if action.dest in ("model_name_or_path", "output_dir"):
            action.required = True
    return parser


def parse(argv: Sequence[str]) -> tuple[TrainArguments, Any, Any]:
    """(perrecbench's, `trl.SFTConfig`, `trl.ModelConfig`) settings of the command line `argv`.

    Raises:
        ConfigError: a bad or unknown flag, a bad ``--config`` file, a flag of the old parser, a setting
            TRL refuses, full fine-tuning (``use_peft`` off), ``push_to_hub`` (TRL's upload skips the publish
            scan of `perrecbench push adapter`) or a secret given as a setting.
    """
    import yaml

    for arg in argv:
        if (old := arg.split("=", 1)[0]) in _RENAMED:
            raise ConfigError(f"{old} is gone (sft train takes TRL's settings now): use {_RENAMED[old]}")
    try:
        *parsed, in_file, in_flags = make_parser().parse_args_and_config(
            list(argv), return_remaining_strings=True, separate_remaining_strings=True
        )
    except ConfigError:
        raise
    except (ValueError, OSError, yaml.YAMLError) as err:  # TrlParser's and the dataclasses' own errors
        raise ConfigError(f"sft train settings: {' '.join(str(err).split())}") from err
    if in_file or in_flags:
        raise ConfigError(
            f"unknown setting(s) {' '.join([*in_file, *in_flags])}: not a field of trl.SFTConfig, "
            "trl.ModelConfig or perrecbench's (see perrecbench sft train --help)"
        )
    script, training, model = parsed
    if training.push_to_hub:  # TRL would upload the folder itself, checkpoints and local paths included
        raise ConfigError(
            "--push_to_hub is refused: TRL would upload without perrecbench's publish checks (secrets, "
            f"local paths); train, then upload with `perrecbench push adapter {training.output_dir} "
            "--repo ORG/NAME`"
        )
    if not model.use_peft:
        raise ConfigError("sft train trains a LoRA adapter: leave use_peft on (drop --use_peft false)")
    check_numbers(training, model)
    for settings in (script, training, model):
        for field in dataclasses.fields(settings):
            if is_secret_name(field.name) and getattr(settings, field.name):
                raise ConfigError(
                    f"--{field.name} is refused (it would be saved in training_args.bin and {TRAIN_INFO}): "
                    "set HF_TOKEN in the environment (or run `hf auth login`) instead"
                )
    return script, training, model


# Settings torch or PEFT would refuse (or train nothing with) deep inside the run: (valid?, what is valid).
_RANGES: dict[str, tuple[Callable[[float], bool], str]] = {
    "per_device_train_batch_size": (lambda value: value >= 1, "at least 1"),
    "gradient_accumulation_steps": (lambda value: value >= 1, "at least 1"),
    "lora_r": (lambda value: value >= 1, "at least 1"),
    "learning_rate": (lambda value: value > 0, "positive"),
    "lora_alpha": (lambda value: value > 0, "positive"),
    "lora_dropout": (lambda value: 0 <= value < 1, "in [0, 1)"),
    "weight_decay": (lambda value: value >= 0, "not negative"),
    "warmup_steps": (lambda value: value >= 0, "not negative"),
    "max_grad_norm": (lambda value: value >= 0, "not negative"),
    "num_train_epochs": (lambda value: value >= 0, "not negative"),
}


def check_numbers(training: Any, model: Any) -> None:
    """Refuse NaN or infinite numbers in any setting, and values torch or PEFT cannot train with.

    Raises:
        ConfigError: one line naming the setting and the values it takes.
    """
    for settings in (training, model):
        for field in dataclasses.fields(settings):
            value = getattr(settings, field.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"--{field.name} must be a finite number, got {value}")
            valid, wanted = _RANGES.get(field.name, (None, ""))
            if valid is not None and value is not None and not valid(value):
                raise ConfigError(f"--{field.name} must be {wanted}, got {value}")


def settings_of(script: TrainArguments, training: Any, model: Any) -> dict[str, Any]:
    """Every setting by name but those of :data:`_RUN_ONLY`: what a checkpoint depends on (redacted)."""
    values = {**dataclasses.asdict(script), **training.to_dict(), **dataclasses.asdict(model)}
    return redact({key: value for key, value in values.items() if key not in _RUN_ONLY})


def trl_departures(script: TrainArguments, training: Any, model: Any) -> dict[str, Any]:
    """The TRL settings, other than the recipe's recorded ones, that differ from the paper's recipe."""
    required = ["--model_name_or_path", model.model_name_or_path, "--output_dir", training.output_dir]
    recipe = settings_of(*make_parser().parse_args_into_dataclasses([*required, "--data", script.data]))
    recorded = {*RECIPE_KEYS.values(), "lora_target_modules", "bf16", "fp16"}
    own = {field.name for field in dataclasses.fields(script)}
    return {
        key: value
        for key, value in settings_of(script, training, model).items()
        if key not in recorded | own and recipe.get(key) != value
    }


def load_examples(
    script: TrainArguments, max_length: int | None, tokenizer: Any
) -> tuple[Any, dict[str, Any], list[int], int]:
    """The prompt-completion dataset, its ``sft_data.json``, each kept example's token count, and how many
    examples were left out for being longer than `max_length`.

    Raises:
        DataError: `script.data` is not a folder of `perrecbench sft data`.
        ConfigError: examples are longer than `max_length` and `drop_long` is off.
    """
    import datasets

    info_path = Path(script.data) / INFO_FILE
    if not info_path.is_file():
        fix = _examples_fix(script.data)
        raise DataError(f"--data {script.data} is not an examples folder (no {INFO_FILE}): {fix}")
    data_info = fileio.read_json(info_path)
    dataset = datasets.load_dataset(str(script.data), split="train").select_columns(["prompt", "completion"])
    lengths = [len(token_ids(tokenizer, [*row["prompt"], *row["completion"]])) for row in dataset]
    long = [i for i, length in enumerate(lengths) if max_length is not None and length > max_length]
    if long and not script.drop_long:
        raise ConfigError(
            f"{len(long)} of {len(lengths)} examples are longer than --max_length {max_length} tokens "
            f"(longest {max(lengths)}): truncation would cut their answers; raise --max_length or pass "
            "--drop_long to leave them out"
        )
    if long and len(long) == len(lengths):
        raise ConfigError(
            f"all {len(lengths)} examples are longer than --max_length {max_length} tokens (shortest "
            f"{min(lengths)}): --drop_long would leave nothing to train on; raise --max_length to at least "
            f"{min(lengths)}"
        )
    if long:
        logger.warning("leaving out %d examples longer than %d tokens", len(long), max_length)
        keep = sorted(set(range(len(lengths))) - set(long))
        dataset = dataset.select(keep)
        lengths = [lengths[i] for i in keep]
    return dataset, data_info, lengths, len(long)


def _examples_fix(data: str) -> str:
    """How to write the examples `--data` should name: into `data` when it is free, else from it when it is
    a benchmark (a build's manifest, or a folder per subset of a family), else into a folder of their own."""
    from perrec_eval import registry

    folder = Path(data)
    if is_empty(folder):
        return f"write one with `perrecbench sft data --data BENCHMARK --format FORMAT --out {data}`"
    subsets = {subset for name in registry.evaluable() for subset in registry.get(name).subsets}
    if (folder / "manifest.json").is_file() or any((folder / subset).is_dir() for subset in subsets):
        return (
            f"{data} is a benchmark: write examples from it with `perrecbench sft data --data {data} "
            "--format FORMAT --out EXAMPLES` and pass --data EXAMPLES"
        )
    return "write examples with `perrecbench sft data --data BENCHMARK --format FORMAT --out EXAMPLES`"


def load_tokenizer(model: Any, trust_remote_code: bool) -> Any:
    """The model's tokenizer, with a chat template, padding with EOS when it has no pad token."""
    from perrec_eval.engines._common import check_local_path

    check_local_path(model.model_name_or_path, "--model_name_or_path")
    tokenizer = require("transformers", "train", by="fine-tuning").AutoTokenizer.from_pretrained(
        model.model_name_or_path, revision=model.model_revision, trust_remote_code=trust_remote_code
    )
    if not getattr(tokenizer, "chat_template", None):
        raise ConfigError(
            f"the tokenizer of {model.model_name_or_path!r} has no chat template: fine-tune an "
            "instruction-tuned (chat) model"
        )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def last_checkpoint(out: Path) -> Path | None:
    """The ``checkpoint-N`` of `out` with the highest N that was saved whole (it has its trainer state)."""
    steps = [
        (int(step), path)
        for path in out.glob("checkpoint-*")
        if (step := path.name.split("-", 1)[1]).isascii() and step.isdigit()
        and (path / "trainer_state.json").is_file()
    ]
    return max(steps)[1] if steps else None


# The key of the settings file that holds the examples' fingerprint (`examples_fingerprint`).
DATA_KEY = "data_sha256"


def examples_fingerprint(data: str | os.PathLike) -> str | None:
    """sha256 over the examples folder's data files (their names and contents), None when it has none.

    A checkpoint records it, so a training resumes only on the examples it started on: `sft data` may have
    rewritten the folder in between.
    """
    import hashlib

    folder = Path(data)
    files = sorted(path for path in folder.rglob("*.parquet") if path.is_file()) if folder.is_dir() else []
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        with path.open("rb") as handle:
            content = hashlib.file_digest(handle, "sha256").hexdigest()
        digest.update(f"{path.relative_to(folder).as_posix()}\t{content}\n".encode())
    return digest.hexdigest()


def _written_by_train(out: Path) -> bool:
    if (out / MERGE_INFO).exists():
        return False
    return any((out / name).exists() for name in (SETTINGS_FILE, TRAIN_INFO)) or any(out.glob("checkpoint-*"))


def resume_point(
    script: TrainArguments, training: Any, model: Any, *, main_process: bool = True
) -> str | None:
    """Check the output folder before anything is loaded; the checkpoint to resume from, or None to start.

    An interrupted training resumes from its last checkpoint when the same command runs again; a finished
    adapter or another training's checkpoints are replaced only with ``--overwrite`` (which starts again from
    step 0); a folder of something else is refused.

    Raises:
        ConfigError: the output folder overlaps the local model or data folder, holds a finished adapter or
            another training's checkpoints (without ``--overwrite``), or holds something else.
    """
    refuse_overlap(
        training.output_dir, {"--model_name_or_path": model.model_name_or_path, "--data": script.data}
    )
    out = Path(training.output_dir)
    settings = {**settings_of(script, training, model), DATA_KEY: examples_fingerprint(script.data)}
    checkpoint = None
    if not is_empty(out) and not (out.is_dir() and _written_by_train(out)):
        raise ConfigError(
            f"--output_dir {out} is a folder `perrecbench sft train` did not write: choose another one"
        )
    if script.overwrite:
        if main_process:
            for old in out.glob("checkpoint-*"):
                shutil.rmtree(old)
            (out / TRAIN_INFO).unlink(missing_ok=True)
    elif (out / TRAIN_INFO).is_file():
        raise ConfigError(
            f"--output_dir {out} holds a finished adapter: pass --overwrite to train again, or another folder"
        )
    else:
        checkpoint = last_checkpoint(out)
        recorded = fileio.read_json(out / SETTINGS_FILE) if (out / SETTINGS_FILE).is_file() else {}
        if checkpoint is not None and recorded != settings:
            changed = sorted(
                k for k in settings.keys() | recorded.keys() if recorded.get(k) != settings.get(k)
            )
            what = "its examples were not these in --data:" if changed == [DATA_KEY] else "changed:"
            raise ConfigError(
                f"--output_dir {out} holds checkpoints of another training ({what} {', '.join(changed)}): "
                "run that command to resume it, pass --overwrite to start again, or choose another folder"
            )
    if script.resume and checkpoint is None:
        raise ConfigError(f"--resume: {out} holds no checkpoint of this training to resume from")
    if main_process and checkpoint is None:
        fileio.write_json(out / SETTINGS_FILE, settings)
    return str(checkpoint) if checkpoint is not None else None


def train(script: TrainArguments, training: Any, model: Any) -> dict[str, Any]:
    """Fine-tune a LoRA adapter on the examples of `script.data` and save it to `training.output_dir`.

    The main process holds the output folder's lock (`perrec_eval.lock`): a second training into the same
    folder is refused instead of clobbering its checkpoints.

    Returns:
        The record written to ``sft_train.json`` (on the main process; the others return it too).
    """
    trl = require("trl", "train", by="fine-tuning")
    out = training.output_dir
    outputs.target(out, flag="--output_dir")  # never the current, home or root folder
    refuse_overlap(
        out, {"--model_name_or_path": model.model_name_or_path, "--data": script.data}, flag="--output_dir"
    )  # before the lock
    main_process = int(os.environ.get("RANK", "0")) == 0
    with folder_lock(out) if main_process else contextlib.nullcontext():
        return _train(script, training, model, main_process, trl)


def _train(script: TrainArguments, training: Any, model: Any, main_process: bool, trl: Any) -> dict[str, Any]:
    from perrec_eval.rundir import versions

    checkpoint = resume_point(script, training, model, main_process=main_process)
    settings, departures = settings_of(script, training, model), trl_departures(script, training, model)
    training.model_init_kwargs = {
        "revision": model.model_revision,
        "trust_remote_code": training.trust_remote_code,
        "attn_implementation": model.attn_implementation,
        "dtype": model.dtype,
        **(training.model_init_kwargs or {}),
    }
    tokenizer = load_tokenizer(model, training.trust_remote_code)
    dataset, data_info, lengths, dropped = load_examples(script, training.max_length, tokenizer)
    trainer = trl.SFTTrainer(
        model=model.model_name_or_path,
        args=training,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=trl.get_peft_config(model),
        quantization_config=trl.get_quantization_config(model),
    )
    checkpoint = training.resume_from_checkpoint or checkpoint
    if checkpoint:
        logger.info("resuming from %s", checkpoint)
    result = trainer.train(resume_from_checkpoint=checkpoint)
    trainer.save_model(training.output_dir)
    info = {
        "kind": "adapter",
        "base_model": script.base_model_id or model.model_name_or_path,
        "perrecbench": versions("perrecbench")["perrecbench"],
        "data": {key: value for key, value in data_info.items() if key != "templates"}
        | {"path": script.data, "sha256": examples_fingerprint(script.data)},
        "recipe": {key: settings[name] for key, name in RECIPE_KEYS.items()}
        | {
            "target_modules": sorted(trainer.model.peft_config["default"].target_modules),
            "batch_size": training.per_device_train_batch_size
            * training.gradient_accumulation_steps
            * training.world_size,
            "world_size": training.world_size,
            "precision": "bf16" if training.bf16 else "fp16" if training.fp16 else "fp32",
            "trl_settings": departures,
        },
        "dropped_long": dropped,
        "train_examples": len(lengths),
        "train_tokens": sum(lengths),
        "steps": trainer.state.global_step,
        "metrics": result.metrics,
        "log_history": trainer.state.log_history,
        "versions": versions("trl", "peft", "transformers", "torch", "accelerate"),
    }
    if trainer.is_world_process_zero():
        fileio.open_permissions(out := training.output_dir)  # safetensors writes 0600
        if script.base_model_id:
            record_hub_base(out, script.base_model_id, model.model_name_or_path)
        fileio.write_json(Path(out) / TRAIN_INFO, info)
        fileio.write_text(Path(out) / "README.md", model_card(info, name=Path(out).name))
    trainer.accelerator.print(
        f"adapter saved to {training.output_dir} (mean training loss {result.metrics['train_loss']:.4f})"
    )
    trainer.end()
    return info


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m sft.train` (e.g. under `accelerate launch`): the arguments of `perrecbench sft train`."""
    from perrec_eval.logs import setup_logging  # the command's log: the Hub's lines once, secrets redacted

    setup_logging(verbose=False)
    train(*parse(sys.argv[1:] if argv is None else argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
