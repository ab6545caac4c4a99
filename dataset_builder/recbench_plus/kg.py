"""The item knowledge graph of RecBench+: each catalogue item's relation values, from its metadata.

Relations are named after the metadata field they come from: ``author``, ``store``, ``categories`` (every
level of the path is one value) and ``details.<Key>`` for the keys of :data:`DEFAULT_DETAIL_KEYS` (or the
build's ``--details-keys``). A value is normalized (:func:`normalize_value`) and compared by its key
(:func:`value_key`); a value held by fewer than ``min_items`` items, or by more than ``max_share`` of the
catalogue, says too little to be a condition and is dropped (:func:`build_graph`).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# The `details` keys that become relations, per category; any other category uses "*". Chosen from the keys
# the Amazon Reviews 2023 metadata carries in those categories that name a shared property (not a size, a
# date or an identifier such as ISBN-13).
DEFAULT_DETAIL_KEYS: dict[str, tuple[str, ...]] = {
    "Books": ("Publisher", "Language", "Format"),
    "Kindle_Store": ("Publisher", "Language"),
    "Movies_and_TV": ("Director", "Actors", "Studio", "Language", "Genre"),
    "CDs_and_Vinyl": ("Label", "Language"),
    "*": ("Brand", "Manufacturer", "Material", "Color", "Department"),
}
_STORE = re.compile(r"^visit the (.+?) store$", re.IGNORECASE)
_SPACES = re.compile(r"\s+")
# Notes the real metadata adds to a value: a contributor's role in Books' `store` ("Ann Lee (Author)") and a
# date after a publisher ("Penguin; Reprint edition (May 1, 2007)"): without them a value is shared again.
_ROLE = re.compile(
    r"\s*\((?:author|editor|illustrator|translator|narrator|contributor|foreword|introduction|"
    r"photographer|compiler|adapter|reader)[^)]*\)",
    re.IGNORECASE,
)
_DATED = re.compile(r"\s*\([^()]*\b(?:1[5-9]|20)\d\d\)\s*$")


def detail_keys(domain: str, override: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The `details` keys read as relations in `domain`: `override`, or the documented default.

    >>> detail_keys("Books"), detail_keys("Toys_and_Games")[:2], detail_keys("Books", ("Brand",))
    (('Publisher', 'Language', 'Format'), ('Brand', 'Manufacturer'), ('Brand',))
    """
    if override is not None:
        return override
    return DEFAULT_DETAIL_KEYS.get(domain, DEFAULT_DETAIL_KEYS["*"])


def normalize_value(text: str, relation: str = "") -> str:
    """A relation value as shown: Unicode NFKC, whitespace collapsed, "Visit the X Store" read as X,
    contributor roles and a trailing dated note removed; a publisher is read up to its first ";".

    >>> normalize_value("  Visit the   Harbor Press Store ")
    'Harbor Press'
    >>> normalize_value("Ann\\u00a0Lee (Author), Bo Li (Illustrator)")
    'Ann Lee, Bo Li'
    >>> normalize_value("Penguin Books; Reprint edition (May 1, 2007)", "details.Publisher")
    'Penguin Books'
    """
    if text.isascii() and "(" not in text and ";" not in text and " ".join(text.split()) == text:
        if not text[:10].lower() == "visit the ":  # nothing to change (most values): no regex at all
            return text
    text = _SPACES.sub(" ", unicodedata.normalize("NFKC", text)).strip()
    if relation == "details.Publisher":
        text = text.split(";")[0]
    text = _DATED.sub("", _ROLE.sub("", text)).strip()
    match = _STORE.match(text)
    return match.group(1).strip() if match else text


def value_key(text: str) -> str:
    """What two values must share to be one value: the normalized text, case-folded.

    >>> value_key("Visit the HARBOR press Store") == value_key("harbor Press")
    True
    """
    return normalize_value(text).casefold()


@dataclass(frozen=True, slots=True, order=True)
class Fact:
    """One relation value of an item: ``relation`` (``author``, ``store``, ``categories``,
    ``details.<Key>``) and ``value`` (normalized text)."""

    relation: str
    value: str

    @property
    def key(self) -> tuple[str, str]:
        return self.relation, value_key(self.value)

    def to_json(self) -> dict[str, str]:
        return {"relation": self.relation, "value": self.value}


