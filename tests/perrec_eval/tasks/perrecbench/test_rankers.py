"""The ranking methods as state machines, without an engine: which requests, and the ranking from answers."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perrec_eval.tasks.perrecbench.protocols import get
from perrec_eval.tasks.perrecbench.rankers import (
    AllPairsRanker,
    HeapsortRanker,
    ListSlot,
    ListwiseRanker,
    PairSlot,
    PointwiseRanker,
    UserSlot,
    consistent_winner,
)


def make_ranker(method, avg_ratings, **options):
    return get(method).ranker(avg_ratings, **options)


def demonstration(method, relative_ratings, ratings):
    return get(method).demonstration(relative_ratings, ratings)


def _truthful(values):
    """Answers of a model that knows each user's true value: the higher one wins every comparison."""

    def answer(slot):
        if isinstance(slot, PairSlot):
            return "A" if values[slot.a] > values[slot.b] else "B"
        if isinstance(slot, ListSlot):
            return [i + 1 for i in sorted(range(len(values)), key=lambda i: -values[i])]
        return values[slot.user]

    return answer


def _drive(ranker, answer):
    rounds = 0
    while not ranker.done:
        ranker.feed({slot: answer(slot) for slot in ranker.pending()})
        rounds += 1
    return rounds


def _best_first(values):
    return [i + 1 for i in sorted(range(len(values)), key=lambda i: -values[i])]


def test_slots_name_the_users_a_prompt_shows_and_serialise_as_before():
    assert UserSlot(2).users == (2,) and UserSlot(2).to_json() == ["user", 2]
    assert PairSlot(1, 0).users == (1, 0) and PairSlot(1, 0).to_json() == ["pair", 1, 0]
    assert ListSlot(3).users == (0, 1, 2) and ListSlot(3).to_json() == ["list"]


def test_pointwise_ranker_asks_once_per_user_and_ranks_by_rating_minus_average():
    ranker = PointwiseRanker([4.5, 2.0, 3.0])
    assert ranker.pending() == [UserSlot(0), UserSlot(1), UserSlot(2)]
    ranker.feed({UserSlot(0): 4.0, UserSlot(1): 3.0, UserSlot(2): 3.0})
    assert ranker.done and ranker.pending() == []
    prediction = ranker.prediction()
    assert prediction.format == "scores"
    assert prediction.value == [-0.5, 1.0, 0.0]
    assert prediction.predicted_ratings == [4.0, 3.0, 3.0]


def test_pointwise_ranker_with_a_failed_rating_is_invalid_but_keeps_the_others():
    ranker = PointwiseRanker([4.0, 3.0])
    ranker.feed({UserSlot(0): 5.0, UserSlot(1): None})
    assert ranker.prediction().value is None
    assert ranker.prediction().predicted_ratings == [5.0, None]


def test_listwise_ranker_passes_the_parsed_permutation_through():
    ranker = ListwiseRanker(3)
    assert ranker.pending() == [ListSlot(3)]
    ranker.feed({ListSlot(3): [2, 3, 1]})
    assert ranker.prediction().format == "ranking" and ranker.prediction().value == [2, 3, 1]


def test_listwise_ranker_failed_answer_is_invalid():
    ranker = ListwiseRanker(2)
    ranker.feed({})
    assert ranker.done and ranker.prediction().value is None


def test_allpairs_asks_every_ordered_pair_in_one_step():
    ranker = AllPairsRanker(4)
    pending = ranker.pending()
    assert len(pending) == 12 == len(set(pending))
    assert set(pending) == {PairSlot(a, b) for a, b in itertools.permutations(range(4), 2)}


def test_allpairs_disagreement_splits_the_point_and_all_failed_is_invalid():
    ranker = AllPairsRanker(2)
    ranker.feed({PairSlot(0, 1): "A", PairSlot(1, 0): "A"})  # position bias: no consistent winner
    assert ranker.prediction().value == [0.5, 0.5]
    failed = AllPairsRanker(2)
    failed.feed({PairSlot(0, 1): None, PairSlot(1, 0): None})
    assert failed.prediction().value is None


@given(st.lists(st.floats(-4, 4, allow_nan=False), min_size=2, max_size=5, unique=True))
def test_allpairs_with_a_truthful_model_orders_users_by_value(values):
    ranker = AllPairsRanker(len(values))
    assert _drive(ranker, _truthful(values)) == 1
    scores = ranker.prediction().value
    assert sorted(range(len(values)), key=lambda i: -scores[i]) == [i - 1 for i in _best_first(values)]


@given(st.lists(st.floats(-4, 4, allow_nan=False), min_size=2, max_size=5, unique=True))
def test_heapsort_with_a_truthful_model_returns_the_true_best_first_order(values):
    ranker = HeapsortRanker(len(values))
    _drive(ranker, _truthful(values))
    assert ranker.prediction().value == _best_first(values)


def test_heapsort_asks_one_pair_in_both_orders_per_round_and_at_most_n_log_n_rounds():
    ranker = HeapsortRanker(4)
    first = ranker.pending()
    assert len(first) == 2 and first[0].users == first[1].users[::-1]
    assert _drive(ranker, lambda slot: "A") <= 7


@pytest.mark.parametrize(("n", "expected"), [(2, [1, 2]), (3, [1, 3, 2]), (4, [1, 4, 3, 2])])
def test_heapsort_always_user_a_gives_the_papers_biased_orders(n, expected):
    ranker = HeapsortRanker(n)
    _drive(ranker, lambda slot: "A")
    assert ranker.prediction().value == expected


def test_consistent_winner_needs_both_orders_to_agree():
    assert consistent_winner("A", "B", 3, 5) == 3
    assert consistent_winner("B", "A", 3, 5) == 5
    assert consistent_winner("B", "B", 3, 5) is None
    assert consistent_winner("A", None, 3, 5) is None


def test_make_ranker_picks_the_class_and_rejects_unknown_names():
    assert isinstance(make_ranker("pointwise", [3.0, 4.0]), PointwiseRanker)
    assert isinstance(make_ranker("pairwise", [3.0, 4.0]), AllPairsRanker)
    assert isinstance(make_ranker("listwise", [3.0, 4.0]), ListwiseRanker)
    assert isinstance(make_ranker("pairwise", [3.0, 4.0], pairwise_strategy="heapsort"), HeapsortRanker)
    with pytest.raises(ValueError, match="pairwise strategy"):
        make_ranker("pairwise", [3.0, 4.0], pairwise_strategy="bubble")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown method"):
        make_ranker("groupwise", [3.0])  # type: ignore[arg-type]


def test_demonstration_answers_are_the_truth_in_each_methods_format():
    rel, ratings = [-1.0, 1.5, 0.2], [2.0, 5.0, 4.0]
    assert demonstration("pointwise", rel, ratings) == (UserSlot(0), 2.0)
    assert demonstration("pairwise", rel, ratings) == (PairSlot(0, 1), "B")
    assert demonstration("listwise", rel, ratings) == (ListSlot(3), [2, 3, 1])
