"""Reading a RecBench+ answer: a list of titles, then each title matched to a catalogue item.

`split_answer` reads ``[SEP]``-separated, numbered, bulleted, one-per-line and JSON lists with
`perrec_eval.answers.entries` (reasoning removed; chat prose before and after the list dropped; a leading
number is a list marker only where the entries are numbered 1, 2, 3, ..., so "2001: A Space Odyssey"
keeps its first word; a single title is a one-item list, not a failure). An answer that lists nothing
and declines ("I'm sorry, but X is not in the category Y, so I cannot recommend...", "There are no such
movies"), or an empty JSON list, is an answer with **no items** (`DECLINED`): the query failed to
recommend, and on a misinformed query it rejected the false premise. The prompt's own answer header
("Recommended books (separated by [SEP]):") is removed wherever the model echoes it. An answer over
`perrec_eval.answers.MAX_ANSWER_CHARS` characters fails (``too_long``).

Titles are matched by `Matcher`, the one title matcher of every family (`perrec_eval.titles`): normalized on
both sides (case, Unicode, quotes and punctuation, a trailing year, edition notes), a catalogue title's other
forms (moved articles, alternative titles, subtitles), an answer's title with and without a trailing author
("The Night Circus by Erin Morgenstern"), then the closest title with rapidfuzz `fuzz.ratio` at least
`FUZZY_THRESHOLD`. The same matcher serves every metric (the released code took the best of two matchers
per metric).
"""

from __future__ import annotations

from collections.abc import Iterable

from perrec_eval.answers import MAX_ANSWER_CHARS, TOO_LONG, entries, is_refusal, strip_think, too_long
from perrec_eval.task import Parsed
from perrec_eval.tasks.recbench_plus.prompts import SEPARATOR, answer_header
from perrec_eval.titles import FUZZY_THRESHOLD, TitleMatcher, normalize_title

__all__ = ["DECLINED", "FUZZY_THRESHOLD", "Matcher", "normalize_title", "split_answer"]
DECLINED = "declined"  # the detail of an answer read as having no items


def split_answer(text: str | None) -> Parsed:
    """The titles of an answer, in order (empty pieces dropped); no titles (detail ``declined``) for an
    answer that declines and lists nothing; a failure: ``no_items`` when there is nothing else, ``too_long``
    for an answer over `perrec_eval.answers.MAX_ANSWER_CHARS` characters.

    >>> split_answer("A [SEP] B [SEP] ").value
    ['A', 'B']
    >>> split_answer("1. A\\n2) B\\n- C").value
    ['A', 'B', 'C']
    >>> split_answer('["A", "B"]').value, split_answer("Only One (1994)").value
    (['A', 'B'], ['Only One (1994)'])
    >>> split_answer("I'm sorry, but no movie meets all of these conditions.").value
    []
    >>> split_answer("Recommended books (separated by [SEP]): Emma [SEP]: Dune").value
    ['Emma', 'Dune']
    >>> split_answer("<think>hmm</think>  ").reason
    'no_items'
    """
    if too_long(text):
        return Parsed(False, reason=TOO_LONG, detail=f"over {MAX_ANSWER_CHARS:,} characters")
    titles = entries(text, SEPARATOR, header=answer_header())
    if titles == []:
        return Parsed(True, [], detail=DECLINED)
    if titles:
        return Parsed(True, titles)
    answer = strip_think(text)
    if answer and is_refusal(answer):
        return Parsed(True, [], detail=DECLINED)
    return Parsed(False, reason="no_items", detail=(text or "")[:200])


class Matcher(TitleMatcher):
    """Titles of one catalogue (one domain) → their item (`perrec_eval.titles.TitleMatcher`, the one matcher
    of every family), from ``(parent_asin, title, popularity)``: a title names every item that has it, most
    popular first (ties by asin).

    >>> m = Matcher([("a", "The Lost Wizard", 3), ("b", "Dragons of Old", 9), ("c", "Dragons of old", 12)])
    >>> m.match("the lost wizard (1994)"), m.match("Dragons of Olde"), m.match("Something else")
    (('a',), ('c', 'b'), ())
    """

    def __init__(self, items: Iterable[tuple[str, str, int]], threshold: float = FUZZY_THRESHOLD) -> None:
        ranked = sorted(items, key=lambda item: (-item[2], item[0]))
        super().__init__(((asin, title) for asin, title, _ in ranked), threshold=threshold)
