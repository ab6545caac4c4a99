"""The test / train split: domain-stratified test quotas, and the train rules on inputs with known answers."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_builder.build import build
from dataset_builder.perrecbench.splits import GroupMembers, conflicts, domain_quotas, split_groups
from tests.dataset_builder.build_fixture import DAY, T0, Scenario, config

A, B = "QA00000001", "QB00000002"


# ------------------------------------------------------------------------------------------- test quotas


def test_build_splits_quotas_are_even_when_every_domain_has_enough() -> None:
    assert domain_quotas({"A": 90, "B": 60, "C": 300, "D": 51}, 200, 0) == {
        "A": 50,
        "B": 50,
        "C": 50,
        "D": 50,
    }


def test_build_splits_quotas_give_a_small_domain_all_and_share_the_rest() -> None:
    quota = domain_quotas({"A": 10, "B": 45, "C": 300, "D": 300}, 200, 0)
    assert (quota["A"], quota["B"], sorted([quota["C"], quota["D"]])) == (10, 45, [72, 73])


def test_build_splits_quotas_take_everything_when_too_few() -> None:
    assert domain_quotas({"A": 3, "B": 4}, 200, 0) == {"A": 3, "B": 4}


@settings(max_examples=200, deadline=None)
@given(
    available=st.dictionaries(st.sampled_from("ABCDEFG"), st.integers(0, 60), min_size=1),
    total=st.integers(0, 200),
    seed=st.integers(0, 5),
)
def test_build_splits_quotas_are_as_even_as_the_groups_allow(available, total, seed) -> None:
    quota = domain_quotas(available, total, seed)
    assert sum(quota.values()) == min(total, sum(available.values()))
    assert all(0 <= quota[d] <= available[d] for d in available)
    open_ = [quota[d] for d in available if quota[d] < available[d]]  # domains that could give more
    if open_:
        assert max(open_) - min(open_) <= 1
        assert all(quota[d] <= min(open_) + 1 for d in available)  # nobody got more than an open domain + 1


# ------------------------------------------------------------------------------------------- train rules


def members(gid: str, *users: tuple[str, int]) -> GroupMembers:
    return GroupMembers(gid, gid.split(":")[0], tuple(users))


# Test user "u" of Books reviewed their test item at t = 100.
FIRST_TEST = {("Books", "u"): 100}
CASES = [  # (train group, leak-free, leak-free with avg_scope=all, user-disjoint)
    (members("Books:before", ("u", 50), ("x", 500)), False, True, True),
    (members("Books:same-ms", ("u", 100)), True, True, True),
    (members("Books:after", ("u", 150)), True, True, True),
    (members("Electronics:after", ("u", 150)), False, False, True),
    (members("Books:strangers", ("w", 500), ("x", 1)), False, False, False),
]


@pytest.mark.parametrize(("group", "free", "free_all", "disjoint"), CASES, ids=[c[0].group_id for c in CASES])
def test_build_splits_rules_drop_known_groups(group, free, free_all, disjoint) -> None:
    assert conflicts(group, FIRST_TEST, "leak-free", "history") is free
    assert conflicts(group, FIRST_TEST, "leak-free", "all") is free_all
    assert conflicts(group, FIRST_TEST, "user-disjoint", "history") is disjoint
    assert conflicts(group, FIRST_TEST, "none", "all") is False


group_lists = st.lists(
    st.tuples(
        st.sampled_from(["Books", "Electronics"]),
        st.lists(
            st.tuples(st.sampled_from("uvwxyz"), st.integers(0, 20)),
            min_size=1,
            max_size=3,
            unique_by=lambda m: m[0],
        ),
    ),
    min_size=1,
    max_size=14,
).map(lambda rows: [GroupMembers(f"{d}:{i}", d, tuple(users)) for i, (d, users) in enumerate(rows)])


@settings(max_examples=200, deadline=None)
@given(groups=group_lists, test_groups=st.integers(1, 6), seed=st.integers(0, 3))
def test_build_splits_leak_free_train_holds_no_test_review(groups, test_groups, seed) -> None:
    split = split_groups(groups, test_groups, seed, "leak-free", "history")
    assert len(split.test) == min(test_groups, len(groups))
    assert sorted(split.test + split.train + split.dropped) == sorted(g.group_id for g in groups)
    by_id = {g.group_id: g for g in groups}
    tests = [(g.domain, u, t) for gid in split.test for g in [by_id[gid]] for u, t in g.users]
    for gid in split.train:  # the definition of a leak, independently: a test review in a train history
        group = by_id[gid]
        assert not any(
            d == group.domain and u == v and t_test < t for d, u, t_test in tests for v, t in group.users
        )
    for gid in split.dropped:  # and nothing dropped without a reason
        group = by_id[gid]
        assert any(
            d == group.domain and u == v and t >= t_test for d, u, t_test in tests for v, t in group.users
        )


def test_build_splits_test_sample_does_not_depend_on_the_rule_or_other_domains() -> None:
    books = [members(f"Books:{i}", (f"b{i}", i)) for i in range(10)]
    electronics = [members(f"Electronics:{i}", (f"b{i}", i)) for i in range(10)]
    alone = split_groups(books, 2, 7, "none", "history").test
    both = split_groups(books + electronics, 4, 7, "leak-free", "history").test
    assert [g for g in both if g.startswith("Books:")] == alone
    assert len([g for g in both if g.startswith("Electronics:")]) == 2


# ------------------------------------------------------------------------------------- through the build


def shared_user_source(folder: Path) -> Path:
    """Two items, one group each; user S is in both: A at T0 (first), B 100 days later."""
    scenario = Scenario()
    for item, when, prefix in ((A, T0, "U"), (B, T0 + 100 * DAY, "V")):
        for k, rating in enumerate((1.0, 2.0, 4.0, 5.0)):
            scenario.add_user(f"{prefix}{k}", [3.0] * 21, rating, query_ts=when, query=item)
    scenario.add_user("S", [3.0] * 21, 3.0, query_ts=T0, query=A)  # relative 0 in both groups
    scenario.review("S", B, 3.0, T0 + 100 * DAY)
    return scenario.write(folder)


# (rule, the test item) -> (train items, train groups dropped, test reviews found in train histories)
EXPECTED = {
    ("leak-free", A): ([], 1, 0),  # S's test review of A would be in S's history for B
    ("leak-free", B): ([A], 0, 0),  # S's review of A is older than the test one: their test history shows it
    ("user-disjoint", A): ([], 1, 0),
    ("user-disjoint", B): ([], 1, 0),
    ("none", A): ([B], 0, 1),
    ("none", B): ([A], 0, 0),
}


@pytest.mark.parametrize("rule", ["leak-free", "user-disjoint", "none"])
def test_build_splits_rule_on_a_shared_user(tmp_path: Path, rule: str) -> None:
    source = shared_user_source(tmp_path / "raw")
    seen = set()
    for seed in range(12):  # seeds until each item has been the test item once
        out = build(config(source, tmp_path / f"out-{seed}", split_rule=rule, seed=seed))
        files = json.loads((out / "manifest.json").read_text())["outputs"]["full"]
        items = {
            s: [r["query"]["parent_asin"] for r in pq.read_table(out / p).to_pylist()]
            for s, p in files.items()
        }
        [test_item] = items["test"]
        train, dropped, in_histories = EXPECTED[(rule, test_item)]
        stats = json.loads((out / "stats.json").read_text())["split"]
        assert items.get("train", []) == train
        assert stats["train_groups_dropped"] == dropped
        assert stats["leaks"]["test_reviews_in_train_histories"] == in_histories
        assert stats["leaks"]["test_reviews_as_train_queries"] == 0
        assert stats["test_groups_per_domain"] == {"Books": 1}
        seen.add(test_item)
        if seen == {A, B}:
            break
    assert seen == {A, B}
