"""Typed records that flow between the runner's stages, built once from the dataset and passed on typed.

- `Group` (with `Query`, `User`, `HistoryItem`) is a benchmark row. `Group.from_row` is the one boundary
  between the dataset and the runner, and it applies the **untitled-item rule** there: a history item whose
  item has no metadata (null or empty title) has nothing to retrieve by or show, so it is dropped from the
  user's history before retrieval, prompts, profiles or baselines see it (`User.untitled` counts the items
  dropped). Retrieval indexes into `User.history` after the rule, so indices and items always agree.
- `UserView` is what a prompt shows of one user: retrieved history (best first), rating summary, profile.
- `SampleRecord` is one engine request and its parsed answers (a line of ``samples.jsonl``);
  `PredictionRecord` is one group's ranking input to the metric with the truth (a line of
  ``predictions.jsonl``).

A group is read from the dataset row's shape (the builder's `schema.FEATURES`); the two line records are
written with `to_json()` and read back with `from_json()`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perrec_eval.tasks.perrecbench.vocabulary import Level, Method

UserKey = tuple[str, str]  # (group_id, user_id): a user as one group sees them (profiles, retrieval)


@dataclass(frozen=True, slots=True)
class HistoryItem:
    """One earlier review of a user: the item's title/author and the user's rating."""

    parent_asin: str | None
    title: str
    author: str | None
    rating: float
    timestamp: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HistoryItem:
        return cls(
            parent_asin=data.get("parent_asin"),
            title=data["title"],
            author=data.get("author"),
            rating=float(data["rating"]),
            timestamp=int(data["timestamp"]),
        )



@dataclass(frozen=True, slots=True)
class Query:
    """The query item every user of a group reviewed."""

    parent_asin: str | None
    title: str
    author: str | None = None
    main_category: str | None = None
    average_rating: float | None = None
    rating_number: int | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Query:
        return cls(
            parent_asin=data.get("parent_asin"),
            title=data["title"],
            author=data.get("author"),
            main_category=data.get("main_category"),
            average_rating=data.get("average_rating"),
            rating_number=data.get("rating_number"),
        )



@dataclass(frozen=True, slots=True)
class User:
    """One user of a group: the truth (rating, relative rating), the rating summary and the history."""

    user_id: str
    rating: float
    timestamp: int
    avg_rating: float
    most_common_rating: float
    relative_rating: float
    history: tuple[HistoryItem, ...]
    untitled: int = 0

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> User:
        """A user from its row shape; history items without a title are dropped (see the module doc). A row
        read without its history (`context.load_groups(history=False)`) gives a user without one."""
        items = data.get("history", ())
        history = tuple(HistoryItem.from_json(item) for item in items if item.get("title"))
        return cls(
            user_id=data["user_id"],
            rating=float(data["rating"]),
            timestamp=int(data["timestamp"]),
            avg_rating=float(data["avg_rating"]),
            most_common_rating=float(data["most_common_rating"]),
            relative_rating=float(data["relative_rating"]),
            history=history,
            untitled=len(items) - len(history) + int(data.get("untitled", 0)),
        )



@dataclass(frozen=True, slots=True)
class Group:
    """One benchmark row: a query item and the users (in presentation order) who reviewed it.

    >>> row = {"group_id": "g", "domain": "Books", "level": "easy", "window_start": 0,
    ...        "query": {"parent_asin": "q", "title": "Dune"},
    ...        "users": [{"user_id": "u", "rating": 5.0, "timestamp": 9, "avg_rating": 4.0,
    ...                   "most_common_rating": 4.0, "relative_rating": 1.0,
    ...                   "history": [{"title": None, "rating": 3.0, "timestamp": 1},
    ...                               {"title": "Emma", "rating": 4.0, "timestamp": 2}]}]}
    >>> group = Group.from_row(row)
    >>> [item.title for item in group.users[0].history], group.users[0].untitled
    (['Emma'], 1)
    """

    group_id: str
    domain: str
    level: str
    query: Query
    window_start: int
    users: tuple[User, ...]

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Group:
        """The group of a dataset row (the builder's `schema.FEATURES`), untitled items dropped."""
        return cls(
            group_id=row["group_id"],
            domain=row.get("domain") or "",
            level=row.get("level") or "",
            query=Query.from_json(row["query"]),
            window_start=int(row.get("window_start") or 0),
            users=tuple(User.from_json(user) for user in row["users"]),
        )


    @property
    def relative_ratings(self) -> list[float]:
        return [user.relative_rating for user in self.users]

    @property
    def ratings(self) -> list[float]:
        return [user.rating for user in self.users]

    @property
    def avg_ratings(self) -> list[float]:
        return [user.avg_rating for user in self.users]


@dataclass(frozen=True, slots=True)
class UserView:
    """What a prompt shows of one user: retrieved history (best first), rating summary, optional profile."""

    history: tuple[HistoryItem, ...]
    most_common_rating: float
    avg_rating: float
    profile: str | None = None
    profile_error: str | None = None  # why the profile this view needs could not be written


@dataclass(frozen=True, slots=True)
class SampleRecord:
    """One engine request of a run and what came back (a line of ``samples.jsonl``).

    `slot` is the ranker's slot as JSON (``["user", 0]``, ``["pair", 0, 1]``, ``["list"]``); `value` the
    answer after self-consistency aggregation (None when no sample parsed); `reason` why it failed. `error`
    is set when the engine gave no answer at all (server error, timeout, a failed profile request the
    prompt needed): such a request is not an answer and not a parse failure; it is asked again when the
    run is repeated. `key` is None for a request that could not be rendered.
    """

    group_id: str
    level: Level | str
    method: Method
    step: int
    slot: list[Any]
    key: str | None
    texts: list[str]
    parsed: list[Any]
    value: Any
    ok: bool
    reason: str | None
    num_failed_samples: int
    prompt_tokens: int | None
    completion_tokens: int | None
    error: str | None = None
    finish_reasons: list[str | None] | None = None  # per sample, when the engine reports them ("length": cut)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SampleRecord:
        # `error` and `finish_reasons` came later: runs written before them have none.
        later = ("error", "finish_reasons")
        return cls(
            **{name: data[name] for name in cls.__slots__ if name not in later},
            **{name: data.get(name) for name in later},
        )

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class PredictionRecord:
    """One group's metric input and truth for one (level, method) cell (a line of ``predictions.jsonl``).

    `format` is ``scores`` (higher = preferred, per user) or ``ranking`` (best-first 1-based user indices);
    `prediction` is None for a group that could not be ranked. `cluster` is the group's query item
    (``<domain>:<parent_asin>``) when its level has several groups of one item (large-preset builds), so the
    statistics resample and flip signs per item; None (and absent from the JSON line) otherwise.
    """

    level: Level | str
    method: Method
    group_id: str
    format: str
    prediction: list[float] | list[int] | None
    predicted_ratings: list[float | None] | None
    references: list[float]
    true_ratings: list[float]
    cluster: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PredictionRecord:
        return cls(**{name: data.get(name) for name in cls.__slots__})

    def to_json(self) -> dict[str, Any]:
        # Unclustered runs keep the line they had before `cluster` existed.
        return {
            name: getattr(self, name)
            for name in self.__slots__
            if name != "cluster" or self.cluster is not None
        }


def clusters_of(records: Sequence[PredictionRecord]) -> list[str] | None:
    """One cluster id per record (its query item, or its own group id), or None when no record has one.

    >>> a = PredictionRecord("easy", "pointwise", "g1", "scores", None, None, [1.0], [4.0], "B:q")
    >>> clusters_of([a, PredictionRecord("easy", "pointwise", "g2", "scores", None, None, [1.0], [4.0])])
    ['B:q', 'g2']
    >>> clusters_of([PredictionRecord("easy", "pointwise", "g2", "scores", None, None, [1.0], [4.0])])
    """
    if all(record.cluster is None for record in records):
        return None
    return [record.group_id if record.cluster is None else record.cluster for record in records]
