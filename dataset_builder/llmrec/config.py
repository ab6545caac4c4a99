"""`perrecbench build --task llmrec` settings (a light module: the CLI imports it to build the parser)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Literal

from dataset_builder.config import BuildConfigError, BuildSpec, portable_name
from perrec_eval.cliconfig import option

# P5 preprocessed its data with this seed; negatives and shuffles use it by default.
P5_SEED = 2022
# The Amazon Reviews 2023 benchmark's global cut points (hyp1231/AmazonReviews2023; ms): 2021-08-11 and
# 2022-07-16.
VALID_FROM = 1_628_643_414_042
TEST_FROM = 1_658_002_729_837
Split = Literal["last_out", "timestamp"]
Sampling = Literal["uniform", "popularity"]
Ties = Literal["asin", "drop", "random"]


@dataclass(frozen=True, slots=True)
class BuildConfig(BuildSpec):
    """LLMRec's rating, sequential and direct tasks, leave-last-out per user (real data: --domains All_Beauty,
    LLMRec's domain in the 2023 release)."""

    task: ClassVar[str] = "llmrec"
    description: ClassVar[str] = (
        "Build LLMRec's five tasks (rating, sequential and direct recommendation, explanation, review "
        "summarization): k-core, chronological per user, "
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
    negative_sampling: Sampling = option(
        "how negatives are drawn from the items the user never reviewed: uniform (P5) or popularity "
        "(proportional to 1 + the item's train interactions)",
        default="uniform",
    )
    split: Split = option(
        "last_out: test = each user's last item, validation = the second to last (P5, LLMRec); timestamp: "
        "the Amazon Reviews 2023 benchmark's global cut points (--valid-from, --test-from), a row per "
        "interaction after the first",
        default="last_out",
    )
    valid_from: int = option(
        "--split timestamp: targets from this time (ms) are validation (the benchmark's t1, 2021-08-11)",
        default=VALID_FROM,
    )
    test_from: int = option(
        "--split timestamp: targets from this time (ms) are test (the benchmark's t2, 2022-07-16)",
        default=TEST_FROM,
    )
    seed: int = option("seed of the negatives and of the candidates' order (P5's 2022)", default=P5_SEED)
    ties: Ties = option(
        "a user's items with equal timestamps: asin orders them by parent_asin (P5's order; the default), "
        "drop leaves out every user whose last item has the time of the one before it, random orders them "
        "by a draw from --seed; the build counts the targets that tie either way",
        default="asin",
    )

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
        if self.negative_sampling not in ("uniform", "popularity"):
            raise BuildConfigError(
                f"--negative-sampling must be uniform or popularity, got {self.negative_sampling!r}"
            )
        if self.ties not in ("asin", "drop", "random"):
            raise BuildConfigError(f"--ties must be asin, drop or random, got {self.ties!r}")
        if self.split not in ("last_out", "timestamp"):
            raise BuildConfigError(f"--split must be last_out or timestamp, got {self.split!r}")
        if not 0 <= self.valid_from < self.test_from:
            raise BuildConfigError(
                f"--valid-from must be >= 0 and before --test-from, got {self.valid_from} and "
                f"{self.test_from}"
            )

    def as_manifest(self) -> dict[str, Any]:
        """The settings that decide the output, JSON-ready (no local paths)."""
        every = asdict(self)
        names = (
            "kcore", "history_length", "negatives", "negative_sampling", "split", "ties", "seed",
            "on_bad_line",
        )  # fmt: skip
        timed = self.split == "timestamp"
        cuts = {"valid_from": self.valid_from, "test_from": self.test_from} if timed else {}
        return {
            "source": portable_name(self.source),
            "domains": list(self.domains),
            **{name: every[name] for name in names},
            **cuts,
        }
