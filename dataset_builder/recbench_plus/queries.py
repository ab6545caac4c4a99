"""Condition queries of RecBench+ from the item knowledge graph (paper §2.2, eq. 6).

For a user, the relation values held by at least ``min_subset`` items of their history (and by at most
``max_subset``) give one-condition queries; pairs of values of two different relations whose shared subset
is still large enough give two-condition queries (a pair is skipped when one value's catalogue items all
hold the other: the second condition would add nothing). The subset is the ground truth, and the history
shown is the rest of the user's history, in time order (less any item titled like a ground-truth item).

Phrasing is a deterministic template (:data:`EXPLICIT_PHRASES`, :data:`IMPLICIT_PHRASES`): an implicit query
names each value through another catalogue item that holds it (outside the user's history, whose title does
not contain any hidden value; one with a single value of that relation first, then the most popular); a
query whose values cannot all be referenced so is not written, and counted.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from dataset_builder.recbench_plus.kg import Fact, Graph, value_key
from perrec_eval.tasks.recbench_plus.parsing import normalize_title

TEMPLATE_ID = "template-v1"
EXPLICIT_PHRASES = {
    "author": "written by {value}",
    "store": "sold by {value}",
    "categories": "in the category {value}",
    "details": "whose {key} is {value}",
}
IMPLICIT_PHRASES = {
    "author": 'by the author of "{title}"',
    "store": 'sold by the store that sells "{title}"',
    "categories": 'in the same category as "{title}"',
    "details": 'with the same {key} as "{title}"',
}
QUERY = "Can you recommend some {noun} {conditions}?"
NOUNS = {"Books": "books", "Kindle_Store": "books", "Movies_and_TV": "movies", "CDs_and_Vinyl": "albums"}


@dataclass(frozen=True, slots=True)
class Item:
    """A catalogue item: its title and popularity (reviews in the source)."""

    parent_asin: str
    title: str
    popularity: int

    def to_json(self) -> dict[str, str]:
        return {"parent_asin": self.parent_asin, "title": self.title}


@dataclass(frozen=True, slots=True)
class Candidate:
    """Conditions shared by a subset of one user's history."""

    conditions: tuple[Fact, ...]
    subset: tuple[str, ...]  # parent_asin, in history order


def candidates(history: Sequence[str], graph: Graph, *, min_subset: int, max_subset: int) -> list[Candidate]:
    """Every one- and two-condition candidate of a history (deterministic order).

    >>> from dataset_builder.recbench_plus.kg import build_graph
    >>> ann, p = Fact("author", "Ann"), Fact("store", "P")
    >>> g = build_graph({"a": [ann, p], "b": [ann, p], "c": [ann], "d": [p]}, min_items=2, max_share=1)
    >>> [(len(c.conditions), c.subset) for c in candidates(["a", "b", "c"], g, min_subset=2, max_subset=5)]
    [(1, ('a', 'b', 'c')), (1, ('a', 'b')), (2, ('a', 'b'))]
    """
    by_value: dict[tuple[str, str], list[str]] = {}
    facts: dict[tuple[str, str], Fact] = {}
    for asin in dict.fromkeys(history):
        for fact in graph.facts.get(asin, ()):
            by_value.setdefault(fact.key, []).append(asin)
            facts.setdefault(fact.key, fact)
    shared = sorted(key for key, items in by_value.items() if len(items) >= min_subset)
    found = [Candidate((facts[k],), tuple(by_value[k])) for k in shared if len(by_value[k]) <= max_subset]
    for a, b in combinations(shared, 2):
        if a[0] == b[0] or graph.holders[a] <= graph.holders[b] or graph.holders[b] <= graph.holders[a]:
            continue
        subset = tuple(asin for asin in by_value[a] if asin in set(by_value[b]))
        if min_subset <= len(subset) <= max_subset:
            found.append(Candidate((facts[a], facts[b]), subset))
    return found


def choose(found: Sequence[Candidate], per_user: int, rng: random.Random) -> list[Candidate]:
    """Up to `per_user` candidates, alternating one- and two-condition ones, drawn with `rng`."""
    pools = [[c for c in found if len(c.conditions) == n] for n in (1, 2)]
    for pool in pools:
        rng.shuffle(pool)
    chosen: list[Candidate] = []
    while len(chosen) < per_user and any(pools):
        for pool in pools:
            if pool and len(chosen) < per_user:
                chosen.append(pool.pop())
    return chosen


