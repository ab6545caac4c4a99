"""LLMRec's text tasks from review texts (pure functions): explanation generation and review summarization.

Amazon Reviews 2023 has no Sentires (feature, opinion, sentence, polarity) tuples, which P5 drew its
explanations from, so the explanation ground truth is extracted here, deterministically:

1. a review's **sentences**: its text with HTML line breaks as newlines, split at newlines and after
   ``.``, ``!`` or ``?`` followed by a space;
2. its **terms**: lower-case alphabetic words of at least 3 letters that are not in `STOPWORDS` (function
   words and the common opinion words of reviews: a feature is what is talked about, not how it is judged);
3. the domain's **feature vocabulary**: the `VOCABULARY_SIZE` terms found in the most train reviews (document
   frequency, at least 2 reviews; ties by the term), from the train split only;
4. a review's **explanation**: among its sentences of `MIN_WORDS` to `MAX_WORDS` whitespace words, the one
   holding the most frequent vocabulary term (the earlier sentence of equals), with that term as `feature`.
   A review without such a sentence has no explanation row (counted as ``no_sentence``).

The summary ground truth is the review's title; a title that is empty, a star phrase ("Five Stars",
"5 stars", "One Star", `is_star_phrase`) or without a letter or digit has no summary row (counted).

Leakage: a validation or test target (explanation or summary) whose words occur, in order, in the title or
text of an earlier review of the same user, or equal the title of an item of its history, is left out
(counted as ``repeated_target``), so no test target text is in that user's history or in any train or
validation row of the user.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

TEXT_CONFIGS = ("explanation", "summarization")
TARGETS = {"explanation": "explanation", "summarization": "summary"}  # each config's ground-truth column
VOCABULARY_SIZE = 100
MIN_WORDS = 4  # BLEU-4 of a truth shorter than 4 words is 0 even against itself
MAX_WORDS = 30
STOPWORDS = frozenset(
    """a about above after again against all also am an and any are aren as at be because been before being
    below between both but by can cannot could couldn did didn do does doesn doing don down during each
    even ever every few for from further get gets getting got had hadn has hasn have haven having he her
    here hers herself him himself his how however i if in into is isn it its itself just let lot lots me
    more most much must my myself no nor not now of off on once one only or other our ours ourselves out
    over own per quite really same she should shouldn since so some still such than that the their
    theirs them themselves then there these they this those though through thus to too two under until
    up upon us very was wasn way we well were weren what when where which while who whom why will with
    within without won would wouldn yet you your yours yourself yourselves
    able absolutely actually almost already although always another anything around away back bad best
    better big bit bought buy buying came come comes definitely did different does done easy enjoy
    enjoyed enough especially everything exactly excellent expected far fast favorite feel felt fine
    first found free gave give gives glad goes going good great happy hard highly hope item items keep
    kind know last left like liked likes little long look looked looking looks love loved loves made
    make makes many maybe might money must need needed never new nice nothing ordered perfect pretty
    product products purchase purchased put rather received recommend recommended right sadly said say
    see seems small something special star stars sure take thank thanks thing things think thought time
    times tried try trying two use used uses using want wanted wasn week weeks went whole wonderful work
    worked working works worth year years""".split()
)
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[a-z]{3,}")  # a run of 3 or more letters, whole (shorter runs are never terms)
_TOKEN = re.compile(r"\w+")
_NUMBER = r"(?:one|two|three|four|five|[1-5](?:\.0)?)"
_STARS = re.compile(
    rf"(?:{_NUMBER}[\s-]*stars?(?:\s*(?:out\s+)?of\s+(?:five|5))?"
    rf"|{_NUMBER}\s*(?:/|out\s+of)\s*(?:five|5)(?:[\s-]*stars?)?)[\s.!]*"
)


def sentences(text: str) -> list[str]:
    """A review's sentences, stripped, in order.

    >>> sentences("Great soap.  Smells nice!<br />Would buy again")
    ['Great soap.', 'Smells nice!', 'Would buy again']
    """
    return [part.strip() for part in _SENTENCE_END.split(_BREAK.sub("\n", text)) if part.strip()]


def terms(text: str) -> set[str]:
    """The candidate feature terms of a text.

    >>> sorted(terms("The scent of this soap is great; the SOAP lasts."))
    ['lasts', 'scent', 'soap']
    """
    return set(_WORD.findall(text.casefold())) - STOPWORDS


def feature_vocabulary(texts: Iterable[str], size: int = VOCABULARY_SIZE) -> dict[str, int]:
    """The `size` terms found in the most texts (at least 2), by rank (0 = most frequent; ties by term).

    >>> feature_vocabulary(["soap scent", "soap bottle", "scent soap", "bottle"], size=2)
    {'soap': 0, 'bottle': 1}
    """
    return ranked_vocabulary(document_frequency(texts), size)


def document_frequency(texts: Iterable[str], into: Counter | None = None) -> Counter:
    """In how many of `texts` each term occurs (added to `into` if given: a domain counted a chunk at a time).

    >>> sorted(document_frequency(["soap scent soap", "soap"]).items())
    [('scent', 1), ('soap', 2)]
    """
    frequency = Counter() if into is None else into
    for text in texts:
        frequency.update(terms(text))
    return frequency


def ranked_vocabulary(frequency: Mapping[str, int], size: int = VOCABULARY_SIZE) -> dict[str, int]:
    """The `size` terms of `frequency` found in the most texts (at least 2), by rank (ties by term).

    >>> ranked_vocabulary({"soap": 3, "bottle": 2, "scent": 2, "cap": 1}, size=2)
    {'soap': 0, 'bottle': 1}
    """
    ranked = sorted((term for term, n in frequency.items() if n >= 2), key=lambda t: (-frequency[t], t))
    return {term: rank for rank, term in enumerate(ranked[:size])}


def explanation(text: str, vocabulary: Mapping[str, int]) -> tuple[str, str] | None:
    """The review's sentence naming its most frequent feature, and that feature; None without one.

    >>> vocabulary = {"soap": 0, "scent": 1}
    >>> explanation("I like it. The scent is light and fresh. This soap lathers very well.", vocabulary)
    ('This soap lathers very well.', 'soap')
    >>> explanation("Soap!", vocabulary) is None  # too short a sentence
    True
    """
    # the vocabulary holds terms only (no stop word, 3 letters or more): a word in it is a term
    if vocabulary.keys().isdisjoint(_WORD.findall(text.casefold())):
        return None  # (a sentence's words are the text's: none can name a feature)
    best: tuple[int, str, str] | None = None
    for sentence in sentences(text):
        if not MIN_WORDS <= len(sentence.split()) <= MAX_WORDS:
            continue
        ranks = [(vocabulary[t], t) for t in _WORD.findall(sentence.casefold()) if t in vocabulary]
        if ranks and (best is None or min(ranks)[0] < best[0]):
            rank, term = min(ranks)
            best = (rank, sentence, term)
    return None if best is None else (best[1], best[2])


def is_star_phrase(title: str) -> bool:
    """Whether a review title only states its stars.

    >>> [is_star_phrase(t) for t in ("Five Stars", "5 stars", "One Star", "five-star!", "5 out of 5 stars")]
    [True, True, True, True, True]
    >>> is_star_phrase("Five stars for the scent"), is_star_phrase("4.0 stars out of five")
    (False, True)
    """
    return _STARS.fullmatch(title.strip().casefold()) is not None


def summary_problem(title: str | None) -> str | None:
    """Why a review title is no summary (``empty_title``, ``star_title``, ``no_word``), or None.

    >>> [summary_problem(title) for title in ("Lovely scent", " ", "Five Stars", "!!")]
    [None, 'empty_title', 'star_title', 'no_word']
    """
    if title is None or not title.strip():
        return "empty_title"
    if is_star_phrase(title):
        return "star_title"
    if not re.search(r"[A-Za-z0-9]", title):  # rouge-score keeps only a-z0-9: it would score 0 against itself
        return "no_word"
    return None


@functools.lru_cache(maxsize=2**16)  # a user's earlier reviews are read again for each checked row
def _words(text: str) -> str:
    """A text as its lower-case words joined by single spaces, padded (for whole-word containment)."""
    return " " + " ".join(_TOKEN.findall(text.casefold())) + " "


def repeats(target: str, earlier: Sequence[str], history_titles: Sequence[str]) -> bool:
    """Whether `target`'s words occur in order in one of the `earlier` texts, or equal a history title.

    >>> repeats("Great scent", ["The great scent lasts."], []), repeats("Great scent", ["Greater scent"], [])
    (True, False)
    """
    words = _words(target)
    if words.strip() == "":
        return False
    return any(words in _words(text) for text in earlier) or any(words == _words(t) for t in history_titles)


def text_rows(
    rated: Mapping[str, Sequence[dict[str, Any]]],
    train_pairs: Sequence[tuple[str, str, int]],
    reviews: Mapping[tuple[str, str], tuple[str | None, str | None]],
) -> tuple[dict[str, dict[str, list[dict[str, Any]]]], dict[str, dict[str, int]]]:
    """The explanation and summarization rows of one domain, and what was left out.

    Args:
        rated: the domain's rating rows by split (ids, users, targets, their ratings and histories).
        train_pairs: every train review ``(user_id, parent_asin, timestamp)``: the vocabulary's texts.
        reviews: each review's ``(title, text)`` by ``(user_id, parent_asin)``.

    Returns:
        ``{config: {split: rows}}`` and ``{config: {reason or "kept_<split>": count}}``.
    """
    vocabulary = feature_vocabulary(reviews[(u, a)][1] or "" for u, a, _ in train_pairs)
    by_user: dict[str, set[tuple[int, str]]] = {}
    for user, asin, ts in train_pairs:
        by_user.setdefault(user, set()).add((ts, asin))
    for split_rows in rated.values():
        for row in split_rows:
            by_user.setdefault(row["user_id"], set()).add((row["timestamp"], row["parent_asin"]))
    out: dict[str, dict[str, list[dict[str, Any]]]] = {name: {} for name in TEXT_CONFIGS}
    counts: dict[str, Counter] = {name: Counter() for name in TEXT_CONFIGS}
    for split, split_rows in rated.items():
        for row in split_rows:
            user = row["user_id"]
            title, text = reviews[(user, row["parent_asin"])]
            earlier: list[str] | None = None
            if split != "train":  # the build's order: time, then parent_asin
                before = [a for ts, a in by_user[user] if (ts, a) < (row["timestamp"], row["parent_asin"])]
                earlier = [part for asin in before for part in reviews[(user, asin)] if part]
            history = [item["title"] for item in row["history"]]
            for name, result in review_targets(title, text, vocabulary, earlier, history).items():
                if isinstance(result, str):
                    counts[name][result] += 1
                    continue
                kept = {k: v for k, v in row.items() if k != "rating"} if name == "summarization" else row
                out[name].setdefault(split, []).append({**kept, **result})
                counts[name][f"kept_{split}"] += 1
    return out, {name: dict(sorted(c.items())) for name, c in counts.items()}


def review_targets(
    title: str | None,
    text: str | None,
    vocabulary: Mapping[str, int],
    earlier: Sequence[str] | None,
    history_titles: Sequence[str],
) -> dict[str, dict[str, str] | str]:
    """Each text config's target columns for one review, or the reason it has none.

    Args:
        title, text: the review's title and text.
        vocabulary: the domain's feature vocabulary (`feature_vocabulary`).
        earlier: the titles and texts of the user's earlier reviews for a validation or test row (checked
            for a repeated target), None for a train row (kept as it is).
        history_titles: the titles of the row's history items.

    >>> review_targets("Fresh", "The soap smells so fresh.", {"soap": 0}, None, [])["explanation"]
    {'explanation': 'The soap smells so fresh.', 'feature': 'soap'}
    >>> review_targets("Fresh", "The soap smells so fresh.", {"soap": 0}, ["fresh!"], [])["summarization"]
    'repeated_target'
    """
    made = {"explanation": _explanation(text, vocabulary), "summarization": _summary(title, text)}
    for name, result in made.items():
        if earlier is not None and not isinstance(result, str):
            if repeats(result[TARGETS[name]], earlier, history_titles):
                made[name] = "repeated_target"
    return made


def _explanation(text: str | None, vocabulary: Mapping[str, int]) -> dict[str, str] | str:
    if not text or not text.strip():
        return "no_text"
    found = explanation(text, vocabulary)
    if found is None:
        return "no_sentence"
    return {"explanation": found[0], "feature": found[1]}


def _summary(title: str | None, text: str | None) -> dict[str, str] | str:
    if not text or not text.strip():
        return "no_text"
    problem = summary_problem(title)
    if problem is not None:
        return problem
    assert title is not None
    return {"review_text": text, "summary": title.strip()}
