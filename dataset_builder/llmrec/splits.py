"""Leave-last-out rows of LLMRec's tasks from each user's chronological sequence (pure functions).

A user's items ``s_0 .. s_{n-1}`` (chronological, ties by ``parent_asin``; n >= 3 after the k-core):
test asks about ``s_{n-1}``, validation about ``s_{n-2}``, train about ``s_1 .. s_{n-3}`` (``s_0`` has no
earlier item: it only appears in histories). Each row's history is the most recent ``history_length``
items before its target, oldest first, so no row shows its own target or anything after it, and a test
target (a user reviews an item once after deduplication) is in no other row of its user.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

SPLITS = ("train", "validation", "test")


@dataclass(frozen=True, slots=True)
class Interaction:
    """One (user, item) review kept by the build."""

    parent_asin: str
    title: str
    rating: float
    timestamp: int

    def as_history(self) -> dict[str, Any]:
        return {
            "parent_asin": self.parent_asin,
            "title": self.title,
            "rating": self.rating,
            "timestamp": self.timestamp,
        }


def split_of(position: int, n: int) -> str | None:
    """The split of the row asking about position `position` of a sequence of `n` items (None: no row).

    >>> [split_of(i, 5) for i in range(5)]
    [None, 'train', 'train', 'validation', 'test']
    """
    if position == n - 1:
        return "test"
    if position == n - 2:
        return "validation"
    return "train" if position >= 1 else None


def user_rows(
    domain: str, user: str, sequence: Sequence[Interaction], history_length: int
) -> list[tuple[str, dict[str, Any]]]:
    """(split, row) for every target of one user: the columns every config shares, plus the rating.

    >>> seq = [Interaction(f"I{i}", f"T{i}", 5.0, i) for i in range(4)]
    >>> [(split, row["parent_asin"], [h["parent_asin"] for h in row["history"]])
    ...  for split, row in user_rows("D", "U", seq, 2)]
    [('train', 'I1', ['I0']), ('validation', 'I2', ['I0', 'I1']), ('test', 'I3', ['I1', 'I2'])]
    """
    rows = []
    for position, target in enumerate(sequence):
        split = split_of(position, len(sequence))
        if split is None:
            continue
        history = sequence[max(0, position - history_length) : position]
        rows.append(
            (
                split,
                {
                    "id": f"{domain}:{user}:{position}",
                    "domain": domain,
                    "user_id": user,
                    "parent_asin": target.parent_asin,
                    "title": target.title,
                    "rating": target.rating,
                    "timestamp": target.timestamp,
                    "history": [item.as_history() for item in history],
                },
            )
        )
    return rows


def row_rng(seed: int, row_id: str) -> np.random.Generator:
    """A generator of its own for each row, so a row's draw depends on neither order nor other rows."""
    digest = int.from_bytes(hashlib.sha256(row_id.encode()).digest()[:8], "big")
    return np.random.default_rng([seed, digest])


def candidates(
    target: str, pool: np.ndarray, negatives: int, rng: np.random.Generator
) -> tuple[list[str], int]:
    """The target and `negatives` items drawn uniformly without replacement from `pool` (the domain's
    items the user never reviewed), shuffled; and the target's position.

    >>> items, at = candidates("T", np.array(["A", "B", "C"]), 2, np.random.default_rng(0))
    >>> sorted(items).count("T"), items[at], len(set(items))
    (1, 'T', 3)
    """
    drawn = rng.choice(pool, size=negatives, replace=False).tolist()
    order = rng.permutation(negatives + 1)
    listed = [*drawn, target]
    shuffled = [listed[i] for i in order]
    return shuffled, int(np.flatnonzero(order == negatives)[0])
