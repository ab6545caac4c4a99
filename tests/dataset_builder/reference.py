"""A slow, obviously correct, in-memory implementation of the group selection (PROTOCOL §2).

This module is a **test oracle** for the DuckDB builder: small inputs only (a few thousand reviews). It reads
plain dicts, keeps every intermediate in Python lists, and computes relative ratings with exact rational
arithmetic (:class:`fractions.Fraction`), so "a gap of exactly λ" is decided exactly rather than by floating
point luck.

Conventions (the builder must match them; each is tested in ``tests/dataset_builder/test_reference.py``):

* **Deduplication** — per ``(user_id, parent_asin)`` the earliest review is kept. Reviews of one pair at the
  same millisecond are ordered by ``(rating, asin)`` and the smallest is kept, so the result never depends on
  the order of lines in the file.
* **Chronological order** of a user's (deduplicated) reviews is ``(timestamp, parent_asin)``: history lists
  are "oldest first" in that order, and "the value that came first" (most-common-rating ties) refers to it.
* **Active users** — a review counts as *before* the query review only if its timestamp is strictly smaller.
  Reviews at the same millisecond as the query review (other items bought at once) are **not** before.
  A user qualifies with **more than** ``min_history`` such reviews (``min_history + 1`` or more).
* **Average and most common rating** — ``avg_scope="history"`` (default, leak-free): over the reviews strictly
  before the query review. ``avg_scope="all"`` (paper mode): over the user's whole deduplicated review list in
  the domain, including the query review and everything after it. The most common rating uses the same scope;
  on equal counts the value whose first occurrence comes earliest (chronological order above) wins.
* **Window** — the chosen users' query-review timestamps must fit in one closed interval
  ``[t0, t0 + window_days * 86_400_000]`` (both ends inclusive), i.e. ``max(t) - min(t) <= Δ``.
* **Distinct preferences** — every pair of relative ratings differs by **strictly more** than ``min_gap``;
  ``min_gap`` is taken as the decimal it prints as (``0.6`` means exactly 3/5, not the binary float), so a
  gap of exactly 0.6 fails. A float builder matches this by comparing ``gap > min_gap + 1e-9``.
* **Group size** — exactly ``group_size`` distinct users.
* **Which group** — the builder draws from the earliest window that admits a valid group: the window
  ``[t, t + Δ]`` whose start ``t`` is the earliest candidate's timestamp for which the window holds a valid
  group (``t`` can be the time of a candidate that belongs to no group, so the window can end before
  ``t0 + Δ``, ``t0`` the earliest first member of a group), and picks uniformly among **all** valid groups
  of the candidates inside it; :func:`window_groups` lists them by enumeration.
* **Large preset** — per level (group size 2, 3, 4) the builder repeats that draw on the reviewers it has not
  drawn yet, until none of the item's windows admits a group; :func:`window_groups` with ``exclude`` (the
  users drawn before) lists the groups of each draw, so a test replays the builder's draws one by one.

Everything is per domain: pass the reviews of one category file.
"""

from __future__ import annotations

import gzip
import json
import logging
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations
from pathlib import Path
from typing import Literal

logger = logging.getLogger(__name__)

MS_PER_DAY = 86_400_000
AvgScope = Literal["history", "all"]
Search = Literal["exhaustive", "spacing"]

# Alternative spellings found in some copies of the raw files -> canonical name.
_ALIASES = {"sort_timestamp": "timestamp", "sortTimestamp": "timestamp", "helpful_votes": "helpful_vote"}
REQUIRED_FIELDS = ("user_id", "parent_asin", "rating", "timestamp")


# --------------------------------------------------------------------------------------------- reading