def item_facts(
    author: str | None,
    store: str | None,
    categories: Iterable[str] | None,
    details: str | Mapping[str, object] | None,
    keys: tuple[str, ...],
) -> list[Fact]:
    """Every relation value one item's metadata gives (before the thresholds).

    >>> facts = item_facts("Ann", "Visit the P Store", ["Books", "Fantasy"], '{"Language": "English"}',
    ...                    ("Language",))
    >>> [f.to_json() for f in facts]  # doctest: +NORMALIZE_WHITESPACE
    [{'relation': 'author', 'value': 'Ann'}, {'relation': 'store', 'value': 'P'},
     {'relation': 'categories', 'value': 'Books'}, {'relation': 'categories', 'value': 'Fantasy'},
     {'relation': 'details.Language', 'value': 'English'}]
    """
    raw: list[tuple[str, object]] = [("author", author), ("store", store)]
    raw += [("categories", level) for level in categories or ()]
    parsed = json.loads(details) if isinstance(details, str) else (details or {})
    raw += [(f"details.{key}", parsed.get(key)) for key in keys if isinstance(parsed, dict)]
    facts: dict[tuple[str, str], Fact] = {}
    for relation, value in raw:
        if isinstance(value, str) and normalize_value(value, relation):
            fact = Fact(relation, normalize_value(value, relation))
            facts.setdefault(fact.key, fact)
    return list(facts.values())


@dataclass(frozen=True, slots=True)
class Graph:
    """The kept relation values of a catalogue's items, the items numbered ``0 .. n_items - 1`` (the
    catalogue's order): index arrays both ways, and how many values each item's metadata gives of each
    relation (kept or not). A catalogue of millions of items costs a few integers per (item, value) pair,
    no Python object per item.

    Values are numbered in :class:`Fact` order (relation, then the shown spelling), so an item's values in
    index order are its facts sorted.
    """

    n_items: int
    facts: list[Fact]  # value -> its relation and shown spelling (the smallest of its spellings)
    keys: list[tuple[str, str]]  # value -> its Fact.key (relation, value_key)
    holder_start: np.ndarray  # value -> where its items start in `holder_items` (n_values + 1)
    holder_items: np.ndarray  # the items holding each value, ascending (int32)
    item_start: np.ndarray  # item -> where its values start in `item_values` (n_items + 1)
    item_values: np.ndarray  # each item's kept values, ascending (int32)
    relations: tuple[str, ...]  # every relation the metadata names, sorted
    # item x relation -> how many values the item's metadata gives of it (kept or not, uint16): an item
    # lacks a kept value provably only where it names another value of that relation (a misinformed
    # claim's test), and names a value unambiguously ("the director of X") only where it holds one
    arity: np.ndarray
    dropped: dict[str, int]  # why values were dropped: too_rare, too_common (counts of distinct values)
    index: dict[tuple[str, str], int] = field(default_factory=dict)  # Fact.key -> value

    def holders(self, value: int) -> np.ndarray:
        """The items holding a kept value, ascending."""
        return self.holder_items[self.holder_start[value] : self.holder_start[value + 1]]

    def values(self, item: int) -> np.ndarray:
        """An item's kept values, ascending (= its facts in order)."""
        return self.item_values[self.item_start[item] : self.item_start[item + 1]]

    def item_facts(self, item: int) -> tuple[Fact, ...]:
        """An item's kept facts, sorted."""
        return tuple(self.facts[v] for v in self.values(item).tolist())

    def single(self, item: int, relation: str) -> bool:
        """Whether `item` holds exactly one value of `relation`, counting the values dropped as too rare or
        too common (a reader of "the genre of X" thinks of all of X's genres).

        >>> drama, war = Fact("genre", "Drama"), Fact("genre", "War")
        >>> g = build_graph([[drama], [drama, war]], min_items=2, max_share=1)
        >>> g.single(0, "genre"), g.single(1, "genre")
        (True, False)
        """
        return bool(self.arity_of(relation)[item] == 1)

    def arity_of(self, relation: str) -> np.ndarray:
        """Per item, how many values its metadata gives of `relation` (zeros for a relation never met)."""
        if relation not in self.relations:
            return np.zeros(self.n_items, dtype=np.uint16)
        return self.arity[:, self.relations.index(relation)]

    def lacks(self, items: np.ndarray, value: int) -> np.ndarray:
        """Per item of `items`, whether it provably lacks `value`: it has a value of the relation, not this.

        >>> g = build_graph([[Fact("author", "Ann")], [Fact("author", "Ann")], [Fact("author", "Bo")], []],
        ...                 min_items=2, max_share=1)
        >>> g.lacks(np.arange(4), g.index[("author", "ann")]).tolist()
        [False, False, True, False]
        """
        items = np.asarray(items, dtype=np.int64)
        named = self.arity_of(self.facts[value].relation)[items] > 0
        return named & ~contains(self.holders(value), items)


