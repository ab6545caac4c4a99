"""The three ranking methods as per-group state machines driven in lockstep.

Every ranker asks for a batch of comparisons or ratings (`pending()`), receives the parsed answers
(`feed()`), and when `done` yields a prediction for the PTC metric. The driver
(`perrec_eval.runner.drive`, called by `perrec_eval.tasks.perrecbench.run`) collects
the pending requests of *all* groups of a level into one engine call per step, so pointwise, listwise and
all-pairs take exactly one call and heapsort takes one call per lockstep round.
"""

from __future__ import annotations

import itertools
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

PairwiseStrategy = Literal["allpairs", "heapsort"]
PredictionFormat = Literal["scores", "ranking"]


@dataclass(frozen=True, slots=True)
class UserSlot:
    """A pointwise request: predict the rating of user `user` (0-based position in the group)."""

    user: int

    @property
    def users(self) -> tuple[int, ...]:
        return (self.user,)

    def to_json(self) -> list[Any]:
        return ["user", self.user]


@dataclass(frozen=True, slots=True)
class PairSlot:
    """A pairwise request: user `a` shown as [User A], user `b` as [User B]."""

    a: int
    b: int

    @property
    def users(self) -> tuple[int, ...]:
        return (self.a, self.b)

    def to_json(self) -> list[Any]:
        return ["pair", self.a, self.b]


@dataclass(frozen=True, slots=True)
class ListSlot:
    """A listwise request: the whole group of `n_users`, shown as User1..UserN.

    `order` gives the group position shown as User1, User2, ...; None shows them in group (dataset) order.
    As JSON a request in group order is ``["list"]`` (what runs wrote before presentations existed), any
    other order ``["list", *order]``.

    >>> ListSlot(3, (2, 0, 1)).users, ListSlot(3, (2, 0, 1)).to_json(), ListSlot(2, (0, 1)).to_json()
    ((2, 0, 1), ['list', 2, 0, 1], ['list'])
    """

    n_users: int
    order: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.order is not None and sorted(self.order) != list(range(self.n_users)):
            raise ValueError(f"a listwise order must be a permutation of 0..{self.n_users - 1}: {self.order}")

    @property
    def users(self) -> tuple[int, ...]:
        return tuple(range(self.n_users)) if self.order is None else self.order

    def to_json(self) -> list[Any]:
        users = self.users
        return ["list"] if users == tuple(range(self.n_users)) else ["list", *users]

    @classmethod
    def shown_order(cls, slot_json: list[Any], n_users: int) -> tuple[int, ...]:
        """The group positions a recorded ``["list", ...]`` slot showed, first shown first.

        >>> ListSlot.shown_order(["list"], 3), ListSlot.shown_order(["list", 1, 0], 2)
        ((0, 1, 2), (1, 0))
        """
        return tuple(slot_json[1:]) if len(slot_json) > 1 else tuple(range(n_users))


# One request inside a group. `users` are the group positions the prompt shows, in the order it shows them:
# the renderer needs nothing else, and the answer parser needs only their number.
Slot = UserSlot | PairSlot | ListSlot


@dataclass(frozen=True, slots=True)
class Prediction:
    """A group's prediction in the metric's input format; `value` is None when the group is invalid."""

    format: PredictionFormat
    value: list[float] | list[int] | None
    predicted_ratings: list[float | None] | None = None


class Ranker:
    """Base protocol: `pending()` slots, `feed({slot: parsed or None})`, then `prediction()` once done."""

    n_users: int

    def pending(self) -> list[Slot]:
        raise NotImplementedError

    def feed(self, answers: Mapping[Slot, Any]) -> None:
        raise NotImplementedError

    @property
    def done(self) -> bool:
        raise NotImplementedError

    def prediction(self) -> Prediction:
        raise NotImplementedError


class _OneShot(Ranker):
    def __init__(self, n_users: int) -> None:
        self.n_users = n_users
        self._answers: dict[Slot, Any] | None = None

    def slots(self) -> list[Slot]:
        raise NotImplementedError

    def pending(self) -> list[Slot]:
        return [] if self._answers is not None else self.slots()

    def feed(self, answers: Mapping[Slot, Any]) -> None:
        self._answers = {slot: answers.get(slot) for slot in self.slots()}

    @property
    def done(self) -> bool:
        return self._answers is not None


class PointwiseRanker(_OneShot):
    """Predict each user's rating; rank by predicted − the user's average (the relative rating).

    A group with any unusable rating is invalid: imputing one would invent a ranking.

    >>> r = PointwiseRanker([4.0, 3.0])
    >>> r.feed({UserSlot(0): 4.5, UserSlot(1): 4.5})
    >>> r.prediction().value
    [0.5, 1.5]
    """

    def __init__(self, avg_ratings: Sequence[float]) -> None:
        super().__init__(len(avg_ratings))
        self.avg_ratings = list(avg_ratings)

    def slots(self) -> list[Slot]:
        return [UserSlot(i) for i in range(self.n_users)]

    def prediction(self) -> Prediction:
        ratings = [self._answers[UserSlot(i)] for i in range(self.n_users)]
        if any(r is None for r in ratings):
            return Prediction("scores", None, ratings)
        return Prediction("scores", [r - a for r, a in zip(ratings, self.avg_ratings, strict=True)], ratings)


