"""LoRA fine-tuning on PerRecBench examples with TRL's `SFTTrainer` (the shape of `trl/scripts/sft.py`).

```bash
# one GPU, or CPU (fp32) for a tiny model
perrecbench sft train --model Qwen/Qwen2.5-0.5B-Instruct --data sft_data/pairwise --out adapters/pairwise

# several GPUs: the same flags through accelerate (DDP; or zero3.yaml / fsdp.yaml for models that do not fit)
accelerate launch --config_file sft/configs/ddp.yaml -m sft.train \
    --model meta-llama/Llama-3.1-8B-Instruct --data sft_data/pairwise --out adapters/pairwise
```

Settings are `sft.config.TrainConfig` (defaults: the paper's recipe), read from ``--config FILE.yaml`` and
then the flags; any other `trl.SFTConfig` field goes through ``--trl-arg KEY=VALUE``. The dataset is the
conversational prompt-completion folder of `perrecbench sft data`, so the loss is on the answer only
(``completion_only_loss``). The effective batch is `batch_size` whatever the number of processes: gradient
accumulation is derived from the per-device batch and the world size. Progress and loss are logged by the
trainer every `logging_steps` steps. The output folder holds the adapter (PEFT), the tokenizer,
``sft_train.json`` (data, recipe, metrics, log history) and a model card.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perrec_eval import cliconfig, fileio
from perrec_eval.cliconfig import safe_yaml
from perrec_eval.errors import ConfigError, DataError
from perrec_eval.extras import require
from perrec_eval.lock import folder_lock
from perrec_eval.secrets import is_secret_name, redact
from sft.card import MERGE_INFO, TRAIN_INFO, model_card, record_hub_base
from sft.config import TrainConfig
from sft.data import INFO_FILE, token_ids
from sft.outdir import is_empty, refuse_overlap

logger = logging.getLogger(__name__)

# The settings of the training whose checkpoints --out holds (hidden: `sft push` leaves it out).
SETTINGS_FILE = ".sft_train_settings.json"
# TrainConfig fields that do not change what is trained (a resumed run may change them).
_RUN_ONLY = ("progress", "resume", "overwrite", "report_to", "logging_steps")

# SFTConfig fields that a flag of TrainConfig sets (a --trl-arg may not set them a second time).
_OWN_FIELDS = {
    "output_dir": "--out",
    "num_train_epochs": "--epochs",
    "max_steps": "--max-steps",
    "per_device_train_batch_size": "--per-device-batch-size",
    "gradient_accumulation_steps": "--batch-size (the effective batch)",
    "learning_rate": "--learning-rate",
    "lr_scheduler_type": "--lr-scheduler",
    "warmup_steps": "--warmup",
    "max_length": "--max-length",
    "activation_checkpointing": "--no-activation-checkpointing",
    "gradient_checkpointing": "--no-activation-checkpointing",
    "logging_steps": "--logging-steps",
    "save_strategy": "--save-strategy",
    "seed": "--seed",
    "report_to": "--report-to",
    "trust_remote_code": "--trust-remote-code",
    "disable_tqdm": "--no-progress",
    "bf16": "--precision",
    "fp16": "--precision",
    "dataloader_pin_memory": "nothing: on when there is a GPU",
    "use_cpu": "nothing: on when there is no GPU",
    "model_init_kwargs": "--dtype and --attn-implementation",
    "completion_only_loss": "nothing: the loss is always on the answer only",
    "save_total_limit": "nothing: the last checkpoint is kept",
}


def trl_overrides(pairs: Sequence[str], fields: set[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings as SFTConfig keyword arguments, each value read as YAML (numbers, true, null).

    >>> trl_overrides(["optim=paged_adamw_32bit", "max_grad_norm=0.3"], {"optim", "max_grad_norm"})
    {'optim': 'paged_adamw_32bit', 'max_grad_norm': 0.3}
    """
    import yaml

    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ConfigError(f"--trl-arg {pair!r} is not KEY=VALUE, e.g. optim=paged_adamw_32bit")
        if is_secret_name(key):
            raise ConfigError(
                f"--trl-arg {key}: a secret given as a flag would be saved in training_args.bin and "
                f"{TRAIN_INFO}; set HF_TOKEN in the environment (or run `hf auth login`) instead"
            )
        if key in _OWN_FIELDS:
            raise ConfigError(f"--trl-arg {key}: perrecbench sets it; use {_OWN_FIELDS[key]}")
        if key not in fields:
            raise ConfigError(
                f"--trl-arg {key}: trl.SFTConfig has no such field (see the TRL SFTConfig docs)"
            )
        try:
            values[key] = safe_yaml(raw)
        except yaml.YAMLError as err:
            raise ConfigError(f"--trl-arg {key}: the value is not valid YAML ({str(err)[:200]})") from err
    return values


