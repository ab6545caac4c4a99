"""In which order a listwise prompt shows a group's users: balanced across the groups of a level, or the
dataset's order (the paper's presentation).

A model that always gives the same answer (``[1, 2, ...]``, its reverse, any fixed permutation of the shown
users) knows nothing about the users, yet under the dataset's order its PTC is whatever the luck of that
order gives (on one 200-group build: -0.13 for always ``[1, 2]``). The **balanced** presentation removes
that luck exactly:

- the groups of a level are taken in a seeded order and paired; the first of a pair is shown in a seeded,
  uniformly random order sigma (shown position -> true rank); its partner in the value-reversed order
  (true rank r shown where the first showed n + 1 - r);
- a fixed answer then has tau t on the first group and -t on its partner (truths with no ties, PerRecBench
  groups differ by more than 0.6), so its PTC over the level is exactly 0, or within one group's tau
  divided by the number of groups when a level has an odd number of groups (the last group is unpaired);
- each group on its own is still shown in a uniformly random order.

Pointwise shows one user, and pairwise already asks both orders, so only listwise needs this. Few-shot
demonstrations and `sft data` examples keep the dataset's order (itself a seeded random order per group):
whatever position habit they teach, the balanced test presentation scores it 0.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Literal

from perrec_eval.tasks.perrecbench.records import Group

Presentation = Literal["balanced", "dataset"]
PRESENTATIONS: tuple[str, ...] = ("balanced", "dataset")


def true_ranks(relative_ratings: Sequence[float]) -> list[int]:
    """Group positions best first (true rank 1 first).

    >>> true_ranks([0.5, -1.0, 2.0])
    [2, 0, 1]
    """
    return sorted(range(len(relative_ratings)), key=lambda i: -relative_ratings[i])


def balanced_orders(groups: Sequence[Group], *, seed: int, level: str) -> dict[str, tuple[int, ...]]:
    """The balanced listwise presentation of every group of one level.

    Args:
        groups: the level's groups (any order; the pairing depends on their ids, not on their order).
        seed: the run's seed.
        level: the level's name (so that levels are paired independently).

    Returns:
        group id -> the group positions shown as User1, User2, ... .

    >>> from perrec_eval.tasks.perrecbench.records import User
    >>> def group(gid, rels):
    ...     users = tuple(User(f"u{i}", 3.0 + r, 0, 3.0, 3.0, r, ()) for i, r in enumerate(rels))
    ...     return Group(gid, "Books", "medium", None, 0, users)
    >>> a, b = group("a", [1.0, -1.0, 0.0]), group("b", [0.0, 2.0, -2.0])
    >>> orders = balanced_orders([a, b], seed=0, level="medium")
    >>> rank_a = [true_ranks(a.relative_ratings).index(i) + 1 for i in orders["a"]]
    >>> rank_b = [true_ranks(b.relative_ratings).index(i) + 1 for i in orders["b"]]
    >>> [x + y for x, y in zip(rank_a, rank_b)]  # shown position by position: ranks r and n + 1 - r
    [4, 4, 4]
    """
    rng = random.Random(f"{seed}:{level}:listwise-presentation")
    by_size: dict[int, list[Group]] = {}
    for group in sorted(groups, key=lambda g: g.group_id):
        by_size.setdefault(len(group.users), []).append(group)
    orders: dict[str, tuple[int, ...]] = {}
    for n, members in sorted(by_size.items()):
        rng.shuffle(members)
        for start in range(0, len(members), 2):
            sigma = rng.sample(range(1, n + 1), n)  # shown position -> true rank
            pair = members[start : start + 2]
            for group, ranks in zip(pair, (sigma, [n + 1 - r for r in sigma]), strict=False):
                best_first = true_ranks(group.relative_ratings)
                orders[group.group_id] = tuple(best_first[rank - 1] for rank in ranks)
    return orders


def listwise_orders(
    groups: Sequence[Group], presentation: Presentation, *, seed: int, level: str
) -> dict[str, tuple[int, ...]] | None:
    """Each group's listwise presentation under `presentation`; None for the dataset's order."""
    if presentation == "dataset":
        return None
    if presentation == "balanced":
        return balanced_orders(groups, seed=seed, level=level)
    raise ValueError(f"unknown presentation {presentation!r}: use {' or '.join(PRESENTATIONS)}")