def normalize_review(raw: dict) -> dict:
    """Return a copy of one raw review with canonical field names, validated.

    Args:
        raw: one parsed JSON line of a review file.

    Returns:
        The review with ``timestamp``/``helpful_vote`` spelled canonically and ``rating`` as a float.

    Raises:
        ValueError: a required field is missing or out of range (the message names the field).

    >>> normalize_review({"user_id": "u", "parent_asin": "i", "rating": 5, "sort_timestamp": 1})["timestamp"]
    1
    >>> normalize_review({"user_id": "u", "parent_asin": "i", "rating": "five", "timestamp": 1})
    Traceback (most recent call last):
    ...
    ValueError: field 'rating' must be a number in [1, 5], got 'five'
    """
    if not isinstance(raw, dict):
        raise ValueError(f"a review line must be a JSON object, got {type(raw).__name__}")
    review = dict(raw)
    for alias, name in _ALIASES.items():
        if alias in review:
            value = review.pop(alias)
            if review.get(name) is None:
                review[name] = value
    for field in REQUIRED_FIELDS:
        if review.get(field) is None:
            raise ValueError(f"required field {field!r} is missing or null")
    for field in ("user_id", "parent_asin"):
        if not isinstance(review[field], str) or not review[field]:
            raise ValueError(f"field {field!r} must be a non-empty string, got {review[field]!r}")
    rating = review["rating"]
    if isinstance(rating, bool) or not isinstance(rating, int | float) or not 1 <= rating <= 5:
        raise ValueError(f"field 'rating' must be a number in [1, 5], got {rating!r}")
    review["rating"] = float(rating)
    timestamp = review["timestamp"]
    if isinstance(timestamp, bool) or not isinstance(timestamp, int) or timestamp < 0:
        raise ValueError(
            f"field 'timestamp' must be a non-negative integer (milliseconds), got {timestamp!r}"
        )
    return review


def _open_text(path: Path):
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def load_reviews(path: str | Path, *, on_bad_line: Literal["error", "skip"] = "error") -> list[dict]:
    """Read a raw review file (``.jsonl`` or ``.jsonl.gz``) into normalized dicts, in file order.

    Args:
        path: the review file of one category.
        on_bad_line: ``"error"`` raises on the first malformed line (bad JSON, missing or out-of-range
            required field); ``"skip"`` logs and drops such lines. Blank lines are always ignored.

    Returns:
        One dict per valid line (see :func:`normalize_review`).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: a malformed line with ``on_bad_line="error"``; the message names file and line.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such review file; pass a <Category>.jsonl or .jsonl.gz file")
    reviews: list[dict] = []
    with _open_text(path) as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                reviews.append(normalize_review(json.loads(line)))
            except ValueError as err:  # json.JSONDecodeError is a ValueError
                message = f"{path}:{lineno}: {err}"
                if on_bad_line == "error":
                    raise ValueError(f"{message}; fix or delete that line, or skip bad lines") from err
                logger.warning("skipping %s", message)
    return reviews


# --------------------------------------------------------------------------------------------- indexing


@dataclass(frozen=True, slots=True)
class _Review:
    user_id: str
    parent_asin: str
    rating: Fraction
    timestamp: int


def dedupe(reviews: Iterable[dict]) -> list[dict]:
    """Keep the earliest review per ``(user_id, parent_asin)``; same-millisecond ties by ``(rating, asin)``.

    Args:
        reviews: normalized reviews (any order).

    Returns:
        The kept reviews, sorted by ``(user_id, timestamp, parent_asin)``.

    >>> rows = [{"user_id": "u", "parent_asin": "i", "rating": 5.0, "timestamp": 9},
    ...         {"user_id": "u", "parent_asin": "i", "rating": 1.0, "timestamp": 3}]
    >>> [r["rating"] for r in dedupe(rows)]
    [1.0]
    """
    best: dict[tuple[str, str], dict] = {}
    for review in reviews:
        key = (review["user_id"], review["parent_asin"])
        kept = best.get(key)
        if kept is None or _dedupe_key(review) < _dedupe_key(kept):
            best[key] = review
    return sorted(best.values(), key=lambda r: (r["user_id"], r["timestamp"], r["parent_asin"]))


def _dedupe_key(review: dict) -> tuple:
    return (review["timestamp"], review["rating"], str(review.get("asin") or ""))


def user_timelines(reviews: Iterable[dict]) -> dict[str, list[dict]]:
    """Each user's deduplicated reviews in chronological order ``(timestamp, parent_asin)``.

    >>> rows = [{"user_id": "u", "parent_asin": "b", "rating": 4.0, "timestamp": 2},
    ...         {"user_id": "u", "parent_asin": "a", "rating": 3.0, "timestamp": 2}]
    >>> [r["parent_asin"] for r in user_timelines(rows)["u"]]
    ['a', 'b']
    """
    timelines: dict[str, list[dict]] = defaultdict(list)
    for review in dedupe(reviews):
        timelines[review["user_id"]].append(review)
    return dict(timelines)


class _Index:
    """Timelines and per-item reviewers of one domain, built once per public call."""

    def __init__(self, reviews: Iterable[dict]) -> None:
        self.timelines: dict[str, list[_Review]] = {}
        self.by_item: dict[str, dict[str, _Review]] = defaultdict(dict)
        for user_id, rows in user_timelines(reviews).items():
            timeline = [
                _Review(user_id, r["parent_asin"], Fraction(r["rating"]), int(r["timestamp"])) for r in rows
            ]
            self.timelines[user_id] = timeline
            for review in timeline:
                self.by_item[review.parent_asin][user_id] = review

    def query_review(self, parent_asin: str, user_id: str) -> _Review | None:
        return self.by_item.get(parent_asin, {}).get(user_id)

    def history(self, query: _Review) -> list[_Review]:
        """The user's reviews strictly before the query review (equal timestamps are not before)."""
        return [r for r in self.timelines[query.user_id] if r.timestamp < query.timestamp]


