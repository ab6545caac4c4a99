"""One title matcher for every family: the names a model writes matched to a catalogue's items.

Both sides are compared in one form (`normalize_title`: Unicode, case, quotes and punctuation, a trailing year
"(1994)" or ", 1994", an edition note "(Paperback)", "[2nd Edition]"). A catalogue title also stands for its
other forms (`alternatives`): MovieLens's moved article ("Usual Suspects, The" is "The Usual Suspects" and
"Usual Suspects"), its bracketed and "a.k.a." alternative titles ("Seven (Se7en)", "Professional, The (a.k.a.
Leon: The Professional)"), the title without its leading article and without its subtitle. An answer's title
is tried as written, then without a trailing author ("The Night Circus by Erin Morgenstern", "Piranesi —
Susanna Clarke", "The Hobbit (J.R.R. Tolkien)": so "Stand by Me" still matches first as itself), without a
trailing bracketed note, and, where its year agrees with the catalogue title's, without its leading article
or its subtitle (`answer_forms`).

`TitleMatcher.find` takes, in order: a catalogue title in its own form, then in one of its other forms, and
last the closest catalogue title in its own form (rapidfuzz ``fuzz.ratio`` of the normalized forms at least
`FUZZY_THRESHOLD`, their numbers equal: "Rocky II" is no typo of "Rocky III"). Where
both titles carry a year, years more than one apart never match ("Heat (1986)" is not "Heat (1995)").

Bounds: a title is matched in time linear in its length and independent of the catalogue's size (exact forms
are hashed; the fuzzy candidates come from an index of character trigrams, at most `FUZZY_CANDIDATES` of them
scored, found through the `FUZZY_GRAMS` rarest trigrams of the title); a title of more than `MAX_TITLE_CHARS`
characters names no item; each distinct title is matched once per matcher (a bounded cache).
"""

from __future__ import annotations

import re
import unicodedata
from array import array
from collections import Counter
from collections.abc import Iterable

FUZZY_THRESHOLD = 90.0  # rapidfuzz fuzz.ratio (0-100) on normalized titles
MAX_TITLE_CHARS = 500  # an answer's title longer than this names no item
FUZZY_GRAMS = 24  # the rarest trigrams of a title that find its fuzzy candidates
FUZZY_CANDIDATES = 64  # the candidates sharing most of them that are scored
FUZZY_POSTING = 5_000  # a trigram more titles hold than this ("the") finds no candidate
_CACHE = 100_000  # titles remembered per matcher

_YEAR_END = re.compile(r"(?:[(\[]\s*+((?:1[89]|20)\d\d)\s*+[)\]]|,\s*+((?:1[89]|20)\d\d))$")
_EDITION = re.compile(
    r"\b(?:edition|paperback|hardcover|kindle|audiobook|audio cd|unabridged|abridged|mass market|dvd|blu-ray|"
    r"vhs|remastered|book \d++|volume \d++|vol\. ?\d++)\b",
    re.IGNORECASE,
)
_ARTICLES = ("The", "A", "An", "La", "Le", "Les", "L'", "Il", "Das", "Der", "Die", "El", "Los", "Las")
_MOVED = re.compile(rf", ({'|'.join(_ARTICLES)})$")  # "Usual Suspects, The"
_LEADING = re.compile(r"^(?:The|A|An|La|Le|Les|Il|Das|Der|Die|El|Los|Las) (?=\S)")
_AKA = re.compile(r"^(?:a\.k\.a\.|aka|also known as)\s++", re.IGNORECASE)
_SUBTITLE = re.compile(r":\s| - | or, | or: ")
_NAME = re.compile(  # an author: "Erin Morgenstern", "J.R.R. Tolkien", "Tim LaHaye and Jerry B. Jenkins"
    r"(?:[A-Z][\w.'’-]*+\.?|de|van|von|la|le|du|da|del|der|and|&)"
    r"(?:\s++(?:[A-Z][\w.'’-]*+\.?|de|van|von|la|le|du|da|del|der|and|&)){0,7}"
)
_PUNCT = re.compile(r"[^\w\s]|_")
_NUMERAL = re.compile(r"\d++|[ivx]{2,4}|v|x")


def _strip_tail(text: str) -> tuple[str, int | None]:
    """A title without its trailing year and edition notes (in any order), and the year it gave."""
    year = None
    for _ in range(3):
        text = text.rstrip()
        found = _YEAR_END.search(text[-16:])
        if found:
            year = year or int(found.group(1) or found.group(2))
            text = text[: len(text) - len(found.group(0))]
            continue
        if text.endswith((")", "]")):
            start = text.rfind("(" if text.endswith(")") else "[")
            if start > 0 and _EDITION.search(text[start:]):
                text = text[:start]
                continue
        break
    return text.rstrip(" ,"), year


