"""The test oracle of PROTOCOL §2 on hand-made inputs with known answers, one criterion at a time."""

from __future__ import annotations

import gzip
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.dataset_builder import reference

DAY = 86_400_000
T0 = 1_600_000_000_000
QUERY = "Q"


def review(user: str, item: str, rating: float, timestamp: int, **extra) -> dict:
    return {"user_id": user, "parent_asin": item, "rating": float(rating), "timestamp": timestamp, **extra}


def history(user: str, ratings: list[float], *, end: int = T0) -> list[dict]:
    """One review per rating on distinct items, one day apart, the last one day before ``end``."""
    n = len(ratings)
    return [review(user, f"h-{user}-{i}", r, end - (n - i) * DAY) for i, r in enumerate(ratings)]


def member(user: str, query_rating: float, *, avg3: int = 21, when: int = T0, hist: list | None = None):
    """A user with a history (default: ``avg3`` reviews rated 3) and a review of QUERY at ``when``."""
    ratings = hist if hist is not None else [3.0] * avg3
    return [*history(user, ratings, end=when), review(user, QUERY, query_rating, when)]


def five_users(**overrides) -> list[dict]:
    """Five users with average 3 whose query ratings 1..5 give relative ratings -2..2 (a valid group)."""
    rows: list[dict] = []
    for i, rating in enumerate([1, 2, 3, 4, 5]):
        rows += overrides.get(f"u{i}", member(f"u{i}", rating, when=T0 + i * DAY))
    return rows


USERS = [f"u{i}" for i in range(5)]


def test_reference_finds_a_plain_valid_group():
    rows = five_users()
    assert reference.items_with_valid_group(rows) == {QUERY}
    assert reference.is_valid_group(rows, QUERY, USERS)
    assert reference.valid_groups(rows, QUERY) == [tuple(USERS)]
    assert reference.find_group(rows, QUERY) == tuple(USERS)
    assert set(reference.find_group(rows, QUERY, search="spacing")) == set(USERS)


def test_reference_user_with_exactly_min_history_is_inactive():
    rows = five_users(u2=member("u2", 3, avg3=20, when=T0 + 2 * DAY))
    assert reference.items_with_valid_group(rows) == set()
    assert reference.find_group(rows, QUERY) is None
    assert reference.why_invalid(rows, QUERY, USERS).startswith("inactive")
    assert reference.items_with_valid_group(rows, min_history=19) == {QUERY}


def test_reference_review_at_the_same_millisecond_is_not_before():
    when = T0 + 2 * DAY
    same_ms = review("u2", "bought-together", 1.0, when)
    rows = five_users(u2=[*member("u2", 3, avg3=20, when=when), same_ms])
    assert reference.items_with_valid_group(rows) == set()
    # it is not in the leak-free average either, but it is in the whole-list average
    assert reference.relative_ratings(rows, QUERY, ["u2"])["u2"] == (3.0, 3.0, 0.0)
    avg_all = (20 * 3 + 3 + 1) / 22
    assert reference.relative_ratings(rows, QUERY, ["u2"], avg_scope="all")["u2"][0] == pytest.approx(avg_all)


def test_reference_window_edges_are_inclusive():
    edge = five_users(u4=member("u4", 5, when=T0 + 30 * DAY))
    assert reference.items_with_valid_group(edge) == {QUERY}
    assert reference.items_with_valid_group(edge, search="spacing") == {QUERY}
    assert reference.is_valid_group(edge, QUERY, USERS)
    past = five_users(u4=member("u4", 5, when=T0 + 30 * DAY + 1))
    assert reference.items_with_valid_group(past) == set()
    assert reference.why_invalid(past, QUERY, USERS).startswith("window")
    assert reference.items_with_valid_group(past, window_days=31) == {QUERY}


def test_reference_gap_of_exactly_min_gap_is_not_enough():
    # u3: average 3.4 (15 x 3 and 10 x 4), rating 4 -> relative 0.6, exactly 0.6 above u2 (relative 0).
    # In binary floats 4.0 - 3.4 = 0.6000000000000001, which a naive float comparison would accept.
    tie = five_users(u3=member("u3", 4, hist=[3.0] * 15 + [4.0] * 10, when=T0 + 3 * DAY))
    assert reference.relative_ratings(tie, QUERY, ["u3"])["u3"][2] == pytest.approx(0.6)
    assert reference.items_with_valid_group(tie) == set()
    assert reference.why_invalid(tie, QUERY, USERS).startswith("gap")
    assert reference.items_with_valid_group(tie, min_gap=0.59) == {QUERY}
    # average 3.36 (16 x 3, 9 x 4): relative 0.64 clears the bar
    above = five_users(u3=member("u3", 4, hist=[3.0] * 16 + [4.0] * 9, when=T0 + 3 * DAY))
    assert reference.items_with_valid_group(above) == {QUERY}