@dataclass(frozen=True, slots=True)
class _Candidate:
    user_id: str
    timestamp: int
    n_before: int
    avg: Fraction
    most_common: Fraction
    rel: Fraction


def _most_common(ratings: list[Fraction]) -> Fraction:
    """Highest count wins; on equal counts the value seen first in ``ratings`` (chronological) wins."""
    counts = Counter(ratings)
    top = max(counts.values())
    return next(value for value in ratings if counts[value] == top)


def _candidate(index: _Index, query: _Review, avg_scope: AvgScope) -> _Candidate:
    history = index.history(query)
    if avg_scope == "history":
        scope = history
    elif avg_scope == "all":
        scope = index.timelines[query.user_id]
    else:
        raise ValueError(f"avg_scope must be 'history' or 'all', got {avg_scope!r}")
    if not scope:
        raise ValueError(f"user {query.user_id!r} has no review before {query.parent_asin!r}: no average")
    ratings = [r.rating for r in scope]
    avg = sum(ratings, Fraction(0)) / len(ratings)
    return _Candidate(
        query.user_id, query.timestamp, len(history), avg, _most_common(ratings), query.rating - avg
    )


# --------------------------------------------------------------------------------------------- criteria


@dataclass(frozen=True, slots=True)
class _Options:
    window_ms: int
    min_history: int
    min_gap: Fraction
    group_size: int
    avg_scope: AvgScope

    @classmethod
    def make(cls, window_days: float, min_history: int, min_gap: float, group_size: int, avg_scope: str):
        if window_days < 0 or min_history < 0 or min_gap < 0:
            raise ValueError("window_days, min_history and min_gap must be non-negative")
        if group_size < 1:
            raise ValueError(f"group_size must be at least 1, got {group_size}")
        if avg_scope not in ("history", "all"):
            raise ValueError(f"avg_scope must be 'history' or 'all', got {avg_scope!r}")
        return cls(
            round(window_days * MS_PER_DAY), min_history, Fraction(str(min_gap)), group_size, avg_scope
        )


