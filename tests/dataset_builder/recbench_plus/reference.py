"""The knowledge graph and the candidates of RecBench+ as first written: Python sets per value, every
combination of the history's shared values tried in turn. Small and obviously right, slow at scale; the
builder's index-array versions (`kg.graph_from_rows`, `queries.candidates`) are checked against them."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

from dataset_builder.recbench_plus.kg import Fact

Key = tuple[str, str]


def graph(facts: Mapping[str, list[Fact]], *, min_items: int, max_share: float) -> dict:
    """Each item's kept facts (sorted), each kept value's holders, the dropped counts, and per item its
    relations' value counts (kept or not)."""
    holders: dict[Key, set[str]] = defaultdict(set)
    spellings: dict[Key, str] = {}
    for asin, item in facts.items():
        for fact in item:
            holders[fact.key].add(asin)
            spellings[fact.key] = min(spellings.get(fact.key, fact.value), fact.value)
    limit = max_share * len(facts)
    why = Counter(
        "too_rare" if len(items) < min_items else "too_common" if len(items) > limit else "kept"
        for items in holders.values()
    )
    kept = {key: frozenset(items) for key, items in holders.items() if min_items <= len(items) <= limit}
    return {
        "facts": {
            asin: tuple(sorted(Fact(f.relation, spellings[f.key]) for f in item if f.key in kept))
            for asin, item in facts.items()
        },
        "holders": kept,
        "dropped": {"too_rare": why["too_rare"], "too_common": why["too_common"]},
        "arity": {
            asin: dict(Counter(f.relation for f in {f.key: f for f in item}.values()))
            for asin, item in facts.items()
        },
    }


def candidates(
    history: Sequence[str], ref: dict, *, min_subset: int, max_subset: int, max_conditions: int = 4
) -> list[tuple[tuple[Fact, ...], tuple[str, ...]]]:
    """Every (conditions, subset) of one to `max_conditions` conditions, in the builder's order."""
    by_value: dict[Key, list[str]] = {}
    facts: dict[Key, Fact] = {}
    for asin in dict.fromkeys(history):
        for fact in ref["facts"].get(asin, ()):
            by_value.setdefault(fact.key, []).append(asin)
            facts.setdefault(fact.key, fact)
    shared = sorted(key for key, items in by_value.items() if len(items) >= min_subset)
    found = [((facts[k],), tuple(by_value[k])) for k in shared if len(by_value[k]) <= max_subset]
    level = [((k,), tuple(by_value[k]), ref["holders"][k]) for k in shared]
    for _ in range(max_conditions - 1):
        grown = []
        for keys, subset, held in level:
            for key in shared[shared.index(keys[-1]) + 1 :]:
                if key[0] in {k[0] for k in keys} or held <= ref["holders"][key]:
                    continue
                if any(ref["holders"][key] <= ref["holders"][k] for k in keys):
                    continue
                inside = set(by_value[key])
                narrowed = tuple(asin for asin in subset if asin in inside)
                if len(narrowed) < min_subset:
                    continue
                grown.append(((*keys, key), narrowed, held & ref["holders"][key]))
                if len(narrowed) <= max_subset:
                    found.append((tuple(facts[k] for k in (*keys, key)), narrowed))
        level = grown
    return found
