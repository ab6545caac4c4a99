"""The large preset: per-level groups found directly, several user-disjoint draws per item, against brute
force and the reference oracle; the uniform draw; the per-level split and leak rule; the output layout."""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from itertools import combinations
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from dataset_builder.build import build
from dataset_builder.config import BuildConfigError
from dataset_builder.perrecbench.config import BuildConfig
from dataset_builder.perrecbench.groups import Candidate, find_group, find_groups, gap_ok, item_rng
from dataset_builder.perrecbench.splits import split_levels
from dataset_builder.synth import write_synthetic
from tests.dataset_builder import reference

DAY = 86_400_000
LEVELS = {"easy": 2, "medium": 3, "hard": 4}


def valid(group: tuple[Candidate, ...], window_ms: int, min_gap: float) -> bool:
    times = [c.timestamp for c in group]
    rels = sorted(c.rel for c in group)
    return max(times) - min(times) <= window_ms and all(
        gap_ok(a, b, min_gap) for a, b in zip(rels, rels[1:], strict=False)
    )


def earliest_window_groups(cands: list[Candidate], window_ms: int, k: int) -> list[frozenset[str]]:
    """Brute force: every valid k-group of the earliest window ``[t, t + Δ]`` (t a candidate's time) that
    holds one (the oracle's rule, ``reference._window_groups``)."""
    for start in sorted({c.timestamp for c in cands}):
        inside = [c for c in cands if start <= c.timestamp <= start + window_ms]
        groups = [
            frozenset(c.user_id for c in g) for g in combinations(inside, k) if valid(g, window_ms, 0.6)
        ]
        if groups:
            return groups
    return []


candidate_lists = st.lists(st.tuples(st.integers(0, 10), st.integers(-8, 8)), min_size=0, max_size=10).map(
    lambda rows: [Candidate(rel / 4, day * DAY, f"u{i}") for i, (day, rel) in enumerate(rows)]
)


@settings(max_examples=200, deadline=None)
@given(cands=candidate_lists, window_days=st.integers(0, 5), k=st.integers(2, 4), seed=st.integers(0, 9))
def test_build_large_draws_replay_brute_force(
    cands: list[Candidate], window_days: int, k: int, seed: int
) -> None:
    window = window_days * DAY
    drawn = find_groups(cands, window_ms=window, min_gap=0.6, group_size=k, rng=random.Random(seed))
    left = list(cands)
    for choice in drawn:
        members = frozenset(c.user_id for c in choice.members)
        choices = earliest_window_groups(left, window, k)
        assert members in choices  # a valid group of the earliest window among the users not drawn yet
        assert choice.n_groups == len(choices)  # ... drawn among all of them
        left = [c for c in left if c.user_id not in members]
    assert earliest_window_groups(left, window, k) == []  # no valid group remains: the item gave all it holds


@settings(max_examples=200, deadline=None)
@given(cands=candidate_lists, window_days=st.integers(0, 5), k=st.integers(2, 4), seed=st.integers(0, 9))
def test_build_large_sweep_equals_a_search_per_draw(
    cands: list[Candidate], window_days: int, k: int, seed: int
) -> None:
    # find_groups sweeps the windows once; the definition is find_group again on the undrawn candidates.
    rng, left, expected = random.Random(seed), list(cands), []
    while (
        choice := find_group(left, window_ms=window_days * DAY, min_gap=0.6, group_size=k, rng=rng)
    ) is not None:
        expected.append(choice)
        left = [c for c in left if c not in choice.members]
    swept = find_groups(
        cands, window_ms=window_days * DAY, min_gap=0.6, group_size=k, rng=random.Random(seed)
    )
    assert swept == expected


def test_build_large_draws_are_disjoint_and_capped() -> None:
    cands = [Candidate(float(r), 0, f"u{r}") for r in range(9)]
    drawn = find_groups(cands, window_ms=0, min_gap=0.6, group_size=2, rng=random.Random(0))
    users = [c.user_id for choice in drawn for c in choice.members]
    assert len(drawn) == 4 and len(set(users)) == 8
    capped = find_groups(cands, window_ms=0, min_gap=0.6, group_size=2, rng=random.Random(0), max_groups=2)
    assert capped == drawn[:2]


