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
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy import sparse

from dataset_builder.recbench_plus.kg import Fact, Graph, contains, intersect, is_subset, value_key
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
    """Conditions shared by a subset of one user's history (items by their catalogue index)."""

    conditions: tuple[Fact, ...]
    subset: tuple[int, ...]  # in history order
    values: tuple[int, ...] = ()  # the conditions' values in the graph


class Holdings:
    """The catalogue-wide tests of growing a combination, remembered across users: whether every item
    holding a combination's values holds one more (it would add nothing), and the items holding them all.
    Users meet the same common values (a category, a language), whose items number in the hundreds of
    thousands at the size of a real category."""

    def __init__(self, graph: Graph, limit: int = 4096) -> None:
        self.graph = graph
        self.held: OrderedDict[tuple[int, ...], np.ndarray] = OrderedDict()
        self.subset: dict[tuple[tuple[int, ...], int], bool] = {}
        self.implied: dict[tuple[int, int], bool] = {}
        self.limit = limit

    def items(self, values: tuple[int, ...]) -> np.ndarray:
        """The catalogue items holding every value of `values`."""
        if len(values) == 1:
            return self.graph.holders(values[0])
        found = self.held.get(values)
        if found is None:
            found = intersect(self.items(values[:-1]), self.graph.holders(values[-1]))
            self.held[values] = found
            if len(self.held) > self.limit:
                self.held.popitem(last=False)
        else:
            self.held.move_to_end(values)
        return found

    def implies(self, value: int, other: int) -> bool:
        """Whether every item holding `value` holds `other` (adding `value` to a combination holding `other`
        would narrow nothing in the catalogue that `other` did not)."""
        key = (value, other)
        if key not in self.implied:
            if len(self.implied) > 64 * self.limit:
                self.implied.clear()
            self.implied[key] = is_subset(self.graph.holders(value), self.graph.holders(other))
        return self.implied[key]

    def within(self, values: tuple[int, ...], value: int) -> bool:
        """Whether every item holding all of `values` holds `value` too."""
        key = (values, value)
        if key not in self.subset:
            if len(self.subset) > 64 * self.limit:
                self.subset.clear()
            self.subset[key] = is_subset(self.items(values), self.graph.holders(value))
        return self.subset[key]


def candidates(
    history: Sequence[int],
    graph: Graph,
    *,
    min_subset: int,
    max_subset: int,
    max_conditions: int = MAX_CONDITIONS,
    holdings: Holdings | None = None,
) -> list[Candidate]:
    """Every candidate of one to `max_conditions` conditions of a history of catalogue items (deterministic
    order).

    A combination of values grows by a value of a later key (keys in :attr:`Fact.key` order) and another
    relation, when the history items holding them all are still at least `min_subset` and the value adds
    something in the catalogue (neither do all the items holding the combination hold it, nor does it imply
    one of the combination's values). Only the values held by at least `min_subset` of the combination's
    own history items are tried (counted from those items' values), so the work follows the combinations
    the history supports, not every combination of its shared values; the catalogue-wide tests compare
    index arrays, the smaller looked up in the larger, and are remembered across users (`holdings`).

    >>> from dataset_builder.recbench_plus.kg import build_graph
    >>> ann, p = Fact("author", "Ann"), Fact("store", "P")
    >>> g = build_graph([[ann, p], [ann, p], [ann], [p]], min_items=2, max_share=1)
    >>> [(len(c.conditions), c.subset) for c in candidates([0, 1, 2], g, min_subset=2, max_subset=5)]
    [(1, (0, 1, 2)), (1, (0, 1)), (2, (0, 1))]
    """
    holdings = holdings or Holdings(graph)
    items = list(dict.fromkeys(history))
    by_value: dict[int, list[int]] = {}
    for position, item in enumerate(items):
        for value in graph.values(item).tolist():
            by_value.setdefault(value, []).append(position)
    shared = sorted(
        (v for v, held in by_value.items() if len(held) >= min_subset), key=graph.keys.__getitem__
    )
    relation = [graph.facts[v].relation for v in shared]
    found = [
        Candidate((graph.facts[v],), tuple(items[p] for p in by_value[v]), (v,))
        for v in shared
        if len(by_value[v]) <= max_subset
    ]
    if not shared:
        return found
    # history position x shared value (by rank): which position holds which value
    columns = [r for r, v in enumerate(shared) for _ in by_value[v]]
    positions = [p for v in shared for p in by_value[v]]
    holds = sparse.csr_matrix((np.ones(len(positions), dtype=np.int32), (positions, columns)),
                              shape=(len(items), len(shared)))  # fmt: skip
    inside = [set(by_value[v]) for v in shared]
    codes = {name: n for n, name in enumerate(sorted(set(relation)))}
    relation_bit = np.array([1 << codes[name] for name in relation], dtype=np.int64)
    blocks = []
    for bit in np.unique(relation_bit).tolist():
        ranks = np.flatnonzero(relation_bit == bit)
        blocks.append((bit, ranks, holds[:, ranks].tocsr()))
    level = [((r,), tuple(by_value[v])) for r, v in enumerate(shared)]
    for _ in range(max_conditions - 1):
        grown = []
        used = np.array([np.bitwise_or.reduce(relation_bit[list(combo)]) for combo, _ in level])
        values_of = [tuple(shared[c] for c in combo) for combo, _ in level]
        for e, r in _supported(level, blocks, len(items), min_subset, used):
            combo, subset = level[e]
            values = values_of[e]
            if holdings.within(values, shared[r]) or any(holdings.implies(shared[r], v) for v in values):
                continue
            narrowed = tuple(p for p in subset if p in inside[r])
            grown.append(((*combo, r), narrowed))
            if len(narrowed) <= max_subset:
                chosen = (*values, shared[r])
                facts = tuple(graph.facts[v] for v in chosen)
                found.append(Candidate(facts, tuple(items[p] for p in narrowed), chosen))
        level = grown
        if not level:
            break
    return found


