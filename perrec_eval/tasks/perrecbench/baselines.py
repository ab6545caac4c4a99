"""Scorers without an LLM: the floor every model must beat (``--engine baseline --model NAME``).

Each baseline predicts a *rating* for every user of a group, so MAE/RMSE can be reported next to PTC; the
ranking score is, as for the pointwise method, the predicted rating minus the user's average rating
(`ranking_scores`).

- ``random``: predicted = avg + u, u ~ Uniform(-1, 1) drawn from a generator seeded by (seed, group_id,
  user_id) — the same value whatever the order of groups or users, so the ranking is uniformly random.
  Predictions are not clipped to [1, 5]: clipping would tie the draw to the user's average and bias the
  ranking away from chance.
- ``rating-bias``: predicted = the user's average rating. Every ranking score is 0, so it cannot rank; it is
  the paper's point that such a predictor still does well on MAE.
- ``item-quality``: predicted = the query item's ``average_rating`` (the user's average when it is null).
  Everyone gets the same predicted rating, so it knows nothing about who likes the item more; its ranking
  score ``average_rating - avg(u)`` orders users by ascending average rating. That is exactly what the
  pointwise method does with an LLM that answers the same number for everyone, so this row is the floor a
  pointwise model must beat (it need not score 0: users with low averages tend to have higher relative
  ratings).
- ``constant``: predicted = `CONSTANT_RATING` for every user (the answer of a model that knows nothing and
  says so). Its ranking score ``CONSTANT_RATING - avg(u)`` orders users by ascending average rating, so its
  PTC is the pointwise floor: not 0, because under the paper's pointwise definition users with low averages
  tend to have higher relative ratings. Every run's pointwise cells report this floor on their own groups
  (`perrec_eval.tasks.perrecbench.scoring.constant_floor`).
- ``history-affinity``: predicted = avg + the BM25-score-weighted mean of ``rating - avg`` over the user's
  retrieved history items (0 when the total weight is 0): users who rated similar items above their own
  average are predicted to like the query item more.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from perrec_eval.tasks.perrecbench.records import Group, HistoryItem, User
from perrec_eval.tasks.perrecbench.retrieval import Retrieved

BASELINES: tuple[str, ...] = ("random", "rating-bias", "item-quality", "constant", "history-affinity")
# Only these read `retrieved`; the others can be given an empty mapping (retrieval costs ~3 ms per user).
USES_RETRIEVAL: frozenset[str] = frozenset({"history-affinity"})

RANDOM_HALF_WIDTH = 1.0
# Any constant ranks the same way; 4.0 is what the fake engine's `constant` script answers pointwise.
CONSTANT_RATING = 4.0

RetrievedByUser = Mapping[str, Sequence[Retrieved]]  # user_id -> retrieved history, best first
_Predictor = Callable[[Group, RetrievedByUser, int], list[float]]


def _users(group: Group) -> Sequence[User]:
    if not group.users:
        raise ValueError(f"group {group.group_id!r} has no users; expected a benchmark group with users")
    return group.users


def user_seed(seed: int, group_id: str, user_id: str) -> int:
    """A 64-bit seed that depends only on (seed, group_id, user_id), stable across runs and platforms.

    Args:
        seed: the run's seed.
        group_id: the group.
        user_id: the user.

    Returns:
        A non-negative integer below 2**64.

    >>> user_seed(0, "g1", "u1") == user_seed(0, "g1", "u1") != user_seed(1, "g1", "u1")
    True
    """
    digest = hashlib.sha256(f"{seed}\x00{group_id}\x00{user_id}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def _random(group: Group, retrieved: RetrievedByUser, seed: int) -> list[float]:
    predicted = []
    for user in _users(group):
        rng = np.random.default_rng(user_seed(seed, group.group_id, user.user_id))
        predicted.append(user.avg_rating + float(rng.uniform(-RANDOM_HALF_WIDTH, RANDOM_HALF_WIDTH)))
    return predicted


def _rating_bias(group: Group, retrieved: RetrievedByUser, seed: int) -> list[float]:
    return [user.avg_rating for user in _users(group)]


def _item_quality(group: Group, retrieved: RetrievedByUser, seed: int) -> list[float]:
    item_avg = group.query.average_rating
    return [user.avg_rating if item_avg is None else float(item_avg) for user in _users(group)]


def _constant(group: Group, retrieved: RetrievedByUser, seed: int) -> list[float]:
    return [CONSTANT_RATING for _ in _users(group)]


def affinity(history: Sequence[HistoryItem], hits: Sequence[Retrieved], avg: float) -> float:
    """BM25-weighted mean of (rating - avg) over the retrieved history items; 0 if the weights sum to 0.

    Args:
        history: the user's history.
        hits: retrieved items (indices into ``history`` and their BM25 scores).
        avg: the user's average rating.

    Returns:
        The weighted mean relative rating of the retrieved items.

    >>> history = [HistoryItem(None, "a", None, rating, 0) for rating in (5.0, 1.0, 4.0)]
    >>> affinity(history, [Retrieved(0, 3.0), Retrieved(1, 1.0)], avg=3.0)
    1.0
    >>> affinity(history, [Retrieved(2, 0.0)], avg=3.0)
    0.0
    """
    for hit in hits:
        if not 0 <= hit.index < len(history):
            raise ValueError(f"retrieved index {hit.index} is outside a history of {len(history)} items")
    total = sum(hit.score for hit in hits)
    if total <= 0:
        return 0.0
    return sum(hit.score * (history[hit.index].rating - avg) for hit in hits) / total


def _history_affinity(group: Group, retrieved: RetrievedByUser, seed: int) -> list[float]:
    predicted = []
    for user in _users(group):
        if user.user_id not in retrieved:
            raise ValueError(
                f"history-affinity needs retrieved items for user {user.user_id!r} of group "
                f"{group.group_id!r}; pass retrieval.retrieve_groups(...) results for this group"
            )
        predicted.append(user.avg_rating + affinity(user.history, retrieved[user.user_id], user.avg_rating))
    return predicted


_PREDICTORS: dict[str, _Predictor] = {
    "random": _random,
    "rating-bias": _rating_bias,
    "item-quality": _item_quality,
    "constant": _constant,
    "history-affinity": _history_affinity,
}


def predict(name: str, group: Group, retrieved: RetrievedByUser, *, seed: int = 0) -> list[float]:
    """Predicted rating of every user of one group, in the group's user order.

    Args:
        name: one of `BASELINES`.
        group: a benchmark group.
        retrieved: user_id → that user's retrieved history (only ``history-affinity`` reads it).
        seed: the run's seed (only ``random`` reads it).

    Returns:
        One predicted rating per user.

    >>> from perrec_eval.tasks.perrecbench.records import Query
    >>> users = tuple(User(uid, 4.0, 0, avg, avg, 4.0 - avg, ()) for uid, avg in (("a", 3.0), ("b", 4.0)))
    >>> group = Group("g", "Books", "easy", Query("q", "Dune", average_rating=4.5), 0, users)
    >>> predict("rating-bias", group, {}), predict("item-quality", group, {})
    ([3.0, 4.0], [4.5, 4.5])
    """
    if name not in _PREDICTORS:
        raise ValueError(f"unknown baseline {name!r}; choose one of: {', '.join(BASELINES)}")
    return _PREDICTORS[name](group, retrieved, seed)


def ranking_scores(group: Group, predicted: Sequence[float]) -> list[float]:
    """Ranking score of every user: predicted rating minus the user's average rating (higher = preferred).

    Args:
        group: the benchmark group the predictions are for.
        predicted: one predicted rating per user, in the group's user order.

    Returns:
        ``predicted[i] - users[i].avg_rating`` for each user.

    >>> from perrec_eval.tasks.perrecbench.records import Query
    >>> users = tuple(User(uid, 4.0, 0, avg, avg, 4.0 - avg, ()) for uid, avg in (("a", 3.0), ("b", 4.0)))
    >>> ranking_scores(Group("g", "Books", "easy", Query("q", "Dune"), 0, users), [4.5, 4.5])
    [1.5, 0.5]
    """
    users = _users(group)
    if len(predicted) != len(users):
        raise ValueError(f"got {len(predicted)} predictions for a group of {len(users)} users")
    return [float(value) - user.avg_rating for value, user in zip(predicted, users, strict=True)]