def normalize_title(title: str) -> str:
    """The form two titles are compared in (linear in the title's length).

    >>> normalize_title("  The Lost Wizard (1994) "), normalize_title("The Lost Wizard: A Tale [2nd Edition]")
    ('the lost wizard', 'the lost wizard a tale')
    >>> normalize_title("Dune (Paperback), 2005"), normalize_title("1984")
    ('dune', '1984')
    """
    text = unicodedata.normalize("NFKC", title).strip()
    stripped, _ = _strip_tail(text)
    text = _PUNCT.sub(" ", (stripped or text).casefold())
    return " ".join(text.split())


def _year(title: str) -> int | None:
    return _strip_tail(unicodedata.normalize("NFKC", title).strip())[1]


def _moved(name: str) -> list[str]:
    """A name with a moved article put back in front, and without it ("Usual Suspects, The")."""
    found = _MOVED.search(name)
    if not found:
        return [name]
    rest, article = name[: found.start()], found.group(1)
    return [f"{article}{'' if article.endswith(chr(39)) else ' '}{rest}", rest]


def alternatives(title: str) -> tuple[list[str], list[str], list[str]]:
    """A catalogue title's own forms, its other forms and its titles without their subtitle (module
    docstring), as written.

    >>> alternatives("Postino, Il (The Postman) (1994)")
    (['Postino, Il (The Postman) (1994)', 'Il Postino'], ['Postino', 'The Postman', 'Postman'], [])
    >>> alternatives("Professional, The (a.k.a. Leon: The Professional) (1994)")[1:]
    (['Professional', 'Leon: The Professional'], ['Leon'])
    """
    rest, _ = _strip_tail(unicodedata.normalize("NFKC", title).strip())
    bracketed: list[str] = []
    for _ in range(4):  # "Boat, The (Das Boot)", "City of Lost Children, The (Cité des enfants perdus, La)"
        if not rest.endswith(")") or (start := rest.rfind("(")) <= 0:
            break
        inner = _AKA.sub("", rest[start + 1 : -1].strip())
        bracketed = [part.strip() for part in inner.split("/") if part.strip()] + bracketed
        rest = rest[:start].rstrip()
    main, *shorter = _moved(rest)
    own = [title, main]
    other = list(shorter)
    for name in bracketed:
        other += _moved(name)
    other += [bare for name in [main, *other] if (bare := _LEADING.sub("", name)) != name]
    heads = [head for name in [main, *other] if (head := _SUBTITLE.split(name, maxsplit=1)[0]) != name]
    other = [form for form in dict.fromkeys(other) if form not in own]
    return own, other, [form for form in dict.fromkeys(heads) if form not in own and form not in other]


def _author_free(title: str) -> str | None:
    """The title without a trailing "by Author", "— Author" or "- Author" (an author: two words or more, so
    "Mission: Impossible - Fallout" keeps its "Fallout"); None without one."""
    for mark in (" by ", " \u2014 ", " \u2013 ", " - "):
        cut = title.rfind(mark)
        name = title[cut + len(mark) :].strip().rstrip(".")
        if cut > 0 and (" " in name or "." in name) and _NAME.fullmatch(name):
            return title[:cut]
    return None


def answer_forms(title: str) -> list[tuple[str, bool]]:
    """An answer's title as it may name a catalogue title: (form, whether the form is relaxed), most literal
    first (module docstring). A relaxed form (without the answer's leading article or subtitle) names an
    item only where both carry a year and the years agree: "Mad Max: Fury Road" is not "Mad Max (1979)", and
    "The Heat" is not "Heat (1995)", but "The Best Men (1997)" is "Best Men (1997)".

    >>> [form for form, _ in answer_forms("The Night Circus by Erin Morgenstern")]
    ['The Night Circus by Erin Morgenstern', 'The Night Circus', 'Night Circus']
    >>> answer_forms("Mad Max: Fury Road (action, post-apocalyptic)")[1:]
    [('Mad Max: Fury Road', False), ('Mad Max', True)]
    """
    text = unicodedata.normalize("NFKC", title).strip().strip("\"'“”‘’`«» ")
    forms = [(text, False)]
    moved = _moved(_strip_tail(text)[0])
    if len(moved) > 1:
        forms.append((moved[0], False))  # "Boat, The" as "The Boat"
    bare = _author_free(text)
    if bare:
        forms.append((bare, False))
    base = _strip_tail(bare or text)[0]
    if base.endswith(")") and (start := base.rfind("(")) > 0:
        forms.append((base[:start].rstrip(), False))
    last = forms[-1][0]
    if (articleless := _LEADING.sub("", last)) != last:
        forms.append((articleless, True))
    head = _SUBTITLE.split(last, maxsplit=1)[0]
    if head != last and head.strip():
        forms.append((head, True))
    return forms


def _numerals(key: str) -> set[str]:
    """The numbers of a normalized title: digits and roman numerals ("rocky iii" → {"iii"})."""
    return {word for word in key.split() if _NUMERAL.fullmatch(word)}


def _grams(key: str) -> set[str]:
    padded = f" {key[:MAX_TITLE_CHARS]} "
    return {padded[i : i + 3] for i in range(len(padded) - 2)}