class ListwiseRanker(_OneShot):
    """One request per group, its users shown in `order` (None: group order).

    The parsed answer is a best-first permutation of the *shown* indices 1..n; the prediction maps it back to
    group positions, so the metric sees the same numbering whatever the presentation.

    >>> r = ListwiseRanker(3, (2, 0, 1))
    >>> r.feed({r.slots()[0]: [1, 3, 2]})
    >>> r.prediction().value
    [3, 2, 1]
    """

    def __init__(self, n_users: int, order: Sequence[int] | None = None) -> None:
        super().__init__(n_users)
        self._slot = ListSlot(n_users, None if order is None else tuple(order))

    def slots(self) -> list[Slot]:
        return [self._slot]

    def prediction(self) -> Prediction:
        ranking = self._answers[self._slot]
        if ranking is None:
            return Prediction("ranking", None)
        shown = self._slot.users
        return Prediction("ranking", [shown[index - 1] + 1 for index in ranking])


class AllPairsRanker(_OneShot):
    """Every pair asked in both orders; a consistent win scores 1, a disagreement or failure 0.5 each.

    Users are ranked by total score: symmetric in presentation order and fully batchable. A group where
    every answer failed is invalid.

    >>> r = AllPairsRanker(2)
    >>> r.feed({PairSlot(0, 1): "B", PairSlot(1, 0): "A"})
    >>> r.prediction().value
    [0.0, 1.0]
    """

    def slots(self) -> list[Slot]:
        return [PairSlot(a, b) for a, b in itertools.permutations(range(self.n_users), 2)]

    def prediction(self) -> Prediction:
        scores = [0.0] * self.n_users
        for a, b in itertools.combinations(range(self.n_users), 2):
            winner = consistent_winner(self._answers[PairSlot(a, b)], self._answers[PairSlot(b, a)], a, b)
            if winner is None:
                scores[a] += 0.5
                scores[b] += 0.5
            else:
                scores[winner] += 1.0
        if all(value is None for value in self._answers.values()):
            return Prediction("scores", None)
        return Prediction("scores", scores)


def consistent_winner(ab: str | None, ba: str | None, a: int, b: int) -> int | None:
    """The user both orders agree on, or None on disagreement or failure.

    `ab` is the answer with `a` shown as [User A]; `ba` with `b` shown as [User A].

    >>> consistent_winner("A", "B", 0, 1), consistent_winner("A", "A", 0, 1)
    (0, None)
    >>> consistent_winner(None, "A", 0, 1) is None
    True
    """
    if ab == "A" and ba == "B":
        return a
    if ab == "B" and ba == "A":
        return b
    return None


class HeapsortRanker(Ranker):
    """The paper's pairwise heapsort: a max-heap where a child is asked as candidate against the current
    largest; any disagreement or failure means "candidate not better"; the sorted list is reversed to
    best-first. With a model that always answers "[User A]" this yields [1, 2], [1, 3, 2], [1, 4, 3, 2].

    >>> r = HeapsortRanker(3)
    >>> while not r.done:
    ...     r.feed({slot: "A" for slot in r.pending()})
    >>> r.prediction().value
    [1, 3, 2]
    """

    def __init__(self, n_users: int) -> None:
        self.n_users = n_users
        self._order = list(range(n_users))
        self._steps = self._sort()
        self._current: tuple[int, int] | None = next(self._steps, None)

    def _sort(self) -> Generator[tuple[int, int], bool, None]:
        arr, n = self._order, self.n_users
        for i in range(n // 2 - 1, -1, -1):
            yield from self._heapify(arr, n, i)
        for end in range(n - 1, 0, -1):
            arr[0], arr[end] = arr[end], arr[0]
            yield from self._heapify(arr, end, 0)

    def _heapify(self, arr: list[int], n: int, i: int) -> Generator[tuple[int, int], bool, None]:
        while True:
            largest = i
            for child in (2 * i + 1, 2 * i + 2):
                if child < n:
                    better = yield (arr[child], arr[largest])
                    if better:
                        largest = child
            if largest == i:
                return
            arr[i], arr[largest] = arr[largest], arr[i]
            i = largest

    def pending(self) -> list[Slot]:
        if self._current is None:
            return []
        candidate, largest = self._current
        return [PairSlot(candidate, largest), PairSlot(largest, candidate)]

    def feed(self, answers: Mapping[Slot, Any]) -> None:
        candidate, largest = self._current
        winner = consistent_winner(
            answers.get(PairSlot(candidate, largest)),
            answers.get(PairSlot(largest, candidate)),
            candidate,
            largest,
        )
        try:
            self._current = self._steps.send(winner == candidate)
        except StopIteration:
            self._current = None

    @property
    def done(self) -> bool:
        return self._current is None

    def prediction(self) -> Prediction:
        return Prediction("ranking", [index + 1 for index in reversed(self._order)])
