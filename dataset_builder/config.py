"""The builder's parameters, validated once at the boundary (CLI flags map one to one onto fields)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from dataset_builder.schema import DOMAINS

AvgScope = Literal["history", "all"]
OnBadLine = Literal["error", "skip"]
MS_PER_DAY = 86_400_000
HF_RAW_SOURCE = "hf://datasets/McAuley-Lab/Amazon-Reviews-2023/raw"
# Relative ratings are floats; a gap of exactly min_gap (0.6 as a decimal) must fail, so the comparison is
# `gap > min_gap + GAP_TOLERANCE` (the reference oracle decides it with exact fractions).
GAP_TOLERANCE = 1e-9


class BuildError(Exception):
    """A build cannot proceed; the message names the file, the line (if any) and the fix."""


_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*$", re.IGNORECASE)
_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS.update({"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40})


def parse_memory(text: str) -> int:
    """Bytes in a DuckDB-style memory size.

    Args:
        text: e.g. ``"4GB"``, ``"512MiB"``.

    Returns:
        The size in bytes.

    >>> parse_memory("4GB")
    4000000000
    >>> parse_memory("1.5 GiB")
    1610612736
    """
    match = _MEMORY.match(text)
    if not match:
        raise BuildError(f"--memory-limit {text!r} is not a size; write it like 4GB or 512MB")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def parse_domains(text: str | None) -> tuple[str, ...]:
    """The comma-separated category list, or the paper's four when empty.

    >>> parse_domains("Books, Electronics")
    ('Books', 'Electronics')
    """
    if not text:
        return DOMAINS
    return tuple(part.strip() for part in text.split(",") if part.strip())


@dataclass(frozen=True, slots=True)
class BuildConfig:
    """Everything one build depends on; see PROTOCOL §2 for the selection parameters.

    Args:
        source: a local folder (plain or .gz files) or an ``hf://`` folder of the raw dataset.
        out: the output folder (written to a sibling temp folder, then renamed).
        domains: category names; each needs ``<Category>.jsonl[.gz]`` and its ``meta_`` file.
        window_days: all users of a group reviewed the item within this many days (closed interval).
        min_history: a user needs more than this many reviews strictly before the query review.
        min_gap: every pair in a group differs by more than this in relative rating.
        group_size: users per group (the ``full`` config); easy/medium/hard draw 2/3/4 of them.
        test_groups: groups in the ``test`` split; the rest go to ``train``.
        avg_scope: ``history`` (leak-free default) or ``all`` (paper mode) for avg/most-common rating.
        seed: drives the test/train split, the level draws and the presentation order.
        threads: DuckDB threads (None: DuckDB's default, all cores).
        memory_limit: DuckDB memory limit; larger work spills to ``work_dir``.
        on_bad_line: ``error`` stops at the first malformed line; ``skip`` counts and skips it.
        overwrite: replace an existing ``out``.
        work_dir: stage files for resuming (default: ``<out>.stages`` next to ``out``).
        push_to_hub: ``ORG/NAME`` to upload the finished folder to (needs a token).
        progress: show tqdm bars.
    """

    source: str
    out: Path
    domains: tuple[str, ...] = DOMAINS
    window_days: float = 30.0
    min_history: int = 20
    min_gap: float = 0.6
    group_size: int = 5
    test_groups: int = 200
    avg_scope: AvgScope = "history"
    seed: int = 0
    threads: int | None = None
    memory_limit: str = "4GB"
    on_bad_line: OnBadLine = "error"
    overwrite: bool = False
    work_dir: Path | None = None
    push_to_hub: str | None = None
    progress: bool = field(default=True, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", Path(self.out))
        if self.work_dir is not None:
            object.__setattr__(self, "work_dir", Path(self.work_dir))
        object.__setattr__(self, "domains", tuple(self.domains))
        unknown = [d for d in self.domains if d not in DOMAINS]
        if unknown:
            raise BuildError(f"unknown domain(s) {unknown}; choose from {', '.join(DOMAINS)}")
        if not self.domains or len(set(self.domains)) != len(self.domains):
            raise BuildError(f"--domains must list each category once, got {list(self.domains)}")
        if not self.source:
            raise BuildError("--source is empty; pass a folder of raw files or " + HF_RAW_SOURCE)
        if not self.window_days >= 0:
            raise BuildError(f"--window-days must be >= 0, got {self.window_days}")
        if self.min_history < 0:
            raise BuildError(f"--min-history must be >= 0, got {self.min_history}")
        if not self.min_gap >= 0:
            raise BuildError(f"--min-gap must be >= 0, got {self.min_gap}")
        if self.group_size < 2:
            raise BuildError(f"--group-size must be at least 2, got {self.group_size}")
        if self.test_groups < 1:
            raise BuildError(f"--test-groups must be at least 1, got {self.test_groups}")
        if self.avg_scope not in ("history", "all"):
            raise BuildError(f"--avg-scope must be history or all, got {self.avg_scope!r}")
        if self.on_bad_line not in ("error", "skip"):
            raise BuildError(f"--on-bad-line must be error or skip, got {self.on_bad_line!r}")
        if self.threads is not None and self.threads < 1:
            raise BuildError(f"--threads must be >= 1, got {self.threads}")
        parse_memory(self.memory_limit)
        if self.push_to_hub is not None and self.push_to_hub.count("/") != 1:
            raise BuildError(f"--push-to-hub wants ORG/NAME, got {self.push_to_hub!r}")

    @property
    def window_ms(self) -> int:
        """The window length in milliseconds (rounded like the reference oracle)."""
        return round(self.window_days * MS_PER_DAY)

    @property
    def stage_root(self) -> Path:
        """Where per-domain stage files live between runs."""
        return self.work_dir if self.work_dir is not None else self.out.with_name(self.out.name + ".stages")

    def selection_params(self) -> dict[str, Any]:
        """The parameters a domain's groups depend on (the seed only shapes splits and order)."""
        return {
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
        for name in ("progress", "out", "work_dir", "overwrite", "push_to_hub"):
            data.pop(name)
        data["domains"] = list(self.domains)
        if not self.source.startswith("hf://"):
            data["source"] = Path(self.source).name  # a local path says nothing to others and may be private
        return data