def test_reference_duplicate_review_keeps_the_earliest():
    later = review("u0", QUERY, 5.0, T0 + 60 * DAY)
    rows = [later, *five_users()]  # the later duplicate comes first in the file
    assert reference.relative_ratings(rows, QUERY, ["u0"])["u0"] == (3.0, 3.0, -2.0)
    assert reference.items_with_valid_group(rows) == {QUERY}
    assert reference.is_valid_group(rows, QUERY, USERS)


def test_reference_duplicate_history_review_counts_once():
    hist = history("u2", [3.0] * 20, end=T0 + 2 * DAY)
    again = review("u2", hist[0]["parent_asin"], 3.0, T0 - 100 * DAY + 1)
    rows = five_users(u2=[*hist, again, review("u2", QUERY, 3.0, T0 + 2 * DAY)])
    assert reference.items_with_valid_group(rows) == set()


def test_reference_dedupe_same_millisecond_prefers_lowest_rating_then_asin():
    rows = [
        review("u", "i", 4.0, 5, asin="B"),
        review("u", "i", 2.0, 5, asin="C"),
        review("u", "i", 2.0, 5, asin="A"),
    ]
    assert [(r["rating"], r["asin"]) for r in reference.dedupe(rows)] == [(2.0, "A")]
    assert reference.dedupe(rows) == reference.dedupe(rows[::-1])


def test_reference_avg_scope_all_includes_query_and_later_reviews():
    later = [review("u2", f"later-{i}", 5.0, T0 + (40 + i) * DAY) for i in range(25)]
    rows = five_users(u2=[*member("u2", 3, when=T0 + 2 * DAY), *later])
    assert reference.items_with_valid_group(rows, avg_scope="history") == {QUERY}
    assert reference.items_with_valid_group(rows, avg_scope="all") == set()
    avg, _, rel = reference.relative_ratings(rows, QUERY, ["u2"], avg_scope="all")["u2"]
    assert avg == pytest.approx((21 * 3 + 3 + 25 * 5) / 47)
    assert rel == pytest.approx(3 - avg)


def test_reference_most_common_tie_goes_to_the_value_seen_first():
    rows = member("u", 5, hist=[4.0, 2.0, 2.0, 4.0, 1.0])
    assert reference.relative_ratings(rows, QUERY, ["u"])["u"][1] == 4.0
    rows = member("u", 5, hist=[2.0, 4.0, 4.0, 2.0, 1.0])
    assert reference.relative_ratings(rows, QUERY, ["u"])["u"][1] == 2.0


def test_reference_most_common_tie_at_equal_timestamps_orders_by_parent_asin():
    rows = [review("u", "b", 4.0, 1), review("u", "a", 2.0, 1), review("u", QUERY, 5.0, 2)]
    assert reference.relative_ratings(rows, QUERY, ["u"])["u"] == (3.0, 2.0, 2.0)


def test_reference_group_size_and_sixth_user():
    rows = five_users() + member("u5", 3, when=T0 + 5 * DAY)  # relative 0, too close to u2
    assert reference.items_with_valid_group(rows) == {QUERY}
    assert reference.items_with_valid_group(rows, group_size=6) == set()
    assert len(reference.valid_groups(rows, QUERY)) == 2  # u2 or u5 in the middle
    assert reference.why_invalid(rows, QUERY, USERS[:4]).startswith("size")
    assert reference.is_valid_group(rows, QUERY, USERS[:4], group_size=4)


def test_reference_window_groups_lists_every_group_of_the_earliest_window():
    rows = five_users() + member("u5", 3, when=T0 + 5 * DAY)  # u2 or u5 in the middle
    assert sorted(reference.window_groups(rows, QUERY)) == sorted(
        [("u0", "u1", "u2", "u3", "u4"), ("u0", "u1", "u3", "u4", "u5")]
    )
    assert reference.window_groups(rows, QUERY, group_size=6) == []


def test_reference_window_groups_include_groups_not_starting_at_the_window_start():
    # The window starts at u0 (day 0); u5 (day 6, relative -3) is compatible with everyone: any 5 of the 6
    # users form a group, u1..u5 included, although it does not start at the window's start.
    rows = five_users() + member("u5", 1, hist=[4.0] * 21, when=T0 + 6 * DAY)
    groups = reference.window_groups(rows, QUERY)
    assert len(groups) == 6 and ("u1", "u2", "u3", "u4", "u5") in groups
    assert all(reference.is_valid_group(rows, QUERY, g) for g in groups)
    # a later window alone is not used: with u0 at day 0 and the others at day 40+, no group at all
    late = five_users(u0=member("u0", 1, when=T0 - 40 * DAY))
    assert reference.window_groups(late, QUERY) == []