def _supported(
    level: Sequence[tuple[tuple[int, ...], tuple[int, ...]]],
    blocks: Sequence[tuple[int, np.ndarray, sparse.csr_matrix]],
    n_positions: int,
    min_subset: int,
    used: np.ndarray,
) -> list[tuple[int, int]]:
    """The (combination, value rank) pairs of a level in order, the value after the combination's last one,
    of a relation the combination has not (`used`: each combination's relations as bits), and held by at
    least `min_subset` of the combination's history positions. One sparse product per relation (`blocks`:
    its bit, its values' ranks, and which history positions hold them) counts, for every combination
    without that relation, its positions holding each of the relation's values."""
    lengths = [len(subset) for _, subset in level]
    rows = np.repeat(np.arange(len(level)), lengths)
    cols = np.fromiter((p for _, subset in level for p in subset), dtype=np.int64, count=int(sum(lengths)))
    members = sparse.csr_matrix((np.ones(len(cols), dtype=np.int32), (rows, cols)),
                                shape=(len(level), n_positions))  # fmt: skip
    last = np.array([combo[-1] for combo, _ in level], dtype=np.int64)
    found_rows, found_cols = [np.empty(0, dtype=np.int64)], [np.empty(0, dtype=np.int64)]
    for bit, columns, holds in blocks:
        free = np.flatnonzero((used & bit) == 0)
        if not free.size:
            continue
        counts = ((members if free.size == len(level) else members[free]) @ holds).tocoo()
        row, col = free[counts.row], columns[counts.col]
        keep = (counts.data >= min_subset) & (col > last[row])
        found_rows.append(row[keep])
        found_cols.append(col[keep])
    row, col = np.concatenate(found_rows), np.concatenate(found_cols)
    order = np.lexsort((col, row))
    return list(zip(row[order].tolist(), col[order].tolist(), strict=True))


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
    """What writing queries reads of one domain: the graph and the items by index (ids, titles,
    popularity), the items most popular first (`ranked`, ties by id), titles normalized as they are asked
    for, and each value's reference order (cached as asked). Nothing per item but arrays, so a catalogue of
    millions of items costs tens of bytes each."""

    graph: Graph
    asins: pa.Array  # item -> parent_asin
    titles: pa.Array  # item -> title
    popularity: np.ndarray  # item -> reviews in the source
    ranked: np.ndarray = field(init=False)
    _id_rank: np.ndarray = field(init=False)  # item -> its id's place in code point order
    _normalized: dict[int, str] = field(init=False, default_factory=dict)
    _orders: dict[tuple[int, bool], np.ndarray] = field(init=False, default_factory=dict)
    _index: dict[str, int] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        by_id = pc.sort_indices(self.asins).to_numpy()  # code point order, as Python sorts text
        self._id_rank = np.empty(len(by_id), dtype=np.int64)
        self._id_rank[by_id] = np.arange(len(by_id))
        self.ranked = np.lexsort((self._id_rank, -self.popularity))

    @classmethod
    def of(cls, graph: Graph, items: Sequence[Item]) -> Catalogue:
        """A small catalogue from its items (item ``i`` = ``items[i]``)."""
        return cls(
            graph,
            pa.array([i.parent_asin for i in items], pa.string()),
            pa.array([i.title for i in items], pa.string()),
            np.array([i.popularity for i in items], dtype=np.int64),
        )

    def item(self, index: int) -> Item:
        return Item(self.asins[index].as_py(), self.titles[index].as_py(), int(self.popularity[index]))

    def to_json(self, index: int) -> dict[str, str]:
        return {"parent_asin": self.asins[index].as_py(), "title": self.titles[index].as_py()}

    def normalized(self, index: int) -> str:
        """The item's title as answers are compared (`normalize_title`)."""
        if index not in self._normalized:
            self._normalized[index] = normalize_title(self.titles[index].as_py())
        return self._normalized[index]

    def index_of(self, asin: str) -> int:
        """The index of an item id (a small catalogue's lookups: demographics, tests)."""
        if self._index is None:
            self._index = {a: i for i, a in enumerate(self.asins.to_pylist())}
        return self._index[asin]

    def reference_order(self, value: int, *, unambiguous: bool = True) -> np.ndarray:
        """The items holding a value, most popular first (then by id); with `unambiguous`, only those
        holding no other value of the relation (`Graph.single`: "the author of X" is ambiguous when X has
        two authors, even if one of them was dropped as too rare)."""
        key = (value, unambiguous)
        if key not in self._orders:
            holders = self.graph.holders(value)
            if unambiguous:
                holders = holders[self.graph.arity_of(self.graph.facts[value].relation)[holders] == 1]
            self._orders[key] = holders[np.lexsort((self._id_rank[holders], -self.popularity[holders]))]
        return self._orders[key]