def contains(sorted_items: np.ndarray, items: np.ndarray) -> np.ndarray:
    """Per item of `items`, whether the ascending array `sorted_items` holds it.

    >>> contains(np.array([2, 5, 9]), np.array([5, 6, 9, 1])).tolist()
    [True, False, True, False]
    """
    at = np.searchsorted(sorted_items, items)
    found = np.zeros(len(items), dtype=bool)
    inside = at < len(sorted_items)
    found[inside] = sorted_items[at[inside]] == np.asarray(items)[inside]
    return found


def intersect(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The items of two ascending arrays held by both, ascending: the smaller looked up in the larger, so a
    value held by most of a catalogue costs what the other side does.

    >>> intersect(np.array([1, 3, 5, 7]), np.array([3, 4, 7])).tolist()
    [3, 7]
    """
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    return small[contains(large, small)]


def is_subset(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether every item of the ascending array `a` is in the ascending array `b`.

    >>> is_subset(np.array([3, 7]), np.array([1, 3, 7])), is_subset(np.array([3, 8]), np.array([3, 7]))
    (True, False)
    """
    return len(a) <= len(b) and bool(contains(b, a).all())


@dataclass(slots=True)
class FactRows:
    """Every relation value the catalogue's items are given, before the thresholds, one row per (item,
    relation, value) in precedence order: an item's earlier row of a key wins (its metadata's in
    :func:`item_facts` order, then ``--item-attributes`` rows in file order). Values are :class:`Fact`
    values (normalized); relations and values are stored once each (codes into their lists)."""

    item: list[np.ndarray] = field(default_factory=list)
    relation: list[np.ndarray] = field(default_factory=list)
    value: list[np.ndarray] = field(default_factory=list)
    relation_names: dict[str, int] = field(default_factory=dict)
    value_texts: dict[str, int] = field(default_factory=dict)

    def add(self, items: np.ndarray, relations: Iterable[str], values: Iterable[str]) -> None:
        """Append rows (in precedence order after the rows already added)."""
        self.item.append(np.asarray(items, dtype=np.int32))
        self.relation.append(_codes(relations, self.relation_names))
        self.value.append(_codes(values, self.value_texts))

    def add_arrow(self, items: np.ndarray, relation: str, values: pa.Array) -> None:
        """Append rows of one relation whose values (normalized) are an Arrow string array: each distinct
        text is looked at once (a catalogue of millions of items has far fewer distinct values)."""
        encoded = values.dictionary_encode()
        codes = _codes(encoded.dictionary.to_pylist(), self.value_texts)
        self.item.append(np.asarray(items, dtype=np.int32))
        self.relation.append(
            np.full(len(values), self.relation_names.setdefault(relation, len(self.relation_names)))
        )
        self.value.append(codes[encoded.indices.to_numpy(zero_copy_only=False)])

    def add_facts(self, items: Iterable[int], facts: Iterable[Sequence[Fact]]) -> None:
        """Append each item's facts (Python records: a small catalogue, or ``--item-attributes`` rows)."""
        pairs = [(item, fact) for item, item_facts in zip(items, facts, strict=True) for fact in item_facts]
        self.add(
            np.array([i for i, _ in pairs], dtype=np.int32),
            [f.relation for _, f in pairs],
            [f.value for _, f in pairs],
        )


def _codes(texts: Iterable[str], table: dict[str, int]) -> np.ndarray:
    return np.fromiter((table.setdefault(t, len(table)) for t in texts), dtype=np.int64)


def graph_from_rows(rows: FactRows, n_items: int, *, min_items: int, max_share: float) -> Graph:
    """Keep the values held by at least `min_items` items and by at most `max_share` of the `n_items`
    catalogue items (:func:`build_graph` on index arrays: the same graph)."""
    item = np.concatenate(rows.item) if rows.item else np.empty(0, dtype=np.int32)
    relation = np.concatenate(rows.relation) if rows.relation else np.empty(0, dtype=np.int64)
    value = np.concatenate(rows.value) if rows.value else np.empty(0, dtype=np.int64)
    relation_names = list(rows.relation_names)
    value_texts = list(rows.value_texts)
    # a key is (relation, value_key(value)): value keys once per distinct value text
    vkey_of: dict[str, int] = {}
    vkey = np.fromiter((vkey_of.setdefault(value_key(t), len(vkey_of)) for t in value_texts), dtype=np.int64)
    pair = relation * max(len(vkey_of), 1) + vkey[value]
    pairs, key = np.unique(pair, return_inverse=True)
    key = key.astype(np.int64)
    # an item's first row of a key wins (stable: rows keep their precedence within an item and key)
    order = np.lexsort((key, item))
    first = np.ones(len(order), dtype=bool)
    first[1:] = (item[order][1:] != item[order][:-1]) | (key[order][1:] != key[order][:-1])
    kept_rows = order[first]
    item, key, value, relation = item[kept_rows], key[kept_rows], value[kept_rows], relation[kept_rows]
    holders = np.bincount(key, minlength=len(pairs))
    limit = max_share * n_items
    kept = (holders >= min_items) & (holders <= limit)
    seen = holders > 0
    dropped = {
        "too_rare": int((seen & (holders < min_items)).sum()),
        "too_common": int((seen & (holders >= min_items) & (holders > limit)).sum()),
    }
    # the shown spelling: the smallest value text of the key's rows
    rank = np.empty(len(value_texts), dtype=np.int64)  # code point order, as Python's min compares text
    rank[pc.sort_indices(pa.array(value_texts, pa.string())).to_numpy()] = np.arange(len(value_texts))
    smallest = np.full(len(pairs), np.iinfo(np.int64).max)
    np.minimum.at(smallest, key, rank[value])
    by_rank = np.argsort(rank)
    vkeys = list(vkey_of)
    names = {
        k: (relation_names[int(pairs[k]) // max(len(vkey_of), 1)], value_texts[by_rank[smallest[k]]])
        for k in np.flatnonzero(kept).tolist()
    }
    ordered = sorted(names, key=names.__getitem__)  # Fact order: relation, then spelling
    number = np.full(len(pairs), -1, dtype=np.int64)
    number[ordered] = np.arange(len(ordered))
    facts = [Fact(*names[k]) for k in ordered]
    keys = [
        (f.relation, vkeys[int(pairs[k]) % max(len(vkey_of), 1)]) for k, f in zip(ordered, facts, strict=True)
    ]
    has = number[key] >= 0
    holder_start, holder_items = _csr(number[key][has], item[has], len(ordered))
    item_start, item_values = _csr(item[has], number[key][has], n_items)
    sorted_relations = tuple(sorted(relation_names))
    column = np.array([sorted_relations.index(r) for r in relation_names], dtype=np.int64)
    arity = np.zeros((n_items, len(sorted_relations)), dtype=np.uint16)
    np.add.at(arity, (item, column[relation]), 1)
    index = {k: v for v, k in enumerate(keys)}
    return Graph(
        n_items,
        facts,
        keys,
        holder_start,
        holder_items,
        item_start,
        item_values,
        sorted_relations,
        arity,
        dropped,
        index,
    )


def _csr(rows: np.ndarray, columns: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Row starts and the columns of each row, ascending (int32)."""
    order = np.lexsort((columns, rows))
    start = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=start[1:])
    return start, columns[order].astype(np.int32)


def build_graph(item_facts_by_item: Sequence[Sequence[Fact]], *, min_items: int, max_share: float) -> Graph:
    """The graph of a small catalogue given as each item's facts (item ``i`` = the ``i``-th list): keep the
    values held by at least `min_items` items and by at most `max_share` of the catalogue. A value's shown
    spelling is the smallest of its spellings, so the graph does not depend on input order.

    >>> graph = build_graph([[Fact("author", "Ann")], [Fact("author", "ANN")], [Fact("author", "Bo")]],
    ...                     min_items=2, max_share=0.9)
    >>> graph.item_facts(0), graph.holders(0).tolist(), graph.dropped
    ((Fact(relation='author', value='ANN'),), [0, 1], {'too_rare': 1, 'too_common': 0})
    """
    rows = FactRows()
    rows.add_facts(range(len(item_facts_by_item)), item_facts_by_item)
    return graph_from_rows(rows, len(item_facts_by_item), min_items=min_items, max_share=max_share)