def test_reference_window_starts_at_a_candidate_outside_every_group():
    # x (day -10, relative -1.5) belongs to no group; z (day 25, relative 3) would give five more groups in
    # [day 0, day 30], but the earliest window that holds a group is [day -10, day 20]: u0..u4 only.
    x = member("x", 1.5, when=T0 - 10 * DAY)
    z = member("z", 5, hist=[2.0] * 21, when=T0 + 25 * DAY)
    rows = five_users() + x + z
    assert reference.window_groups(rows, QUERY) == [("u0", "u1", "u2", "u3", "u4")]
    assert len(reference.window_groups(five_users() + z, QUERY)) == 6  # without x: [day 0, day 30]


def test_reference_user_without_query_review_is_reported():
    rows = five_users()
    assert reference.why_invalid(rows, QUERY, [*USERS[:4], "stranger"]).startswith("no review")
    with pytest.raises(ValueError, match="did not review"):
        reference.relative_ratings(rows, QUERY, ["stranger"])


def test_reference_query_items_restricts_queries():
    rows = five_users()
    assert reference.items_with_valid_group(rows, query_items={"other"}) == set()


def test_reference_load_reviews_normalizes_spellings_and_gzip(tmp_path):
    line = {"user_id": "u", "parent_asin": "i", "rating": 4, "sort_timestamp": 7, "helpful_votes": 2}
    plain = tmp_path / "Books.jsonl"
    plain.write_text(json.dumps(line) + "\n\n")
    packed = tmp_path / "Books.jsonl.gz"
    with gzip.open(packed, "wt") as handle:
        handle.write(json.dumps({**line, "sortTimestamp": 7, "sort_timestamp": None}) + "\n")
    for path in (plain, packed):
        (row,) = reference.load_reviews(path)
        assert (row["timestamp"], row["helpful_vote"], row["rating"]) == (7, 2, 4.0)
        assert "sort_timestamp" not in row and "helpful_votes" not in row


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"user_id": "u", "parent_asin": "i", "rating": 4', "Expecting"),
        ('{"user_id": "u", "parent_asin": "i", "rating": "five", "timestamp": 1}', "rating"),
        ('{"parent_asin": "i", "rating": 4, "timestamp": 1}', "user_id"),
        ('{"user_id": "u", "parent_asin": "i", "rating": 7, "timestamp": 1}', "rating"),
        ('{"user_id": "u", "parent_asin": "i", "rating": 4, "timestamp": 1.5}', "timestamp"),
    ],
)
def test_reference_load_reviews_bad_line_names_file_and_line(tmp_path, line, message):
    good = json.dumps(review("u", "j", 3.0, 1))
    path = tmp_path / "Books.jsonl"
    path.write_text(f"{good}\n{line}\n{good}\n")
    with pytest.raises(ValueError, match=rf"Books.jsonl:2: .*{message}"):
        reference.load_reviews(path)
    assert len(reference.load_reviews(path, on_bad_line="skip")) == 2


def test_reference_load_reviews_missing_file_names_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="Category"):
        reference.load_reviews(tmp_path / "nope.jsonl")


def test_reference_rejects_bad_options():
    with pytest.raises(ValueError, match="avg_scope"):
        reference.items_with_valid_group([], avg_scope="future")
    with pytest.raises(ValueError, match="search"):
        reference.items_with_valid_group([], search="guess")


_small_reviews = st.lists(
    st.tuples(
        st.integers(0, 6),  # user
        st.integers(0, 9),  # item (0-2 are the popular ones)
        st.integers(1, 5),  # rating
        st.integers(0, 30),  # timestamp in hours
    ),
    min_size=10,
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(_small_reviews, st.sampled_from(["history", "all"]), st.integers(2, 4))
def test_reference_spacing_search_agrees_with_exhaustive(rows, avg_scope, group_size):
    reviews = [review(f"u{u}", f"i{i % 10 if i > 2 else i}", r, h * 3_600_000) for u, i, r, h in rows]
    options = dict(window_days=0.25, min_history=1, min_gap=0.6, group_size=group_size, avg_scope=avg_scope)
    exhaustive = reference.items_with_valid_group(reviews, **options)
    assert reference.items_with_valid_group(reviews, search="spacing", **options) == exhaustive
    for item in exhaustive:
        for group in reference.valid_groups(reviews, item, **options):
            assert reference.is_valid_group(reviews, item, group, **options)
        assert reference.is_valid_group(
            reviews, item, reference.find_group(reviews, item, **options), **options
        )
        spaced = reference.find_group(reviews, item, search="spacing", **options)
        assert reference.is_valid_group(reviews, item, spaced, **options)