def _gaps_ok(cands: Iterable[_Candidate], min_gap: Fraction) -> bool:
    return all(abs(a.rel - b.rel) > min_gap for a, b in combinations(cands, 2))


def _window_ok(cands: Collection[_Candidate], window_ms: int) -> bool:
    times = [c.timestamp for c in cands]
    return max(times) - min(times) <= window_ms


def _item_candidates(index: _Index, parent_asin: str, opts: _Options) -> list[_Candidate]:
    """Reviewers of the item who are active, sorted by (query timestamp, user_id)."""
    out = []
    for review in index.by_item.get(parent_asin, {}).values():
        if len(index.history(review)) > opts.min_history:
            out.append(_candidate(index, review, opts.avg_scope))
    return sorted(out, key=lambda c: (c.timestamp, c.user_id))


def why_invalid(
    reviews: Iterable[dict],
    parent_asin: str,
    user_ids: Collection[str],
    *,
    window_days: float = 30,
    min_history: int = 20,
    min_gap: float = 0.6,
    group_size: int = 5,
    avg_scope: AvgScope = "history",
) -> str | None:
    """Why ``user_ids`` is not a valid group for ``parent_asin`` (``None`` when it is valid).

    Args:
        reviews: the normalized reviews of one domain.
        parent_asin: the query item.
        user_ids: the proposed group.
        window_days, min_history, min_gap, group_size, avg_scope: the selection parameters (module docstring).

    Returns:
        ``None`` for a valid group, otherwise a reason starting with one of ``"size"``, ``"no review"``,
        ``"inactive"``, ``"window"``, ``"gap"``.
    """
    opts = _Options.make(window_days, min_history, min_gap, group_size, avg_scope)
    users = list(user_ids)
    if len(users) != opts.group_size or len(set(users)) != len(users):
        return f"size: need {opts.group_size} distinct users, got {users}"
    index = _Index(reviews)
    queries = {u: index.query_review(parent_asin, u) for u in users}
    missing = [u for u, q in queries.items() if q is None]
    if missing:
        return f"no review: {missing} did not review {parent_asin!r}"
    inactive = {u: len(index.history(q)) for u, q in queries.items() if len(index.history(q)) <= min_history}
    if inactive:
        return f"inactive: reviews strictly before the query {inactive} are not more than {min_history}"
    cands = [_candidate(index, q, opts.avg_scope) for q in queries.values()]
    if not _window_ok(cands, opts.window_ms):
        return f"window: query reviews span more than {window_days} days"
    if not _gaps_ok(cands, opts.min_gap):
        return f"gap: some pair of relative ratings differs by at most {min_gap}"
    return None


def is_valid_group(
    reviews: Iterable[dict],
    parent_asin: str,
    user_ids: Collection[str],
    *,
    window_days: float = 30,
    min_history: int = 20,
    min_gap: float = 0.6,
    group_size: int = 5,
    avg_scope: AvgScope = "history",
) -> bool:
    """Whether ``user_ids`` form a valid group for ``parent_asin`` (all criteria of PROTOCOL §2).

    Same arguments as :func:`why_invalid`.
    """
    return (
        why_invalid(
            reviews,
            parent_asin,
            user_ids,
            window_days=window_days,
            min_history=min_history,
            min_gap=min_gap,
            group_size=group_size,
            avg_scope=avg_scope,
        )
        is None
    )


