"""`perrecbench build --task llmrec` settings (a light module: the CLI imports it to build the parser)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from dataset_builder.config import BuildConfigError, BuildSpec, portable_name
from perrec_eval.cliconfig import option

# P5 preprocessed its data with this seed; negatives and shuffles use it by default.
P5_SEED = 2022


@dataclass(frozen=True, slots=True)
class BuildConfig(BuildSpec):
    """LLMRec's rating, sequential and direct tasks, leave-last-out per user (real data: --domains All_Beauty,
    LLMRec's domain in the 2023 release)."""

    task: ClassVar[str] = "llmrec"
    description: ClassVar[str] = (
        "Build LLMRec's rating, sequential and direct recommendation tasks: k-core, chronological per user, "
        "leave-last-out (test = last item, validation = second to last). LLMRec's domain in Amazon Reviews "
        "2023 is All_Beauty (--domains All_Beauty)."
    )
    kcore: int = option(
        "keep users and items with at least K reviews each, iterated to a fixed point (leave-last-out needs "
        "3 per user)",
        default=5,
    )
    history_length: int = option("the most recent earlier items each row shows, oldest first", default=10)
    negatives: int = option("negatives beside the target in each direct row (P5: 99)", default=99)
    seed: int = option("seed of the negatives and of the candidates' order (P5's 2022)", default=P5_SEED)

    def __post_init__(self) -> None:
        BuildSpec.__post_init__(self)
        if self.kcore < 3:
            raise BuildConfigError(
                f"--kcore must be >= 3 (train, validation and test need 3 items per user), got {self.kcore}"
            )
        if self.history_length < 1:
            raise BuildConfigError(f"--history-length must be >= 1, got {self.history_length}")
        if self.seed < 0:  # numpy's generators take no negative seed
            raise BuildConfigError(f"--seed must be an integer >= 0, got {self.seed}")
        if self.negatives < 1:
            raise BuildConfigError(f"--negatives must be >= 1, got {self.negatives}")

    def as_manifest(self) -> dict[str, Any]:
        """The settings that decide the output, JSON-ready (no local paths)."""
        every = asdict(self)
        names = ("kcore", "history_length", "negatives", "seed", "on_bad_line")
        return {
            "source": portable_name(self.source),
            "domains": list(self.domains),
            **{name: every[name] for name in names},
        }
