"""The settings of ``perrecbench synth`` and ``perrecbench build``, validated once at the boundary.

Each field declares its command-line help with :func:`perrec_eval.cliconfig.option`, so the flags, their
defaults and ``--config FILE.yaml`` follow from the dataclasses (see :mod:`dataset_builder.cli`). A setting
that does not fit raises :class:`BuildConfigError`, whose message names the flag and the fix. This module
imports nothing heavy: the CLI imports it to build its parser.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from perrec_eval.cliconfig import check_hub_id, option
from perrec_eval.errors import ConfigError, PerrecbenchError

DOMAINS: tuple[str, ...] = ("Books", "Clothing_Shoes_and_Jewelry", "Home_and_Kitchen", "Electronics")
# Every category of the Amazon Reviews 2023 release (the file stems of raw/review_categories/ and the 34 lines
# of its all_categories.txt: 33 categories plus Unknown).
CATEGORIES: tuple[str, ...] = (
    "All_Beauty", "Amazon_Fashion", "Appliances", "Arts_Crafts_and_Sewing", "Automotive", "Baby_Products",
    "Beauty_and_Personal_Care", "Books", "CDs_and_Vinyl", "Cell_Phones_and_Accessories",
    "Clothing_Shoes_and_Jewelry", "Digital_Music", "Electronics", "Gift_Cards", "Grocery_and_Gourmet_Food",
    "Handmade_Products", "Health_and_Household", "Health_and_Personal_Care", "Home_and_Kitchen",
    "Industrial_and_Scientific", "Kindle_Store", "Magazine_Subscriptions", "Movies_and_TV",
    "Musical_Instruments", "Office_Products", "Patio_Lawn_and_Garden", "Pet_Supplies", "Software",
    "Sports_and_Outdoors", "Subscription_Boxes", "Tools_and_Home_Improvement", "Toys_and_Games",
    "Video_Games", "Unknown",
)  # fmt: skip
# Written by `perrecbench synth` next to its files: the sha256 of every file it wrote. A build whose inputs
# match it records "source_kind": "synthetic" and says so in its card.
SYNTH_MARKER = "synth_marker.json"
ALL_DOMAINS = "all"  # --domains all: every category present in the source (build) or every category (synth)
AvgScope = Literal["history", "all"]
OnBadLine = Literal["error", "skip"]
SplitRule = Literal["leak-free", "user-disjoint", "none"]
Preset = Literal["paper", "large"]
LEVELS: dict[str, int] = {"easy": 2, "medium": 3, "hard": 4}  # the large preset's group size per level
MS_PER_DAY = 86_400_000
HF_RAW_SOURCE = "hf://datasets/McAuley-Lab/Amazon-Reviews-2023/raw"
# Relative ratings are floats; a gap of exactly min_gap (0.6 as a decimal) must fail, so the comparison is
# `gap > min_gap + GAP_TOLERANCE` (the reference oracle decides it with exact fractions).
GAP_TOLERANCE = 1e-9
MIN_REVIEWS_PER_DOMAIN = 200
MAX_WINDOW_DAYS = 36_500
MAX_THREADS = 4096  # DuckDB's threads setting; more than any machine's cores
SYNTH_BYTES_PER_REVIEW = 500  # peak memory of `synth` per review of a domain (measured: about 470)


class BuildError(PerrecbenchError):
    """A build cannot proceed; the message names the file, the line (if any) and the fix."""


class BuildConfigError(BuildError, ConfigError):
    """A setting of ``perrecbench synth`` or ``build`` is invalid (both a build and a config error)."""


_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*$", re.IGNORECASE)
_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS.update({"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40})


def parse_memory(text: str) -> int:
    """Bytes in a DuckDB-style memory size.

    Args:
        text: e.g. ``"4GB"``, ``"512MiB"``.

    Returns:
        The size in bytes.

    Raises:
        BuildConfigError: ``text`` is not a size.

    >>> parse_memory("4GB")
    4000000000
    >>> parse_memory("1.5 GiB")
    1610612736
    """
    match = _MEMORY.match(text)
    if not match:
        raise BuildConfigError(f"--memory-limit {text!r} is not a size; write it like 4GB or 512MB")
    size = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    if size > 2**60:  # DuckDB keeps the limit in 64 bits; no machine has an exbibyte
        raise BuildConfigError(f"--memory-limit {text!r} is larger than any machine's memory; write e.g. 4GB")
    return size


def parse_domains(domains: str | Sequence[str] | None) -> tuple[str, ...]:
    """The categories to synthesize or build: names of :data:`CATEGORIES`, or ``all`` alone.

    Args:
        domains: a comma-separated string or a sequence of names; ``None`` means the paper's four
            (:data:`DOMAINS`); ``"all"`` stays ``("all",)`` and is resolved against the source by the build.

    Returns:
        The names, in the given order.

    Raises:
        BuildConfigError: an unknown name (the message lists the valid ones), none at all, or one twice.

    >>> parse_domains("Books, Video_Games")
    ('Books', 'Video_Games')
    >>> parse_domains(None) == DOMAINS, parse_domains("all")
    (True, ('all',))
    """
    if domains is None:
        return DOMAINS
    parts = domains.split(",") if isinstance(domains, str) else domains
    names = tuple(name.strip() for name in parts if name.strip())
    if names == (ALL_DOMAINS,):
        return names
    if ALL_DOMAINS in names:
        raise BuildConfigError(f"--domains {ALL_DOMAINS} stands alone, got {list(names)}")
    unknown = [name for name in names if name not in CATEGORIES]
    if unknown:
        raise BuildConfigError(
            f"unknown domain(s) {unknown}; choose from {ALL_DOMAINS} or the Amazon Reviews 2023 categories "
            + ", ".join(CATEGORIES)
        )
    if not names or len(set(names)) != len(names):
        raise BuildConfigError(f"--domains must list each category once, got {list(names)}")
    return names


def out_of_memory(memory_limit: str, stage: str, err: Exception) -> BuildError:
    """The one-line error for DuckDB running out of memory: where, DuckDB's reason, and the fix.

    >>> error = out_of_memory("1MB", "Books: read reviews", MemoryError("Out of Memory Error: x\\nmore"))
    >>> str(error).splitlines() == [str(error)], str(error)[:71]
    (True, 'DuckDB ran out of memory in Books: read reviews with --memory-limit 1MB')
    """
    reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return BuildError(
        f"DuckDB ran out of memory in {stage} with --memory-limit {memory_limit} ({reason}); raise "
        "--memory-limit (its JSON reader alone takes 128 MiB per thread: allow about 256MB per --threads, "
        "2GB or more for the real files) or lower --threads"
    )


def duckdb_settings(memory_limit: str, threads: int | None, spill: Path | None) -> dict[str, Any]:
    """The DuckDB connection settings of a build: memory limit, threads and where to spill.

    Args:
        memory_limit: e.g. ``"4GB"``; larger work spills to ``spill``.
        threads: DuckDB threads (None: DuckDB's default, all cores).
        spill: the spill folder (None: DuckDB's default).

    Returns:
        The ``config`` mapping for ``duckdb.connect``.

    >>> duckdb_settings("1GB", None, None)
    {'memory_limit': '1GB', 'preserve_insertion_order': False}
    """
    settings: dict[str, Any] = {"memory_limit": memory_limit, "preserve_insertion_order": False}
    if spill is not None:
        settings["temp_directory"] = str(spill)
    if threads is not None:
        settings["threads"] = threads
    return settings


def portable_name(uri: str) -> str:
    """What a published file records for an input: the hf:// URI, or just the local file or folder name.

    A local path says nothing to others and may be private.

    >>> portable_name("/home/me/raw/Books.jsonl.gz"), portable_name("hf://datasets/o/r/raw/Books.jsonl")
    ('Books.jsonl.gz', 'hf://datasets/o/r/raw/Books.jsonl')
    """
    return uri if uri.startswith("hf://") else Path(uri).name


def _physical_memory() -> int | None:
    """The machine's memory in bytes (None where the system does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


@dataclass(frozen=True, slots=True)
class SynthConfig:
    """What ``perrecbench synth`` writes: synthetic raw files with a planted preference signal.

    The generative model and the faults are documented in :mod:`dataset_builder.synth`.
    """

    out: Path = option("output folder (created); our files in it are replaced atomically, others are kept")
    reviews_per_domain: int = option(
        f"clean review lines per domain (at least {MIN_REVIEWS_PER_DOMAIN}); the build finds about 1.8 "
        "groups per 1,000 reviews",
        default=60_000,
    )
    domains: tuple[str, ...] = option(
        "comma-separated Amazon Reviews 2023 categories to write (e.g. Video_Games), or all", default=DOMAINS
    )
    seed: int = option("random seed; the same seed gives byte-identical files", default=0)
    gzip: bool = option("write .jsonl.gz files instead of plain .jsonl", default=False)
    dirty: bool = option(
        "plant realistic faults in the first domain (duplicate review, bad lines, an item without "
        "metadata), recorded in synth_truth.json",
        default=False,
    )
    twins: bool = option(
        "plant twin items: every 20th item gets a second id with an edition or format note in its title, "
        "reviewed (same rating) ten days before the original by its reviewers; recorded in synth_truth.json",
        default=False,
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", Path(self.out))
        domains = parse_domains(self.domains)
        object.__setattr__(self, "domains", CATEGORIES if domains == (ALL_DOMAINS,) else domains)
        n = self.reviews_per_domain
        if isinstance(n, bool) or not isinstance(n, int):
            raise BuildConfigError(f"--reviews-per-domain must be an integer, got {n!r}")
        if n < MIN_REVIEWS_PER_DOMAIN:
            raise BuildConfigError(f"--reviews-per-domain must be at least {MIN_REVIEWS_PER_DOMAIN}, got {n}")
        memory = _physical_memory()
        if memory and n * SYNTH_BYTES_PER_REVIEW > memory:  # refused before numpy tries to allocate it
            raise BuildConfigError(
                f"--reviews-per-domain {n:,} needs about {n * SYNTH_BYTES_PER_REVIEW / 2**30:,.0f} GiB of "
                f"memory, more than this machine's {memory / 2**30:,.0f} GiB: write at most "
                f"{memory // SYNTH_BYTES_PER_REVIEW:,} reviews per domain"
            )
        if self.seed < 0:  # numpy's generators take no negative seed
            raise BuildConfigError(f"--seed must be an integer >= 0, got {self.seed}")


@dataclass(frozen=True, slots=True)
class BuildConfig:
    """Everything one build depends on; see PROTOCOL §2 for the selection parameters."""

    source: str = option(
        f"folder of raw files (plain or .gz: <Category>.jsonl and meta_<Category>.jsonl) or {HF_RAW_SOURCE}"
    )
    out: Path = option("output folder (written to a sibling temp folder, then renamed into place)")
    domains: tuple[str, ...] = option(
        "comma-separated Amazon Reviews 2023 categories (file stems: Books, Video_Games, ...; each needs "
        "<Category>.jsonl[.gz] and its meta_ file), or all: every category the source folder holds",
        default=DOMAINS,
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
        "groups, for model comparisons that need resolution; see the README)",
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
    threads: int | None = option("DuckDB threads; none uses all cores", default=None)
    memory_limit: str = option(
        "DuckDB memory limit, e.g. 4GB or 512MiB; larger work spills to disk", default="4GB"
    )
    on_bad_line: OnBadLine = option(
        "at a malformed line: stop with its file and line number (error) or count, report and skip it (skip)",
        default="error",
    )
    with_interactions: bool = option(
        "also write each domain's rating interactions (user, item, rating, timestamp; deduplicated) with "
        "every test label removed, as interactions/<Domain>-<sha12>.parquet: the training data of the "
        "collaborative-filtering baselines (--engine baseline --model mf|item-knn)",
        default=False,
    )
    overwrite: bool = option("replace an existing --out folder instead of stopping", default=False)
    work_dir: Path | None = option(
        "folder of stage files for resuming an interrupted or repeated build; none means <out>.stages "
        "next to --out",
        default=None,
    )
    push_to_hub: str | None = option(
        "upload the finished folder to this Hub dataset repo (needs a token); none uploads nothing",
        default=None,
        metavar="ORG/NAME",
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", Path(self.out))
        if self.work_dir is not None:
            object.__setattr__(self, "work_dir", Path(self.work_dir))
        object.__setattr__(self, "domains", parse_domains(self.domains))
        if not self.source:
            raise BuildConfigError("--source is empty; pass a folder of raw files or " + HF_RAW_SOURCE)
        if self.out.name in ("", "..") or self.out.resolve() in (Path.cwd(), *Path.cwd().parents):
            # checked here, not after the selection: the build replaces --out as a whole
            raise BuildConfigError(
                f"--out {self.out} is the current folder or one above it: name a new folder for the "
                "benchmark, e.g. --out perrecbench"
            )
        if self.work_dir is not None and (
            self.work_dir.name in ("", "..") or self.work_dir.resolve() in (Path.cwd(), *Path.cwd().parents)
        ):  # the stage folders are replaced whole, like --out
            raise BuildConfigError(
                f"--work-dir {self.work_dir} is the current folder or one above it: name a folder for the "
                "stage files, e.g. --work-dir perrecbench.stages"
            )
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
        if self.on_bad_line not in ("error", "skip"):
            raise BuildConfigError(f"--on-bad-line must be error or skip, got {self.on_bad_line!r}")
        if self.threads is not None and not 1 <= self.threads <= MAX_THREADS:
            raise BuildConfigError(f"--threads must be in 1..{MAX_THREADS}, got {self.threads}")
        if self.seed < 0:  # numpy's generators take no negative seed
            raise BuildConfigError(f"--seed must be an integer >= 0, got {self.seed}")
        parse_memory(self.memory_limit)
        if self.push_to_hub is not None:
            try:
                check_hub_id(self.push_to_hub, "--push-to-hub")
            except ConfigError as err:
                raise BuildConfigError(str(err)) from None

    @property
    def window_ms(self) -> int:
        """The window length in milliseconds (rounded like the reference oracle)."""
        return round(self.window_days * MS_PER_DAY)

    @property
    def stage_root(self) -> Path:
        """Where per-domain stage files live between runs."""
        return self.work_dir if self.work_dir is not None else self.out.with_name(self.out.name + ".stages")

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
        data = asdict(self)
        for name in ("out", "work_dir", "overwrite", "push_to_hub"):
            data.pop(name)
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
