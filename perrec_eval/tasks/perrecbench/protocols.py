"""PerRecBench's three request protocols (ranking methods) as objects.

Each protocol holds everything that differs between pointwise, pairwise and listwise: its ranker (which
requests, and the ranking from their answers), the answer a demonstration or training example shows, how
that answer is written, how a reply is read back, how several samples combine, the structured-output
format and its regular expression / JSON schema, and the default answer budget. Everything else of the
family asks `PROTOCOLS[name]` instead of comparing method names.
"""

from __future__ import annotations

import itertools
import json
import math
import numbers
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from perrec_eval.tasks.perrecbench import parsing
from perrec_eval.tasks.perrecbench.parsing import ParseResult, PointwiseAggregate, Value
from perrec_eval.tasks.perrecbench.rankers import (
    AllPairsRanker,
    HeapsortRanker,
    ListSlot,
    ListwiseRanker,
    PairSlot,
    PairwiseStrategy,
    PointwiseRanker,
    Ranker,
    Slot,
    UserSlot,
)

MAX_LISTWISE_USERS = 5  # structured outputs list every order of the users: 5! = 120 alternatives
_RATING = r"([1-4](\.[0-9])?|5(\.0)?)"  # 1..5, one decimal allowed


@dataclass(frozen=True, slots=True)
class RankingProtocol:
    """What one ranking method asks and how it reads the answers (subclasses fill the methods)."""

    name: ClassVar[str]
    max_tokens: ClassVar[int]  # the released code's answer budget
    users_per_prompt: ClassVar[str]  # how many users a prompt shows, in words
    answer_key: ClassVar[str | None]  # the JSON key of the answer, if any

    def accepts(self, count: int) -> bool:
        """Whether a prompt may show `count` users."""
        raise NotImplementedError

    def prompt_fields(self, blocks: Sequence[str]) -> dict[str, str]:
        """The user template's placeholders for the users' rendered blocks, in the order shown."""
        raise NotImplementedError

    def ranker(
        self,
        avg_ratings: Sequence[float],
        *,
        pairwise_strategy: PairwiseStrategy = "allpairs",
        listwise_order: Sequence[int] | None = None,
    ) -> Ranker:
        """The lockstep state machine that ranks one group."""
        raise NotImplementedError

    def demonstration(
        self, relative_ratings: Sequence[float], ratings: Sequence[float]
    ) -> tuple[Slot, Value]:
        """What a few-shot demonstration shows of a held-out group, and its true answer."""
        raise NotImplementedError

    def true_answer(self, relative_ratings: Sequence[float], ratings: Sequence[float], slot: Slot) -> Value:
        """The true answer to `slot` of a group (the users it shows, in its order): SFT targets, oracles."""
        shown = slot.users
        return self.demonstration([relative_ratings[i] for i in shown], [ratings[i] for i in shown])[1]

    def format_answer(self, answer: Any, n_users: int | None = None) -> str:
        """The answer written exactly as the prompt asks the model to write it."""
        raise NotImplementedError

    def parse(self, text: str | None, n_users: int | None = None) -> ParseResult:
        """Read one reply (reasoning blocks and fences removed first)."""
        cleaned, failure = parsing.clean(text)
        return failure if failure is not None else self._parse(cleaned, n_users)

    def _parse(self, cleaned: str, n_users: int | None) -> ParseResult:
        raise NotImplementedError

    def combine(self, values: Sequence[Value], how: PointwiseAggregate = "mean") -> Value:
        """One answer from several samples' parsed values: the most frequent (ties: the first seen)."""
        keys = [tuple(v) if isinstance(v, list | tuple) else v for v in values]
        winner = parsing.first_most_common(keys)
        return list(winner) if isinstance(winner, tuple) else winner

    def answer_format(self, n_users: int, *, cot: bool = False) -> str:
        """The structured-output spec of an answer about `n_users` users (part of every cache key)."""
        return self.name + ("+cot" if cot else "")

    def answer_regex(self, n_users: int | None) -> str:
        """The regular expression the bare answer (no reasoning before it) must match in full."""
        raise NotImplementedError

    def json_schema(self, n_users: int | None) -> dict[str, Any] | None:
        """A JSON schema of the answer for servers that only take ``response_format``; None if none fits."""
        return None

    def _schema(self, value: dict[str, Any]) -> dict[str, Any]:
        key = self.answer_key
        return {
            "type": "object",
            "properties": {key: value},
            "required": [key],
            "additionalProperties": False,
        }


