"""Pure group search for one query item, and the per-user summaries of a history.

The search decides **exactly** whether a valid group exists, and then draws one **uniformly** (seeded):

* Every valid group fits a closed window ``[t, t + Δ]`` whose start ``t`` is the timestamp of its earliest
  member, i.e. of some candidate. So it is enough to try the windows that start at each distinct candidate
  timestamp, in increasing order.
* Inside one window, a set of ``k`` users with all pairwise gaps ``> λ`` exists iff the greedy scan over
  ascending relative ratings (take the lowest; then the lowest that is more than λ above the last taken)
  takes at least ``k``. Exchange argument: for every count ``j`` the greedy's ``j``-th value is the smallest
  possible ``j``-th value of any valid chain, so any chain of length ``k`` can be matched by greedy. Gaps
  between non-consecutive members are sums of consecutive ones, so checking consecutive pairs suffices.
* The chosen window is the earliest one that admits a group (a rule on time only: it never looks at the
  values of the relative ratings beyond "a group exists"). Inside it, the group is drawn uniformly among
  **all** valid ``k``-subsets of the window's candidates (:func:`draw_chain`): they are counted by dynamic
  programming over the sorted values and one is unranked from a single seeded draw, without enumerating
  them. (The greedy's own group would be the ``k`` lowest compatible values: biased toward negative
  relative ratings.) The random stream of an item is :func:`item_rng` of ``(seed, domain, parent_asin)``,
  so the choice depends neither on the processing order nor on the other items.

**Several groups per item** (the ``large`` preset, :func:`find_groups`): the search above is repeated on the
candidates not yet drawn — the earliest window that still admits a group, a uniform draw among all valid
groups of the remaining candidates inside it — until no window admits one (or ``max_groups`` is reached).
So an item gives a maximal set of user-disjoint groups (not a maximum one: choosing draws to pack more
groups would favour some users), each draw uniform given the ones before it, and no valid group is left
among the users not drawn.

:func:`find_groups` does this in one sweep over the window starts (removing candidates never gives an earlier
start a group), so an item costs about what one search costs plus ``O(k w)`` per group drawn (``w``: the
window's candidates) rather than a search per group.

The windows slide: a sorted list of the window's ratings is updated incrementally, so an item with ``m``
candidates costs ``O(m log m)`` comparisons plus ``O(m²)`` cheap list moves in the worst case, plus
``O(k m)`` for the draw in the chosen window.
"""

from __future__ import annotations

import bisect
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from dataset_builder.perrecbench.config import GAP_TOLERANCE


@dataclass(frozen=True, slots=True, order=True)
class Candidate:
    """An active reviewer of the query item: rating relative to their own average, and when."""

    rel: float
    timestamp: int
    user_id: str


@dataclass(frozen=True, slots=True)
class Choice:
    """The group drawn for one item, and the window it was drawn from."""

    members: list[Candidate]  # ordered by (rel, timestamp, user_id)
    window: list[Candidate]  # every candidate of the chosen window, same order
    n_groups: int  # valid groups in the window; the draw was uniform among them


def gap_ok(low: float, high: float, min_gap: float) -> bool:
    """Whether two relative ratings differ by strictly more than ``min_gap`` (exact ties fail).

    >>> gap_ok(0.0, 0.6000000000000001, 0.6)
    False
    >>> gap_ok(0.0, 0.61, 0.6)
    True
    """
    return high - low > min_gap + GAP_TOLERANCE


def item_rng(seed: int, domain: str, parent_asin: str) -> random.Random:
    """The random stream of one item's draw (string seeds are hashed with SHA-512: stable everywhere).

    >>> item_rng(0, "Books", "B1").random() == item_rng(0, "Books", "B1").random()
    True
    """
    return random.Random(f"{seed}:{domain}:{parent_asin}")


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


def _next_compatible(rels: Sequence[float], min_gap: float) -> list[int]:
    """For each index ``i`` of sorted values, the first ``j > i`` more than ``min_gap`` above (or ``m``)."""
    nxt, j = [], 0
    for i, low in enumerate(rels):
        j = max(j, i + 1)
        while j < len(rels) and not gap_ok(low, rels[j], min_gap):
            j += 1
        nxt.append(j)
    return nxt


def chain_counts(rels: Sequence[float], min_gap: float, size: int) -> list[list[int]]:
    """``ways[j][i]``: valid chains of ``j`` values (consecutive gaps > ``min_gap``) starting at index ``i``.

    Args:
        rels: ascending values.
        min_gap: λ.
        size: the longest chain counted (``ways`` has rows ``0..size``; row 0 is unused).

    Returns:
        The table; ``sum(ways[size])`` is the number of valid ``size``-subsets.

    >>> sum(chain_counts([0.0, 1.0, 2.0, 3.0], 0.6, 3)[3])  # any 3 of 4 values one apart
    4
    >>> sum(chain_counts([0.0, 0.5, 1.0], 0.6, 2)[2])  # only {0.0, 1.0}
    1
    """
    m = len(rels)
    nxt = _next_compatible(rels, min_gap)
    ways = [[0] * m, [1] * m]
    for _ in range(2, size + 1):
        tail = [0] * (m + 1)  # tail[i] = chains one shorter starting at i or later
        for i in range(m - 1, -1, -1):
            tail[i] = tail[i + 1] + ways[-1][i]
        ways.append([tail[nxt[i]] for i in range(m)])
    return ways