def device_flags(precision: str, torch: Any) -> dict[str, bool]:
    """bf16/fp16 for `precision` (auto = bf16 on a CUDA GPU that supports it, else fp32: TRL's bf16 default
    fails on CPU, PITFALLS 7); on a machine without any accelerator, `use_cpu` (so that several processes
    from torchrun train as one CPU data-parallel job) and no pinned memory."""
    cuda = torch.cuda.is_available()
    if precision == "auto":
        precision = "bf16" if cuda and torch.cuda.is_bf16_supported() else "fp32"
    cpu_only = torch.accelerator.current_accelerator() is None
    return {
        "bf16": precision == "bf16",
        "fp16": precision == "fp16",
        "use_cpu": cpu_only,
        "dataloader_pin_memory": not cpu_only,
    }


def sft_config(config: TrainConfig, world_size: int, torch: Any) -> Any:
    """The `trl.SFTConfig` of `config` on `world_size` processes."""
    trl = require("trl", "train", by="fine-tuning")
    model_kwargs: dict[str, Any] = {"dtype": config.dtype}
    if config.attn_implementation:
        model_kwargs["attn_implementation"] = config.attn_implementation
    fields = {field.name for field in dataclasses.fields(trl.SFTConfig)}
    return trl.SFTConfig(
        output_dir=config.out,
        num_train_epochs=config.epochs,
        max_steps=config.max_steps,
        per_device_train_batch_size=config.per_device_batch_size,
        gradient_accumulation_steps=config.gradient_accumulation(world_size),
        learning_rate=config.learning_rate,
        lr_scheduler_type=config.lr_scheduler,
        warmup_steps=config.warmup,
        max_length=config.max_length,
        completion_only_loss=True,
        activation_checkpointing=config.activation_checkpointing,
        logging_steps=config.logging_steps,
        save_strategy=config.save_strategy,
        save_total_limit=1,
        seed=config.seed,
        report_to=config.report_to,
        trust_remote_code=config.trust_remote_code,
        model_init_kwargs=model_kwargs,
        disable_tqdm=not config.progress,
        **device_flags(config.precision, torch),
        **trl_overrides(config.trl_args, fields),
    )


def lora_config(config: TrainConfig) -> Any:
    """The PEFT `LoraConfig` of `config` (task CAUSAL_LM, no bias)."""
    peft = require("peft", "train", by="fine-tuning")
    targets = config.target_modules
    return peft.LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules="all-linear" if targets == ("all-linear",) else list(targets),
        bias="none",
        task_type="CAUSAL_LM",
    )


