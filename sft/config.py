"""One config dataclass per general `perrecbench sft` command; the command-line flags are derived from them.

`sft data` is a family's own (PerRecBench's: `sft.perrecbench.config`; the general path's:
`sft.family_data`).

`sft train` is the exception: its settings are TRL's (`trl.SFTConfig`, `trl.ModelConfig`) plus the few of
`TrainArguments`, parsed by `trl.TrlParser` in `sft.train`, with `sft/configs/lora.yaml` (the paper's recipe)
as defaults. Only `perrec_eval.cliconfig` is imported here, so ``--help`` is fast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from perrec_eval.cliconfig import option
from perrec_eval.errors import ConfigError

MergeMethod = Literal["cat", "linear", "factor-mean", "ties", "svd"]
DType = Literal["auto", "bfloat16", "float16", "float32"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainArguments:
    """perrecbench's own settings of `perrecbench sft train`, parsed beside TRL's `SFTConfig` and
    `ModelConfig` by `trl.TrlParser` (flags ``--data`` or ``--drop-long``, or keys of ``--config``)."""

    data: str = field(metadata={"help": "examples folder written by `perrecbench sft data`"})
    base_model_id: str | None = field(
        default=None,
        metadata={
            "help": "the Hub id (ORG/NAME) of --model_name_or_path when that is a local copy of it: written "
            "into the card and the adapter's adapter_config.json, so the published adapter loads for anyone"
        },
    )
    drop_long: bool = field(
        default=False,
        metadata={
            "help": "leave out examples longer than --max_length (counted in sft_train.json) instead of "
            "refusing them (truncation would cut their answers)"
        },
    )
    resume: bool = field(
        default=False,
        metadata={
            "help": "insist on resuming: fail unless --output_dir holds a checkpoint (without it, an "
            "interrupted training in --output_dir resumes anyway)"
        },
    )
    overwrite: bool = field(
        default=False,
        metadata={
            "help": "replace a finished adapter or another training's checkpoints in --output_dir, "
            "starting from step 0"
        },
    )

    def __post_init__(self) -> None:
        if self.resume and self.overwrite:
            raise ConfigError("--resume and --overwrite exclude each other: choose one")
        if self.base_model_id is not None and (
            self.base_model_id.count("/") != 1 or self.base_model_id.startswith(("/", ".", "~"))
        ):
            raise ConfigError(f"--base-model-id must be a Hub id ORG/NAME, got {self.base_model_id!r}")


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
            if not all(0 < weight < math.inf for weight in self.weights):  # NaN compares false too
                raise ConfigError(
                    f"--weights must be positive finite numbers, got {','.join(map(str, self.weights))}"
                )
        if not 0 < self.density <= 1:
            raise ConfigError(f"--density must be in (0, 1], got {self.density}")
        if self.svd_rank is not None and self.svd_rank < 1:
            raise ConfigError(
                f"--svd-rank must be >= 1 (or left out: the largest adapter rank), got {self.svd_rank}"
            )
        if self.svd_rank is not None and self.method != "svd":
            raise ConfigError(f"--svd-rank is the rank of --method svd; {self.method} does not use it")

    def normalized_weights(self) -> list[float]:
        """The weights, summing to 1 (equal by default).

        >>> MergeConfig(adapters=("a", "b"), out="o", weights=(1.0, 3.0)).normalized_weights()
        [0.25, 0.75]
        >>> MergeConfig(adapters=("a", "b"), out="o", weights=(1e308, 1e308)).normalized_weights()
        [0.5, 0.5]
        """
        weights = self.weights or (1.0,) * len(self.adapters)
        top = max(weights)  # divided by first: a sum of huge weights (1e308, 1e308) would overflow to inf
        scaled = [weight / top for weight in weights]
        total = sum(scaled)
        return [weight / total for weight in scaled]


@dataclass(frozen=True, slots=True, kw_only=True)
class PushConfig:
    """Settings of `perrecbench push adapter` (and its alias `sft push`): an adapter folder with its model
    card to the Hub."""

    adapter: str = option("adapter (or merged model) folder to upload", positional=True)
    repo: str = option("Hub model repository", metavar="ORG/NAME")
    run: str | None = option(
        "run folder of `perrecbench evaluate` with exactly this adapter on its base model: its results table "
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
