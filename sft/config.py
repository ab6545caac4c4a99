"""One config dataclass per `perrecbench sft` command; the command-line flags are derived from these fields.

The training defaults are the paper's recipe (§6 and its released `config_lora.yaml`): LoRA r 16, alpha 16,
dropout 0.05 on every attention and MLP projection, 2 epochs, effective batch 32, learning rate 1e-5,
cosine schedule with 10% warmup, loss on the completion (the answer) only. `sft/configs/lora.yaml` spells
the same values out for ``--config``. Only `perrec_eval.cliconfig` is imported here, so ``--help`` is fast.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from perrec_eval.cliconfig import option
from perrec_eval.config import PromptSpec
from perrec_eval.errors import ConfigError
from perrec_eval.presentation import Presentation
from perrec_eval.types import LEVEL_SIZES

SFTFormat = Literal["pointwise", "pairwise", "listwise", "mixed"]
MergeMethod = Literal["cat", "linear", "factor-mean", "ties", "svd"]
Precision = Literal["auto", "bf16", "fp16", "fp32"]
DType = Literal["auto", "bfloat16", "float16", "float32"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DataConfig(PromptSpec):
    """Settings of `perrecbench sft data`: chat examples for fine-tuning from the train split."""

    level_choices = tuple(LEVEL_SIZES)  # full: the 5-user groups, train only

    format: SFTFormat = option(
        "answer format: pointwise (a rating per user), pairwise (every pair in both orders), listwise (the "
        "best-first order of a group), or mixed (the union of the three, shuffled)"
    )
    out: str = option(
        "output folder: a `datasets` folder (parquet + card) that `perrecbench sft train` reads"
    )
    presentation: Presentation = option(
        "order of the users in listwise examples, as `perrecbench evaluate --presentation`: balanced (paired "
        "across each level's groups, seeded by --seed) or dataset (the dataset's order)",
        default="balanced",
    )
    tokenizer: str | None = option(
        "tokenizer (model id or folder) for token counts in the card; default: character counts",
        default=None,
    )

    def __post_init__(self) -> None:
        PromptSpec.__post_init__(self)
        if not self.profiles and not self.no_profile:
            raise ConfigError(
                "pass --profiles PATH (profiles of the train users, written with `perrecbench profiles "
                "--splits train --out PATH ...`) or --no-profile (prompts without profiles)"
            )

    @property
    def variant(self) -> str:
        """The runner's prompt variant the examples are rendered with."""
        return "no_profile" if self.no_profile else "default"


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainConfig:
    """Settings of `perrecbench sft train` (and `python -m sft.train`): TRL SFT with a LoRA adapter."""

    model: str = option("base model: Hub id or local folder of a chat model")
    base_model_id: str | None = option(
        "the Hub id of --model when --model is a local copy of it: written into the card and the adapter's "
        "adapter_config.json (base_model_name_or_path), so the published adapter loads for anyone",
        default=None,
        metavar="ORG/NAME",
    )
    data: str = option("examples folder written by `perrecbench sft data`")
    out: str = option("output folder of the adapter (also holds checkpoints while training)")
    lora_r: int = option("LoRA rank", default=16)
    lora_alpha: int = option("LoRA alpha (scaling = alpha / r)", default=16)
    lora_dropout: float = option("LoRA dropout", default=0.05)
    target_modules: tuple[str, ...] = option(
        "modules that get LoRA: all-linear (every linear layer but the output head: for Llama, Qwen and "
        "Mistral the q/k/v/o and gate/up/down projections), or explicit names",
        default=("all-linear",),
    )
    epochs: float = option("training epochs", default=2.0)
    batch_size: int = option(
        "effective batch size: per-device batch x gradient accumulation x number of processes", default=32
    )
    per_device_batch_size: int = option(
        "examples per forward pass on one device (gradient accumulation makes up the rest)", default=4
    )
    learning_rate: float = option("peak learning rate", default=1e-5)
    lr_scheduler: str = option("learning-rate schedule (a transformers scheduler name)", default="cosine")
    warmup: float = option(
        "warmup: a fraction of the training steps if < 1, else a number of steps", default=0.1
    )
    max_length: int = option(
        "longest example in tokens; a longer one is an error (truncation would cut its answer) unless "
        "--drop-long",
        default=8192,
    )
    drop_long: bool = option(
        "leave out examples longer than --max-length (counted in sft_train.json)", default=False
    )
    max_steps: int = option("stop after this many optimizer steps (-1: train the full --epochs)", default=-1)
    dtype: DType = option("weights dtype when loading the model; auto keeps the checkpoint's", default="auto")
    precision: Precision = option(
        "mixed precision: auto = bf16 on a CUDA GPU that supports it, else fp32 (CPU training needs fp32)",
        default="auto",
    )
    activation_checkpointing: bool = option(
        "recompute activations in the backward pass (less memory, ~20% slower)", default=True
    )
    logging_steps: int = option("log loss and learning rate every N optimizer steps", default=5)
    save_strategy: Literal["no", "epoch", "steps"] = option(
        "when to write a checkpoint (the last one is kept, for --resume)", default="epoch"
    )
    resume: bool = option(
        "insist on resuming: fail unless --out holds a checkpoint (without it, an interrupted training in "
        "--out resumes anyway)",
        default=False,
    )
    overwrite: bool = option(
        "replace a finished adapter or another training's checkpoints in --out, starting from step 0",
        default=False,
    )
    seed: int = option("training seed (data order, LoRA init, dropout)", default=0)
    report_to: str = option(
        "experiment trackers (transformers report_to): none, wandb, trackio, ...", default="none"
    )
    attn_implementation: str | None = option("attention kernel, e.g. sdpa or flash_attention_2", default=None)
    trust_remote_code: bool = option("run the model repository's own code (from_pretrained)", default=False)
    trl_args: tuple[str, ...] = option(
        "any other TRL SFTConfig field as KEY=VALUE, repeatable (e.g. optim=paged_adamw_32bit)",
        default=(),
        flag="--trl-arg",
        repeat=True,
        metavar="KEY=VALUE",
    )
    progress: bool = option("show progress bars", default=True)

    def __post_init__(self) -> None:
        positive = {
            "--lora-r": self.lora_r,
            "--lora-alpha": self.lora_alpha,
            "--batch-size": self.batch_size,
            "--per-device-batch-size": self.per_device_batch_size,
            "--max-length": self.max_length,
            "--logging-steps": self.logging_steps,
        }
        for flag, value in positive.items():
            if value < 1:
                raise ConfigError(f"{flag} must be >= 1, got {value}")
        if not 0 <= self.lora_dropout < 1:
            raise ConfigError(f"--lora-dropout must be in [0, 1), got {self.lora_dropout}")
        if self.epochs <= 0 or self.learning_rate <= 0 or self.warmup < 0:
            raise ConfigError("--epochs and --learning-rate must be > 0 and --warmup >= 0")
        if self.batch_size % self.per_device_batch_size:
            raise ConfigError(
                f"--batch-size {self.batch_size} must be a multiple of --per-device-batch-size "
                f"{self.per_device_batch_size} (the rest is gradient accumulation)"
            )
        if not self.target_modules:
            raise ConfigError("--target-modules must name at least one module, or all-linear")
        if self.base_model_id is not None and (
            self.base_model_id.count("/") != 1 or self.base_model_id.startswith(("/", ".", "~"))
        ):
            raise ConfigError(f"--base-model-id must be a Hub id ORG/NAME, got {self.base_model_id!r}")

    def gradient_accumulation(self, world_size: int) -> int:
        """Gradient accumulation steps that make the effective batch `batch_size` on `world_size` processes.

        >>> TrainConfig(model="m", data="d", out="o").gradient_accumulation(1)
        8
        >>> TrainConfig(model="m", data="d", out="o").gradient_accumulation(4)
        2
        """
        per_step = self.per_device_batch_size * world_size
        if self.batch_size % per_step:
            raise ConfigError(
                f"--batch-size {self.batch_size} is not a multiple of --per-device-batch-size "
                f"{self.per_device_batch_size} x {world_size} processes: change one of them"
            )
        return self.batch_size // per_step