def relative_ratings(
    reviews: Iterable[dict], parent_asin: str, user_ids: Iterable[str], *, avg_scope: AvgScope = "history"
) -> dict[str, tuple[float, float, float]]:
    """Per user: ``(avg_rating, most_common_rating, relative_rating)`` for the query item.

    Args:
        reviews: the normalized reviews of one domain.
        parent_asin: the query item.
        user_ids: users who reviewed it (no activity requirement, but the scope must not be empty).
        avg_scope: ``"history"`` (reviews strictly before the query review) or ``"all"`` (whole list).

    Returns:
        Floats rounded once from the exact rationals.

    Raises:
        ValueError: a user did not review the item, or has no review in the chosen scope.

    >>> rows = [{"user_id": "u", "parent_asin": p, "rating": r, "timestamp": t}
    ...         for p, r, t in [("a", 2.0, 1), ("b", 4.0, 2), ("b2", 4.0, 2), ("q", 5.0, 3)]]
    >>> relative_ratings(rows, "q", ["u"])
    {'u': (3.3333333333333335, 4.0, 1.6666666666666667)}
    >>> relative_ratings(rows, "q", ["u"], avg_scope="all")
    {'u': (3.75, 4.0, 1.25)}
    """
    index = _Index(reviews)
    out: dict[str, tuple[float, float, float]] = {}
    for user_id in user_ids:
        query = index.query_review(parent_asin, user_id)
        if query is None:
            raise ValueError(f"user {user_id!r} did not review {parent_asin!r}")
        cand = _candidate(index, query, avg_scope)
        out[user_id] = (float(cand.avg), float(cand.most_common), float(cand.rel))
    return out


# --------------------------------------------------------------------------------------------- search


def _exhaustive(cands: list[_Candidate], opts: _Options) -> Iterator[tuple[_Candidate, ...]]:
    """Every valid group, each exactly once: its earliest member (in candidate order) starts the window."""
    for start, first in enumerate(cands):
        in_window = [c for c in cands[start + 1 :] if c.timestamp - first.timestamp <= opts.window_ms]
        for rest in combinations(in_window, opts.group_size - 1):
            group = (first, *rest)
            if _gaps_ok(group, opts.min_gap):
                yield group


def _spacing(cands: list[_Candidate], opts: _Options) -> tuple[_Candidate, ...] | None:
    """One valid group if any exists, in polynomial time.

    Every valid group lies inside some window starting at a candidate's timestamp. Inside a window, a set with
    all pairwise gaps > λ exists with k members iff the greedy scan over ascending relative ratings (take the
    lowest, then each next one more than λ above the last taken) takes at least k: greedy keeps the smallest
    possible last value at every count, the classic interval-scheduling exchange argument.
    """
    for first in cands:
        in_window = [c for c in cands if 0 <= c.timestamp - first.timestamp <= opts.window_ms]
        taken: list[_Candidate] = []
        for cand in sorted(in_window, key=lambda c: (c.rel, c.user_id)):
            if not taken or cand.rel - taken[-1].rel > opts.min_gap:
                taken.append(cand)
        if len(taken) >= opts.group_size:
            return tuple(taken[: opts.group_size])
    return None


def _window_groups(cands: list[_Candidate], opts: _Options) -> list[tuple[_Candidate, ...]]:
    """Every valid group among the candidates of the earliest window that holds one (empty when none).

    Windows start at the candidates' timestamps, in increasing order; the first one that holds a valid group
    is chosen, whether or not its first candidate belongs to one.
    """
    for start in sorted({c.timestamp for c in cands}):
        inside = [c for c in cands if start <= c.timestamp <= start + opts.window_ms]
        groups = [g for g in combinations(inside, opts.group_size) if _gaps_ok(g, opts.min_gap)]
        if groups:
            return groups
    return []


def window_groups(
    reviews: Iterable[dict],
    parent_asin: str,
    *,
    window_days: float = 30,
    min_gap: float = 0.6,
    min_history: int = 20,
    group_size: int = 5,
    avg_scope: AvgScope = "history",
    exclude: Collection[str] = (),
) -> list[tuple[str, ...]]:
    """The groups the builder chooses among for one item, each with equal probability (module docstring).

    Enumerates every ``group_size``-subset of the active reviewers inside the chosen window
    (:func:`itertools.combinations`): tiny inputs only. Each group is user_ids in candidate order.
    ``exclude``: users left out of the search (the large preset's earlier draws of the item and level); an
    empty list means no valid group remains among the others.
    """
    opts = _Options.make(window_days, min_history, min_gap, group_size, avg_scope)
    cands = [c for c in _item_candidates(_Index(reviews), parent_asin, opts) if c.user_id not in exclude]
    return [tuple(c.user_id for c in group) for group in _window_groups(cands, opts)]


