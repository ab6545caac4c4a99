"""Pure group search for one query item, and the per-user summaries of a history.

The search decides **exactly** whether a valid group exists, and picks one deterministically:

* Every valid group fits a closed window ``[t, t + Δ]`` whose start ``t`` is the timestamp of its earliest
  member, i.e. of some candidate. So it is enough to try the windows that start at each distinct candidate
  timestamp, in increasing order.
* Inside one window, a set of ``k`` users with all pairwise gaps ``> λ`` exists iff the greedy scan over
  ascending relative ratings (take the lowest; then the lowest that is more than λ above the last taken)
  takes at least ``k``. Exchange argument: for every count ``j`` the greedy's ``j``-th value is the smallest
  possible ``j``-th value of any valid chain, so any chain of length ``k`` can be matched by greedy. Gaps
  between non-consecutive members are sums of consecutive ones, so checking consecutive pairs suffices.
* The chosen group is the greedy's first ``k`` users in the earliest window that admits one. Ties in
  relative rating are broken by ``(timestamp, user_id)``.

The windows slide: a sorted list of the window's ratings is updated incrementally, so an item with ``m``
candidates costs ``O(m log m)`` comparisons plus ``O(m²)`` cheap list moves in the worst case.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from dataset_builder.config import GAP_TOLERANCE


@dataclass(frozen=True, slots=True, order=True)
class Candidate:
    """An active reviewer of the query item: rating relative to their own average, and when."""

    rel: float
    timestamp: int
    user_id: str


def gap_ok(low: float, high: float, min_gap: float) -> bool:
    """Whether two relative ratings differ by strictly more than ``min_gap`` (exact ties fail).

    >>> gap_ok(0.0, 0.6000000000000001, 0.6)
    False
    >>> gap_ok(0.0, 0.61, 0.6)
    True
    """
    return high - low > min_gap + GAP_TOLERANCE


def greedy_chain(ordered: Sequence[Candidate], min_gap: float, need: int) -> list[Candidate]:
    """The greedy chain over candidates sorted by ``(rel, timestamp, user_id)``, stopped at ``need``.

    >>> cands = [Candidate(r, 0, str(r)) for r in (-1.0, -0.8, 0.0, 0.5, 1.0)]
    >>> [c.rel for c in greedy_chain(cands, 0.6, 5)]
    [-1.0, 0.0, 1.0]
    """
    rels = [c.rel for c in ordered]
    chain: list[Candidate] = []
    index = 0
    while index < len(ordered) and len(chain) < need:
        chain.append(ordered[index])
        last = ordered[index].rel
        # Jump close to the next feasible value, then step with the exact predicate (float rounding).
        index = max(index + 1, bisect.bisect_left(rels, last + min_gap) - 1)
        while index < len(ordered) and not gap_ok(last, rels[index], min_gap):
            index += 1
    return chain


def find_group(
    candidates: Sequence[Candidate], *, window_ms: int, min_gap: float, group_size: int
) -> list[Candidate] | None:
    """A valid group among one item's candidates, or ``None`` when none exists (see the module docstring).

    Args:
        candidates: the item's active reviewers (any order, one per user).
        window_ms: window length Δ; members satisfy ``max(t) - min(t) <= Δ``.
        min_gap: λ; every pair differs by more than this.
        group_size: k.

    Returns:
        ``group_size`` candidates ordered by relative rating, or ``None``.

    >>> day = 86_400_000
    >>> cands = [Candidate(float(r), t * day, f"u{t}") for t, r in enumerate([-2, -1, 0, 1, 2, 3])]
    >>> [c.user_id for c in find_group(cands, window_ms=4 * day, min_gap=0.6, group_size=5)]
    ['u0', 'u1', 'u2', 'u3', 'u4']
    >>> find_group(cands, window_ms=3 * day, min_gap=0.6, group_size=5) is None
    True
    """
    if len(candidates) < group_size:
        return None
    by_time = sorted(candidates, key=lambda c: (c.timestamp, c.user_id))
    window: list[Candidate] = []  # sorted by (rel, timestamp, user_id)
    kept = end = 0  # window = by_time[kept:end]
    for start, first in enumerate(by_time):
        if start and by_time[start - 1].timestamp == first.timestamp:
            continue  # same window as the previous start
        for gone in by_time[kept:start]:
            del window[bisect.bisect_left(window, gone)]
        kept = start
        while end < len(by_time) and by_time[end].timestamp - first.timestamp <= window_ms:
            bisect.insort(window, by_time[end])
            end += 1
        if len(window) < group_size:
            continue
        chain = greedy_chain(window, min_gap, group_size)
        if len(chain) == group_size:
            return chain
    return None


def most_common_rating(ratings: Sequence[float]) -> float:
    """The most frequent rating; on equal counts the one whose first occurrence comes first.

    Args:
        ratings: in chronological order.

    Returns:
        The mode (NaN for an empty list).

    >>> most_common_rating([3.0, 5.0, 5.0, 3.0, 1.0])
    3.0
    """
    if not ratings:
        return float("nan")
    counts = Counter(ratings)
    top = max(counts.values())
    return next(value for value in ratings if counts[value] == top)