@dataclass(frozen=True, slots=True, kw_only=True)
class MergeConfig:
    """Settings of `perrecbench sft merge`: several single-format LoRA adapters combined into one."""

    adapters: tuple[str, ...] = option("adapter folders (from `perrecbench sft train`)", positional=True)
    out: str = option("output folder of the merged adapter (or full model with --merge-into-base)")
    method: MergeMethod = option(
        "cat: the exact weighted mean of the weight updates (rank = sum of ranks); factor-mean: the paper's "
        "released script (A and B matrices averaged separately: not the mean update); linear, ties, svd: "
        "PEFT's add_weighted_adapter with that combination type",
        default="cat",
    )
    weights: tuple[float, ...] | None = option(
        "one positive weight per adapter, normalized to sum to 1", default=None, shown="equal"
    )
    merge_into_base: bool = option(
        "write a full model (base weights + merged update) to serve without LoRA", default=False
    )
    model: str | None = option(
        "base model the adapters were trained on", default=None, shown="their base_model_name_or_path"
    )
    density: float = option("fraction of each update kept by ties", default=0.5)
    svd_rank: int | None = option("rank of the svd result", default=None, shown="the largest adapter rank")
    dtype: DType = option("dtype of the base model while merging", default="auto")

    def __post_init__(self) -> None:
        if self.method not in ("cat", "linear", "factor-mean", "ties", "svd"):
            raise ConfigError(f"--method must be cat, linear, factor-mean, ties or svd, got {self.method!r}")
        if len(self.adapters) < 2:
            raise ConfigError(f"merging needs at least two adapters, got {len(self.adapters)}")
        if self.weights is not None:
            if len(self.weights) != len(self.adapters):
                raise ConfigError(
                    f"--weights has {len(self.weights)} values for {len(self.adapters)} adapters: "
                    "give one each"
                )
            if any(weight <= 0 for weight in self.weights):
                raise ConfigError(f"--weights must be positive, got {','.join(map(str, self.weights))}")
        if not 0 < self.density <= 1:
            raise ConfigError(f"--density must be in (0, 1], got {self.density}")

    def normalized_weights(self) -> list[float]:
        """The weights, summing to 1 (equal by default).

        >>> MergeConfig(adapters=("a", "b"), out="o", weights=(1.0, 3.0)).normalized_weights()
        [0.25, 0.75]
        """
        weights = self.weights or (1.0,) * len(self.adapters)
        total = sum(weights)
        return [weight / total for weight in weights]


