"""`perrecbench sft data | train | merge | push`: fine-tuning for personalization (paper §6).

Each subcommand's flags come from its config dataclass in `sft.config` (``--config FILE.yaml`` included).
The handlers import the heavy libraries (torch, transformers, trl, peft) only when they run, so
``perrecbench --help`` stays fast and a missing ``[train]`` extra is one line naming the pip command.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from perrec_eval import cliconfig
from sft.config import DataConfig, MergeConfig, PushConfig, TrainConfig

LOOP = """the loop (paper §6: three single-format adapters, merged):
  perrecbench sft data  --data BENCH --format pairwise --no-profile --out sft_data/pairwise   (x3 formats)
  perrecbench sft train --model MODEL --data sft_data/pairwise --out adapters/pairwise        (x3)
  perrecbench sft merge adapters/pointwise adapters/pairwise adapters/listwise --out adapters/merged
  perrecbench evaluate  --data BENCH --engine hf --model MODEL --no-profile --out runs \\
      --adapter pairwise=adapters/pairwise --adapter merged=adapters/merged
  perrecbench sft push  adapters/merged --repo ORG/NAME --run runs/merged --base-run runs/base --dry-run"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``sft`` with its subcommands to the ``perrecbench`` command."""
    parser = subparsers.add_parser(
        "sft",
        help="fine-tune for personalization: training data, LoRA training, adapter merging, Hub upload",
        description="Fine-tuning for personalization (paper §6) with TRL and PEFT.",
        epilog=LOOP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="sft_command", required=True, metavar="SUBCOMMAND")
    cliconfig.add_command(
        commands,
        "data",
        DataConfig,
        run_data,
        help="chat examples (prompt + true answer) from the benchmark's train split",
        description="Write conversational prompt-completion examples from the train split: each prompt is\n"
        "the request `perrecbench evaluate` sends, each completion the true answer in the format the\n"
        "prompt asks for. Train groups that would show a test rating are left out. Output: a `datasets`\n"
        "folder.",
    )
    cliconfig.add_command(
        commands,
        "train",
        TrainConfig,
        run_train,
        help="train a LoRA adapter with TRL's SFTTrainer (defaults: the paper's recipe)",
        description="Train a LoRA adapter on an examples folder with TRL's SFTTrainer, loss on the answer\n"
        "only. Defaults are the paper's recipe (sft/configs/lora.yaml spells them out). On several GPUs\n"
        "run the same flags through accelerate:\n"
        "  accelerate launch --config_file sft/configs/ddp.yaml -m sft.train --model M --data D --out O",
    )
    cliconfig.add_command(
        commands,
        "merge",
        MergeConfig,
        run_merge,
        help="combine single-format adapters into one (default: the exact mean of their weight updates)",
    )
    cliconfig.add_command(
        commands,
        "push",
        PushConfig,
        run_push,
        help="upload an adapter with its model card (and PTC table) to the Hugging Face Hub",
    )


def run_data(config: DataConfig) -> int:
    from perrec_eval.lock import file_lock
    from sft.data import build

    with file_lock(config.out):  # a second `sft data` into the same folder is refused
        path, info = build(config)
    counts = ", ".join(f"{fmt} {n:,}" for fmt, n in info["examples_per_format"].items())
    left_out = sum(info["test_label_groups_left_out"].values())
    print(f"{info['examples']:,} examples ({counts}) from {info['groups']:,} train groups -> {path}")
    print(f"prompt variant {info['variant']}; {left_out} train groups left out for showing a test rating")
    print(f"next: perrecbench sft train --model MODEL --data {config.out} --out ADAPTER_DIR")
    return 0


def run_train(config: TrainConfig) -> int:
    from sft.train import train

    info = train(config)
    print(
        f"next: perrecbench evaluate --engine hf --model {config.model} --adapter {Path(config.out).name}="
        f"{config.out} --data {info['data']['source']['data']} --out runs/{Path(config.out).name}"
        + (" --no-profile" if info["data"]["variant"] == "no_profile" else "")
    )
    return 0


def run_merge(config: MergeConfig) -> int:
    from perrec_eval.lock import file_lock
    from sft.merge import merge

    with file_lock(config.out):  # a second merge into the same folder is refused
        info = merge(config)
    what = "model" if info["kind"] == "merged-model" else "adapter"
    print(
        f"merged {len(config.adapters)} adapters with {config.method} "
        f"(weights {', '.join(f'{w:.4g}' for w in info['weights'])}) -> {what} in {config.out}"
    )
    return 0


def run_push(config: PushConfig) -> int:
    from perrec_eval.push_cli import report
    from sft.push import adapter_upload

    upload, _ = adapter_upload(config)
    return report(upload, dry_run=config.dry_run, private=config.private, stage=config.stage)
