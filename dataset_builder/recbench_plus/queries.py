"""RecBench+'s queries from the item knowledge graph (paper §2.2, eq. 6).

For a user, the relation values held by at least ``min_subset`` items of their history (and by at most
``max_subset``) give one-condition candidates; values of different relations whose shared subset of the
history is still large enough give two-, three- and four-condition candidates (a value is not added when it
adds nothing in the catalogue: the items holding the others all hold it, or all its items hold one of them).
The subset is the ground truth, and the history shown is the rest of the user's history, in time order (less
any item titled like a ground-truth item). Each chosen candidate gives one row of every query type
(:data:`TYPES`), where that type can be written:

- ``explicit`` names every condition value;
- ``implicit`` names each value through another catalogue item that holds it and no other value of that
  relation (counting values dropped as too rare or too common: "the genre of X" must name one genre), outside
  the user's history and whose title contains no hidden value, the most popular first; a query whose values
  cannot all be referenced so is not written, and counted (``implicit_ambiguous``: a reference exists only
  among items with several values of the relation);
- ``misinformed`` is the explicit query with a false claim about one condition: a catalogue item outside
  the user's history that provably lacks the value (it has another value of that relation) is said to hold
  it (``false_claims``); the true conditions stay the ground truth's;
- ``interest`` names no condition: the user's earliest subset item (kept in the history shown) is the seed
  ("more like X"), and the ground truth is the rest of the subset, the items the query was written from.

Phrasing here is the deterministic template (:data:`EXPLICIT_PHRASES`, :data:`IMPLICIT_PHRASES`,
:data:`MISINFORMED`, :data:`INTEREST`); `dataset_builder.recbench_plus.phrasing` rewrites the texts through
an LLM.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dataset_builder.recbench_plus.kg import Fact, Graph, value_key
from perrec_eval.tasks.recbench_plus.metrics import condition_group
from perrec_eval.tasks.recbench_plus.parsing import normalize_title

TEMPLATE_ID = "template-v1"
# Per relation (its part before a "."); any other relation (`--item-attributes`) reads as "details" does.
EXPLICIT_PHRASES = {
    "author": "written by {value}",
    "store": "sold by {value}",
    "categories": "in the category {value}",
    "details": "whose {key} is {value}",
    "genre": "in the genre {value}",
    "year": "released in {value}",
    "director": "directed by {value}",
    "actor": "starring {value}",
    "composer": "with music by {value}",
}
IMPLICIT_PHRASES = {
    "author": 'by the author of "{title}"',
    "store": 'sold by the store that sells "{title}"',
    "categories": 'in the same category as "{title}"',
    "details": 'with the same {key} as "{title}"',
    "genre": 'of the same genre as "{title}"',
    "year": 'released the same year as "{title}"',
    "director": 'by the director of "{title}"',
    "actor": 'starring the actor of "{title}"',
    "composer": 'with music by the composer of "{title}"',
}
QUERY = "Can you recommend some {noun} {conditions}?"
MISINFORMED = 'I loved "{title}", {claim}. '
INTEREST = 'I recently enjoyed "{title}". Can you recommend more {noun} that I would like as much?'
TYPES = ("explicit", "implicit", "misinformed", "interest")
MAX_CONDITIONS = 4
FALSE_CLAIM_POOL = 20  # a false claim names one of the 20 most popular items that provably lack the value
NOUNS = {"Books": "books", "Kindle_Store": "books", "Movies_and_TV": "movies", "CDs_and_Vinyl": "albums",
         "MovieLens-1M": "movies"}  # fmt: skip


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


def candidates(
    history: Sequence[str],
    graph: Graph,
    *,
    min_subset: int,
    max_subset: int,
    max_conditions: int = MAX_CONDITIONS,
) -> list[Candidate]:
    """Every candidate of one to `max_conditions` conditions of a history (deterministic order).

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
    # grow each combination by a value of a later key and another relation (each combination once)
    level = [((k,), tuple(by_value[k]), graph.holders[k]) for k in shared]
    for _ in range(max_conditions - 1):
        grown = []
        for keys, subset, held in level:
            for key in shared[shared.index(keys[-1]) + 1 :]:
                if key[0] in {k[0] for k in keys} or held <= graph.holders[key]:
                    continue
                if any(graph.holders[key] <= graph.holders[k] for k in keys):
                    continue
                inside = set(by_value[key])
                narrowed = tuple(asin for asin in subset if asin in inside)
                if len(narrowed) < min_subset:
                    continue
                grown.append(((*keys, key), narrowed, held & graph.holders[key]))
                if len(narrowed) <= max_subset:
                    found.append(Candidate(tuple(facts[k] for k in (*keys, key)), narrowed))
        level = grown
    return found