def valid_groups(
    reviews: Iterable[dict],
    parent_asin: str,
    *,
    window_days: float = 30,
    min_history: int = 20,
    min_gap: float = 0.6,
    group_size: int = 5,
    avg_scope: AvgScope = "history",
) -> list[tuple[str, ...]]:
    """All valid groups for one item by exhaustive search (each as user_ids in candidate order).

    Exponential in the number of active reviewers within a window: tiny inputs only.
    """
    opts = _Options.make(window_days, min_history, min_gap, group_size, avg_scope)
    cands = _item_candidates(_Index(reviews), parent_asin, opts)
    return [tuple(c.user_id for c in group) for group in _exhaustive(cands, opts)]


def find_group(
    reviews: Iterable[dict],
    parent_asin: str,
    *,
    window_days: float = 30,
    min_history: int = 20,
    min_gap: float = 0.6,
    group_size: int = 5,
    avg_scope: AvgScope = "history",
    search: Search = "exhaustive",
) -> tuple[str, ...] | None:
    """One valid group for the item (user_ids), or ``None`` when none exists.

    ``search="exhaustive"`` returns the first group of :func:`valid_groups`; ``"spacing"`` the greedy one of
    ``_spacing`` (lowest relative ratings first in the earliest window that has a group).
    """
    opts = _Options.make(window_days, min_history, min_gap, group_size, avg_scope)
    cands = _item_candidates(_Index(reviews), parent_asin, opts)
    if search == "exhaustive":
        group = next(_exhaustive(cands, opts), None)
    elif search == "spacing":
        group = _spacing(cands, opts)
    else:
        raise ValueError(f"search must be 'exhaustive' or 'spacing', got {search!r}")
    return None if group is None else tuple(c.user_id for c in group)


def items_with_valid_group(
    reviews: Iterable[dict],
    *,
    window_days: float = 30,
    min_history: int = 20,
    min_gap: float = 0.6,
    group_size: int = 5,
    avg_scope: AvgScope = "history",
    search: Search = "exhaustive",
    query_items: Collection[str] | None = None,
) -> set[str]:
    """The parent_asins for which at least one valid group exists.

    Args:
        reviews: the normalized reviews of one domain (duplicates allowed; they are deduplicated).
        window_days, min_history, min_gap, group_size, avg_scope: the selection parameters (module docstring).
        search: ``"exhaustive"`` tries every subset of active reviewers in every window (the oracle);
            ``"spacing"`` decides the same question in polynomial time (see ``_spacing``); the tests check
            that both agree.
        query_items: restrict the query items to these (e.g. items that have metadata); histories still use
            every review.

    Returns:
        The set of query items with a valid group.

    >>> items_with_valid_group([], group_size=2)
    set()
    """
    opts = _Options.make(window_days, min_history, min_gap, group_size, avg_scope)
    if search not in ("exhaustive", "spacing"):
        raise ValueError(f"search must be 'exhaustive' or 'spacing', got {search!r}")
    index = _Index(reviews)
    items = index.by_item.keys() if query_items is None else set(query_items) & index.by_item.keys()
    found: set[str] = set()
    for item in sorted(items):
        cands = _item_candidates(index, item, opts)
        if len(cands) < opts.group_size:
            continue
        if search == "exhaustive":
            hit = next(_exhaustive(cands, opts), None) is not None
        else:
            hit = _spacing(cands, opts) is not None
        if hit:
            found.add(item)
    return found
