"""The rows of LLMRec's tasks from each user's chronological sequence (pure functions).

A user's items ``s_0 .. s_{n-1}`` (chronological, ties by ``parent_asin``; n >= 3 after the k-core).
Leave-last-out (``last_out``): test asks about ``s_{n-1}``, validation about ``s_{n-2}``, train about
``s_1 .. s_{n-3}`` (``s_0`` has no earlier item: it only appears in histories). ``timestamp``: the
target's time against two global cut points (`Cuts`): before the first train, before the second
validation, else test (again no row for ``s_0``). Each row's history is the most recent ``history_length``
items before its target, oldest first, so no row shows its own target or anything after it, and a test
target (a user reviews an item once after deduplication) is in no train or validation row of its user.
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


@dataclass(frozen=True, slots=True)
class Cuts:
    """The timestamp split's global cut points (ms): validation from `valid_from`, test from `test_from`."""

    valid_from: int
    test_from: int

    def split(self, position: int, timestamp: int) -> str | None:
        """The split of the row asking about an item at `position` reviewed at `timestamp` (None: no row).

        >>> [Cuts(10, 20).split(p, t) for p, t in ((0, 5), (1, 9), (2, 10), (3, 20))]
        [None, 'train', 'validation', 'test']
        """
        if position == 0:
            return None
        if timestamp >= self.test_from:
            return "test"
        return "validation" if timestamp >= self.valid_from else "train"


def train_items(sequence: Sequence[Interaction], cuts: Cuts | None = None) -> Sequence[Interaction]:
    """The user's items the baselines may be fitted on: every item before the first validation or test
    target (leave-last-out: all but the last two; timestamp: those before `cuts.valid_from`).

    >>> seq = [Interaction(f"I{i}", "", 5.0, 10 * i) for i in range(4)]
    >>> [i.parent_asin for i in train_items(seq)], [i.parent_asin for i in train_items(seq, Cuts(15, 25))]
    (['I0', 'I1'], ['I0', 'I1'])
    """
    if cuts is None:
        return sequence[:-2]
    return [item for item in sequence if item.timestamp < cuts.valid_from]


def user_rows(
    domain: str, user: str, sequence: Sequence[Interaction], history_length: int, cuts: Cuts | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """(split, row) for every target of one user: the columns every config shares, plus the rating
    (leave-last-out, or the timestamp split with `cuts`).

    >>> seq = [Interaction(f"I{i}", f"T{i}", 5.0, i) for i in range(4)]
    >>> [(split, row["parent_asin"], [h["parent_asin"] for h in row["history"]])
    ...  for split, row in user_rows("D", "U", seq, 2)]
    [('train', 'I1', ['I0']), ('validation', 'I2', ['I0', 'I1']), ('test', 'I3', ['I1', 'I2'])]
    >>> [split for split, _ in user_rows("D", "U", seq, 2, Cuts(2, 3))]
    ['train', 'validation', 'test']
    """
    rows = []
    for position, target in enumerate(sequence):
        split = split_of(position, len(sequence)) if cuts is None else cuts.split(position, target.timestamp)
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
    # numpy's default_rng([seed, digest]) spelled out: the same stream without its per-call overhead
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, digest])))


def candidates(
    target: str,
    pool: np.ndarray,
    negatives: int,
    rng: np.random.Generator,
    weights: np.ndarray | None = None,
) -> tuple[list[str], int]:
    """The target and `negatives` items drawn without replacement from `pool` (the domain's items the user
    never reviewed), uniformly or in proportion to `weights`, shuffled; and the target's position.

    >>> items, at = candidates("T", np.array(["A", "B", "C"]), 2, np.random.default_rng(0))
    >>> sorted(items).count("T"), items[at], len(set(items))
    (1, 'T', 3)
    >>> candidates("T", np.array(["A", "B", "C"]), 1, np.random.default_rng(0), np.array([0.0, 1.0, 0.0]))[0]
    ['B', 'T']
    """
    p = None if weights is None else weights / weights.sum()
    drawn = rng.choice(pool, size=negatives, replace=False, p=p).tolist()
    order = rng.permutation(negatives + 1)
    listed = [*drawn, target]
    shuffled = [listed[i] for i in order]
    return shuffled, int(np.flatnonzero(order == negatives)[0])
