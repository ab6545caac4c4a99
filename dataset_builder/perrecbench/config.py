"""The settings of ``perrecbench build --task perrecbench``: PerRecBench's own, beside the shared ones.

:class:`BuildConfig` adds PerRecBench's selection, split and level settings (PROTOCOL §2) to the settings
every build shares (:class:`dataset_builder.config.BuildSpec`). Imports nothing heavy: the CLI imports it to
build the parser of ``perrecbench build``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Literal

from dataset_builder.config import MAX_WINDOW_DAYS, MS_PER_DAY, BuildConfigError, BuildSpec, portable_name
from perrec_eval.cliconfig import option

AvgScope = Literal["history", "all"]
SplitRule = Literal["leak-free", "user-disjoint", "none"]
Preset = Literal["paper", "large"]
LEVELS: dict[str, int] = {"easy": 2, "medium": 3, "hard": 4}  # the large preset's group size per level
# Relative ratings are floats; a gap of exactly min_gap (0.6 as a decimal) must fail, so the comparison is
# `gap > min_gap + GAP_TOLERANCE` (the reference oracle decides it with exact fractions).
GAP_TOLERANCE = 1e-9


@dataclass(frozen=True, slots=True)
class BuildConfig(BuildSpec):
    """PerRecBench's build: selection, split and levels (PROTOCOL §2)."""

    task: ClassVar[str] = "perrecbench"
    description: ClassVar[str] = (
        "Select PerRecBench groups (PROTOCOL §2) from raw review and metadata files with DuckDB\n"
        "and write a folder that datasets.load_dataset reads: configs easy/medium/hard/full, splits\n"
        "test/train, a dataset card, stats.json and manifest.json. --preset paper (default) reproduces\n"
        "the paper's 5-user groups; --preset large finds each level's groups directly, several per item,\n"
        "for the resolution that model comparisons need (the card states each level's resolution)."
    )

    window_days: float = option(
        "co-purchase window: all users of a group reviewed the item within this many days (closed)",
        default=30.0,
    )
    min_history: int = option(
        "a user needs MORE than this many reviews strictly before the query review", default=20
    )
    min_gap: float = option("every pair in a group differs by MORE than this in relative rating", default=0.6)
    group_size: int = option(
        "paper preset: users per group (the full config); easy/medium/hard draw 2/3/4", default=5
    )
    preset: Preset = option(
        "paper: one 5-user group per item, easy/medium/hard drawn from it (the paper's protocol); large: "
        "groups of 2/3/4 users found per level directly, several user-disjoint groups per item (many more "
        "groups, for model comparisons that need resolution; see docs/perrecbench.md)",
        default="paper",
    )
    test_groups: int = option(
        "groups in the test split (with --preset large: per level), spread over the domains as evenly as "
        "their groups allow; the rest go to train (minus those --split-rule drops)",
        default=200,
    )
    train_fraction: float | None = option(
        "large preset only: hold out this share of each level's groups (stratified by domain) for train "
        "and put all the others in test, instead of --test-groups per level",
        default=None,
    )
    max_groups_per_item: int | None = option(
        "large preset only: at most this many groups per item and level (none: as many user-disjoint "
        "groups as the item's reviewers hold)",
        default=None,
    )
    keep_twins: bool = option(
        "keep a history item that is the query item under another id (same normalized title and author: "
        "editions, formats) in that user's history, as the paper did; by default it is removed and counted",
        default=False,
    )
    split_rule: SplitRule = option(
        "which non-test groups train keeps: leak-free (drop a train group when one of its users is a test "
        "user whose train review is not strictly before their test review: no test review anywhere in "
        "train), user-disjoint (drop every train group with a test user), none (keep all: the paper's "
        "split; leaks counted in stats.json)",
        default="leak-free",
    )
    avg_scope: AvgScope = option(
        "average and most common rating over the reviews before the query (history, leak-free) or over "
        "all the user's reviews (all, paper mode)",
        default="history",
    )
    seed: int = option(
        "drives the group drawn in each item's window, the test/train split, the level draws and the "
        "presentation order",
        default=0,
    )
    with_interactions: bool = option(
        "also write each domain's rating interactions (user, item, rating, timestamp; deduplicated) with "
        "every test label removed, as interactions/<Domain>-<sha12>.parquet: the training data of the "
        "collaborative-filtering baselines (--engine baseline --model mf|item-knn)",
        default=False,
    )

    def __post_init__(self) -> None:
        BuildSpec.__post_init__(self)
        if self.seed < 0:  # numpy's generators take no negative seed
            raise BuildConfigError(f"--seed must be an integer >= 0, got {self.seed}")
        if not 0 <= self.window_days <= MAX_WINDOW_DAYS:  # in ms it must fit DuckDB's 64-bit integers
            raise BuildConfigError(
                f"--window-days must be a number of days in 0..{MAX_WINDOW_DAYS:,} (a century), got "
                f"{self.window_days}"
            )
        if self.min_history < 0:
            raise BuildConfigError(f"--min-history must be >= 0, got {self.min_history}")
        if not self.min_gap >= 0:
            raise BuildConfigError(f"--min-gap must be >= 0, got {self.min_gap}")
        if self.group_size < 2:
            raise BuildConfigError(f"--group-size must be at least 2, got {self.group_size}")
        if self.test_groups < 1:
            raise BuildConfigError(f"--test-groups must be at least 1, got {self.test_groups}")
        if self.preset not in ("paper", "large"):
            raise BuildConfigError(f"--preset must be paper or large, got {self.preset!r}")
        if self.preset == "paper" and (
            self.train_fraction is not None or self.max_groups_per_item is not None
        ):
            raise BuildConfigError(
                "--train-fraction and --max-groups-per-item apply to --preset large only; drop them or add "
                "--preset large"
            )
        if self.preset == "large" and self.group_size != 5:
            raise BuildConfigError(
                "--group-size applies to --preset paper; the large preset's levels have 2, 3 and 4 users"
            )
        if self.train_fraction is not None and not 0 < self.train_fraction < 1:
            raise BuildConfigError(f"--train-fraction must lie in (0, 1), got {self.train_fraction}")
        if self.max_groups_per_item is not None and self.max_groups_per_item < 1:
            raise BuildConfigError(f"--max-groups-per-item must be >= 1, got {self.max_groups_per_item}")
        if self.avg_scope not in ("history", "all"):
            raise BuildConfigError(f"--avg-scope must be history or all, got {self.avg_scope!r}")
        if self.split_rule not in ("leak-free", "user-disjoint", "none"):
            raise BuildConfigError(
                f"--split-rule must be leak-free, user-disjoint or none, got {self.split_rule!r}"
            )

    @property
    def window_ms(self) -> int:
        """The window length in milliseconds (rounded like the reference oracle)."""
        return round(self.window_days * MS_PER_DAY)

    @property
    def paper_files(self) -> bool:
        """Whether this build writes the earlier builder's files byte for byte (paper preset, twins kept):
        ``stats.json`` and ``manifest.json`` then carry none of the keys added since."""
        return self.preset == "paper" and self.keep_twins

    def level_sizes(self) -> dict[str, int]:
        """Users per group of each level this build writes (easy/medium/hard; ``full`` excluded).

        >>> BuildConfig(source="s", out="o", group_size=3).level_sizes()
        {'easy': 2, 'medium': 3}
        """
        limit = self.group_size if self.preset == "paper" else max(LEVELS.values())
        return {name: k for name, k in LEVELS.items() if k <= limit}

    def selection_params(self) -> dict[str, Any]:
        """The parameters a domain's groups depend on (the seed draws each item's group)."""
        added = (
            {}
            if self.paper_files
            else {
                "preset": self.preset,
                "max_groups_per_item": self.max_groups_per_item,
                "keep_twins": self.keep_twins,
            }
        )
        return {
            **added,
            "seed": self.seed,
            "window_days": self.window_days,
            "min_history": self.min_history,
            "min_gap": self.min_gap,
            "group_size": self.group_size,
            "avg_scope": self.avg_scope,
            "on_bad_line": self.on_bad_line,
        }

    def as_manifest(self) -> dict[str, Any]:
        """All parameters, JSON-ready; the output and stage paths are left out so content is path-free."""
        every = asdict(self)
        data = {name: every[name] for name in _RECORDED}  # the first release's order
        if not self.with_interactions:  # absent unless asked for: manifests of other builds are unchanged
            data.pop("with_interactions")
        data["domains"] = list(self.domains)
        data["source"] = portable_name(self.source)
        # Options added after the first release are recorded only when they change the output from that
        # release's (so the paper preset with --keep-twins writes the same manifest as before).
        for name, earlier in _EARLIER.items():
            if data[name] == earlier:
                data.pop(name)
        return data


# The behaviour of the builder before these options existed.
_EARLIER: dict[str, Any] = {
    "preset": "paper",
    "train_fraction": None,
    "max_groups_per_item": None,
    "keep_twins": True,
}

# The parameters manifest.json records, in the order of the first release (the output and stage paths are
# left out, so its content is path-free).
_RECORDED: tuple[str, ...] = (
    "source", "domains", "window_days", "min_history", "min_gap", "group_size", "preset", "test_groups",
    "train_fraction", "max_groups_per_item", "keep_twins", "split_rule", "avg_scope", "seed", "threads",
    "memory_limit", "on_bad_line", "with_interactions",
)  # fmt: skip
