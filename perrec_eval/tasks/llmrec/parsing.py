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
from collections.abc import Sequence

from perrec_eval.answers import MAX_ANSWER_CHARS, TOO_LONG, entries, is_refusal, strip_think, too_long
from perrec_eval.task import Parsed
from perrec_eval.titles import FUZZY_THRESHOLD, TitleMatcher, normalize_title

__all__ = [
    "FUZZY_THRESHOLD", "RATING_RULES", "TitleIndex", "normalize_title", "parse_ranking", "parse_rating",
    "resolve", "strip_think",
]  # fmt: skip

_NUM = r"(?<![\w.])([-+]?\d++(?:\.\d++)?)"  # a number that starts a word: "1111" is read once, not per digit
# The rules that read a rating, tried in order: (name, pattern whose group 1 is the rating). None nests a
# quantifier or can backtrack through a run of digits or spaces: a 40,000-character answer reads in
# milliseconds.
RATING_RULES: tuple[tuple[str, str], ...] = (
    ("final", rf"\b(?:final (?:answer|rating|prediction)|predicted rating|prediction|my (?:answer|prediction|"
              rf"rating)|answer)\s*+[:=][\s*]*+{_NUM}"),
    ("labelled", rf"\b(?:rating|score)\b[^0-9\n]{{0,60}}?(?:\bis\b|\bof\b|\bbe\b|:|=)[\s*]*+{_NUM}"),
    ("fraction", rf"{_NUM}\s*+\(?\s*+(?:/|out of)\s*+5(?:\.0)?(?![\d.])"),
    ("stars", rf"{_NUM}\s*+-?\s*+stars?\b"),
    ("glyphs", r"(?<![★☆⭐])([★⭐]{1,5}+)(?:[☆✩]{0,4}+)(?![★☆⭐✩])"),
    ("bold", rf"\*\*\s*+{_NUM}\s*+\*\*"),
    ("verb", rf"\b(?:rate[sd]?|give[sn]?|gave|predict(?:s|ed)?|assign(?:s|ed)?|estimate[sd]?)\b"
             rf"[^0-9\n]{{0,40}}?{_NUM}"),
    ("number", rf"{_NUM}(?![\w]|\.\d)"),
)  # fmt: skip
_RULES = tuple((name, re.compile(pattern, re.IGNORECASE)) for name, pattern in RATING_RULES)
_QUOTED = re.compile(r'"[^"\n]*+(?:"|$)|“[^”\n]*+(?:”|$)|«[^»\n]*+(?:»|$)', re.MULTILINE)  # or cut off
_MARKER = re.compile(r"^\s*+\d{1,3}[.)]\s", re.MULTILINE)  # "1. " of a listed line: no rating
_YEAR = re.compile(r"[(\[]\s*+(?:1[6-9]|20)\d\d\s*+[)\]]")
_COUNT = re.compile(
    r"(?<![\w.])\d++(?:\.\d++)?\s*+"
    r"(?:%|percent|users?|reviews?|ratings|people|items|products|times|years?)(?!\w)",
    re.IGNORECASE,
)
_ID = re.compile(  # "MLU196", "A2X", "User 196" (not "4stars")
    r"\b(?!\d++stars?\b)(?=\w*+[^\W\d_])(?=\w*+\d)\w++|\b(?:user|id)\s*+#?\s*+\d++", re.IGNORECASE
)
_HISTORY = re.compile(  # a line of the prompt's history echoed back: '3. "Heat (1995)": 4 stars'
    r'^\s*+(?:\d{1,3}[.)]\s*+)?"([^"\n]*+)"\s*+:\s*+\d(?:\.\d)?\s*+stars?\b[^\n]*+$',
    re.MULTILINE | re.IGNORECASE,
)
_LAST_LINE_NUMBER = re.compile(r"\n\s*+(\d{1,3})\s*+$")  # "…\n3. Raiders of the Lost Ark\n4": a cut marker
_JSON = re.compile(r"\{[^{}]*+\}")
_GLYPHS = "★⭐"

# P5's evaluation kept a rating only if it was one of "1.0" .. "4.9" (range(10, 50) / 10: 5.0 is dropped).
P5_RANGE = (1.0, 4.9)


def _mask(text: str, title: str | None, user: str | None = None) -> str:
    """The answer with what is no rating blanked out: the item's title (with and without its year), the
    user's id and any word mixing letters and digits ("MLU196", "A2X"), echoed history lines, quoted spans
    (one cut at the budget too), bracketed years, counts, list markers and a list marker the budget cut."""
    target = normalize_title(title) if title else ""
    echoed = _HISTORY.sub
    text = echoed(lambda m: m.group(0) if target and normalize_title(m.group(1)) == target else " ", text)
    for name in (title, re.sub(r"\s*+[(\[]\s*+\d{4}\s*+[)\]]\s*+$", "", title or ""), user):
        if name and name.strip():
            text = re.sub(re.escape(name.strip()), " ", text, flags=re.IGNORECASE)
    cut = _LAST_LINE_NUMBER.search(text)
    if cut and re.search(rf"(?m)^\s*+{int(cut.group(1)) - 1}[.)]\s", text):
        text = text[: cut.start()]
    for pattern in (_QUOTED, _YEAR, _COUNT, _ID, _MARKER):
        text = pattern.sub(" ", text)
    return text


