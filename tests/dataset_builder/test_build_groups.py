"""The pure group search: exact existence (against brute force), the uniform draw, determinism, ties."""

from __future__ import annotations

import random
from collections import Counter
from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from dataset_builder.perrecbench.groups import (
    Candidate,
    chain_counts,
    draw_chain,
    find_group,
    gap_ok,
    greedy_chain,
    item_rng,
    most_common_rating,
)

DAY = 86_400_000


def valid(group: tuple[Candidate, ...], window_ms: int, min_gap: float) -> bool:
    times = [c.timestamp for c in group]
    rels = sorted(c.rel for c in group)
    return max(times) - min(times) <= window_ms and all(
        gap_ok(a, b, min_gap) for a, b in zip(rels, rels[1:], strict=False)
    )


def brute_force_exists(cands: list[Candidate], window_ms: int, min_gap: float, k: int) -> bool:
    return any(valid(group, window_ms, min_gap) for group in combinations(cands, k))


def find(cands: list[Candidate], window_ms: int, k: int, seed: int = 0, min_gap: float = 0.6):
    return find_group(cands, window_ms=window_ms, min_gap=min_gap, group_size=k, rng=random.Random(seed))


class Rank:
    """A stand-in random stream whose ``randrange`` returns a chosen rank (to enumerate every draw)."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def randrange(self, stop: int) -> int:
        assert 0 <= self.rank < stop
        return self.rank


candidate_lists = st.lists(st.tuples(st.integers(0, 12), st.integers(-8, 8)), min_size=0, max_size=11).map(
    lambda rows: [Candidate(rel / 4, day * DAY, f"u{i}") for i, (day, rel) in enumerate(rows)]
)


@settings(max_examples=300, deadline=None)
@given(cands=candidate_lists, window_days=st.integers(0, 6), k=st.integers(2, 5), seed=st.integers(0, 9))
def test_build_groups_exists_iff_brute_force_finds_one(
    cands: list[Candidate], window_days: int, k: int, seed: int
) -> None:
    choice = find(cands, window_days * DAY, k, seed)
    assert (choice is not None) == brute_force_exists(cands, window_days * DAY, 0.6, k)
    if choice is not None:
        assert len({c.user_id for c in choice.members}) == k
        assert valid(tuple(choice.members), window_days * DAY, 0.6)
        assert set(choice.members) <= set(choice.window)
        assert choice.members == sorted(choice.members)


@settings(max_examples=300, deadline=None)
@given(rels=st.lists(st.integers(-8, 8), max_size=12), k=st.integers(1, 5))
def test_build_groups_chain_counts_equal_brute_force(rels: list[int], k: int) -> None:
    values = sorted(r / 4 for r in rels)
    expected = sum(
        all(gap_ok(a, b, 0.6) for a, b in zip(s, s[1:], strict=False)) for s in combinations(values, k)
    )
    assert sum(chain_counts(values, 0.6, k)[k]) == expected


@settings(max_examples=100, deadline=None)
@given(rels=st.lists(st.integers(-8, 8), min_size=1, max_size=9), k=st.integers(1, 4))
def test_build_groups_each_rank_draws_a_different_valid_group(rels: list[int], k: int) -> None:
    # Exact uniformity: rank -> group is a bijection onto all valid k-subsets, so a uniform rank gives a
    # uniform group.
    ordered = sorted(Candidate(r / 4, 0, f"u{i}") for i, r in enumerate(rels))
    everything = {s for s in combinations(ordered, k) if valid(s, 0, 0.6)}
    _, total = draw_chain(ordered, 0.6, k, random.Random(0))
    assert total == len(everything)
    drawn = [tuple(draw_chain(ordered, 0.6, k, Rank(rank))[0]) for rank in range(total)]
    assert set(drawn) == everything and len(drawn) == len(everything)


def test_build_groups_draw_is_uniform_over_a_small_window() -> None:
    # 7 users in one window; 3-user groups with gaps > 0.6: 21 valid groups, each user in 5 to 12 of them.
    rels = [-1.5, -1.2, -0.3, 0.0, 0.4, 1.1, 2.0]
    cands = [Candidate(r, i * DAY, f"u{i}") for i, r in enumerate(rels)]
    everything = [s for s in combinations(sorted(cands), 3) if valid(s, 10 * DAY, 0.6)]
    assert len(everything) == 21
    draws = Counter(
        tuple(
            find_group(
                cands, window_ms=10 * DAY, min_gap=0.6, group_size=3, rng=item_rng(s, "B", "q")
            ).members
        )
        for s in range(21_000)
    )
    assert set(draws) == set(everything)
    assert chisquare([draws[g] for g in everything]).pvalue > 0.001
    # the greedy's own choice (the lowest values) is one group among 21, not the rule
    assert draws[tuple(greedy_chain(sorted(cands), 0.6, 3))] < 1.2 * 21_000 / 21


def test_build_groups_draw_depends_on_the_item_seed_only() -> None:
    cands = [Candidate(float(r), 0, f"u{r}") for r in range(8)]

    def draw(seed: int, item: str, order: list[Candidate]) -> list[str]:
        choice = find_group(order, window_ms=0, min_gap=0.6, group_size=3, rng=item_rng(seed, "Books", item))
        return [c.user_id for c in choice.members]

    assert draw(0, "q1", cands) == draw(0, "q1", cands[::-1])
    assert len({tuple(draw(seed, "q1", cands)) for seed in range(20)}) > 1
    assert len({tuple(draw(0, item, cands)) for item in ("q1", "q2", "q3", "q4", "q5")}) > 1


@settings(max_examples=100, deadline=None)
@given(cands=candidate_lists, seed=st.integers(0, 99))
def test_build_groups_choice_ignores_input_order(cands: list[Candidate], seed: int) -> None:
    forward = find(cands, 3 * DAY, 3, seed)
    backward = find(cands[::-1], 3 * DAY, 3, seed)
    assert forward == backward


def test_build_groups_greedy_beats_first_fit_in_time_order() -> None:
    # First-fit in time order takes 0.0, which blocks -0.2 and 0.5: it ends with 3 users. There is exactly
    # one valid 4-user group and the search finds it.
    rels = [0.0, -0.2, 0.5, -0.9, 1.2]
    cands = [Candidate(r, i, f"u{i}") for i, r in enumerate(rels)]
    choice = find(cands, 10, 4)
    assert [c.rel for c in choice.members] == [-0.9, -0.2, 0.5, 1.2] and choice.n_groups == 1


def test_build_groups_exact_gap_tie_is_not_enough() -> None:
    assert not gap_ok(3 - 3.6, 3 - 3.0, 0.6)  # 0.6000000000000001 in floats, exactly 0.6 in decimals
    cands = [Candidate(3 - avg, 0, str(avg)) for avg in (4.2, 3.6, 3.0, 2.4, 1.8)]
    assert find(cands, 0, 5) is None
    assert find(cands, 0, 5, min_gap=0.59) is not None
    assert sum(chain_counts([c.rel for c in sorted(cands)], 0.6, 2)[2]) == 6  # only gaps of 1.2 or more


def test_build_groups_window_is_closed_interval() -> None:
    cands = [Candidate(float(i), i * 10, f"u{i}") for i in range(3)]
    assert find(cands, 20, 3) is not None
    assert find(cands, 19, 3) is None


def test_build_groups_earliest_window_wins() -> None:
    early = [Candidate(float(i), i, f"e{i}") for i in range(3)]
    late = [Candidate(float(i), 1000 + i, f"l{i}") for i in range(4)]
    for seed in range(10):
        choice = find(late + early, 10, 3, seed)
        assert [c.user_id for c in choice.members] == ["e0", "e1", "e2"]
        assert [c.user_id for c in choice.window] == ["e0", "e1", "e2"]


def test_build_groups_window_may_start_at_a_candidate_in_no_group() -> None:
    # The oracle's rule (tests/dataset_builder/reference.py): x at day -10 is in no group, yet its window
    # [day -10, day 20] holds one, so z (day 25) is outside the chosen window.
    rels = {
        "x": (-1.5, -10),
        "u0": (-2.0, 0),
        "u1": (-1.0, 1),
        "u2": (0.0, 2),
        "u3": (1.0, 3),
        "u4": (2.0, 4),
    }
    cands = [Candidate(r, d * DAY, u) for u, (r, d) in rels.items()] + [Candidate(3.0, 25 * DAY, "z")]
    choice = find(cands, 30 * DAY, 5)
    assert choice.n_groups == 1 and "z" not in {c.user_id for c in choice.window}


def test_build_groups_window_holds_every_candidate_in_it() -> None:
    cands = [Candidate(float(i) / 2, i * DAY, f"u{i}") for i in range(6)]  # 0, 0.5, ..., 2.5
    choice = find(cands, 5 * DAY, 3)
    assert [c.user_id for c in choice.window] == [f"u{i}" for i in range(6)]
    assert choice.n_groups == sum(valid(s, 5 * DAY, 0.6) for s in combinations(cands, 3))


def test_build_groups_greedy_chain_stops_at_need() -> None:
    cands = [Candidate(float(i), 0, f"u{i}") for i in range(8)]
    assert len(greedy_chain(cands, 0.6, 5)) == 5


def test_build_groups_most_common_first_seen_wins_ties() -> None:
    assert most_common_rating([2.0, 4.0, 4.0, 2.0]) == 2.0
    assert most_common_rating([5.0, 1.0, 1.0]) == 1.0