def load_examples(config: TrainConfig, tokenizer: Any) -> tuple[Any, dict[str, Any], list[int], int]:
    """The prompt-completion dataset, its ``sft_data.json``, each kept example's token count, and how many
    examples were left out for being longer than `max_length`.

    Raises:
        DataError: `data` is not a folder of `perrecbench sft data`.
        ConfigError: examples are longer than `max_length` and `drop_long` is off.
    """
    import datasets

    info_path = Path(config.data) / INFO_FILE
    if not info_path.is_file():
        raise DataError(
            f"--data {config.data} is not an examples folder (no {INFO_FILE}): write one with "
            f"`perrecbench sft data --data BENCHMARK --format FORMAT --out {config.data}`"
        )
    data_info = fileio.read_json(info_path)
    dataset = datasets.load_dataset(str(config.data), split="train").select_columns(["prompt", "completion"])
    lengths = [len(token_ids(tokenizer, [*row["prompt"], *row["completion"]])) for row in dataset]
    long = [i for i, length in enumerate(lengths) if length > config.max_length]
    if long and not config.drop_long:
        raise ConfigError(
            f"{len(long)} of {len(lengths)} examples are longer than --max-length {config.max_length} tokens "
            f"(longest {max(lengths)}): truncation would cut their answers; raise --max-length or pass "
            "--drop-long to leave them out"
        )
    if long and len(long) == len(lengths):
        raise ConfigError(
            f"all {len(lengths)} examples are longer than --max-length {config.max_length} tokens (shortest "
            f"{min(lengths)}): --drop-long would leave nothing to train on; raise --max-length to at least "
            f"{min(lengths)}"
        )
    if long:
        logger.warning("leaving out %d examples longer than %d tokens", len(long), config.max_length)
        keep = sorted(set(range(len(lengths))) - set(long))
        dataset = dataset.select(keep)
        lengths = [lengths[i] for i in keep]
    return dataset, data_info, lengths, len(long)


def load_tokenizer(config: TrainConfig) -> Any:
    """The model's tokenizer, with a chat template, padding with EOS when it has no pad token."""
    from perrec_eval.engines._common import check_local_path

    check_local_path(config.model, "--model")
    transformers = require("transformers", "train", by="fine-tuning")
    tokenizer = transformers.AutoTokenizer.from_pretrained(
        config.model, trust_remote_code=config.trust_remote_code
    )
    if not getattr(tokenizer, "chat_template", None):
        raise ConfigError(
            f"the tokenizer of {config.model!r} has no chat template: fine-tune an instruction-tuned "
            "(chat) model"
        )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def train_settings(config: TrainConfig) -> dict[str, Any]:
    """What a checkpoint depends on: every setting but those of :data:`_RUN_ONLY` (secrets redacted)."""
    return redact({k: v for k, v in dataclasses.asdict(config).items() if k not in _RUN_ONLY})


def last_checkpoint(out: Path) -> Path | None:
    """The ``checkpoint-N`` of `out` with the highest N that was saved whole (it has its trainer state)."""
    steps = [
        (int(path.name.split("-", 1)[1]), path)
        for path in out.glob("checkpoint-*")
        if path.name.split("-", 1)[1].isdigit() and (path / "trainer_state.json").is_file()
    ]
    return max(steps)[1] if steps else None


def _written_by_train(out: Path) -> bool:
    if (out / MERGE_INFO).exists():
        return False
    return any((out / name).exists() for name in (SETTINGS_FILE, TRAIN_INFO)) or any(out.glob("checkpoint-*"))


def resume_point(config: TrainConfig, *, main_process: bool = True) -> str | None:
    """Check `config.out` before anything is loaded; the checkpoint to resume from, or None to start.

    An interrupted training resumes from its last checkpoint when the same command runs again; a finished
    adapter or another training's checkpoints are replaced only with ``--overwrite`` (which starts again from
    step 0); a folder of something else is refused.

    Raises:
        ConfigError: `out` overlaps the local model or data folder, holds a finished adapter or another
            training's checkpoints (without ``--overwrite``), or holds something else.
    """
    refuse_overlap(config.out, {"--model": config.model, "--data": config.data})
    out = Path(config.out)
    settings = train_settings(config)
    if config.resume and config.overwrite:
        raise ConfigError("--resume and --overwrite exclude each other: choose one")
    checkpoint = None
    if not is_empty(out) and not (out.is_dir() and _written_by_train(out)):
        raise ConfigError(
            f"--out {out} is a folder `perrecbench sft train` did not write: choose another --out"
        )
    if config.overwrite:
        if main_process:
            for old in out.glob("checkpoint-*"):
                shutil.rmtree(old)
            (out / TRAIN_INFO).unlink(missing_ok=True)
    elif (out / TRAIN_INFO).is_file():
        raise ConfigError(
            f"--out {out} holds a finished adapter: pass --overwrite to train again, or another --out"
        )
    else:
        checkpoint = last_checkpoint(out)
        recorded = fileio.read_json(out / SETTINGS_FILE) if (out / SETTINGS_FILE).is_file() else {}
        if checkpoint is not None and recorded != settings:
            changed = sorted(
                k for k in settings.keys() | recorded.keys() if recorded.get(k) != settings.get(k)
            )
            raise ConfigError(
                f"--out {out} holds checkpoints of another training (changed: {', '.join(changed)}): "
                "run that command to resume it, pass --overwrite to start again, or choose another --out"
            )
    if config.resume and checkpoint is None:
        raise ConfigError(f"--resume: {out} holds no checkpoint of this training to resume from")
    if main_process and checkpoint is None:
        fileio.write_json(out / SETTINGS_FILE, settings)
    return str(checkpoint) if checkpoint is not None else None