def references(
    conditions: Sequence[Fact], catalogue: Catalogue, exclude: set[int], *, unambiguous: bool = True
) -> list[Item] | None:
    """One reference item per condition outside `exclude` (item indices), whose title names no hidden value
    and that is not already a reference (the first in :meth:`Catalogue.reference_order`); None when some
    condition has none."""
    chosen: list[int] = []
    for fact in conditions:
        skip = exclude | set(chosen)
        order = catalogue.reference_order(catalogue.graph.index[fact.key], unambiguous=unambiguous)
        pool = (i for i in order.tolist() if i not in skip)
        found = next((i for i in pool if not leaks(catalogue.titles[i].as_py(), conditions)), None)
        if found is None:
            return None
        chosen.append(found)
    return [catalogue.item(i) for i in chosen]


_CLAIM_BLOCK = 4096  # popular items looked at a block at a time for a false claim


def false_claim(
    conditions: Sequence[Fact], catalogue: Catalogue, exclude: set[int], salt: str
) -> tuple[Fact, Item] | None:
    """A false claim for a misinformed query: the first condition that some catalogue item outside `exclude`
    provably lacks (:meth:`Graph.lacks`), and one of the `FALSE_CLAIM_POOL` most popular such items (chosen
    by a hash of `salt`, so claims vary across queries); None when no condition has one. No item titled like
    an excluded one is named."""
    titles = {catalogue.normalized(i) for i in exclude}
    excluded = np.array(sorted(exclude), dtype=np.int64)
    for fact in conditions:
        value = catalogue.graph.index[fact.key]
        pool: list[int] = []
        for start in range(0, len(catalogue.ranked), _CLAIM_BLOCK):
            block = catalogue.ranked[start : start + _CLAIM_BLOCK]
            block = block[catalogue.graph.lacks(block, value) & ~contains(excluded, block)]
            for i in block.tolist():
                if catalogue.normalized(i) not in titles:
                    pool.append(i)
                    if len(pool) == FALSE_CLAIM_POOL:
                        break
            if len(pool) == FALSE_CLAIM_POOL:
                break
        if pool:
            return fact, catalogue.item(pool[zlib.crc32(salt.encode()) % len(pool)])
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


def _shown(history: Sequence[int], hidden: set[int], catalogue: Catalogue) -> list[dict[str, str]]:
    """The history shown: every item not hidden, less any titled like a hidden one (an answer cannot tell
    them apart), in time order."""
    titles = {catalogue.normalized(i) for i in hidden}
    return [
        catalogue.to_json(i)
        for i in dict.fromkeys(history)
        if i not in hidden and catalogue.normalized(i) not in titles
    ]


def _skip(counts: dict[str, int], config: str) -> None:
    counts[f"{config}_skipped"] = counts.get(f"{config}_skipped", 0) + 1


def rows_of_user(
    user_id: str,
    history: Sequence[int],
    chosen: Sequence[Candidate],
    catalogue: Catalogue,
    domain: str,
    counts: dict[str, int],
) -> dict[str, list[dict[str, Any]]]:
    """The rows of every query type of one user's chosen candidates (`counts` records the queries a type
    could not write); `history` holds catalogue item indices in time order."""
    as_json = catalogue.to_json
    rows: dict[str, list[dict[str, Any]]] = {config: [] for config in TYPES}
    everything = set(history)
    for n, candidate in enumerate(chosen):
        conditions = candidate.conditions
        base = {
            "id": f"{domain}-{user_id}-{n}",
            "user_id": user_id,
            "domain": domain,
            "conditions": [fact.to_json() for fact in conditions],
            "ground_truth": [as_json(i) for i in candidate.subset],
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
        if catalogue.normalized(seed) in {catalogue.normalized(i) for i in truth}:
            _skip(counts, "interest")
        else:
            rows["interest"].append(
                {
                    **base,
                    "query": interest_text(catalogue.item(seed), domain),
                    "conditions": [],
                    "ground_truth": [as_json(i) for i in truth],
                    "history": _shown(history, set(truth), catalogue),
                    "seeds": [as_json(seed)],
                }
            )
    return rows