@dataclass(frozen=True, slots=True)
class Pointwise(RankingProtocol):
    """One user per request, answered with a predicted rating; ranked by predicted − the user's average.

    >>> p = Pointwise()
    >>> p.format_answer(4), p.parse('Sure! {"predicted_rating": 4}').value, p.combine([4.0, 5.0])
    ('{"predicted_rating": 4.0}', 4.0, 4.5)
    """

    name: ClassVar[str] = "pointwise"
    max_tokens: ClassVar[int] = 800
    users_per_prompt: ClassVar[str] = "exactly 1"
    answer_key: ClassVar[str | None] = "predicted_rating"

    def accepts(self, count: int) -> bool:
        return count == 1

    def prompt_fields(self, blocks: Sequence[str]) -> dict[str, str]:
        return {"user_data": blocks[0]}

    def ranker(self, avg_ratings, *, pairwise_strategy="allpairs", listwise_order=None) -> Ranker:
        return PointwiseRanker(avg_ratings)

    def demonstration(self, relative_ratings, ratings):
        return UserSlot(0), ratings[0]

    def format_answer(self, answer: Any, n_users: int | None = None) -> str:
        finite = isinstance(answer, numbers.Real) and math.isfinite(float(answer))
        if isinstance(answer, bool) or not finite:
            raise ValueError(f"a pointwise answer must be a finite number, got {answer!r}")
        rating = float(answer)
        if not 1 <= rating <= 5:
            raise ValueError(f"a pointwise answer must be a rating in [1, 5], got {answer!r}")
        return '{"predicted_rating": ' + str(rating) + "}"

    def _parse(self, cleaned: str, n_users: int | None) -> ParseResult:
        return parsing.parse_rating(cleaned)

    def combine(self, values: Sequence[Value], how: PointwiseAggregate = "mean") -> Value:
        ratings = [float(v) for v in values]  # type: ignore[arg-type]
        if how == "mean":
            return statistics.fmean(ratings)
        if how == "median":
            return float(statistics.median(ratings))
        return parsing.first_most_common(ratings)

    def answer_regex(self, n_users: int | None) -> str:
        return r'\{"predicted_rating": ' + _RATING + r"\}"

    def json_schema(self, n_users: int | None) -> dict[str, Any] | None:
        return self._schema({"type": "number", "minimum": 1, "maximum": 5})


@dataclass(frozen=True, slots=True)
class Pairwise(RankingProtocol):
    """Two users per request (A then B), answered with the one who liked the item more.

    >>> p = Pairwise()
    >>> p.format_answer("B"), p.parse("**[User B]**").value, p.combine(["B", "A", "B"])
    ('[User B]', 'B', 'B')
    """

    name: ClassVar[str] = "pairwise"
    max_tokens: ClassVar[int] = 512
    users_per_prompt: ClassVar[str] = "exactly 2 (A then B)"
    answer_key: ClassVar[str | None] = None

    def accepts(self, count: int) -> bool:
        return count == 2

    def prompt_fields(self, blocks: Sequence[str]) -> dict[str, str]:
        return {"user_a": blocks[0], "user_b": blocks[1]}

    def ranker(self, avg_ratings, *, pairwise_strategy="allpairs", listwise_order=None) -> Ranker:
        if pairwise_strategy == "allpairs":
            return AllPairsRanker(len(avg_ratings))
        if pairwise_strategy == "heapsort":
            return HeapsortRanker(len(avg_ratings))
        raise ValueError(f"unknown pairwise strategy {pairwise_strategy!r}: use 'allpairs' or 'heapsort'")

    def demonstration(self, relative_ratings, ratings):
        return PairSlot(0, 1), "A" if relative_ratings[0] > relative_ratings[1] else "B"

    def format_answer(self, answer: Any, n_users: int | None = None) -> str:
        if answer not in ("A", "B"):
            raise ValueError(f"a pairwise answer must be 'A' or 'B', got {answer!r}")
        return f"[User {answer}]"

    def _parse(self, cleaned: str, n_users: int | None) -> ParseResult:
        return parsing.parse_label(cleaned)

    def answer_regex(self, n_users: int | None) -> str:
        return r"\[User [AB]\]"


