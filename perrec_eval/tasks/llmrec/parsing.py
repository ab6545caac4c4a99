"""Reading LLMRec answers: a rating from free text, a ranked list of items from a list of titles.

Failures are data (`Parsed` with a reason), never exceptions. A rating is read by `RATING_RULES`, a table
tried in order on the answer with its reasoning removed and the item's title, quoted spans, years in
brackets and counts masked (so "Coneheads (1993)" never gives 1993): a JSON field first, then a labelled
number ("Rating: 4", "the predicted rating for X is 4"), a fraction of 5 ("4/5", "4 out of 5"), stars
("4 stars"), bold ("**4**"), a verb's object ("I would rate it 4"), and last the one number left. The
first rule that finds a number decides: it fails as ``ambiguous`` when it finds different numbers (an
answer that echoes the history's "X: 4 stars" lines); a rating outside 1..5 fails
(``out_of_range``), never clipped; an answer that declines and names no number fails as ``refused``
(`perrec_eval.answers.is_refusal`).

A ranked list is read by `perrec_eval.answers.entries` (a Python or JSON list, else a numbered or bulleted
list, else one entry per line; chat prose around it dropped); each entry is mapped to the items its
normalized title names (`normalize`), else to those of the closest title whose `rapidfuzz.fuzz.ratio` is
at least `FUZZY_THRESHOLD`. A title that several items share names all of them, and counts for whichever
of them the doc wants (`resolve`). Entries matching nothing, and repeats of an item already ranked, are
dropped and counted; an answer that lists nothing and declines fails as ``refused``.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence

from rapidfuzz import fuzz, process

from perrec_eval.answers import entries, is_refusal, strip_think
from perrec_eval.task import Parsed

__all__ = [
    "RATING_RULES", "TitleIndex", "normalize", "parse_ranking", "parse_rating", "resolve", "strip_think"
]  # fmt: skip

# rapidfuzz's normalized Indel similarity (0..100) of two normalized titles: 90 accepts a dropped article
# or a typo in a title of some length, and rejects two titles that share only a series name.
FUZZY_THRESHOLD = 90.0
_NUM = r"([-+]?\d+(?:\.\d+)?)"
# The rules that read a rating, tried in order: (name, pattern whose group 1 is the rating).
RATING_RULES: tuple[tuple[str, str], ...] = (
    ("labelled", rf"\b(?:rating|score)\b[^0-9\n]{{0,60}}?(?:\bis\b|\bof\b|:|=|\bbe\b)\s*\**\s*{_NUM}"),
    ("fraction", rf"{_NUM}\s*(?:/|out of)\s*5(?:\.0)?(?![\d.])"),
    ("stars", rf"{_NUM}\s*-?\s*stars?\b"),
    ("bold", rf"\*\*\s*{_NUM}\s*\*\*"),
    ("verb", rf"\b(?:rate[sd]?|give[sn]?|gave|predict(?:s|ed)?|assign(?:s|ed)?|estimate[sd]?)\b"
             rf"[^0-9\n]{{0,40}}?{_NUM}"),
    ("number", rf"(?<![\w.]){_NUM}(?![\w]|\.\d)"),
)
_RULES = tuple((name, re.compile(pattern, re.IGNORECASE)) for name, pattern in RATING_RULES)
_QUOTED = re.compile(r'"[^"\n]*(?:"|$)|“[^”\n]*(?:”|$)|«[^»\n]*(?:»|$)', re.MULTILINE)  # or cut off
_MARKER = re.compile(r"^\s*\d{1,3}[.)]\s", re.MULTILINE)  # "1. " of a listed line: no rating
_YEAR = re.compile(r"[(\[]\s*(?:1[6-9]|20)\d\d\s*[)\]]")
_COUNT = re.compile(
    r"\b\d+(?:\.\d+)?\s*(?:%|percent|users?|reviews?|ratings|people|items|products|times|years?)(?!\w)", re.I
)
_JSON = re.compile(r"\{[^{}]*\}")

# P5's evaluation kept a rating only if it was one of "1.0" .. "4.9" (range(10, 50) / 10: 5.0 is dropped).
P5_RANGE = (1.0, 4.9)


def _mask(text: str, title: str | None) -> str:
    """The answer with the item's title, quoted spans (one cut at the budget too), bracketed years, counts
    and list markers blanked out."""
    if title and title.strip():
        text = re.sub(re.escape(title.strip()), " ", text, flags=re.IGNORECASE)
    for pattern in (_QUOTED, _YEAR, _COUNT, _MARKER):
        text = pattern.sub(" ", text)
    return text


def _json_rating(text: str) -> str | None:
    """The rating field of a JSON object in the answer (a key naming a rating, score or stars), as text."""
    for chunk in reversed(_JSON.findall(text)):
        try:
            data = json.loads(chunk)
        except ValueError:
            continue
        for key, value in data.items() if isinstance(data, dict) else ():
            if not re.search(r"rating|score|stars", str(key), re.IGNORECASE) or isinstance(value, bool):
                continue
            if isinstance(value, int | float) or re.fullmatch(_NUM, str(value).strip()):
                return str(value).strip()
    return None


def read_rating(text: str | None, title: str | None = None) -> tuple[str | None, str]:
    """The rating an answer states, as written, and the rule that found it; or None and the failure's
    reason (``ambiguous``, ``refused``, ``no_number``).

    >>> read_rating('I would rate "Coneheads (1993)" 4 stars.'), read_rating("Coneheads (1993): 4 stars")
    (('4', 'stars'), ('4', 'stars'))
    >>> read_rating("The predicted rating for Coneheads (1993) is 4.", "Coneheads (1993)")
    ('4', 'labelled')
    >>> read_rating('{"rating": 3.5}'), read_rating("4/5"), read_rating("1 or 5"), read_rating("no idea")
    (('3.5', 'json'), ('4', 'fraction'), (None, 'ambiguous'), (None, 'no_number'))
    """
    answer = strip_think(text)
    found = _json_rating(answer)
    if found is not None:
        return found, "json"
    masked = _mask(answer, title)
    for name, rule in _RULES:
        values = [match.group(1) for match in rule.finditer(masked)]
        if not values:
            continue
        if len({float(value) for value in values}) > 1:  # e.g. the history's ratings echoed back
            return None, "ambiguous"
        return values[-1], name
    return None, "refused" if is_refusal(answer) else "no_number"


def parse_rating(text: str | None, policy: str = "strict", title: str | None = None) -> Parsed:
    """A rating in 1..5 read from an answer (`read_rating`, the item's `title` masked); policy ``p5``: in
    1.0..4.9, P5's rule (a rating it drops fails with reason ``p5_dropped`` instead of vanishing).

    >>> parse_rating("I think 4.5 stars").value
    4.5
    >>> parse_rating("6").reason, parse_rating("no idea").reason
    ('out_of_range', 'no_number')
    >>> parse_rating("5", policy="p5").reason, parse_rating("4.9", policy="p5").value
    ('p5_dropped', 4.9)
    """
    found, rule = read_rating(text, title)
    if found is None:
        return Parsed(False, reason=rule, detail=(text or "")[:200])
    value = float(found)
    if not 1.0 <= value <= 5.0:
        return Parsed(False, reason="out_of_range", detail=f"{found} (rule {rule})")
    if policy == "p5" and not P5_RANGE[0] <= value <= P5_RANGE[1]:
        return Parsed(False, reason="p5_dropped", detail=found)
    return Parsed(True, value)


def normalize(title: str) -> str:
    """A title as titles are compared: NFKC, case-folded, quotes and edge punctuation gone, spaces collapsed.

    >>> normalize('  "The  Hobbit!" ')
    'the hobbit'
    """
    text = unicodedata.normalize("NFKC", title).casefold()
    text = re.sub(r"\s+", " ", text)
    return text.strip(" \t\"'`“”‘’.,;:!?")


class TitleIndex:
    """Items by normalized title, for mapping generated titles back (hashed by identity: a slot holds it).

    A title several items share names all of them, in the order they were given.
    """

    __slots__ = ("_by_title", "_titles")

    def __init__(self, items: Iterable[tuple[str, str]]) -> None:
        by_title: dict[str, list[str]] = {}
        for asin, title in items:
            named = by_title.setdefault(normalize(title), [])
            if asin not in named:
                named.append(asin)
        self._by_title = {title: tuple(asins) for title, asins in by_title.items()}
        self._titles = list(self._by_title)

    def find(self, title: str) -> tuple[tuple[str, ...], bool]:
        """The items a title names and whether it took the fuzzy match; ((), False) when none is close."""
        key = normalize(title)
        if key in self._by_title:
            return self._by_title[key], False
        best = process.extractOne(key, self._titles, scorer=fuzz.ratio, score_cutoff=FUZZY_THRESHOLD)
        return (self._by_title[best[0]], True) if best else ((), False)


def resolve(items: Sequence[str | Sequence[str]], wanted: str) -> list[str]:
    """A parsed ranking as items, best first: an entry naming several items (a shared title) is `wanted`
    where it is one of them, else its first item; an item already ranked is not ranked again.

    >>> resolve(["a", ["b", "t"], ["b", "c"]], "t")
    ['a', 't', 'b']
    """
    ranked: list[str] = []
    for entry in items:
        named = [entry] if isinstance(entry, str) else list(entry)
        pick = wanted if wanted in named else next((asin for asin in named if asin not in ranked), None)
        if pick is not None and pick not in ranked:
            ranked.append(pick)
    return ranked


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
        "duplicates": n}`` (plus ``"not_candidate": n`` with a `catalogue`); an entry of ``items`` whose
        title several items share is the list of them (`resolve` picks one). Failed (``no_list``,
        ``refused`` or ``no_item``) when nothing maps to an item.

    >>> index = TitleIndex([("A1", "Red Soap"), ("B2", "Blue Soap")])
    >>> parse_ranking('["blue soap", "Red Sop", "Green Soap", "Blue Soap"]', index).value
    {'items': ['B2', 'A1'], 'fuzzy': 1, 'unmatched': 1, 'duplicates': 1}
    >>> catalogue = TitleIndex([("A1", "Red Soap"), ("B2", "Blue Soap"), ("C3", "Green Soap")])
    >>> parse_ranking('["Green Soap", "Pink Soap", "Red Soap"]', index, catalogue).value
    {'items': ['A1'], 'fuzzy': 0, 'unmatched': 1, 'duplicates': 0, 'not_candidate': 1}
    >>> parse_ranking("I'm sorry, I cannot recommend anything.", index).reason
    'refused'
    """
    listed = entries(text)
    answer = strip_think(text)
    if not listed or (len(listed) == 1 and is_refusal(answer)):
        return Parsed(False, reason="refused" if is_refusal(answer) else "no_list", detail=(text or "")[:200])
    items: list[str | list[str]] = []
    taken: set[tuple[str, ...]] = set()
    fuzzy = unmatched = duplicates = not_candidate = 0
    for entry in listed:
        named, approximate = index.find(entry)
        if not named and catalogue is not None and catalogue.find(entry)[0]:
            not_candidate += 1
        elif not named:
            unmatched += 1
        elif named in taken:
            duplicates += 1
        else:
            taken.add(named)
            items.append(named[0] if len(named) == 1 else list(named))
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
