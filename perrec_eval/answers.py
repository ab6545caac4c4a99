"""Reading answers as instruct models write them: reasoning blocks, chat prose around a list, list markers,
refusals. Shared by every family whose answers are lists of names; what a name means is the family's.

The rules are tables (`LEAD_INS`, `CLOSINGS`, `REFUSALS`): a line of chat prose before or after a list is
dropped, never read as an entry; an answer that lists nothing and says it cannot or will not answer is a
refusal (`is_refusal`), which a family reads as an answer with no items, not as one hallucinated name.

A leading number is a list marker only where the pieces are numbered 1, 2, 3, ... in order (`entries`), so
"2001: A Space Odyssey" in a ``[SEP]`` list keeps its first word.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence

_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_CLOSE_THINK = re.compile(r"</think>", re.IGNORECASE)
_FENCE = re.compile(r"^```[\w-]*\s*|\s*```$")
_BULLET = re.compile(r"^\s*(?:[-*•·]|\u2013|\u2014)\s+")
_NUMBER = re.compile(r"^\s*(?:\(\s*(\d{1,3})\s*\)|#?(\d{1,3})\s*[.):]|(\d{1,3})\s+[-\u2013\u2014]\s)\s*")
_BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__")
_QUOTES = "\"'“”‘’`«»"

# Lines of chat prose around a list (matched at the start of a line, case-insensitive).
LEAD_INS = (
    r"(?:sure|certainly|of course|absolutely|okay|ok|great|alright|yes)\b",
    r"here(?:'s| is| are)\b",
    r"(?:based on|given|considering|according to)\b",
    r"i (?:would|'d|recommend|suggest|think|believe|have|can)\b",
    r"(?:these|the following|below|my) (?:are|is|recommendations?|suggestions?|picks?|list)\b",
    r"(?:recommended|recommendations?|suggestions?|answer|output|result)s?\s*[:(]",
)
CLOSINGS = (
    r"(?:enjoy|happy (?:watching|reading|listening|shopping))\b",
    r"(?:i )?hope (?:you|this|these)\b",
    r"(?:let me know|feel free|if you (?:like|want|need|enjoy))\b",
    r"(?:each|all|both) of (?:these|them)\b",
    r"these (?:movies|films|books|titles|items|products|picks|recommendations|suggestions|options)\b",
    r"(?:note|remember)\s*:",
)
# An answer that declines: an apology, an inability, or a statement that nothing fits.
REFUSALS = (
    r"\b(?:i'm|i am) (?:sorry|afraid|unable|not able)\b",
    r"\bi apologi[sz]e\b",
    r"\b(?:i|we) (?:can ?not|can't|couldn't|could not|won't|will not|am unable to|do not|don't) "
    r"(?:recommend|suggest|find|provide|answer|help|identify|think of|predict|give)\b",
    r"\bunfortunately\b",
    r"\b(?:there (?:are|is|were|was)|i (?:know|found|have found)) (?:no|not any)\b",
    r"\bno (?:such )?(?:movies?|films?|books?|titles?|items?|products?|matches|results)\b"
    r"(?: (?:that|which|who|were|was|are|is|match|meet|satisfy|fit))?",
    r"\b(?:does not|doesn't|do not|don't) (?:exist|match|appear|belong|fit)\b",
    r"\bnot (?:in|part of|among|a member of) (?:the|this|that|any)\b",
    r"\b(?:false|incorrect|mistaken|wrong) (?:premise|claim|assumption|information)\b",
)
_LEAD = re.compile(r"^\s*(?:" + "|".join(LEAD_INS) + ")", re.IGNORECASE)
_CLOSE = re.compile(r"^\s*(?:" + "|".join(CLOSINGS) + ")", re.IGNORECASE)
_REFUSE = re.compile("|".join(REFUSALS), re.IGNORECASE)


def strip_think(text: str | None) -> str:
    """The answer without its reasoning: ``<think>…</think>`` blocks (an unclosed one runs to the end), and
    everything before a lone ``</think>`` (templates that open the block in the prompt).

    >>> strip_think("<think>4? 5?</think> 4"), strip_think("hmm 3?</think>4"), strip_think("<think>cut")
    ('4', '4', '')
    """
    text = text or ""
    closes = list(_CLOSE_THINK.finditer(text))
    if closes and "<think>" not in text[: closes[-1].start()].lower():
        text = text[closes[-1].end() :]
    return _THINK.sub("", text).strip()


def is_prose(line: str) -> bool:
    """Whether a line is chat prose around a list: a line ending in ":", or a lead-in ("Sure! Here are…")
    or a closing ("Happy watching!", "I hope you enjoy these.") that reads as a sentence (it ends in
    punctuation or runs to 5 words), so a title such as "I Am Legend" stays a title.

    >>> is_prose("Sure! Here are some you might like:"), is_prose("Happy watching!"), is_prose("Heat")
    (True, True, False)
    >>> is_prose("I Have a Dream"), is_prose("I hope you enjoy these movies")
    (False, True)
    """
    stripped = line.strip().strip("*_ ")
    if not stripped:
        return False
    if stripped.endswith(":"):
        return True
    sentence = stripped[-1] in ".!?" or len(stripped.split()) >= 5
    return sentence and bool(_LEAD.match(stripped) or _CLOSE.match(stripped))


def is_refusal(text: str) -> bool:
    """Whether an answer declines (it apologizes, cannot answer, or says no item fits).

    >>> is_refusal("I'm sorry, but Heat is not in the category Crime, so I cannot recommend any movies.")
    True
    >>> is_refusal("There are no such books."), is_refusal("Heat [SEP] Alien")
    (True, False)
    """
    return bool(_REFUSE.search(text))


def _literal_list(text: str) -> list[str] | None:
    """The entries of a JSON or Python list in the answer (entries that are objects give their ``title``
    or ``name``), or None."""
    body = _FENCE.sub("", text.strip())
    start, end = body.find("["), body.rfind("]")
    if start < 0 or end <= start:
        return None
    chunk = body[start : end + 1]
    for reader in (json.loads, ast.literal_eval):
        try:
            value = reader(chunk)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, list):
            out = []
            for entry in value:
                if isinstance(entry, dict):
                    entry = entry.get("title", entry.get("name"))
                if isinstance(entry, str | int | float) and not isinstance(entry, bool):
                    out.append(str(entry))
            return out
    return None


def _marker_number(piece: str) -> int | None:
    match = _NUMBER.match(piece)
    return None if match is None else int(next(g for g in match.groups() if g is not None))


def _numbered(pieces: Sequence[str]) -> bool:
    """Whether the pieces' leading numbers read 1, 2, 3, … in order (then they are list markers; pieces
    with a bullet or no marker may sit among them)."""
    numbers = [n for n in map(_marker_number, pieces) if n is not None]
    return bool(numbers) and numbers == list(range(1, len(numbers) + 1))


def clean_entry(piece: str, *, numbered: bool) -> str:
    """One listed name: its marker (a bullet; a number when the list is `numbered`) and wrapping quotes
    removed; where part of it is bold, that part alone (the name, without the description after it).

    >>> clean_entry("3. **Heat** (1995) - a crime epic", numbered=True)
    'Heat'
    >>> clean_entry("2001: A Space Odyssey", numbered=False)
    '2001: A Space Odyssey'
    """
    piece = _BULLET.sub("", piece.strip())
    if numbered:
        piece = _NUMBER.sub("", piece, count=1)
    bold = _BOLD.search(piece)
    if bold:  # "**Heat** (1995) - a crime epic": the bold name
        piece = bold.group(1) or bold.group(2)
    piece = piece.strip()
    while len(piece) > 1 and piece[0] in _QUOTES:  # wrapping quotes ('"Heat"'), not a quote that ends a name
        piece = piece.strip(_QUOTES).strip()
    return piece


def entries(text: str | None, separator: str | None = None) -> list[str] | None:
    """The names an answer lists, in order, with chat prose and markers removed; None when it lists
    nothing (no line that is not prose), an empty list when it is one (``[]``). A JSON or Python list is
    read first, then a `separator`-joined list (case-insensitive), then one entry per line.

    >>> entries("Sure! Here are some you might like:\\n1. Heat\\n2. Alien\\nHappy watching!")
    ['Heat', 'Alien']
    >>> entries("Blade Runner [SEP] 2001: A Space Odyssey [SEP] Alien", "[SEP]")
    ['Blade Runner', '2001: A Space Odyssey', 'Alien']
    >>> entries('Here you go: ["Heat", "Alien"] enjoy'), entries("<think>x</think>"), entries("[]")
    (['Heat', 'Alien'], None, [])
    """
    body = strip_think(text)
    listed = _literal_list(body) if "[" in body else None
    if listed is not None and (separator is None or separator.casefold() not in body.casefold()):
        return [name for name in (clean_entry(p, numbered=False) for p in listed) if name]
    if separator and separator.casefold() in body.casefold():
        pieces = re.split(re.escape(separator), body, flags=re.IGNORECASE)
        # prose on lines of its own before the first entry or after the last one
        first = [line for line in pieces[0].splitlines() if line.strip()]
        while first and is_prose(first[0]) and (len(first) > 1 or ":" not in first[0]):
            first.pop(0)
        lead = first[-1] if first else ""
        if is_prose(lead) and ":" in lead:  # "Here are some: Heat [SEP] ..."
            lead = lead.partition(":")[2]
        last = [line for line in pieces[-1].splitlines() if line.strip()] if len(pieces) > 1 else [lead]
        while len(last) > 1 and is_prose(last[-1]):
            last.pop()
        pieces[0] = lead
        if len(pieces) > 1:
            pieces[-1] = last[0] if last and not is_prose(last[0]) else ""
    else:
        pieces = [line for line in body.splitlines() if line.strip()]
        while pieces and is_prose(pieces[0]):
            pieces.pop(0)
        while pieces and is_prose(pieces[-1]):
            pieces.pop()
        marked = [p for p in pieces if _BULLET.match(p) or _NUMBER.match(p)]
        if marked and len(marked) < len(pieces) and (_numbered(marked) or all(map(_BULLET.match, marked))):
            pieces = marked  # a marked list among prose lines: its entries only
    pieces = [p for p in pieces if p.strip()]
    numbered = _numbered(pieces)
    names = [clean_entry(piece, numbered=numbered) for piece in pieces]
    return [name for name in names if name] or None
