"""Twin items: one product listed under two ids (editions and formats of a book, a film on DVD and Blu-ray).

A history item that is the query item under another id shows the user's own rating of the query product,
so the builder removes it from that user's history for that query (``--keep-twins`` keeps it, as the paper
did). Two items are twins when their titles agree after :func:`title_key` and, when both name an author,
their authors agree after :func:`author_key`. The key drops what tells editions and formats of one product
apart on Amazon — case, accents, punctuation, a bracketed format or edition note (``(Paperback)``,
``[DVD]``, ``(Kindle Edition)``, ``(2nd Edition)``), a trailing ``- Kindle edition`` — and keeps what tells
products apart: a volume or part number (``(Volume 2)``) and any other bracketed text stay in the key.
"""

from __future__ import annotations

import re
import unicodedata

_FORMATS = (
    r"paperback|hardcover|hardback|mass market|trade paper|board book|library binding|spiral[- ]bound|"
    r"kindle|ebook|e-book|audible|audiobook|audio cd|mp3 cd|cd|dvd|blu-?ray|4k|uhd|vhs|vinyl|lp|"
    r"large print|unabridged|abridged|edition|ed\.|import|widescreen|full ?screen|digital|"
    r"reprint|revised|anniversary|collector'?s|deluxe|box(ed)? set"
)
_BRACKETED = re.compile(r"[(\[{][^()\[\]{}]*\b(?:" + _FORMATS + r")\b[^()\[\]{}]*[)\]}]")
_TRAILING = re.compile(
    r"\s*(?:[-:,/|]\s*)+(?:[\w']+\s+){0,2}?(?:" + _FORMATS + r")(?:\s+(?:edition|version|format))?\W*$"
)
_EDITION = re.compile(r"\b(?:\d+(?:st|nd|rd|th)|first|second|third|new|revised|updated|expanded)\s+edition\b")
_NON_WORD = re.compile(r"[^0-9a-z]+")


def _fold(text: str) -> str:
    if text.isascii():  # nothing to decompose (most titles): the same result, without a loop per character
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).lower()


def title_key(title: str | None) -> str:
    """The part of a title shared by the editions and formats of one product (empty: no key).

    >>> title_key("The Hobbit (Paperback)") == title_key("the hobbit [Kindle Edition]") == "the hobbit"
    True
    >>> title_key("Dune: Deluxe Edition") == title_key("DUNE - 2nd edition") == title_key("Dune")
    True
    >>> title_key("Saga, Volume 1"), title_key("Saga (Volume 2)")
    ('saga volume 1', 'saga volume 2')
    >>> title_key("Alien [Blu-ray]") == title_key("Alien (DVD)"), title_key("  ()  ")
    (True, '')
    >>> title_key("USB Cable - 6ft for CD Player")  # a format word inside a product's name stays
    'usb cable 6ft for cd player'
    """
    if not title:
        return ""
    text = _fold(title)
    text = _BRACKETED.sub(" ", text)
    text = _EDITION.sub(" ", text)
    text = _TRAILING.sub("", text)
    return " ".join(_NON_WORD.sub(" ", text).split())


def author_key(author: str | None) -> str:
    """An author name folded like titles (empty: unknown).

    >>> author_key("J. R. R. Tolkien") == author_key("j.r.r. tolkien")
    True
    """
    return _NON_WORD.sub("", _fold(author)) if author else ""


def are_twins(query: tuple[str | None, str | None], item: tuple[str | None, str | None]) -> bool:
    """Whether a history item ``(title, author)`` is the query item ``(title, author)`` under another id.

    >>> are_twins(("Emma (Penguin Classics)", "Jane Austen"), ("Emma [Kindle Edition]", None))
    False
    >>> are_twins(("Emma (Paperback)", "Jane Austen"), ("Emma: Kindle Edition", None))
    True
    >>> are_twins(("Poems", "Ann Lee"), ("Poems", "Bo Yu"))
    False
    """
    key = title_key(query[0])
    if not key or key != title_key(item[0]):
        return False
    authors = author_key(query[1]), author_key(item[1])
    return not all(authors) or authors[0] == authors[1]