def test_build_large_each_draw_is_uniform_given_the_ones_before() -> None:
    # 6 users in one window: 15 pairs, 13 of them valid; the first draw is uniform over the 13, and given the
    # most frequent first pair, the second draw is uniform over the valid pairs of the 4 users left.
    rels = [-1.5, -1.2, -0.3, 0.4, 1.1, 2.0]
    cands = [Candidate(r, i * DAY, f"u{i}") for i, r in enumerate(rels)]
    pairs = [frozenset(c.user_id for c in g) for g in combinations(cands, 2) if valid(g, DAY * 9, 0.6)]
    first: Counter[frozenset[str]] = Counter()
    second: dict[frozenset[str], Counter[frozenset[str]]] = defaultdict(Counter)
    for seed in range(13_000):
        drawn = find_groups(cands, window_ms=9 * DAY, min_gap=0.6, group_size=2, rng=item_rng(seed, "B", "q"))
        a, b = (frozenset(c.user_id for c in choice.members) for choice in drawn[:2])
        first[a] += 1
        second[a][b] += 1
    assert set(first) == set(pairs)
    assert chisquare([first[p] for p in pairs]).pvalue > 0.001
    given_first, counts = max(second.items(), key=lambda kv: sum(kv[1].values()))
    rest = [c for c in cands if c.user_id not in given_first]
    options = [frozenset(c.user_id for c in g) for g in combinations(rest, 2) if valid(g, 9 * DAY, 0.6)]
    assert set(counts) == set(options)
    assert chisquare([counts[p] for p in options]).pvalue > 0.001


def test_build_large_first_draw_is_the_paper_draw() -> None:
    # The paper preset's group of an item is the first draw of the same search and stream.
    cands = [Candidate(float(r) / 2, r * DAY, f"u{r}") for r in range(10)]
    paper = find_group(cands, window_ms=5 * DAY, min_gap=0.6, group_size=3, rng=random.Random(7))
    large = find_groups(cands, window_ms=5 * DAY, min_gap=0.6, group_size=3, rng=random.Random(7))
    assert paper == large[0]


# ------------------------------------------------------------------------------------- builder vs oracle


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("synth")
    write_synthetic(folder, reviews_per_domain=6000, domains="Books", seed=1)
    return folder


def large_config(raw: Path, out: Path, **overrides) -> BuildConfig:
    values = {
        "source": str(raw),
        "out": out,
        "domains": ("Books",),
        "preset": "large",
        "min_history": 10,
        "test_groups": 20,
        "threads": 1,
        "memory_limit": "1GB",
    }
    return BuildConfig(**{**values, **overrides})