def draw_chain(
    ordered: Sequence[Candidate], min_gap: float, size: int, rng: random.Random
) -> tuple[list[Candidate], int]:
    """One valid ``size``-subset of ``ordered``, uniformly among all of them, and how many there are.

    A single ``rng.randrange(total)`` is unranked through :func:`chain_counts` (first member, then the
    next among the compatible ones, ...), so every valid subset has probability ``1 / total`` exactly.

    Args:
        ordered: candidates sorted by ``(rel, timestamp, user_id)``.
        min_gap: λ.
        size: k.
        rng: the item's random stream.

    Returns:
        The members (in ``ordered``'s order) and the number of valid subsets; ``([], 0)`` when none.

    >>> cands = [Candidate(float(r), 0, f"u{r}") for r in range(4)]
    >>> members, total = draw_chain(cands, 0.6, 3, random.Random(0))
    >>> total, len(members)
    (4, 3)
    """
    rels = [c.rel for c in ordered]
    nxt = _next_compatible(rels, min_gap)
    ways = chain_counts(rels, min_gap, size)
    total = sum(ways[size])
    if not total:
        return [], 0
    rank = rng.randrange(total)
    members: list[Candidate] = []
    index = 0
    for remaining in range(size, 0, -1):
        while rank >= ways[remaining][index]:
            rank -= ways[remaining][index]
            index += 1
        members.append(ordered[index])
        index = nxt[index]
    return members, total


def find_group(
    candidates: Sequence[Candidate],
    *,
    window_ms: int,
    min_gap: float,
    group_size: int,
    rng: random.Random,
) -> Choice | None:
    """A valid group among one item's candidates, or ``None`` when none exists (see the module docstring).

    Args:
        candidates: the item's active reviewers (any order, one per user).
        window_ms: window length Δ; members satisfy ``max(t) - min(t) <= Δ``.
        min_gap: λ; every pair differs by more than this.
        group_size: k.
        rng: the item's random stream (:func:`item_rng`); it decides only which valid group of the
            chosen window is returned.

    Returns:
        The drawn group (``group_size`` candidates ordered by relative rating) with its window, or ``None``.

    >>> day = 86_400_000
    >>> cands = [Candidate(float(r), t * day, f"u{t}") for t, r in enumerate([-2, -1, 0, 1, 2, 3])]
    >>> choice = find_group(cands, window_ms=4 * day, min_gap=0.6, group_size=5, rng=random.Random(0))
    >>> [c.user_id for c in choice.members], choice.n_groups
    (['u0', 'u1', 'u2', 'u3', 'u4'], 1)
    >>> find_group(cands, window_ms=3 * day, min_gap=0.6, group_size=5, rng=random.Random(0)) is None
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
        if len(window) >= group_size and len(greedy_chain(window, min_gap, group_size)) == group_size:
            members, total = draw_chain(window, min_gap, group_size, rng)
            return Choice(members, list(window), total)
    return None


def find_groups(
    candidates: Sequence[Candidate],
    *,
    window_ms: int,
    min_gap: float,
    group_size: int,
    rng: random.Random,
    max_groups: int | None = None,
) -> list[Choice]:
    """User-disjoint groups of one item, drawn one after the other by :func:`find_group` (module docstring).

    Args:
        candidates: the item's active reviewers (any order, one per user).
        window_ms: window length Δ.
        min_gap: λ.
        group_size: k.
        rng: the item's random stream for this group size; draw ``j`` uses it after draws ``0..j-1``.
        max_groups: stop after this many groups (None: until no valid group remains).

    Returns:
        The groups in drawing order; each ``Choice.window`` holds the candidates of its window that were
        still undrawn, among which the group was drawn uniformly.

    >>> day = 86_400_000
    >>> cands = [Candidate(float(r), t * day, f"u{t}") for t, r in enumerate([-2, -1, 0, 1, 2, 3])]
    >>> [len(c.members) for c in find_groups(cands, window_ms=9 * day, min_gap=0.6, group_size=2,
    ...                                      rng=random.Random(0))]
    [2, 2, 2]
    """
    # The same as calling find_group on the undrawn candidates again and again (one rng draw per group, in
    # the same order), in one sweep: drawing removes groups, so a window start that held none before holds
    # none after, and the scan goes on from the current start. A start is the time of an undrawn candidate.
    by_time = sorted(candidates, key=lambda c: (c.timestamp, c.user_id))
    drawn: set[str] = set()
    window: list[Candidate] = []  # the undrawn candidates of by_time[kept:end], by (rel, timestamp, user_id)
    kept = end = 0
    out: list[Choice] = []
    for start, first in enumerate(by_time):
        if start and by_time[start - 1].timestamp == first.timestamp:
            continue
        for gone in by_time[kept:start]:
            if gone.user_id not in drawn:
                del window[bisect.bisect_left(window, gone)]
        kept = start
        while end < len(by_time) and by_time[end].timestamp - first.timestamp <= window_ms:
            if by_time[end].user_id not in drawn:
                bisect.insort(window, by_time[end])
            end += 1
        while (
            (max_groups is None or len(out) < max_groups)
            and any(c.timestamp == first.timestamp and c.user_id not in drawn for c in by_time[start:end])
            and len(window) >= group_size
            and len(greedy_chain(window, min_gap, group_size)) == group_size
        ):
            members, total = draw_chain(window, min_gap, group_size, rng)
            out.append(Choice(members, list(window), total))
            for member in members:
                drawn.add(member.user_id)
                del window[bisect.bisect_left(window, member)]
    return out


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