def train(config: TrainConfig) -> dict[str, Any]:
    """Fine-tune a LoRA adapter on the examples of `config.data` and save it to `config.out`.

    The main process holds `config.out`'s lock (`perrec_eval.lock`): a second training into the same folder
    is refused instead of clobbering its checkpoints.

    Returns:
        The record written to ``sft_train.json`` (on the main process; the others return it too).
    """
    torch = require("torch", "train", by="fine-tuning")
    trl = require("trl", "train", by="fine-tuning")
    refuse_overlap(config.out, {"--model": config.model, "--data": config.data})  # before the lock file
    main_process = int(os.environ.get("RANK", "0")) == 0
    with folder_lock(config.out) if main_process else contextlib.nullcontext():
        return _train(config, main_process, torch, trl)


def _train(config: TrainConfig, main_process: bool, torch: Any, trl: Any) -> dict[str, Any]:
    from perrec_eval.rundir import versions

    if not config.progress:
        import datasets

        datasets.disable_progress_bars()
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    checkpoint = resume_point(config, main_process=main_process)
    tokenizer = load_tokenizer(config)
    dataset, data_info, lengths, dropped = load_examples(config, tokenizer)
    args = sft_config(config, world_size, torch)
    trainer = trl.SFTTrainer(
        model=config.model,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=lora_config(config),
    )
    if checkpoint:
        logger.info("resuming from %s", checkpoint)
    result = trainer.train(resume_from_checkpoint=checkpoint)
    trainer.save_model(config.out)
    peft_config = trainer.model.peft_config["default"]
    info = {
        "kind": "adapter",
        "base_model": config.base_model_id or config.model,
        "perrecbench": versions("perrecbench")["perrecbench"],
        "data": {key: value for key, value in data_info.items() if key != "templates"}
        | {"path": config.data},
        "recipe": {
            "lora_r": peft_config.r,
            "lora_alpha": peft_config.lora_alpha,
            "lora_dropout": peft_config.lora_dropout,
            "target_modules": sorted(peft_config.target_modules),
            "epochs": config.epochs,
            "max_steps": config.max_steps,
            "batch_size": config.batch_size,
            "per_device_batch_size": config.per_device_batch_size,
            "gradient_accumulation": args.gradient_accumulation_steps,
            "world_size": world_size,
            "learning_rate": config.learning_rate,
            "lr_scheduler": config.lr_scheduler,
            "warmup": config.warmup,
            "max_length": config.max_length,
            "precision": "bf16" if args.bf16 else "fp16" if args.fp16 else "fp32",
            "dtype": config.dtype,
            "seed": config.seed,
            "completion_only_loss": True,
            "trl_args": redact(list(config.trl_args)),
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
        fileio.open_permissions(config.out)  # safetensors writes 0600
        if config.base_model_id:
            record_hub_base(config.out, config.base_model_id, config.model)
        fileio.write_json(Path(config.out) / TRAIN_INFO, info)
        fileio.write_text(Path(config.out) / "README.md", model_card(info, name=Path(config.out).name))
    trainer.accelerator.print(
        f"adapter saved to {config.out} (mean training loss {result.metrics['train_loss']:.4f})"
    )
    trainer.end()
    return info


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m sft.train` (e.g. under `accelerate launch`): the flags of `perrecbench sft train`."""
    parser = argparse.ArgumentParser(prog="python -m sft.train", description=__doc__.split("\n\n")[0])
    cliconfig.add_arguments(parser, TrainConfig)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    train(cliconfig.from_namespace(TrainConfig, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