@dataclass(frozen=True, slots=True)
class Listwise(RankingProtocol):
    """The whole group in one request, answered with the best-first order of its users.

    >>> p = Listwise()
    >>> p.format_answer([2, 1, 3]), p.parse('{"predicted_ranking": [2, 1, 3]}', 3).value
    ('{"predicted_ranking": [2, 1, 3]}', [2, 1, 3])
    >>> p.answer_format(3, cot=True), p.combine([[2, 1], [1, 2]])
    ('listwise:3+cot', [2, 1])
    """

    name: ClassVar[str] = "listwise"
    max_tokens: ClassVar[int] = 800
    users_per_prompt: ClassVar[str] = "2 or more"
    answer_key: ClassVar[str | None] = "predicted_ranking"

    def accepts(self, count: int) -> bool:
        return count >= 2

    def prompt_fields(self, blocks: Sequence[str]) -> dict[str, str]:
        return {"users": "".join(blocks)}

    def ranker(self, avg_ratings, *, pairwise_strategy="allpairs", listwise_order=None) -> Ranker:
        return ListwiseRanker(len(avg_ratings), listwise_order)

    def demonstration(self, relative_ratings, ratings):
        order = sorted(range(len(relative_ratings)), key=lambda i: -relative_ratings[i])
        return ListSlot(len(relative_ratings)), [i + 1 for i in order]

    def format_answer(self, answer: Any, n_users: int | None = None) -> str:
        if isinstance(answer, str | bytes) or not isinstance(answer, Sequence):
            raise ValueError(f"a listwise answer must be a list of 1-based user indices, got {answer!r}")
        ranking = list(answer)
        size = len(ranking) if n_users is None else n_users
        integers = all(isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in ranking)
        if not integers or sorted(ranking) != list(range(1, size + 1)):
            raise ValueError(
                f"a listwise answer must be a permutation of 1..{size} (best first), got {answer!r}"
            )
        return json.dumps({"predicted_ranking": [int(i) for i in ranking]})

    def parse(self, text: str | None, n_users: int | None = None) -> ParseResult:
        if isinstance(n_users, bool) or not isinstance(n_users, int) or n_users < 1:
            raise ValueError(
                f"parse('listwise', ...) needs n_users, the group size (a positive int); got {n_users!r}"
            )
        return RankingProtocol.parse(self, text, n_users)

    def _parse(self, cleaned: str, n_users: int | None) -> ParseResult:
        assert n_users is not None
        return parsing.parse_ranking(cleaned, n_users)

    def answer_format(self, n_users: int, *, cot: bool = False) -> str:
        return f"{self.name}:{n_users}" + ("+cot" if cot else "")

    def answer_regex(self, n_users: int | None) -> str:
        assert n_users is not None
        orders = [", ".join(map(str, order)) for order in itertools.permutations(range(1, n_users + 1))]
        return r'\{"predicted_ranking": \[(' + "|".join(orders) + r")\]\}"

    def json_schema(self, n_users: int | None) -> dict[str, Any] | None:
        item = {"type": "integer", "minimum": 1, "maximum": n_users}
        return self._schema({"type": "array", "items": item, "minItems": n_users, "maxItems": n_users})


PROTOCOLS: dict[str, RankingProtocol] = {p.name: p for p in (Pointwise(), Pairwise(), Listwise())}


def get(method: str) -> RankingProtocol:
    """The protocol of `method`.

    Raises:
        ValueError: an unknown method; the message lists the known ones.
    """
    try:
        return PROTOCOLS[method]
    except (KeyError, TypeError):
        raise ValueError(f"unknown method {method!r}; choose one of {list(PROTOCOLS)}") from None


def parse(method: str, text: str | None, n_users: int | None = None) -> ParseResult:
    """Read one model reply for `method` (`n_users`, the group size, is needed for listwise).

    >>> parse("pointwise", 'Sure! {"predicted_rating": 4}').value
    4.0
    >>> parse("pairwise", "**[User B]**").value
    'B'
    >>> parse("listwise", '```json\\n{"predicted_ranking": [2, 1, 3]}\\n```', n_users=3).value
    [2, 1, 3]
    >>> parse("listwise", '{"predicted_ranking": [1, 1, 3]}', n_users=3).reason
    'not_permutation'
    """
    return get(method).parse(text, n_users)


def majority(method: str, values: Sequence[Value], *, how: PointwiseAggregate = "mean") -> Value:
    """Combine the parsed values of one request's samples (self-consistency) into one answer.

    Pointwise: the `mean` (default), `median` or `mode` of the ratings; pairwise and listwise: the most
    frequent answer, a tie going to the one seen first (`how` is ignored).

    >>> majority("pairwise", ["B", "A", "B"]), majority("pointwise", [4.0, 5.0])
    ('B', 4.5)
    """
    protocol = get(method)
    if how not in ("mean", "median", "mode"):
        raise ValueError(f"the pointwise aggregate must be mean, median or mode, got {how!r}")
    if not values:
        raise ValueError(
            "majority needs at least one parsed value; a request whose samples all failed has none"
        )
    if isinstance(values[0], ParseResult):
        raise TypeError("majority takes parsed values (result.value of the ok results), not ParseResults")
    return protocol.combine(values, how)


def split_format(spec: str) -> tuple[RankingProtocol, int | None, bool]:
    """The protocol, group size and CoT flag of an answer-format spec (``pointwise``, ``listwise:3+cot``).

    >>> protocol, n_users, cot = split_format("listwise:3+cot")
    >>> protocol.name, n_users, cot
    ('listwise', 3, True)
    """
    body, _, suffix = spec.partition("+")
    if suffix not in ("", "cot"):
        raise ValueError(f"unknown answer-format suffix {suffix!r} in {spec!r}; the only one is +cot")
    name, _, size = body.partition(":")
    if name not in PROTOCOLS or (PROTOCOLS[name].answer_format(2) != name) != bool(size):
        raise ValueError(f"answer format {spec!r} is not pointwise, pairwise or listwise:N")
    n_users = int(size) if size else None
    if n_users is not None and not 1 <= n_users <= MAX_LISTWISE_USERS:
        raise ValueError(f"listwise structured outputs list every order: at most {MAX_LISTWISE_USERS} users")
    return PROTOCOLS[name], n_users, suffix == "cot"
