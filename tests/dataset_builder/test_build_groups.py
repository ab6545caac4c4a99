"""The pure group search: exact existence (against brute force), determinism, tie handling."""

from __future__ import annotations

from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_builder.groups import Candidate, find_group, gap_ok, greedy_chain, most_common_rating

DAY = 86_400_000


def brute_force_exists(cands: list[Candidate], window_ms: int, min_gap: float, k: int) -> bool:
    for group in combinations(cands, k):
        times = [c.timestamp for c in group]
        rels = sorted(c.rel for c in group)
        if max(times) - min(times) <= window_ms and all(
            gap_ok(a, b, min_gap) for a, b in zip(rels, rels[1:], strict=False)
        ):
            return True
    return False


candidate_lists = st.lists(st.tuples(st.integers(0, 12), st.integers(-8, 8)), min_size=0, max_size=11).map(
    lambda rows: [Candidate(rel / 4, day * DAY, f"u{i}") for i, (day, rel) in enumerate(rows)]
)


@settings(max_examples=300, deadline=None)
@given(cands=candidate_lists, window_days=st.integers(0, 6), k=st.integers(2, 5))
def test_build_groups_exists_iff_brute_force_finds_one(
    cands: list[Candidate], window_days: int, k: int
) -> None:
    group = find_group(cands, window_ms=window_days * DAY, min_gap=0.6, group_size=k)
    assert (group is not None) == brute_force_exists(cands, window_days * DAY, 0.6, k)
    if group is not None:
        assert len({c.user_id for c in group}) == k
        assert max(c.timestamp for c in group) - min(c.timestamp for c in group) <= window_days * DAY
        assert all(gap_ok(a.rel, b.rel, 0.6) for a, b in zip(group, group[1:], strict=False))


@settings(max_examples=100, deadline=None)
@given(cands=candidate_lists)
def test_build_groups_choice_ignores_input_order(cands: list[Candidate]) -> None:
    forward = find_group(cands, window_ms=3 * DAY, min_gap=0.6, group_size=3)
    backward = find_group(cands[::-1], window_ms=3 * DAY, min_gap=0.6, group_size=3)
    assert forward == backward


def test_build_groups_greedy_beats_first_fit_in_time_order() -> None:
    # First-fit in time order takes 0.0, which blocks -0.2 and 0.5: it ends with 3 users, greedy finds 4.
    rels = [0.0, -0.2, 0.5, -0.9, 1.2]
    cands = [Candidate(r, i, f"u{i}") for i, r in enumerate(rels)]
    group = find_group(cands, window_ms=10, min_gap=0.6, group_size=4)
    assert [c.rel for c in group] == [-0.9, -0.2, 0.5, 1.2]


def test_build_groups_exact_gap_tie_is_not_enough() -> None:
    assert not gap_ok(3 - 3.6, 3 - 3.0, 0.6)  # 0.6000000000000001 in floats, exactly 0.6 in decimals
    cands = [Candidate(3 - avg, 0, str(avg)) for avg in (4.2, 3.6, 3.0, 2.4, 1.8)]
    assert find_group(cands, window_ms=0, min_gap=0.6, group_size=5) is None
    assert find_group(cands, window_ms=0, min_gap=0.59, group_size=5) is not None


def test_build_groups_window_is_closed_interval() -> None:
    cands = [Candidate(float(i), i * 10, f"u{i}") for i in range(3)]
    assert find_group(cands, window_ms=20, min_gap=0.6, group_size=3) is not None
    assert find_group(cands, window_ms=19, min_gap=0.6, group_size=3) is None


def test_build_groups_earliest_window_wins() -> None:
    early = [Candidate(float(i), i, f"e{i}") for i in range(3)]
    late = [Candidate(float(i), 1000 + i, f"l{i}") for i in range(3)]
    group = find_group(late + early, window_ms=10, min_gap=0.6, group_size=3)
    assert [c.user_id for c in group] == ["e0", "e1", "e2"]


def test_build_groups_greedy_chain_stops_at_need() -> None:
    cands = [Candidate(float(i), 0, f"u{i}") for i in range(8)]
    assert len(greedy_chain(cands, 0.6, 5)) == 5


def test_build_groups_most_common_first_seen_wins_ties() -> None:
    assert most_common_rating([2.0, 4.0, 4.0, 2.0]) == 2.0
    assert most_common_rating([5.0, 1.0, 1.0]) == 1.0
