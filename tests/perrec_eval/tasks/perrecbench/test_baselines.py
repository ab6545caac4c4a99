from dataclasses import replace

import pytest

from perrec_eval.tasks.perrecbench.baselines import (
    BASELINES,
    USES_RETRIEVAL,
    affinity,
    predict,
    ranking_scores,
)
from perrec_eval.tasks.perrecbench.records import Group, HistoryItem
from perrec_eval.tasks.perrecbench.retrieval import Retrieved, retrieve_groups


def review(title, rating, timestamp):
    return HistoryItem(f"{title}@{timestamp}", title, None, rating, timestamp)


def user(user_id, avg, history=(), rating=4.0):
    return {"user_id": user_id, "rating": rating, "timestamp": 10_000, "avg_rating": avg,
            "most_common_rating": round(avg), "relative_rating": rating - avg,
            "history": [{"parent_asin": i.parent_asin, "title": i.title, "rating": i.rating,
                         "timestamp": i.timestamp} for i in history]}


def group(group_id, users, title="Dune Messiah", average_rating=4.2):
    return Group.from_row({"group_id": group_id, "domain": "Books", "level": "easy",
            "query": {"parent_asin": "Q", "title": title, "author": None, "main_category": "Books",
                      "average_rating": average_rating, "rating_number": 100},
            "window_start": 9_000, "users": users})


def mixed_history(scifi_rating, other_rating):
    """Half science fiction, half cooking; both users' averages are 3.0."""
    scifi = ["Dune", "Dune Messiah Deluxe", "Children of Dune", "Foundation"]
    cooking = ["Bread Baking", "Slow Cooker Soups", "Pasta at Home", "Vegan Desserts"]
    history = [review(t, scifi_rating, i) for i, t in enumerate(scifi)]
    history += [review(t, other_rating, 10 + i) for i, t in enumerate(cooking)]
    return history


def retrieved_for(row, k=4):
    hits = retrieve_groups([row], k=k)
    return {uid: found for (_, uid), found in hits.items()}


def test_baselines_history_affinity_ranks_same_topic_lover_above_hater():
    hater, lover = user("hater", 3.0, mixed_history(1.0, 5.0)), user("lover", 3.0, mixed_history(5.0, 1.0))
    row = group("g", [hater, lover])
    predicted = predict("history-affinity", row, retrieved_for(row))
    hater, lover = ranking_scores(row, predicted)
    assert lover > 0 > hater
    assert predicted[1] > predicted[0]


def test_baselines_history_affinity_uses_bm25_weights():
    history = [review("Dune", 5.0, 1), review("Dune Dune Dune", 1.0, 2)]
    hits = [Retrieved(0, 3.0), Retrieved(1, 1.0)]
    assert affinity(history, hits, avg=3.0) == pytest.approx((3.0 * 2.0 + 1.0 * -2.0) / 4.0)


def test_baselines_history_affinity_zero_weight_predicts_the_average():
    row = group("g", [user("a", 3.7, [review("Cookbook", 5.0, 1)])], title="Quantum Physics")
    assert predict("history-affinity", row, retrieved_for(row)) == [3.7]


def test_baselines_history_affinity_needs_retrieved_items_for_every_user():
    row = group("g", [user("a", 3.0, mixed_history(5.0, 1.0))])
    with pytest.raises(ValueError, match="retrieve_groups"):
        predict("history-affinity", row, {})


def test_baselines_history_affinity_rejects_index_outside_history():
    with pytest.raises(ValueError, match="outside a history of 1 items"):
        affinity([review("Dune", 5.0, 1)], [Retrieved(3, 1.0)], avg=3.0)


def test_baselines_rating_bias_predicts_averages_and_ranks_nobody():
    row = group("g", [user("a", 2.5), user("b", 4.1), user("c", 3.3)])
    predicted = predict("rating-bias", row, {})
    assert predicted == [2.5, 4.1, 3.3]
    assert ranking_scores(row, predicted) == [0.0, 0.0, 0.0]


def test_baselines_item_quality_predicts_the_same_rating_for_everyone():
    row = group("g", [user("a", 2.5), user("b", 4.1), user("c", 3.3)], average_rating=4.2)
    predicted = predict("item-quality", row, {})
    assert predicted == [4.2, 4.2, 4.2]
    # As with a pointwise LLM that answers one number for all, the ranking is by ascending user average.
    scores = ranking_scores(row, predicted)
    assert sorted(range(3), key=lambda i: -scores[i]) == [0, 2, 1]


def test_baselines_item_quality_falls_back_to_user_average_when_item_has_none():
    row = group("g", [user("a", 2.5), user("b", 4.1)], average_rating=None)
    predicted = predict("item-quality", row, {})
    assert predicted == [2.5, 4.1]
    assert ranking_scores(row, predicted) == [0.0, 0.0]


def test_baselines_random_is_reproducible_and_independent_of_order():
    row = group("g7", [user("a", 3.0), user("b", 4.0), user("c", 2.0)])
    reordered = replace(row, users=row.users[::-1])
    first = predict("random", row, {}, seed=3)
    assert predict("random", row, {}, seed=3) == first
    predict("random", group("other", [user("z", 1.0)]), {}, seed=3)  # calls in between change nothing
    assert predict("random", reordered, {}, seed=3) == first[::-1]
    assert predict("random", row, {}, seed=4) != first


def test_baselines_random_ranks_at_chance_and_stays_within_one_of_the_average():
    wins = 0
    for g in range(400):
        row = group(f"g{g}", [user("a", 4.5), user("b", 2.0)])
        predicted = predict("random", row, {}, seed=0)
        a, b = ranking_scores(row, predicted)
        assert -1.0 <= a <= 1.0 and -1.0 <= b <= 1.0
        wins += a > b
    assert 160 < wins < 240


@pytest.mark.parametrize("name", BASELINES)
def test_baselines_return_one_rating_per_user_in_row_order(name):
    row = group("g", [user("a", 3.0, mixed_history(5.0, 1.0)), user("b", 4.0, mixed_history(1.0, 5.0))])
    predicted = predict(name, row, retrieved_for(row))
    assert len(predicted) == 2 and all(isinstance(p, float) for p in predicted)


def test_baselines_unknown_name_lists_the_valid_ones():
    with pytest.raises(ValueError, match="random, rating-bias, item-quality, constant, history-affinity"):
        predict("oracle", group("g", [user("a", 3.0)]), {})


def test_baselines_ranking_scores_need_one_prediction_per_user():
    with pytest.raises(ValueError, match="2 predictions for a group of 1"):
        ranking_scores(group("g", [user("a", 3.0)]), [1.0, 2.0])


@pytest.mark.parametrize("name", sorted(set(BASELINES) - USES_RETRIEVAL))
def test_baselines_without_retrieval_ignore_the_retrieved_mapping(name):
    row = group("g", [user("a", 3.0, mixed_history(5.0, 1.0)), user("b", 4.0, mixed_history(1.0, 5.0))])
    assert predict(name, row, {}, seed=1) == predict(name, row, retrieved_for(row), seed=1)


def test_baselines_constant_ranks_users_by_minus_their_average():
    row = group("g", [user("a", 3.0), user("b", 4.5), user("c", 2.0)])
    predicted = predict("constant", row, {})
    assert predicted == [4.0, 4.0, 4.0]
    assert ranking_scores(row, predicted) == [1.0, -0.5, 2.0]