def _json_rating(text: str) -> str | None:
    """The rating field of a JSON object in the answer (a key naming a rating, score or stars), as text."""
    for chunk in reversed(_JSON.findall(text)):
        try:
            data = json.loads(chunk)
        except (ValueError, RecursionError):
            continue
        for key, value in data.items() if isinstance(data, dict) else ():
            if not re.search(r"rating|score|stars", str(key), re.IGNORECASE) or isinstance(value, bool):
                continue
            if isinstance(value, int | float) or re.fullmatch(r"[-+]?\d++(?:\.\d++)?", str(value).strip()):
                return str(value).strip()
    return None


def read_rating(
    text: str | None, title: str | None = None, user: str | None = None
) -> tuple[str | None, str]:
    """The rating an answer states, as written, and the rule that found it; or None and the failure's
    reason (``ambiguous``, ``refused``, ``no_number``, ``too_long``).

    >>> read_rating('I would rate "Coneheads (1993)" 4 stars.'), read_rating("Coneheads (1993): 4 stars")
    (('4', 'stars'), ('4', 'stars'))
    >>> read_rating("The predicted rating for Coneheads (1993) is 4.", "Coneheads (1993)")
    ('4', 'labelled')
    >>> read_rating('{"rating": 3.5}'), read_rating("4/5"), read_rating("1 or 5"), read_rating("no idea")
    (('3.5', 'json'), ('4', 'fraction'), (None, 'ambiguous'), (None, 'no_number'))
    >>> read_rating("★★★★☆"), read_rating("Heat: 5, Alien: 3, Fargo: 4.\\nPrediction: 4")
    (('4', 'glyphs'), ('4', 'final'))
    """
    if too_long(text):
        return None, TOO_LONG
    answer = strip_think(text)
    found = _json_rating(answer)
    if found is not None:
        return found, "json"
    masked = _mask(answer, title, user)
    for name, rule in _RULES:
        values = [match.group(1) for match in rule.finditer(masked)]
        if name == "glyphs":
            values = [str(sum(value.count(glyph) for glyph in _GLYPHS)) for value in values]
        if not values:
            continue
        if name == "final":
            return values[-1], name  # the answer's own label decides, whatever came before it
        if len({float(value) for value in values}) > 1:  # e.g. the history's ratings echoed back
            return None, "ambiguous"
        return values[-1], name
    return None, "refused" if is_refusal(answer) else "no_number"


def parse_rating(
    text: str | None, policy: str = "strict", title: str | None = None, user: str | None = None
) -> Parsed:
    """A rating in 1..5 read from an answer (`read_rating`, the item's `title` masked); policy ``p5``: in
    1.0..4.9, P5's rule (a rating it drops fails with reason ``p5_dropped`` instead of vanishing).

    >>> parse_rating("I think 4.5 stars").value
    4.5
    >>> parse_rating("6").reason, parse_rating("no idea").reason
    ('out_of_range', 'no_number')
    >>> parse_rating("5", policy="p5").reason, parse_rating("4.9", policy="p5").value
    ('p5_dropped', 4.9)
    """
    found, rule = read_rating(text, title, user)
    if found is None:
        return Parsed(False, reason=rule, detail=(text or "")[:200])
    value = float(found)
    if not 1.0 <= value <= 5.0:
        return Parsed(False, reason="out_of_range", detail=f"{found} (rule {rule})")
    if policy == "p5" and not P5_RANGE[0] <= value <= P5_RANGE[1]:
        return Parsed(False, reason="p5_dropped", detail=found)
    return Parsed(True, value)


class TitleIndex(TitleMatcher):
    """Items by title, for mapping generated titles back: the one title matcher of every family
    (`perrec_eval.titles.TitleMatcher`), hashed by identity (a slot holds it). A title several items share
    names all of them, in the order they were given.

    >>> index = TitleIndex([
    ...     ("1", "Usual Suspects, The (1995)"), ("2", "Heat (1995)"), ("3", "Best Men (1997)")
    ... ])
    >>> index.find("The Usual Suspects (1995)"), index.find("Heat"), index.find("The Best Men (1997)")
    ((('1',), False), (('2',), False), (('3',), False))
    """

    __hash__ = object.__hash__


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


def _comma_list(line: str) -> list[str]:
    """A line of titles separated by commas (a last one after "and"), quotes around them removed.

    >>> _comma_list("Heat (1995), 'Alien (1979)', and Casablanca")
    ['Heat (1995)', 'Alien (1979)', 'Casablanca']
    """
    parts = re.split(r",\s*+(?:and\s++|or\s++)?", line)
    return [part.strip().strip("\"'“”‘’").strip() for part in parts if part.strip()]


def _unnamed_list(entry: str, index: TitleIndex) -> bool:
    """Whether an entry is titles joined by commas: it names no item as a whole."""
    return ", " in entry and not index.find(entry)[0]


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
    if too_long(text):
        return Parsed(False, reason=TOO_LONG, detail=f"over {MAX_ANSWER_CHARS:,} characters")
    listed = entries(text)
    answer = strip_think(text)
    if not listed:
        return Parsed(False, reason="refused" if is_refusal(answer) else "no_list", detail=(text or "")[:200])
    listed = [  # "Heat (1995), Alien (1979), Casablanca (1942)" on one line
        part for entry in listed for part in (_comma_list(entry) if _unnamed_list(entry, index) else [entry])
    ]
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