def choose(found: Sequence[Candidate], per_user: int, rng: random.Random) -> list[Candidate]:
    """Up to `per_user` candidates, taking one-, two- and three-or-four-condition ones in turn (the most
    conditions first: they are the rarest), drawn with `rng`.

    >>> one = Candidate((Fact("author", "A"),), ("a", "b"))
    >>> two = Candidate((Fact("author", "A"), Fact("store", "S")), ("a", "b"))
    >>> [len(c.conditions) for c in choose([one, one, two], 2, random.Random(0))]
    [2, 1]
    """
    pools = [[c for c in found if condition_group(len(c.conditions)) == g] for g in ("3-4", "2", "1")]
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
    if relation not in templates:  # a relation of --item-attributes: "whose <relation> is <value>"
        relation, key = "details", relation
    return templates[relation].format(key=key.lower().replace("_", " "), value=fact.value, **values)


def condition_phrase(fact: Fact) -> str:
    """A condition in the explicit query's words.

    >>> condition_phrase(Fact("genre", "Film-Noir")), condition_phrase(Fact("cinematographer", "Ann Lee"))
    ('in the genre Film-Noir', 'whose cinematographer is Ann Lee')
    """
    return _phrase(EXPLICIT_PHRASES, fact)


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


@dataclass(slots=True)
class Catalogue:
    """What writing queries reads of one domain, computed once: the graph, the items, the asins most popular
    first (`ranked`), each title normalized, and each value's reference order (cached as asked)."""

    graph: Graph
    items: Mapping[str, Item]
    ranked: list[str] = field(init=False)
    normalized: dict[str, str] = field(init=False)
    _orders: dict[tuple[str, str, bool], list[str]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.ranked = sorted(self.items, key=lambda asin: (-self.items[asin].popularity, asin))
        self.normalized = {asin: normalize_title(item.title) for asin, item in self.items.items()}

    def reference_order(self, fact: Fact, *, unambiguous: bool = True) -> list[str]:
        """The items holding `fact`, most popular first (then by asin); with `unambiguous`, only those
        holding no other value of the relation (`Graph.single`: "the author of X" is ambiguous when X has
        two authors, even if one of them was dropped as too rare)."""
        key = (*fact.key, unambiguous)
        if key not in self._orders:
            holders = [a for a in self.graph.holders[fact.key] if a in self.items]
            if unambiguous:
                holders = [a for a in holders if self.graph.single(a, fact.relation)]
            self._orders[key] = sorted(holders, key=lambda a: (-self.items[a].popularity, a))
        return self._orders[key]


def references(
    conditions: Sequence[Fact], catalogue: Catalogue, exclude: set[str], *, unambiguous: bool = True
) -> list[Item] | None:
    """One reference item per condition outside `exclude`, whose title names no hidden value and that is not
    already a reference (the first in :meth:`Catalogue.reference_order`); None when some condition has
    none."""
    chosen: list[Item] = []
    for fact in conditions:
        skip = exclude | {item.parent_asin for item in chosen}
        order = catalogue.reference_order(fact, unambiguous=unambiguous)
        pool = (catalogue.items[a] for a in order if a not in skip)
        found = next((item for item in pool if not leaks(item.title, conditions)), None)
        if found is None:
            return None
        chosen.append(found)
    return chosen


def false_claim(
    conditions: Sequence[Fact], catalogue: Catalogue, exclude: set[str], salt: str
) -> tuple[Fact, Item] | None:
    """A false claim for a misinformed query: the first condition that some catalogue item outside `exclude`
    provably lacks (:meth:`Graph.lacks`), and one of the `FALSE_CLAIM_POOL` most popular such items (chosen
    by a hash of `salt`, so claims vary across queries); None when no condition has one. No item titled like
    an excluded one is named."""
    titles = {catalogue.normalized[a] for a in exclude if a in catalogue.items}
    for fact in conditions:
        pool: list[str] = []
        for asin in catalogue.ranked:
            if asin in exclude or not catalogue.graph.lacks(asin, fact):
                continue
            if catalogue.normalized[asin] not in titles:
                pool.append(asin)
                if len(pool) == FALSE_CLAIM_POOL:
                    break
        if pool:
            return fact, catalogue.items[pool[zlib.crc32(salt.encode()) % len(pool)]]
    return None


def misinformed_text(conditions: Sequence[Fact], claim: tuple[Fact, Item], domain: str) -> str:
    """The explicit query after a false claim about one of its values.

    >>> misinformed_text([Fact("author", "Ann Lee")], (Fact("author", "Ann Lee"), Item("z", "Storms", 4)),
    ...                  "Books")
    'I loved "Storms", written by Ann Lee. Can you recommend some books written by Ann Lee?'
    """
    fact, item = claim
    return MISINFORMED.format(title=item.title, claim=_phrase(EXPLICIT_PHRASES, fact)) + explicit_text(
        conditions, domain
    )


def interest_text(seed: Item, domain: str) -> str:
    """The interest query: more like the user's seed item, no condition named.

    >>> interest_text(Item("s", "Dragons", 3), "Books")
    'I recently enjoyed "Dragons". Can you recommend more books that I would like as much?'
    """
    return INTEREST.format(title=seed.title, noun=NOUNS.get(domain, "items"))


def _shown(history: Sequence[str], hidden: set[str], catalogue: Catalogue) -> list[dict[str, str]]:
    """The history shown: every item not hidden, less any titled like a hidden one (an answer cannot tell
    them apart), in time order."""
    titles = {catalogue.normalized[a] for a in hidden}
    return [
        catalogue.items[a].to_json()
        for a in dict.fromkeys(history)
        if a not in hidden and catalogue.normalized[a] not in titles
    ]


def _skip(counts: dict[str, int], config: str) -> None:
    counts[f"{config}_skipped"] = counts.get(f"{config}_skipped", 0) + 1


def rows_of_user(
    user_id: str,
    history: Sequence[str],
    chosen: Sequence[Candidate],
    catalogue: Catalogue,
    domain: str,
    counts: dict[str, int],
) -> dict[str, list[dict[str, Any]]]:
    """The rows of every query type of one user's chosen candidates (`counts` records the queries a type
    could not write)."""
    items = catalogue.items
    rows: dict[str, list[dict[str, Any]]] = {config: [] for config in TYPES}
    everything = set(history)
    for n, candidate in enumerate(chosen):
        conditions = candidate.conditions
        base = {
            "id": f"{domain}-{user_id}-{n}",
            "user_id": user_id,
            "domain": domain,
            "conditions": [fact.to_json() for fact in conditions],
            "ground_truth": [items[a].to_json() for a in candidate.subset],
            "history": _shown(history, set(candidate.subset), catalogue),
        }
        rows["explicit"].append({**base, "query": explicit_text(conditions, domain)})
        refs = references(conditions, catalogue, everything)
        text = None if refs is None else implicit_text(conditions, refs, domain)
        if refs is None or leaks(text, conditions):
            _skip(counts, "implicit")
            if refs is None and references(conditions, catalogue, everything, unambiguous=False) is not None:
                counts["implicit_ambiguous"] = counts.get("implicit_ambiguous", 0) + 1
        else:
            pairs = zip(conditions, refs, strict=True)
            references_json = [{**ref.to_json(), "relation": fact.relation} for fact, ref in pairs]
            rows["implicit"].append({**base, "query": text, "references": references_json})
        claim = false_claim(conditions, catalogue, everything, base["id"])
        if claim is None:
            _skip(counts, "misinformed")
        else:
            fact, item = claim
            wrong = [{**item.to_json(), "relation": fact.relation, "value": fact.value}]
            text = misinformed_text(conditions, claim, domain)
            rows["misinformed"].append({**base, "query": text, "false_claims": wrong})
        seed, *truth = candidate.subset
        if len(conditions) > 1:  # one interest query per one-condition candidate: its seed, then the rest
            continue
        if catalogue.normalized[seed] in {catalogue.normalized[a] for a in truth}:
            _skip(counts, "interest")
        else:
            rows["interest"].append(
                {
                    **base,
                    "query": interest_text(items[seed], domain),
                    "conditions": [],
                    "ground_truth": [items[a].to_json() for a in truth],
                    "history": _shown(history, set(truth), catalogue),
                    "seeds": [items[seed].to_json()],
                }
            )
    return rows
