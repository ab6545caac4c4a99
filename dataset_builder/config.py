"""The settings of ``perrecbench synth`` and the settings every ``perrecbench build --task NAME`` shares.

Each field declares its command-line help with :func:`perrec_eval.cliconfig.option`, so the flags, their
defaults and ``--config FILE.yaml`` follow from the dataclasses (see :mod:`dataset_builder.cli`). A task
family's build settings are a subclass of :class:`BuildSpec` in its folder (its own fields added). A setting
that does not fit raises :class:`BuildConfigError`, whose message names the flag and the fix. This module
imports nothing heavy: the CLI imports it to build its parser.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from perrec_eval import outputs
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
# MovieLens-1M as GroupLens ships it: `::`-separated, Latin-1, three files at the folder's root. A source
# holding them is read as one domain of that name (ratings as its reviews, movies as its metadata).
MOVIELENS_DOMAIN = "MovieLens-1M"
MOVIELENS_FILES: dict[str, str] = {"reviews": "ratings.dat", "meta": "movies.dat", "users": "users.dat"}
AMAZON_LAYOUT, MOVIELENS_LAYOUT = "amazon-reviews-2023", "movielens-1m"
ALL_DOMAINS = "all"  # --domains all: every category present in the source (build) or every category (synth)
OnBadLine = Literal["error", "skip"]
MS_PER_DAY = 86_400_000
HF_RAW_SOURCE = "hf://datasets/McAuley-Lab/Amazon-Reviews-2023/raw"
MIN_REVIEWS_PER_DOMAIN = 200
MAX_WINDOW_DAYS = 36_500
MAX_THREADS = 4096  # DuckDB's threads setting; more than any machine's cores
SYNTH_BYTES_PER_REVIEW = 500  # peak memory of `synth` per review of a domain (measured: about 470)
SYNTH_AMAZON_BYTES_PER_REVIEW = 48  # the same with --shape amazon (dataset_builder/synth/amazon.py)
SYNTH_SHAPES = ("dense", "amazon")


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


def parse_domains(domains: str | Sequence[str] | None, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The categories to synthesize or build: names of :data:`CATEGORIES` (or of `extra`: a build also
    knows :data:`MOVIELENS_DOMAIN`), or ``all`` alone.

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
    unknown = [name for name in names if name not in (*CATEGORIES, *extra)]
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
    shape: str = option(
        "dense (the planted model: every user active, many groups per review; the demo's) or amazon (a "
        "real category's sparsity, sizes and text lengths: most users with one or two reviews, a 5-core of a "
        "third of the reviews; written a block of users at a time, so a whole category fits in memory; "
        "docs/performance.md)",
        default="dense",
    )

    def __post_init__(self) -> None:
        outputs.target(self.out)  # never the current, home or root folder
        object.__setattr__(self, "out", Path(self.out))
        domains = parse_domains(self.domains)
        object.__setattr__(self, "domains", CATEGORIES if domains == (ALL_DOMAINS,) else domains)
        n = self.reviews_per_domain
        if isinstance(n, bool) or not isinstance(n, int):
            raise BuildConfigError(f"--reviews-per-domain must be an integer, got {n!r}")
        if n < MIN_REVIEWS_PER_DOMAIN:
            raise BuildConfigError(f"--reviews-per-domain must be at least {MIN_REVIEWS_PER_DOMAIN}, got {n}")
        if self.shape not in SYNTH_SHAPES:
            raise BuildConfigError(f"--shape must be one of {', '.join(SYNTH_SHAPES)}, got {self.shape!r}")
        if self.shape == "amazon" and (self.dirty or self.twins):
            raise BuildConfigError("--shape amazon plants no faults or twins: drop --dirty and --twins")
        per_review = SYNTH_AMAZON_BYTES_PER_REVIEW if self.shape == "amazon" else SYNTH_BYTES_PER_REVIEW
        memory = _physical_memory()
        if memory and n * per_review > memory:  # refused before numpy tries to allocate it
            raise BuildConfigError(
                f"--reviews-per-domain {n:,} needs about {n * per_review / 2**30:,.0f} GiB of "
                f"memory, more than this machine's {memory / 2**30:,.0f} GiB: write at most "
                f"{memory // per_review:,} reviews per domain"
                + ("" if self.shape == "amazon" else " (or --shape amazon, which needs far less)")
            )
        if self.seed < 0:  # numpy's generators take no negative seed
            raise BuildConfigError(f"--seed must be an integer >= 0, got {self.seed}")


@dataclass(frozen=True, slots=True)
class BuildSpec:
    """Settings every task family's build shares (input, output, DuckDB, publishing)."""

    task: ClassVar[str]  # the family's name in `dataset_builder.tasks`
    description: ClassVar[str]  # what `perrecbench build --task NAME --help` says the build does

    source: str = option(
        f"folder of raw files (plain or .gz: <Category>.jsonl and meta_<Category>.jsonl) or {HF_RAW_SOURCE}"
    )
    out: Path = option("output folder (written to a sibling temp folder, then renamed into place)")
    domains: tuple[str, ...] = option(
        "comma-separated Amazon Reviews 2023 categories (file stems: Books, Video_Games, ...; each needs "
        "<Category>.jsonl[.gz] and its meta_ file), or all: every category the source folder holds",
        default=DOMAINS,
    )
    threads: int | None = option("DuckDB threads; none uses all cores", default=None)
    memory_limit: str = option(
        "DuckDB memory limit, e.g. 4GB or 512MiB; larger work spills to disk", default="4GB"
    )
    on_bad_line: OnBadLine = option(
        "at a malformed line: stop with its file and line number (error) or count, report and skip it (skip)",
        default="error",
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
        object.__setattr__(self, "domains", parse_domains(self.domains, (MOVIELENS_DOMAIN,)))
        if not self.source:
            raise BuildConfigError("--source is empty; pass a folder of raw files or " + HF_RAW_SOURCE)
        outputs.target(self.out)  # checked here, not after the selection: the build replaces --out whole
        if self.on_bad_line not in ("error", "skip"):
            raise BuildConfigError(f"--on-bad-line must be error or skip, got {self.on_bad_line!r}")
        if self.threads is not None and not 1 <= self.threads <= MAX_THREADS:
            raise BuildConfigError(f"--threads must be in 1..{MAX_THREADS}, got {self.threads}")
        parse_memory(self.memory_limit)
        if self.push_to_hub is not None:
            try:
                check_hub_id(self.push_to_hub, "--push-to-hub")
            except ConfigError as err:
                raise BuildConfigError(str(err)) from None
        if self.work_dir is not None:
            try:
                outputs.target(self.work_dir, flag="--work-dir")
                # its stage folders would be mixed into the raw files, or deleted with the build
                local = None if self.source.startswith("hf://") else self.source
                inputs = {"--source": local, "--out": str(self.out)}
                outputs.refuse_overlap(self.work_dir, inputs, flag="--work-dir", holds=False, existing=False)
            except ConfigError as err:
                raise BuildConfigError(str(err)) from None

    @property
    def stage_root(self) -> Path:
        """Where per-domain stage files live between runs."""
        return self.work_dir if self.work_dir is not None else self.out.with_name(self.out.name + ".stages")

    def check_source_apart(self) -> None:
        """Refuse an ``--out`` that is, contains or lies inside a local ``--source`` (before any lock).

        Raises:
            BuildConfigError: the relation, and the fix.
        """
        if self.source.startswith("hf://"):
            return
        local, target = Path(self.source).expanduser().resolve(), self.out.expanduser().resolve()
        if target == local or target in local.parents:
            relation = "is" if target == local else "contains"
            raise BuildConfigError(
                f"--out {self.out} {relation} --source {self.source}, which the build would delete; "
                "choose an --out outside the source folder"
            )
        if local in target.parents:  # the raw files' folder is the user's: nothing is added to it
            raise BuildConfigError(
                f"--out {self.out} is inside --source {self.source}; choose an --out outside the source "
                "folder"
            )