@dataclass(frozen=True, slots=True, kw_only=True)
class PushConfig:
    """Settings of `perrecbench sft push`: an adapter folder with its model card to the Hub."""

    adapter: str = option("adapter (or merged model) folder to upload", positional=True)
    repo: str = option("Hub model repository", metavar="ORG/NAME")
    run: str | None = option(
        "run folder of `perrecbench evaluate` with exactly this adapter on its base model: its PTC table "
        "goes into the card (and its model-index metadata); runs of anything else are refused",
        default=None,
    )
    base_run: str | None = option(
        "run folder of the base model alone (no adapter) on the same benchmark: a base-model row beside the "
        "adapter's",
        default=None,
    )
    dataset: str | None = option(
        "the benchmark's Hub dataset repository the runs used: with --run, the card's model-index and "
        "`.eval_results/` entries name it (with --dataset-revision)",
        default=None,
        metavar="ORG/NAME",
    )
    dataset_revision: str | None = option(
        "the revision (commit) of --dataset the runs used", default=None, metavar="REV"
    )
    private: bool = option("create the repository as private", default=False)
    dry_run: bool = option(
        "list every file and the repository it would go to; upload nothing, write nothing into the folder",
        default=False,
    )
    stage: str | None = option(
        "write the files that would be uploaded (the card included) into this new folder, to read them",
        default=None,
        metavar="DIR",
    )

    def __post_init__(self) -> None:
        owner, sep, name = self.repo.partition("/")
        if not sep or not owner or not name or "/" in name:
            raise ConfigError(f"--repo must be ORG/NAME, got {self.repo!r}")
        if self.base_run and not self.run:
            raise ConfigError("--base-run is shown beside the adapter's run: pass --run too")
        if (self.dataset is None) != (self.dataset_revision is None):
            raise ConfigError("--dataset and --dataset-revision go together: pass both (or neither)")
        if self.dataset and not self.run:
            raise ConfigError("--dataset names the benchmark of --run's results: pass --run too")
