"""Hand-made raw files for the builder tests: users with known histories, so every answer is known.

A ``Scenario`` collects review and metadata lines of one domain; ``add_user`` gives a user a history of given
ratings on filler items (one day apart, ending one day before ``query_ts``) and a review of the query item.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataset_builder.perrecbench.config import BuildConfig

DAY = 86_400_000
T0 = 1_600_000_000_000  # 2020-09-13, milliseconds
QUERY = "Q0000000001"


@dataclass
class Scenario:
    domain: str = "Books"
    reviews: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, dict[str, Any]] = field(default_factory=dict)

    def item(self, asin: str, title: str | None = None, **extra: Any) -> None:
        self.meta[asin] = {
            "parent_asin": asin,
            "title": title or f"title of {asin}",
            "main_category": "Books",
            "average_rating": 4.0,
            "rating_number": 10,
            **extra,
        }

    def review(self, user: str, asin: str, rating: float, ts: int, **extra: Any) -> None:
        self.reviews.append(
            {
                "rating": rating,
                "title": "t",
                "text": "x",
                "images": [],
                "asin": asin,
                "parent_asin": asin,
                "user_id": user,
                "timestamp": ts,
                "helpful_vote": 0,
                "verified_purchase": True,
                **extra,
            }
        )

    def add_user(
        self,
        user: str,
        history: list[float],
        rating: float,
        query_ts: int = T0,
        query: str = QUERY,
        same_ms_extra: int = 0,
    ) -> None:
        """``history`` ratings oldest first; ``same_ms_extra`` more reviews at exactly ``query_ts``."""
        for i, value in enumerate(history):
            asin = f"H-{user}-{i}"
            self.item(asin)
            self.review(user, asin, value, query_ts - (len(history) - i) * DAY)
        for j in range(same_ms_extra):
            asin = f"S-{user}-{j}"
            self.item(asin)
            self.review(user, asin, 3.0, query_ts)
        if query not in self.meta:
            self.item(query, author={"name": "Ann Author", "avatar": None, "about": []})
        self.review(user, query, rating, query_ts)

    def write(
        self, folder: Path, extra_lines: list[str] | None = None, meta_lines: list[str] | None = None
    ) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps(r) for r in self.reviews] + list(extra_lines or [])
        (folder / f"{self.domain}.jsonl").write_text("\n".join(lines) + "\n")
        meta = [json.dumps(m) for m in self.meta.values()] + list(meta_lines or [])
        (folder / f"meta_{self.domain}.jsonl").write_text("\n".join(meta) + "\n")
        return folder


def five_users(
    scenario: Scenario,
    ratings: tuple[float, ...] = (1.0, 2.0, 3.0, 4.0, 5.0),
    n_history: int = 21,
    spacing_ms: int = 0,
) -> None:
    """Five users, each with ``n_history`` reviews rated 3 before the query: relative ratings = rating - 3."""
    for k, rating in enumerate(ratings):
        scenario.add_user(f"U{k}", [3.0] * n_history, rating, query_ts=T0 + k * spacing_ms)


def five_user_source(folder: Path) -> Path:
    """Raw files of one domain (Books) holding exactly one valid group, that of :func:`five_users`."""
    scenario = Scenario()
    five_users(scenario)
    return scenario.write(folder)


def config(source: Path, out: Path, **overrides: Any) -> BuildConfig:
    """A quiet single-domain config for small inputs."""
    values: dict[str, Any] = {
        "source": str(source),
        "out": out,
        "domains": ("Books",),
        "test_groups": 1,
        "threads": 1,
        "memory_limit": "1GB",
    }
    values.update(overrides)
    return BuildConfig(**values)
