"""Selection criteria of PROTOCOL §2, one at a time, through the whole builder on hand-made inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dataset_builder.build import build
from dataset_builder.config import BuildError
from dataset_builder.perrecbench.groups import Candidate, find_group, item_rng
from tests.dataset_builder import reference
from tests.dataset_builder.build_fixture import DAY, QUERY, T0, Scenario, config, five_users


def full_groups(out: Path) -> list[dict]:
    files = json.loads((out / "manifest.json").read_text())["outputs"]["full"]
    return [row for path in files.values() for row in pq.read_table(out / path).to_pylist()]


def run(tmp_path: Path, scenario: Scenario, **overrides) -> list[dict]:
    source = scenario.write(tmp_path / "raw")
    return full_groups(build(config(source, tmp_path / "out", **overrides)))


def test_build_selection_baseline_group_has_known_values(tmp_path: Path) -> None:
    scenario = Scenario()
    five_users(scenario)
    [group] = run(tmp_path, scenario)
    assert group["group_id"] == f"Books:{QUERY}"
    assert group["query"]["author"] == "Ann Author" and group["query"]["title"] == f"title of {QUERY}"
    by_user = {u["user_id"]: u for u in group["users"]}
    assert sorted(by_user) == ["U0", "U1", "U2", "U3", "U4"]
    for k in range(5):
        user = by_user[f"U{k}"]
        assert user["avg_rating"] == 3.0 and user["most_common_rating"] == 3.0
        assert user["relative_rating"] == pytest.approx(k - 2.0)
        assert len(user["history"]) == 21
        times = [h["timestamp"] for h in user["history"]]
        assert times == sorted(times) and times[-1] < user["timestamp"]


def test_build_selection_user_with_exactly_min_history_is_inactive(tmp_path: Path) -> None:
    scenario = Scenario()
    five_users(scenario)
    scenario.reviews = [r for r in scenario.reviews if r["parent_asin"] != "H-U4-0"]  # U4: 20 before
    with pytest.raises(BuildError, match="items_with_enough_active_reviewers=0"):
        run(tmp_path, scenario)


def test_build_selection_min_history_boundary_is_strictly_more(tmp_path: Path) -> None:
    scenario = Scenario()
    five_users(scenario, n_history=20)
    assert len(run(tmp_path / "a", scenario, min_history=19)) == 1
    with pytest.raises(BuildError, match="no valid group"):
        run(tmp_path / "b", scenario, min_history=20)


def test_build_selection_same_millisecond_reviews_are_not_before(tmp_path: Path) -> None:
    scenario = Scenario()
    for k in range(5):
        # 20 reviews strictly before + 3 at the query's millisecond: only 20 count, so nobody is active.
        scenario.add_user(f"U{k}", [3.0] * 20, float(k + 1), same_ms_extra=3)
    with pytest.raises(BuildError, match="active_reviews=0"):
        run(tmp_path, scenario)


def test_build_selection_same_millisecond_reviews_are_not_in_the_average(tmp_path: Path) -> None:
    scenario = Scenario()
    for k in range(5):
        scenario.add_user(f"U{k}", [3.0] * 21, float(k + 1), same_ms_extra=2)  # extras rated 3 too
    scenario.reviews = [
        r if not r["parent_asin"].startswith("S-U0") else {**r, "rating": 5.0} for r in scenario.reviews
    ]
    [group] = run(tmp_path, scenario)
    user = next(u for u in group["users"] if u["user_id"] == "U0")
    assert user["avg_rating"] == 3.0 and len(user["history"]) == 21


def test_build_selection_window_edge_is_inclusive(tmp_path: Path) -> None:
    scenario = Scenario()
    five_users(scenario, spacing_ms=30 * DAY // 4)  # last user exactly 30 days after the first
    [group] = run(tmp_path, scenario)
    assert group["window_start"] == T0


def test_build_selection_window_one_ms_too_long_fails(tmp_path: Path) -> None:
    scenario = Scenario()
    five_users(scenario, spacing_ms=30 * DAY // 4)
    scenario.reviews[-1]["timestamp"] += 1
    with pytest.raises(BuildError, match="items_with_enough_in_one_window=0"):
        run(tmp_path, scenario)


def _gap_scenario() -> Scenario:
    """Relative ratings exactly -1.2, -0.6, 0, 0.6, 1.2 (averages 4.2, 3.6, 3.0, 2.4, 1.8; rating 3)."""
    scenario = Scenario()
    histories = [
        [5.0] * 20 + [1.0] * 5,
        [4.0] * 15 + [3.0] * 10,
        [3.0] * 25,
        [2.0] * 15 + [3.0] * 10,
        [1.0] * 5 + [2.0] * 20,
    ]
    for k, history in enumerate(histories):
        scenario.add_user(f"U{k}", history, 3.0)
    return scenario


def test_build_selection_gap_of_exactly_min_gap_fails(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="items_with_group=0"):
        run(tmp_path, _gap_scenario())


def test_build_selection_gap_just_above_min_gap_passes(tmp_path: Path) -> None:
    [group] = run(tmp_path, _gap_scenario(), min_gap=0.59)
    rels = sorted(u["relative_rating"] for u in group["users"])
    assert rels == pytest.approx([-1.2, -0.6, 0.0, 0.6, 1.2])


def test_build_selection_duplicate_keeps_earliest_review(tmp_path: Path) -> None:
    scenario = Scenario()
    five_users(scenario)
    # U0 reviewed the query item again 90 days later with another rating: the earliest (rating 1) counts.
    scenario.review("U0", QUERY, 5.0, T0 + 90 * DAY)
    [group] = run(tmp_path, scenario)
    user = next(u for u in group["users"] if u["user_id"] == "U0")
    assert user["rating"] == 1.0 and user["timestamp"] == T0


def test_build_selection_duplicate_earliest_outside_window_removes_user(tmp_path: Path) -> None:
    scenario = Scenario()
    five_users(scenario)
    scenario.review("U0", QUERY, 1.0, T0 - 60 * DAY)  # earlier copy: U0 is out of the others' window
    with pytest.raises(BuildError, match="no valid group"):
        run(tmp_path, scenario)


def test_build_selection_duplicate_counted_in_funnel(tmp_path: Path) -> None:
    scenario = Scenario()
    five_users(scenario)
    scenario.review("U0", QUERY, 5.0, T0 + DAY)
    source = scenario.write(tmp_path / "raw")
    out = build(config(source, tmp_path / "out"))
    assert json.loads((out / "manifest.json").read_text())["selection"]["Books"]["duplicates"] == 1


def test_build_selection_avg_scope_all_includes_query_and_later(tmp_path: Path) -> None:
    scenario = Scenario()
    five_users(scenario, ratings=(1.0, 2.0, 3.0, 4.0, 5.0))
    scenario.item("LATER")
    scenario.review("U4", "LATER", 1.0, T0 + 5 * DAY)
    [group] = run(tmp_path, scenario, avg_scope="all", min_gap=0.5)
    user = next(u for u in group["users"] if u["user_id"] == "U4")
    assert user["avg_rating"] == pytest.approx((21 * 3 + 5 + 1) / 23)
    assert user["relative_rating"] == pytest.approx(5 - (21 * 3 + 5 + 1) / 23)
    assert len(user["history"]) == 21


def test_build_selection_most_common_tie_goes_to_first_seen(tmp_path: Path) -> None:
    scenario = Scenario()
    five_users(scenario)
    scenario.reviews = [r for r in scenario.reviews if r["user_id"] != "U2"]
    scenario.add_user("U2", [4.0, 2.0, 2.0, 4.0] + [3.0, 3.0, 3.0, 3.0] * 4 + [3.0, 4.0, 2.0, 4.0, 2.0], 3.0)
    [group] = run(tmp_path, scenario)
    user = next(u for u in group["users"] if u["user_id"] == "U2")
    assert user["most_common_rating"] == 3.0
    scenario.reviews = [r for r in scenario.reviews if r["user_id"] != "U2"]
    scenario.add_user("U2", [4.0, 2.0] * 10 + [3.0], 3.0)  # 4 and 2 ten times each; 4 came first
    [group] = run(tmp_path / "again", scenario)
    user = next(u for u in group["users"] if u["user_id"] == "U2")
    assert user["most_common_rating"] == 4.0


def test_build_selection_query_without_metadata_is_not_a_query(tmp_path: Path) -> None:
    scenario = Scenario()
    five_users(scenario)
    del scenario.meta[QUERY]
    with pytest.raises(BuildError, match="active_reviews_with_metadata=0"):
        run(tmp_path, scenario)


def test_build_selection_history_item_without_metadata_has_null_title(tmp_path: Path) -> None:
    scenario = Scenario()
    five_users(scenario)
    del scenario.meta["H-U0-0"]
    [group] = run(tmp_path, scenario)
    user = next(u for u in group["users"] if u["user_id"] == "U0")
    assert user["history"][0]["parent_asin"] == "H-U0-0" and user["history"][0]["title"] is None


def test_build_selection_picks_a_window_a_global_greedy_would_miss(tmp_path: Path) -> None:
    scenario = Scenario()
    five_users(scenario, spacing_ms=DAY)
    # Early decoys spread over relative ratings, far outside the group's window.
    for k, rating in enumerate((1.0, 2.0, 3.0, 4.0, 5.0)):
        scenario.add_user(f"D{k}", [3.0] * 21, rating, query_ts=T0 - 200 * DAY + k * 40 * DAY)
    [group] = run(tmp_path, scenario)
    assert sorted(u["user_id"] for u in group["users"]) == ["U0", "U1", "U2", "U3", "U4"]


def test_build_selection_draws_among_every_group_of_the_window(tmp_path: Path) -> None:
    # Six users, any five of them valid (X: relative -3): six groups, one drawn per seed, the same one as
    # the pure search draws from the item's stream, and always one of the oracle's groups.
    scenario = Scenario()
    five_users(scenario)
    scenario.add_user("X", [4.0] * 21, 1.0, query_ts=T0 + DAY)
    source = scenario.write(tmp_path / "raw")
    reviews = reference.load_reviews(source / "Books.jsonl")
    oracle = {frozenset(g) for g in reference.window_groups(reviews, QUERY)}
    assert len(oracle) == 6
    cands = [
        Candidate(rel, ts, user)
        for user, rel, ts in [(f"U{k}", k - 2.0, T0) for k in range(5)] + [("X", -3.0, T0 + DAY)]
    ]
    drawn = set()
    for seed in range(6):
        [group] = full_groups(build(config(source, tmp_path / f"out{seed}", seed=seed)))
        users = frozenset(u["user_id"] for u in group["users"])
        expected = find_group(
            cands, window_ms=30 * DAY, min_gap=0.6, group_size=5, rng=item_rng(seed, "Books", QUERY)
        )
        assert users in oracle and users == {c.user_id for c in expected.members}
        drawn.add(users)
    assert len(drawn) > 1
