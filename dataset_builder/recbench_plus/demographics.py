"""RecBench+'s demographics queries (paper §2.3.2), from a source with user attributes (MovieLens-1M).

1. **Groups**: users grouped by every combination of their attributes (:data:`GROUP_TYPES`: age band,
   gender, occupation, the three pairs and the triple, as the release's 59 groups are); per combination the
   ``per_type`` largest groups of at least ``min_size`` users who rated something (ties by their words).
2. **Distinctive items** (the paper's TF-IDF, whose exact formula is not published; the release's summaries
   fit it): ``score(i, G) = share(i, G) * ln(N / n_i)``, the share of the group's users who rated ``i``
   times the log of all users (``N``) over the users who rated ``i`` (``n_i``). Items rated by fewer than
   ``min_raters`` of the group's users are left out (one rating in a small group is noise); the ``top``
   highest scores (ties: more raters, then by id) are the group's distinctive items.
3. **Subsets and queries**: one query names the group only, its ground truth the ``general`` best three;
   each kept relation value (a genre, a year, an ``--item-attributes`` value) held by 2 to
   :data:`MAX_SUBSET` of the distinctive items gives a query naming the group and that value, its ground
   truth those items. Subsets are kept largest first (then by their summed score), each distinct subset
   once, up to ``queries`` per group. Ground truth = the subset, as the release's ``movie subset``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dataset_builder.recbench_plus.kg import Fact

GROUP_TYPES: tuple[tuple[str, ...], ...] = (
    ("age",), ("gender",), ("occupation",), ("age", "gender"), ("age", "occupation"),
    ("gender", "occupation"), ("age", "gender", "occupation"),
)  # fmt: skip
ATTRIBUTES = ("age", "gender", "occupation")
MAX_SUBSET = 4  # the release's subsets hold 2 to 4 items (3 mostly)
GENERAL = 3  # the group-only query's ground truth: the group's three most distinctive items
TEMPLATE = "I'm {who}. Can you recommend some {noun}{conditions} that people like me would enjoy?"


@dataclass(frozen=True, slots=True)
class Group:
    """A user group: its attributes as ``(name, words)`` pairs, in :data:`ATTRIBUTES` order."""

    attributes: tuple[tuple[str, str], ...]

    @property
    def type(self) -> str:
        """``age``, ``age_gender``, ... (the release's ``group_type``)."""
        return "_".join(name for name, _ in self.attributes)

    @property
    def key(self) -> str:
        """``age=25-34|gender=Female``: the group's id (and its queries' cluster)."""
        return "|".join(f"{name}={words}" for name, words in self.attributes)

    def mapping(self) -> dict[str, str | None]:
        """Every attribute, None where the group does not fix it (one parquet struct for every group)."""
        return {name: dict(self.attributes).get(name) for name in ATTRIBUTES}


@dataclass(frozen=True, slots=True)
class Distinctive:
    """One of a group's distinctive items: its score, the group's raters and their share of the group."""

    item: str
    score: float
    raters: int
    share: float


def groups(
    users: Mapping[str, Mapping[str, str]], *, per_type: int, min_size: int
) -> list[tuple[Group, list[str]]]:
    """The groups of every :data:`GROUP_TYPES` combination with their members (user ids, sorted).

    >>> users = {"1": {"age": "18-24", "gender": "Male", "occupation": "writer"},
    ...          "2": {"age": "18-24", "gender": "Female", "occupation": "writer"}}
    >>> [g.key for g, members in groups(users, per_type=1, min_size=2)]
    ['age=18-24', 'occupation=writer', 'age=18-24|occupation=writer']
    """
    out = []
    for names in GROUP_TYPES:
        members: dict[tuple[tuple[str, str], ...], list[str]] = {}
        for user in sorted(users):
            members.setdefault(tuple((n, users[user][n]) for n in names), []).append(user)
        ranked = sorted(members.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        out += [(Group(attrs), m) for attrs, m in ranked if len(m) >= min_size][:per_type]
    return out


def distinctive(
    members: Sequence[str],
    histories: Mapping[str, Sequence[str]],
    raters: Mapping[str, int],
    n_users: int,
    *,
    top: int,
    min_raters: int,
) -> list[Distinctive]:
    """The group's `top` items by ``share * ln(n_users / raters[item])`` (module docstring).

    Args:
        members: the group's users.
        histories: each user's rated items.
        raters: each item's number of raters among all `n_users` users.

    >>> histories = {"a": ["x", "y"], "b": ["x"], "c": ["y"], "d": ["z"]}
    >>> [(d.item, round(d.score, 3)) for d in distinctive(["a", "b"], histories, {"x": 2, "y": 2, "z": 1}, 4,
    ...                                                      top=2, min_raters=1)]
    [('x', 0.693), ('y', 0.347)]
    """
    counts = Counter(item for user in members for item in dict.fromkeys(histories.get(user, ())))
    found = [
        Distinctive(item, n / len(members) * math.log(n_users / raters[item]), n, n / len(members))
        for item, n in counts.items()
        if n >= min_raters
    ]
    return sorted(found, key=lambda d: (-d.score, -d.raters, d.item))[:top]


def subsets(
    best: Sequence[Distinctive], facts: Callable[[str], Sequence[Fact]], *, queries: int
) -> list[tuple[tuple[Fact, ...], tuple[str, ...]]]:
    """The (named values, ground truth) of a group's queries: the group alone with its :data:`GENERAL` best
    items, then each kept value shared by 2 to :data:`MAX_SUBSET` of `best` (module docstring); `facts`
    gives an item's kept values."""
    order = {d.item: i for i, d in enumerate(best)}
    score = {d.item: d.score for d in best}
    found: list[tuple[tuple[Fact, ...], tuple[str, ...]]] = [((), tuple(d.item for d in best[:GENERAL]))]
    by_value: dict[Fact, list[str]] = {}
    for d in best:
        for fact in facts(d.item):
            by_value.setdefault(fact, []).append(d.item)
    shared = [(fact, tuple(items)) for fact, items in by_value.items() if 2 <= len(items) <= MAX_SUBSET]
    shared.sort(key=lambda fs: (-len(fs[1]), -sum(score[i] for i in fs[1]), fs[0]))
    seen = {found[0][1]}
    for fact, items in shared:
        subset = tuple(sorted(items, key=order.__getitem__))
        if subset not in seen:
            seen.add(subset)
            found.append(((fact,), subset))
    return found[:queries]


def who(group: Group) -> str:
    """The group in the user's words.

    >>> who(Group((("age", "25-34"), ("gender", "Female"), ("occupation", "artist"))))
    'a female artist aged 25-34'
    >>> who(Group((("age", "Under 18"),))), who(Group((("gender", "Male"), ("occupation", "other"))))
    ('someone under 18', 'a man whose occupation is listed as other')
    """
    attrs = dict(group.attributes)
    gender = {"Male": ("a man", "male"), "Female": ("a woman", "female")}.get(attrs.get("gender", ""))
    occupation = attrs.get("occupation")
    if occupation is None or occupation == "other":
        text = gender[0] if gender else "someone"
        if occupation == "other":
            text += " whose occupation is listed as other"
    else:
        words = f"{gender[1]} {occupation}" if gender else occupation
        text = ("an " if words[0].lower() in "aeiou" else "a ") + words
    age = attrs.get("age")
    if age is not None:
        text += " under 18" if age == "Under 18" else " aged 56 or over" if age == "56+" else f" aged {age}"
    return text


def query_text(group: Group, named: Sequence[Fact], noun: str, phrase: Any) -> str:
    """A demographics query: the group, then the named values (`phrase(fact)`: the explicit wording).

    >>> query_text(Group((("occupation", "writer"),)), [], "movies", str)
    "I'm a writer. Can you recommend some movies that people like me would enjoy?"
    """
    conditions = "".join(" " + phrase(fact) for fact in named)
    return TEMPLATE.format(who=who(group), noun=noun, conditions=conditions)