@pytest.fixture(scope="module")
def built(raw: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(large_config(raw, tmp_path_factory.mktemp("large") / "out"))


def rows_of(folder: Path, config: str, split: str) -> list[dict]:
    outputs = json.loads((folder / "manifest.json").read_text())["outputs"]
    path = outputs[config].get(split)
    return pq.read_table(folder / path).to_pylist() if path else []


@pytest.mark.parametrize(
    "params",
    [{"min_history": 10}, {"min_history": 10, "window_days": 10, "min_gap": 0.8, "avg_scope": "all"}],
    ids=["default", "window10,gap0.8,all"],
)
def test_build_large_items_and_draws_match_the_oracle(raw: Path, tmp_path: Path, params: dict) -> None:
    out = build(large_config(raw, tmp_path / "out", split_rule="none", keep_twins=True, **params))
    reviews = reference.load_reviews(raw / "Books.jsonl")
    with (raw / "meta_Books.jsonl").open() as handle:
        titled = {m["parent_asin"] for m in map(json.loads, filter(str.strip, handle)) if m.get("title")}
    [index_file] = (tmp_path / "out.stages" / "Books").glob("*.index.parquet")
    index = pq.read_table(index_file, columns=["group_id", "window_valid_groups"]).to_pydict()
    counts = dict(zip(index["group_id"], index["window_valid_groups"], strict=True))
    rows = rows_of(out, "full", "test") + rows_of(out, "full", "train")
    draws: dict[tuple[str, str], list[tuple[int, dict]]] = defaultdict(list)
    for row in rows:
        item, tag = row["group_id"].split(":")[1:]
        level, n = tag.split("-")
        draws[(item, level)].append((int(n), row))
    for level, k in LEVELS.items():
        expected = reference.items_with_valid_group(reviews, group_size=k, query_items=titled, **params)
        assert expected and {item for item, lv in draws if lv == level} == expected
    replayed = 0
    scope = params.get("avg_scope", "history")
    for (item, level), found in sorted(draws.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:12]:
        taken: set[str] = set()
        for _, row in sorted(found, key=lambda pair: pair[0]):
            users = {u["user_id"] for u in row["users"]}
            choices = reference.window_groups(
                reviews, item, group_size=LEVELS[level], exclude=taken, **params
            )
            assert users in [set(g) for g in choices] and counts[row["group_id"]] == len(choices)
            truth = reference.relative_ratings(reviews, item, users, avg_scope=scope)
            for user in row["users"]:
                assert user["relative_rating"] == pytest.approx(truth[user["user_id"]][2], abs=1e-12)
            taken |= users
            replayed += 1
        assert reference.window_groups(reviews, item, group_size=LEVELS[level], exclude=taken, **params) == []
    assert replayed > 12  # some items gave several groups


def test_build_large_levels_hold_their_own_groups(built: Path) -> None:
    for split in ("test", "train"):
        full = {row["group_id"]: row for row in rows_of(built, "full", split)}
        seen = set()
        for level, k in LEVELS.items():
            rows = rows_of(built, level, split)
            assert all(
                len(r["users"]) == k
                and r["level"] == level
                and r["group_id"].endswith(tuple(f"{level}-{n}" for n in range(100)))
                for r in rows
            )
            for row in rows:
                assert (
                    full[row["group_id"]]["users"] == row["users"]
                    and full[row["group_id"]]["level"] == "full"
                )
            seen |= {r["group_id"] for r in rows}
        assert seen == set(full)
    tests = {level: rows_of(built, level, "test") for level in LEVELS}
    assert all(len(rows) == 20 for rows in tests.values())
    stats = json.loads((built / "stats.json").read_text())
    for level in LEVELS:
        entry = stats["resolution"][level]["test"]
        assert entry["groups"] == 20
        assert entry["query_items"] == len({r["query"]["parent_asin"] for r in tests[level]})


def test_build_large_leak_rule_holds_per_level(built: Path) -> None:
    stats = json.loads((built / "stats.json").read_text())
    for level in LEVELS:
        test_pairs = {
            (u["user_id"], r["query"]["parent_asin"])
            for r in rows_of(built, level, "test")
            for u in r["users"]
        }
        train = rows_of(built, level, "train")
        assert train, "the fixture must keep train groups"
        shown = {(u["user_id"], r["query"]["parent_asin"]) for r in train for u in r["users"]}
        shown |= {(u["user_id"], h["parent_asin"]) for r in train for u in r["users"] for h in u["history"]}
        assert not test_pairs & shown
        leaks = stats["split"]["levels"][level]["leaks"]
        assert leaks["test_reviews_as_train_queries"] == leaks["test_reviews_in_train_histories"] == 0


def _members(gid: str, level: str, users: list[tuple[str, int]]) -> dict:
    return {
        "group_id": gid,
        "domain": "Books",
        "parent_asin": gid.split(":")[1],
        "level": level,
        "user_ids": [u for u, _ in users],
        "timestamps": [t for _, t in users],
    }


def test_build_large_split_decides_the_rule_per_level() -> None:
    # u is a test user of easy at t=100. An easy train group showing u's later review is dropped; a medium
    # train group showing the same later review is kept (u is no test user of medium).
    rows = [
        _members("Books:a:easy-0", "easy", [("u", 100), ("v", 100)]),
        _members("Books:b:easy-0", "easy", [("u", 200), ("w", 200)]),
        _members("Books:b:medium-0", "medium", [("u", 200), ("w", 200), ("x", 200)]),
        _members("Books:c:medium-0", "medium", [("y", 50), ("z", 50), ("q", 50)]),
    ]
    index = pa.Table.from_pylist(rows)
    # a seed whose test draw is Books:a for easy and Books:c for medium
    for seed in range(50):
        cfg = BuildConfig(source="s", out="o", domains=("Books",), preset="large", test_groups=1, seed=seed)
        splits = split_levels(index, cfg, {})
        if splits["easy"].test == ["Books:a:easy-0"] and splits["medium"].test == ["Books:c:medium-0"]:
            break
    assert splits["easy"].dropped == ["Books:b:easy-0"] and splits["easy"].train == []
    assert splits["medium"].train == ["Books:b:medium-0"] and splits["medium"].dropped == []
    assert "hard" in splits and splits["hard"].test == []


def test_build_large_train_fraction_holds_out_a_share_per_domain(raw: Path, tmp_path: Path) -> None:
    out = build(large_config(raw, tmp_path / "out", train_fraction=0.25, split_rule="none"))
    stats = json.loads((out / "stats.json").read_text())
    for level in LEVELS:
        facts = stats["split"]["levels"][level]
        test, train = facts["test_groups_per_domain"]["Books"], facts["train_groups_per_domain"]["Books"]
        assert train == round(0.25 * (test + train))


def test_build_large_options_need_the_large_preset() -> None:
    with pytest.raises(BuildConfigError, match="--preset large"):
        BuildConfig(source="s", out="o", train_fraction=0.2)
    with pytest.raises(BuildConfigError, match="--train-fraction"):
        BuildConfig(source="s", out="o", preset="large", train_fraction=1.0)


def test_build_large_max_groups_per_item_caps_each_item_and_level(raw: Path, tmp_path: Path) -> None:
    out = build(large_config(raw, tmp_path / "out", max_groups_per_item=1, split_rule="none"))
    ids = [row["group_id"] for split in ("test", "train") for row in rows_of(out, "full", split)]
    assert ids and all(gid.endswith("-0") for gid in ids)
    assert len({gid.rsplit(":", 1)[0] + gid.rsplit(":", 1)[1][:-2] for gid in ids}) == len(ids)
