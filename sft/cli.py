"""`perrecbench sft data | train | merge | push`: fine-tuning for personalization (paper §6).

Each subcommand's flags come from its config dataclass (``--config FILE.yaml`` included): `sft.config`'s,
and for ``data`` the family's (its `Task.handlers` entry: PerRecBench's `sft.perrecbench.config`, or
`sft.family_data` for a family on the general path, chosen by ``--task``), but for ``train``, whose
arguments go to TRL's own parser in its handler (`sft.train.parse`). The handlers import the heavy
libraries (torch, transformers, trl, peft) only when they run, so ``perrecbench --help`` stays fast and
a missing ``[train]`` extra is one line naming the pip command.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perrec_eval import cliconfig, push_cli
from perrec_eval.registry import default_command
from sft.config import MergeConfig, PushConfig

LOOP = """the loop (paper §6: one adapter per format, merged); a format is one of the family's request
protocols (`perrecbench tasks` lists them) or mixed; --task NAME picks the family (default perrecbench):
  perrecbench sft data  --data BENCH --format F1 --no-profile --out sft_data/F1   (once per format)
  perrecbench sft train --model_name_or_path MODEL --data sft_data/F1 --output_dir adapters/F1
  perrecbench sft merge adapters/F1 adapters/F2 adapters/F3 --out adapters/merged
  perrecbench evaluate  --data BENCH --engine hf --model MODEL --no-profile --out runs \\
      --adapter F1=adapters/F1 --adapter merged=adapters/merged
then publish with `perrecbench push adapter` (`perrecbench sft push` is the same command, kept as an alias):
  perrecbench push adapter adapters/merged --repo ORG/NAME --run runs/merged --base-run runs/base --dry-run"""


class _Parser(cliconfig.OneLineParser):
    """A subcommand's parser; `passthrough` keeps the arguments it does not know (TRL's) in ``argv``."""

    def __init__(self, *args: Any, passthrough: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.passthrough = passthrough

    def parse_known_args(
        self, args: Any = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        namespace, rest = super().parse_known_args(args, namespace)
        if self.passthrough:
            namespace.argv, rest = tuple(rest), []
        return namespace, rest


@dataclass(frozen=True, slots=True)
class TrainCommand:
    """The arguments of `sft train` as typed, for TRL's parser in the handler (torch and trl stay out of
    ``--help``)."""

    argv: Any  # a tuple of strings, taken as they are (not split or stripped like a list option)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``sft`` with its subcommands to the ``perrecbench`` command."""
    parser = subparsers.add_parser(
        "sft",
        help="fine-tune for personalization: training data, LoRA training, adapter merging, Hub upload",
        description="Fine-tuning for personalization (paper §6) with TRL and PEFT.",
        epilog=LOOP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(
        dest="sft_command", required=True, metavar="SUBCOMMAND", parser_class=_Parser
    )
    cliconfig.add_command(
        commands,
        "data",
        *cliconfig.for_task("sft data", *default_command("sft data")),
        help="chat examples (prompt + true answer) from the benchmark's train split",
        description="Write conversational prompt-completion examples from the train split: each prompt is\n"
        "the request `perrecbench evaluate` sends, each completion the true answer in the format the\n"
        "prompt asks for. Train groups that would show a test rating are left out. Output: a `datasets`\n"
        "folder.",
    )
    train = commands.add_parser(
        "train",
        passthrough=True,
        add_help=False,  # --help is TRL's parser's: every trl.SFTConfig and trl.ModelConfig flag
        allow_abbrev=False,
        help="train a LoRA adapter with TRL's SFTTrainer (TRL's settings; defaults: the paper's recipe)",
    )
    cliconfig.add_common_arguments(train)
    train.set_defaults(handler=run_train, config_cls=TrainCommand)
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
        push_cli.run_adapter,
        help="alias of `perrecbench push adapter` (publishing lives under `perrecbench push`)",
    )


def run_train(command: TrainCommand) -> int:
    from sft.train import parse, train

    script, training, model = parse(command.argv)
    info = train(script, training, model)
    out, name = training.output_dir, Path(training.output_dir).name
    task = info["data"].get("task")  # written by the general path; PerRecBench's examples predate it
    print(
        "next: perrecbench evaluate "
        + (f"--task {task} " if task else "")
        + f"--engine hf --model {model.model_name_or_path} --adapter {name}={out} "
        f"--data {info['data']['source']['data']} --out runs/{name}"
        + (" --no-profile" if info["data"].get("variant") == "no_profile" else "")
    )
    return 0


def run_merge(config: MergeConfig) -> int:
    from perrec_eval import outputs
    from perrec_eval.lock import file_lock
    from sft.merge import merge

    outputs.target(config.out)  # before the lock, which sits beside --out
    with file_lock(config.out):  # a second merge into the same folder is refused
        info = merge(config)
    what = "model" if info["kind"] == "merged-model" else "adapter"
    print(
        f"merged {len(config.adapters)} adapters with {config.method} "
        f"(weights {', '.join(f'{w:.4g}' for w in info['weights'])}) -> {what} in {config.out}"
    )
    return 0