def _phrase(templates: Mapping[str, str], fact: Fact, **values: str) -> str:
    relation, _, key = fact.relation.partition(".")
    return templates[relation].format(key=key.lower(), value=fact.value, **values)


def _join(parts: Sequence[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def explicit_text(conditions: Sequence[Fact], domain: str) -> str:
    """The explicit query of `conditions`.

    >>> explicit_text([Fact("author", "Ann Lee"), Fact("details.Language", "French")], "Books")
    'Can you recommend some books written by Ann Lee and whose language is French?'
    """
    parts = [_phrase(EXPLICIT_PHRASES, fact) for fact in conditions]
    return QUERY.format(noun=NOUNS.get(domain, "items"), conditions=_join(parts))


def implicit_text(conditions: Sequence[Fact], references: Sequence[Item], domain: str) -> str:
    """The implicit query: each value named through a reference item that holds it.

    >>> implicit_text([Fact("author", "Ann Lee")], [Item("x", "Dragons", 9)], "Books")
    'Can you recommend some books by the author of "Dragons"?'
    """
    parts = [_phrase(IMPLICIT_PHRASES, f, title=r.title) for f, r in zip(conditions, references, strict=True)]
    return QUERY.format(noun=NOUNS.get(domain, "items"), conditions=_join(parts))


def leaks(text: str, conditions: Sequence[Fact]) -> bool:
    """Whether any condition's value appears in `text` (case-folded, as a substring).

    >>> leaks('books by the author of "Ann Lee: A Life"', [Fact("author", "ann lee")])
    True
    """
    folded = value_key(text)
    return any(value_key(fact.value) in folded for fact in conditions)


def references(
    conditions: Sequence[Fact], graph: Graph, items: Mapping[str, Item], exclude: set[str]
) -> list[Item] | None:
    """One reference item per condition outside `exclude`, whose title names no hidden value and that is not
    already a reference; None when some condition has none. Preferred: an item with one value of the
    relation ("the author of X" is ambiguous when X has two authors), then the most popular, then by asin."""
    chosen: list[Item] = []
    for fact in conditions:

        def ambiguous(asin: str, relation: str = fact.relation) -> bool:
            return sum(f.relation == relation for f in graph.facts.get(asin, ())) > 1

        pool = sorted(
            (items[a] for a in graph.holders[fact.key] if a not in exclude and a in items),
            key=lambda item: (ambiguous(item.parent_asin), -item.popularity, item.parent_asin),
        )
        taken = {item.parent_asin for item in chosen}
        found = next((i for i in pool if i.parent_asin not in taken and not leaks(i.title, conditions)), None)
        if found is None:
            return None
        chosen.append(found)
    return chosen


def rows_of_user(
    user_id: str,
    history: Sequence[str],
    chosen: Sequence[Candidate],
    graph: Graph,
    items: Mapping[str, Item],
    domain: str,
    counts: dict[str, int],
) -> dict[str, list[dict[str, Any]]]:
    """The explicit and implicit rows of one user's chosen candidates (`counts` records implicit skips)."""
    rows: dict[str, list[dict[str, Any]]] = {"explicit": [], "implicit": []}
    for n, candidate in enumerate(chosen):
        subset = set(candidate.subset)
        # an item titled like a ground-truth item is not shown either: an answer cannot tell them apart
        truth_titles = {normalize_title(items[a].title) for a in subset}
        base = {
            "id": f"{domain}-{user_id}-{n}",
            "user_id": user_id,
            "domain": domain,
            "conditions": [fact.to_json() for fact in candidate.conditions],
            "ground_truth": [items[a].to_json() for a in candidate.subset],
            "history": [
                items[a].to_json()
                for a in dict.fromkeys(history)
                if a not in subset and normalize_title(items[a].title) not in truth_titles
            ],
        }
        rows["explicit"].append({**base, "query": explicit_text(candidate.conditions, domain)})
        refs = references(candidate.conditions, graph, items, set(history))
        text = None if refs is None else implicit_text(candidate.conditions, refs, domain)
        if refs is None or leaks(text, candidate.conditions):
            counts["implicit_skipped"] = counts.get("implicit_skipped", 0) + 1
            continue
        rows["implicit"].append(
            {
                **base,
                "query": text,
                "references": [
                    {**ref.to_json(), "relation": fact.relation}
                    for fact, ref in zip(candidate.conditions, refs, strict=True)
                ],
            }
        )
    return rows
