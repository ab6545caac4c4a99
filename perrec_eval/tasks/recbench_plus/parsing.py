"""Reading a RecBench+ answer: a list of titles, then each title matched to a catalogue item.

`split_answer` reads ``[SEP]``-separated, numbered, bulleted, one-per-line and JSON lists (think blocks
removed; a single title is a one-item list, not a failure). `normalize_title` is applied to both sides:
case, Unicode, quotes and punctuation, a trailing year ("Title (1994)", "Title, 1994") and edition notes in
brackets ("(Paperback)", "[2nd Edition]", "(Kindle Edition)"). `Matcher` then takes the exact normalized
title, or else the closest catalogue title whose rapidfuzz `fuzz.ratio` is at least `FUZZY_THRESHOLD`. The
same matcher serves every metric (the released code took the best of two matchers per metric).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

from perrec_eval.tasks import Parsed

FUZZY_THRESHOLD = 90.0  # rapidfuzz fuzz.ratio (0-100) on normalized titles
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_MARKER = re.compile(r"^\s*(?:\d+\s*[.):]|[-*•]|\(\d+\))\s*")
_YEAR = re.compile(r"(?:\s*[(\[]\s*(?:1[89]|20)\d\d\s*[)\]]|,\s*(?:1[89]|20)\d\d)\s*$")
_EDITION = re.compile(
    r"\s*[(\[][^()\[\]]*\b(?:edition|paperback|hardcover|kindle|audiobook|audio cd|unabridged|abridged|"
    r"mass market|dvd|blu-ray|vhs|remastered|book \d+|volume \d+|vol\. ?\d+)\b[^()\[\]]*[)\]]\s*$",
    re.IGNORECASE,
)
_QUOTES = "\"'“”‘’`«»"


def _clean_piece(piece: str) -> str:
    piece = _MARKER.sub("", piece.strip()).strip()
    piece = re.sub(r"^\*\*(.*)\*\*$", r"\1", piece)  # markdown bold around a whole title
    return piece.strip().strip(_QUOTES).strip()


def _json_titles(text: str) -> list[str] | None:
    start, end = text.find("["), text.rfind("]")
    if start < 0 or end <= start:
        return None
    try:
        data = json.loads(text[start : end + 1])
    except ValueError:
        return None
    if not isinstance(data, list):
        return None
    titles = [entry.get("title") if isinstance(entry, dict) else entry for entry in data]
    return [t for t in titles if isinstance(t, str)] if all(isinstance(t, str) for t in titles) else None


def split_answer(text: str | None) -> Parsed:
    """The titles of an answer, in order (empty pieces dropped); a failure when there is none.

    >>> split_answer("A [SEP] B [SEP] ").value
    ['A', 'B']
    >>> split_answer("1. A\\n2) B\\n- C").value
    ['A', 'B', 'C']
    >>> split_answer('["A", "B"]').value, split_answer("Only One (1994)").value
    (['A', 'B'], ['Only One (1994)'])
    >>> split_answer("<think>hmm</think>  ").reason
    'no_items'
    """
    body = _THINK.sub("", text or "").strip()
    titles = _json_titles(body) if body.startswith(("[", "`", "{")) or body.endswith("]") else None
    if titles is None:
        if "[SEP]" in body.upper():
            pieces = re.split(r"\[SEP\]", body, flags=re.IGNORECASE)
        else:
            pieces = [line for line in body.splitlines() if not line.rstrip().endswith(":")]
        titles = [_clean_piece(piece) for piece in pieces]
    titles = [t for t in (title.strip() for title in titles) if t]
    return Parsed(True, titles) if titles else Parsed(False, reason="no_items", detail=(text or "")[:200])


def normalize_title(title: str) -> str:
    """The form two titles are compared in.

    >>> normalize_title("  The Lost Wizard (1994) ")
    'the lost wizard'
    >>> normalize_title("The Lost Wizard: A Tale [2nd Edition]")
    'the lost wizard a tale'
    >>> normalize_title("Dune (Paperback), 2005")
    'dune'
    """
    text = unicodedata.normalize("NFKC", title).strip().strip(_QUOTES)
    for _ in range(3):  # "Title (Paperback), 2005": a year and an edition note, in any order
        text = _EDITION.sub("", _YEAR.sub("", text)).strip()
    text = re.sub(r"[^\w\s]|_", " ", text.casefold())
    return " ".join(text.split())


@dataclass(slots=True)
class Matcher:
    """Titles of one catalogue (one domain) → their item: exact normalized title, else fuzzy.

    A title names every item that has it (most popular first, ties by asin): an answer cannot tell apart
    items whose titles are equal once normalized.

    >>> m = Matcher([("a", "The Lost Wizard", 3), ("b", "Dragons of Old", 9), ("c", "Dragons of old", 12)])
    >>> m.match("the lost wizard (1994)"), m.match("Dragons of Olde"), m.match("Something else")
    (('a',), ('c', 'b'), ())
    """

    items: Iterable[tuple[str, str, int]]  # (parent_asin, title, popularity)
    threshold: float = FUZZY_THRESHOLD
    _by_title: dict[str, tuple[str, ...]] = field(init=False)
    _choices: list[str] = field(init=False)

    def __post_init__(self) -> None:
        ranked = sorted(self.items, key=lambda item: (-item[2], item[0]))
        by_title: dict[str, list[str]] = {}
        for asin, title, _ in ranked:
            by_title.setdefault(normalize_title(title), []).append(asin)
        self._by_title = {title: tuple(asins) for title, asins in by_title.items()}
        self._choices = list(self._by_title)

    def match(self, title: str) -> tuple[str, ...]:
        """The parent_asins of the matched title (empty: not in the catalogue)."""
        from rapidfuzz import fuzz, process

        key = normalize_title(title)
        if not key:
            return ()
        if key in self._by_title:
            return self._by_title[key]
        found = process.extractOne(key, self._choices, scorer=fuzz.ratio, score_cutoff=self.threshold)
        return () if found is None else self._by_title[found[0]]