class TitleMatcher:
    """The items of one catalogue by title (module docstring); a title several items share names all of them,
    in the order they were given (the preferred first).

    >>> m = TitleMatcher([
    ...     ("a", "Usual Suspects, The (1995)"), ("b", "Heat (1995)"), ("c", "The Night Circus")
    ... ])
    >>> m.match("The Usual Suspects"), m.match("Heat"), m.match("The Night Circus by Erin Morgenstern")
    (('a',), ('b',), ('c',))
    >>> m.match("Heat (1986)"), m.find("The Nigth Circus")
    ((), (('c',), True))
    """

    def __init__(self, items: Iterable[tuple[str, str]], *, threshold: float = FUZZY_THRESHOLD) -> None:
        self.threshold = threshold
        self._ids: list[str] = []
        self._years: list[int | None] = []
        own: dict[str, list[int]] = {}
        other: dict[str, list[int]] = {}
        heads: dict[str, list[int]] = {}
        for key, title in items:
            if not isinstance(title, str) or not title.strip():
                continue
            item = len(self._ids)
            self._ids.append(key)
            self._years.append(_year(title))
            for table, forms in zip((own, other, heads), alternatives(title), strict=True):
                for form in forms:
                    named = table.setdefault(normalize_title(form), [])
                    if not named or named[-1] != item:
                        named.append(item)
        # a title without its subtitle names an item only where no other item has it ("Dr. Strangelove"; not
        # "Star Trek", the head of a whole series)
        for form, named in heads.items():
            if len(named) == 1:
                other.setdefault(form, named)
        other = {form: named for form, named in other.items() if form}
        self._tiers = (own, other)
        self._keys = list(own)  # the fuzzy match reads catalogue titles in their own forms only
        self._postings: dict[str, array] | None = None
        self._cache: dict[str, tuple[tuple[str, ...], bool]] = {}

    def __len__(self) -> int:
        return len(self._ids)

    def match(self, title: str) -> tuple[str, ...]:
        """The items a title names (empty: none)."""
        return self.find(title)[0]

    def find(self, title: str) -> tuple[tuple[str, ...], bool]:
        """The items a title names and whether the fuzzy match found them; ((), False) when none does."""
        if not isinstance(title, str) or len(title) > MAX_TITLE_CHARS:
            return (), False
        found = self._cache.get(title)
        if found is None:
            if len(self._cache) >= _CACHE:
                self._cache.clear()
            found = self._cache[title] = self._find(title)
        return found

    def _named(self, items: Iterable[int], year: int | None, *, dated: bool = False) -> tuple[str, ...]:
        """The ids of `items` whose year agrees with `year` (where both have one; `dated`: both must)."""
        years = self._years
        kept = (
            i for i in items
            if (year is None or years[i] is None) and not dated or year is not None and years[i] is not None
            and abs(years[i] - year) <= 1
        )  # fmt: skip
        return tuple(dict.fromkeys(self._ids[i] for i in kept))

    def _find(self, title: str) -> tuple[tuple[str, ...], bool]:
        year = _year(title)
        forms = [(normalize_title(form), relaxed) for form, relaxed in answer_forms(title)]
        forms = [(key, relaxed) for key, relaxed in forms if key and not (relaxed and year is None)]
        for table in self._tiers:
            for key, relaxed in forms:
                if key in table and (named := self._named(table[key], year, dated=relaxed)):
                    return named, False
        for key, relaxed in forms:
            if not relaxed and (named := self._fuzzy(key, year)):
                return named, True
        return (), False

    def _index(self) -> dict[str, array]:
        if self._postings is None:
            postings: dict[str, array] = {}
            for number, key in enumerate(self._keys):
                for gram in _grams(key):
                    postings.setdefault(gram, array("I")).append(number)
            self._postings = postings
        return self._postings

    def _fuzzy(self, key: str, year: int | None) -> tuple[str, ...]:
        """The items of the closest title (ratio at least the threshold) among the index's candidates: the
        titles sharing most of the key's `FUZZY_GRAMS` rarest trigrams (a trigram more than `FUZZY_POSTING`
        titles hold finds none), of a length the threshold allows."""
        from rapidfuzz import fuzz

        postings = self._index()
        grams = sorted((len(postings[g]), g) for g in _grams(key) if g in postings)
        counts: Counter[int] = Counter()
        for size, gram in grams[:FUZZY_GRAMS]:
            if size <= FUZZY_POSTING:
                counts.update(postings[gram])
        slack = 2 * (100 - self.threshold) / self.threshold * len(key) + 1
        numbers = _numerals(key)
        best, best_score, scored = -1, 0.0, 0
        for number, _ in counts.most_common(FUZZY_CANDIDATES * 4):
            candidate = self._keys[number]
            if abs(len(candidate) - len(key)) > slack or _numerals(candidate) != numbers:
                continue  # (a typo changes no number: "Rocky II" is not "Rocky III")
            score = fuzz.ratio(key, candidate, score_cutoff=self.threshold)
            if score and (score > best_score or (score == best_score and number < best)):
                best, best_score = number, score
            scored += 1
            if scored == FUZZY_CANDIDATES:
                break
        if best < 0:
            return ()
        return self._named(self._tiers[0][self._keys[best]], year)
