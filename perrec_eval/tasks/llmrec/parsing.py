"""Reading LLMRec answers: a rating from free text, a ranked list of items from a list of titles.

Failures are data (`Parsed` with a reason), never exceptions: a rating outside 1..5 is a failure
(``out_of_range``), never clipped. A ranked list is read from a Python or JSON list, else a numbered list,
else one entry per line; each entry is mapped to an item by its normalized title (`normalize`), else by
the closest title whose `rapidfuzz.fuzz.ratio` is at least `FUZZY_THRESHOLD`. A title that several items
share maps to the first of them (the listed order of the candidates, or the catalogue's `parent_asin`
order). Entries matching nothing, and repeats of an item already ranked, are dropped and counted.
"""

from __future__ import annotations

import ast
import json
import re
import unicodedata
from collections.abc import Iterable

from rapidfuzz import fuzz, process

from perrec_eval.tasks.base import Parsed

# rapidfuzz's normalized Indel similarity (0..100) of two normalized titles: 90 accepts a dropped article
# or a typo in a title of some length, and rejects two titles that share only a series name.
FUZZY_THRESHOLD = 90.0
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?![\w.])")
_NUMBERED = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+(.+?)\s*$")


def strip_think(text: str | None) -> str:
    """The answer without reasoning blocks."""
    return _THINK.sub("", text or "").strip()


# P5's evaluation kept a rating only if it was one of "1.0" .. "4.9" (range(10, 50) / 10: 5.0 is dropped).
P5_RANGE = (1.0, 4.9)


def parse_rating(text: str | None, policy: str = "strict") -> Parsed:
    """The first number of the answer, a rating in 1..5 (policy ``p5``: in 1.0..4.9, P5's rule; a rating
    it drops fails with reason ``p5_dropped`` instead of vanishing).

    >>> parse_rating("I think 4.5 stars").value
    4.5
    >>> parse_rating("6").reason, parse_rating("no idea").reason
    ('out_of_range', 'no_number')
    >>> parse_rating("5", policy="p5").reason, parse_rating("4.9", policy="p5").value
    ('p5_dropped', 4.9)
    """
    match = _NUMBER.search(strip_think(text))
    if match is None:
        return Parsed(False, reason="no_number")
    value = float(match.group())
    if not 1.0 <= value <= 5.0:
        return Parsed(False, reason="out_of_range", detail=match.group())
    if policy == "p5" and not P5_RANGE[0] <= value <= P5_RANGE[1]:
        return Parsed(False, reason="p5_dropped", detail=match.group())
    return Parsed(True, value)


def normalize(title: str) -> str:
    """A title as titles are compared: NFKC, case-folded, quotes and edge punctuation gone, spaces collapsed.

    >>> normalize('  "The  Hobbit!" ')
    'the hobbit'
    """
    text = unicodedata.normalize("NFKC", title).casefold()
    text = re.sub(r"\s+", " ", text)
    return text.strip(" \t\"'`“”‘’.,;:!?")


def _entries(text: str) -> list[str] | None:
    """The listed entries of an answer, or None if it lists nothing."""
    start, end = text.find("["), text.rfind("]")
    if 0 <= start < end:
        chunk = text[start : end + 1]
        for reader in (json.loads, ast.literal_eval):
            try:
                value = reader(chunk)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(value, list):
                return [str(v) for v in value if isinstance(v, str | int | float)]
    lines = [line for line in text.splitlines() if line.strip()]
    numbered = [m.group(1) for m in map(_NUMBERED.match, lines) if m]
    if numbered:
        return numbered
    return [line.strip() for line in lines] or None


class TitleIndex:
    """Items by normalized title, for mapping generated titles back (hashed by identity: a slot holds it)."""

    __slots__ = ("_by_title", "_titles")

    def __init__(self, items: Iterable[tuple[str, str]]) -> None:
        self._by_title: dict[str, str] = {}
        for asin, title in items:  # the first item of a shared title keeps it
            self._by_title.setdefault(normalize(title), asin)
        self._titles = list(self._by_title)

    def find(self, title: str) -> tuple[str | None, bool]:
        """The item a title names and whether it took the fuzzy match; (None, False) when none is close."""
        key = normalize(title)
        if key in self._by_title:
            return self._by_title[key], False
        best = process.extractOne(key, self._titles, scorer=fuzz.ratio, score_cutoff=FUZZY_THRESHOLD)
        return (self._by_title[best[0]], True) if best else (None, False)


def parse_ranking(text: str | None, index: TitleIndex, catalogue: TitleIndex | None = None) -> Parsed:
    """The ranked items an answer lists, best first, with what was dropped.

    Args:
        text: the answer.
        index: the items an answer may name (the row's candidates, or the catalogue).
        catalogue: the domain's catalogue when `index` is narrower: an entry outside `index` that names
            a catalogue item counts as ``not_candidate``, one that names nothing as ``unmatched`` (a
            hallucination).

    Returns:
        `Parsed` whose value is ``{"items": [parent_asin, ...], "fuzzy": n, "unmatched": n,
        "duplicates": n}`` (plus ``"not_candidate": n`` with a `catalogue`); failed (``no_list`` or
        ``no_item``) when nothing maps to an item.

    >>> index = TitleIndex([("A1", "Red Soap"), ("B2", "Blue Soap")])
    >>> parse_ranking('["blue soap", "Red Sop", "Green Soap", "Blue Soap"]', index).value
    {'items': ['B2', 'A1'], 'fuzzy': 1, 'unmatched': 1, 'duplicates': 1}
    >>> catalogue = TitleIndex([("A1", "Red Soap"), ("B2", "Blue Soap"), ("C3", "Green Soap")])
    >>> parse_ranking('["Green Soap", "Pink Soap", "Red Soap"]', index, catalogue).value
    {'items': ['A1'], 'fuzzy': 0, 'unmatched': 1, 'duplicates': 0, 'not_candidate': 1}
    """
    entries = _entries(strip_think(text))
    if not entries:
        return Parsed(False, reason="no_list")
    items: list[str] = []
    fuzzy = unmatched = duplicates = not_candidate = 0
    for entry in entries:
        asin, approximate = index.find(entry)
        if asin is None and catalogue is not None and catalogue.find(entry)[0] is not None:
            not_candidate += 1
        elif asin is None:
            unmatched += 1
        elif asin in items:
            duplicates += 1
        else:
            items.append(asin)
            fuzzy += approximate
    if not items:
        detail = f"{unmatched} titles matched no item" + (
            f", {not_candidate} named items outside the candidates" if not_candidate else ""
        )
        return Parsed(False, reason="no_item", detail=detail)
    counts = {"fuzzy": fuzzy, "unmatched": unmatched, "duplicates": duplicates}
    if catalogue is not None:
        counts["not_candidate"] = not_candidate
    return Parsed(True, {"items": items, **counts})
