"""Reading a RecBench+ answer: a list of titles, then each title matched to a catalogue item.

`split_answer` reads ``[SEP]``-separated, numbered, bulleted, one-per-line and JSON lists with
`perrec_eval.answers.entries` (reasoning removed; chat prose before and after the list dropped; a leading
number is a list marker only where the entries are numbered 1, 2, 3, ..., so "2001: A Space Odyssey"
keeps its first word; a single title is a one-item list, not a failure). An answer that lists nothing
and declines ("I'm sorry, but X is not in the category Y, so I cannot recommend...", "There are no such
movies"), or an empty JSON list, is an answer with **no items** (`DECLINED`): the query failed to
recommend, and on a misinformed query it rejected the false premise. `normalize_title` is applied to both
sides: case, Unicode, quotes and punctuation, a trailing year ("Title (1994)", "Title, 1994") and edition
notes in brackets ("(Paperback)", "[2nd Edition]", "(Kindle Edition)"). `Matcher` then takes the exact
normalized title, or else the closest catalogue title whose rapidfuzz `fuzz.ratio` is at least
`FUZZY_THRESHOLD`. The same matcher serves every metric (the released code took the best of two matchers
per metric).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

from perrec_eval.answers import entries, is_refusal, strip_think
from perrec_eval.task import Parsed
from perrec_eval.tasks.recbench_plus.prompts import SEPARATOR

FUZZY_THRESHOLD = 90.0  # rapidfuzz fuzz.ratio (0-100) on normalized titles
DECLINED = "declined"  # the detail of an answer read as having no items
_YEAR = re.compile(r"(?:\s*[(\[]\s*(?:1[89]|20)\d\d\s*[)\]]|,\s*(?:1[89]|20)\d\d)\s*$")
_EDITION = re.compile(
    r"\s*[(\[][^()\[\]]*\b(?:edition|paperback|hardcover|kindle|audiobook|audio cd|unabridged|abridged|"
    r"mass market|dvd|blu-ray|vhs|remastered|book \d+|volume \d+|vol\. ?\d+)\b[^()\[\]]*[)\]]\s*$",
    re.IGNORECASE,
)
_QUOTES = "\"'“”‘’`«»"


def split_answer(text: str | None) -> Parsed:
    """The titles of an answer, in order (empty pieces dropped); no titles (detail ``declined``) for an
    answer that declines; a failure (``no_items``) when there is nothing else.

    >>> split_answer("A [SEP] B [SEP] ").value
    ['A', 'B']
    >>> split_answer("1. A\\n2) B\\n- C").value
    ['A', 'B', 'C']
    >>> split_answer('["A", "B"]').value, split_answer("Only One (1994)").value
    (['A', 'B'], ['Only One (1994)'])
    >>> split_answer("I'm sorry, but no movie meets all of these conditions.").value
    []
    >>> split_answer("<think>hmm</think>  ").reason
    'no_items'
    """
    titles = entries(text, SEPARATOR)
    answer = strip_think(text)
    if titles == [] or (titles is not None and len(titles) == 1 and is_refusal(answer)):
        return Parsed(True, [], detail=DECLINED)
    if titles:
        return Parsed(True, titles)
    if answer and is_refusal(answer):
        return Parsed(True, [], detail=DECLINED)
    return Parsed(False, reason="no_items", detail=(text or "")[:200])


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
