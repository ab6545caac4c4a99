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
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

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
    """The kept relation values of every catalogue item, and the items holding each value."""

    facts: dict[str, tuple[Fact, ...]]  # parent_asin -> its kept values, sorted
    holders: dict[tuple[str, str], frozenset[str]]  # Fact.key -> the items holding it
    dropped: dict[str, int]  # why values were dropped: too_rare, too_common (counts of distinct values)
    # parent_asin -> the relations its metadata gives any value of (kept or not): an item lacks a kept value
    # provably only where it names another value of that relation (a misinformed claim's test)
    relations: dict[str, frozenset[str]] = field(default_factory=dict)
    # parent_asin -> relation -> how many values its metadata gives (kept or not): an item names a value
    # unambiguously ("the director of X") only where it holds that relation's one value
    arity: dict[str, dict[str, int]] = field(default_factory=dict)

    def single(self, asin: str, relation: str) -> bool:
        """Whether `asin` holds exactly one value of `relation`, counting the values dropped as too rare or
        too common (a reader of "the genre of X" thinks of all of X's genres).

        >>> drama, war = Fact("genre", "Drama"), Fact("genre", "War")
        >>> g = build_graph({"a": [drama], "b": [drama, war]}, min_items=2, max_share=1)
        >>> g.single("a", "genre"), g.single("b", "genre")
        (True, False)
        """
        return self.arity.get(asin, {}).get(relation, 0) == 1

    def lacks(self, asin: str, fact: Fact) -> bool:
        """Whether `asin` provably lacks `fact`: it has a value of the relation, and not this one.

        >>> g = build_graph({"a": [Fact("author", "Ann")], "b": [Fact("author", "Ann")],
        ...                  "c": [Fact("author", "Bo")], "d": []}, min_items=2, max_share=1)
        >>> [g.lacks(a, Fact("author", "Ann")) for a in "abcd"]
        [False, False, True, False]
        """
        return fact.relation in self.relations.get(asin, ()) and asin not in self.holders.get(fact.key, ())


def build_graph(item_facts_by_asin: Mapping[str, list[Fact]], *, min_items: int, max_share: float) -> Graph:
    """Keep the values held by at least `min_items` items and by at most `max_share` of the catalogue.

    A value's shown spelling is the smallest of its spellings, so the graph does not depend on input order.

    >>> graph = build_graph({"a": [Fact("author", "Ann")], "b": [Fact("author", "ANN")],
    ...                      "c": [Fact("author", "Bo")]}, min_items=2, max_share=0.9)
    >>> graph.facts["a"], graph.dropped
    ((Fact(relation='author', value='ANN'),), {'too_rare': 1, 'too_common': 0})
    """
    holders: dict[tuple[str, str], set[str]] = defaultdict(set)
    spellings: dict[tuple[str, str], str] = {}
    for asin, facts in item_facts_by_asin.items():
        for fact in facts:
            holders[fact.key].add(asin)
            spellings[fact.key] = min(spellings.get(fact.key, fact.value), fact.value)
    limit = max_share * len(item_facts_by_asin)
    why = Counter(
        "too_rare" if len(items) < min_items else "too_common" if len(items) > limit else "kept"
        for items in holders.values()
    )
    kept = {key: frozenset(items) for key, items in holders.items() if min_items <= len(items) <= limit}
    facts = {
        asin: tuple(sorted(Fact(f.relation, spellings[f.key]) for f in item if f.key in kept))
        for asin, item in item_facts_by_asin.items()
    }
    relations = {asin: frozenset(f.relation for f in item) for asin, item in item_facts_by_asin.items()}
    arity = {
        asin: dict(Counter(f.relation for f in {f.key: f for f in item}.values()))
        for asin, item in item_facts_by_asin.items()
    }
    dropped = {"too_rare": why["too_rare"], "too_common": why["too_common"]}
    return Graph(facts, kept, dropped, relations, arity)
