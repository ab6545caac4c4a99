"""Reading answers as instruct models write them: reasoning blocks, chat prose around a list, list markers,
refusals, the prompt's own answer header echoed back. Shared by every family whose answers are lists of
names; what a name means is the family's (`perrec_eval.titles` matches names to a catalogue).

The rules, by what the text does rather than by which words it uses:

- **Prose is a sentence, wherever it sits** (`is_prose`): a line that ends in ":" (a lead-in), or one that
  reads as a sentence (it ends in ``.``/``!``/``?``, holds two sentences, or most of its content words are in
  lower case, where a title capitalises them) and either opens like chat (`LEAD_INS`, `CLOSINGS`), declines
  (`REFUSALS`) or is plainly a sentence (6 words or more, mostly lower case). So "Great Expectations by
  Charles Dickens", "I Think I Love My Wife (2007)" and "Here's No Evil, Never Tell" stay titles, and
  "Sorry, X did not write Y. However, here are others: Title" gives "Title".
- **A refusal is what declines** (`is_refusal`): it apologises, says it cannot, denies the premise ("X did
  not write Y", "X is not the author of Y") or says nothing fits ("there are no such books"), with straight
  or curly apostrophes. An answer whose every line is prose and that declines lists nothing: a family reads
  it as an answer with no items, never as one hallucinated title.
- **The prompt's answer header** ("Recommended books (separated by [SEP]):", a family passes it) is removed
  wherever the model echoes it.
- A leading number is a list marker only where the pieces are numbered 1, 2, 3, ... in order (runs that
  restart at 1 included), so "2001: A Space Odyssey" in a ``[SEP]`` list keeps its first word.

**Bounds** (every reader runs in time linear in its input): an answer of more than `MAX_ANSWER_CHARS`
characters once its reasoning is removed is not read (`too_long`; a family counts it as a failure with
reason ``too_long``), and a list is read up to its first `MAX_ENTRIES` entries. No pattern here nests
quantifiers or searches a pattern that starts with a repeated class.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence

MAX_ANSWER_CHARS = 32_000  # about 8,000 tokens of answer; the longest released RecBench+ answer has 17,688
MAX_ENTRIES = 500  # the longest released RecBench+ list has 382 entries
TOO_LONG = "too_long"  # the failure reason of an answer over MAX_ANSWER_CHARS

_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_CLOSE_THINK = re.compile(r"</think>", re.IGNORECASE)
_FENCE = re.compile(r"^```[\w-]*+|```$")
_BULLET = re.compile(r"^\s*+(?:[-*•·]|\u2013|\u2014)\s++")
_NUMBER = re.compile(
    r"^\s*+(?:\(\s*+(\d{1,3})\s*+\)|#?(\d{1,3})\s*+[.):]|(\d{1,3})\s++[-\u2013\u2014]\s)\s*+"
)
_BOLD = re.compile(r"\*\*([^*\n]++)\*\*|__([^_\n]++)__")
_QUOTES = "\"'“”‘’`«»"
_PAIRS = {'"': '"', "'": "'", "“": "”", "‘": "’", "`": "`", "«": "»", "”": "”", "’": "’"}
_APOSTROPHES = str.maketrans("’‘`´ʼ", "'''''")
_ECHO_RESIDUE = re.compile(r"^[\s:;,)\]>]++")
_YEAR_TAIL = re.compile(
    r"\(\s*+(?:1[89]|20)\d\d\s*+\)\s*+[-\u2013\u2014:]\s"
)  # "Title (1995) - a crime epic"
_ASIDE = re.compile(r'"[^"\n]*+"|“[^”\n]*+”|\([^()\n]*+\)')  # quoted titles and brackets inside a line
_INTRODUCES = re.compile(
    r"(?:\b(?:recommend|suggest|consider|try|such as|including|include)|:)\s*+$", re.IGNORECASE
)  # a name line's lead just before a quoted name: "For Billy Crudup, consider: "Big Fish", …"
_QUOTED_SPAN = re.compile(r'"([^"\n]++)"|“([^”\n]++)”')
_RECOMMENDS = re.compile(
    r"\b(?:recommend|suggest|enjoy|consider|try|check out|explore|such as|like|including|include|"
    r"here (?:are|is))|:\s*+$",
    re.IGNORECASE,
)
_NAMED = re.compile(
    r"\b(?:including|like|such as|called|titled|named|especially|particularly)\s++"
    r"((?:[A-Z0-9][\w'’-]*+\s*+)++)$"
)
_AFTER_YEAR = re.compile(r"(?<=\((?:1[89]|20)\d\d\)),\s++(?=\S)")
_QUOTED_NAME = re.compile(r'^[\s*•·-]{0,3}+(?:"[^"\n]++"|“[^”\n]++”)')  # a line opening with a quoted name
_KEPT_TAIL = re.compile(r"\s*+(?:\(\s*+(?:1[89]|20)\d\d\s*+\)|by\s++[^,;()\n]++)")  # "(1995)", "by Author"
_APOLOGY = re.compile(  # a line that opens by declining
    r"\W*+(?:sorry|unfortunately|apologies|i apologi[sz]e|regrettably|i(?: was|'m| am)? (?:can ?not|can't|"
    r"couldn't|could not|don't|do not|unable to|not able to)|there (?:are|is|were|was) no|no (?:other |more |"
    r"such |further )?(?:\w+ )?(?:movies|films|books|titles|matches|results|recommendations)\b)",
    re.IGNORECASE,
)
_NOTE = re.compile(r"\W*+(?:notes?|n\.b\.|p\.s\.|disclaimer|explanation|reasoning|caveat)\s*+:", re.I)
_ITALIC = re.compile(r"(?<![\w*])[*_]([^*_\n]++)[*_](?![\w*])")
_DASH = re.compile(r" [-\u2013\u2014] ")
_WORD = re.compile(r"[^\W\d_][\w'’-]*+")
_SENTENCE_BREAK = re.compile(r"\b(\w[\w'’-]*+)[.!?](?=\s++[\"“'‘(]?[A-Z])")
_SMALL = frozenset(
    "a an the of and or to in on at by for with from as is it its into over under about up out off vs "
    "de la le les el los das der die und et".split()
)
_ABBREVIATIONS = frozenset("mr mrs ms dr st jr sr vol no mt ft co inc ltd vs etc pt".split())

# Lines of chat that open a list or close it (matched at the start of a line, case-insensitive).
LEAD_INS = (
    r"(?:sure|certainly|of course|absolutely|okay|ok|alright|yes|hello|hi)\b",
    r"(?:great|good|excellent|nice|interesting|wonderful) (?:choice|question|pick|idea|taste|request)",
    r"here(?:'s| is| are)\b",
    r"(?:based on|given|considering|according to|in addition|additionally|also|however|but|alternatively)\b",
    r"i (?:would|'d|recommend|suggest|think|believe|have|can|found|hope|see|understand|'ll|will|'m|am)\b",
    r"(?:these|the following|below|my|some|this|that) (?:are|is|was|were|recommendations?|suggestions?|"
    r"picks?|list|titles?|movies?|films?|books?|options?|authors?|novels?|works?)\b",
    r"(?:recommended|recommendations?|suggestions?|answer|output|result)s?(?: [a-z]++){0,2}\s*+[:(]",
    r"(?:if you|you (?:might|may|could|can|will|would|should)|for (?:fans|readers|viewers) of)\b",
    r"(?:it seems|it appears|it looks like|there (?:are|is|seems|appears))\b",
)
CLOSINGS = (
    r"(?:enjoy|happy (?:watching|reading|listening|shopping))\b",
    r"(?:i )?hope (?:you|this|these)\b",
    r"(?:let me know|feel free|please|if you (?:like|want|need|enjoy|have))\b",
    r"(?:each|all|both|many|most|any) of (?:these|them|those)\b",
    r"(?:these|those|they|this|each) (?:movies|films|books|titles|items|products|picks|recommendations|"
    r"suggestions|options|authors|novels|works|selections|stories|are|were|all|offer|feature|share)\b",
    r"(?:note|remember|explanation|reasoning|disclaimer)\s*+:",
)
# What declines: an apology, an inability, a denial of the query's premise, or a statement that nothing fits.
_DENIED = (
    r"(?:write|written|wrote|author(?:ed)?|direct(?:ed)?|star(?:red|ring)?|appear(?:ed)?|act(?:ed)?|"
    r"publish(?:ed)?|produce[ds]?|work(?:ed)?|compose[ds]?|edit(?:ed)?|illustrate[ds]?|feature[ds]?|"
    r"create[ds]?|release[ds]?|involved|associated|known|credited|linked|related|exist|match|fit|meet|"
    r"satisfy|belong|the (?:author|director|writer|star|actor|actress|cinematographer|composer|producer|"
    r"editor|publisher|creator|illustrator))"
)
_KINDS = (
    r"(?:books?|movies?|films?|titles?|works?|novels?|recommendations?|matches|results|items?|products?|"
    r"records?|information|data|options?)"
)
REFUSALS = (
    r"\b(?:sorry|apologi[sz]e|apologies|unfortunately|regrettably)\b",
    r"\b(?:i'm|i am) (?:afraid|unable|not able|not aware|not familiar|not sure)\b",
    r"\b(?:i|we) (?:can ?not|can't|couldn't|could not|am unable to|was unable to|wasn't able to|do not|"
    r"don't|did not|didn't) (?:\w+ )?(?:recommend|suggest|find|locate|identify|provide|answer|help|verify|"
    r"confirm|think of|come up with|give|have|know|see|access|recall|predict|determine)\b",
    r"\b(?:did|does|do|has|have|had|was|were|is|are)(?: not|n't) (?:\w+ ){0,2}?" + _DENIED + r"\b",
    r"\bno (?:other |additional |more |further |such |known |specific |existing |notable |relevant )?"
    r"(?:\w+ )?" + _KINDS + r"\b",
    r"\bthere (?:are|is|were|was|seem to be|seems to be|appear to be|appears to be) (?:currently )?"
    r"(?:no|not any|none)\b",
    r"\b(?:misunderstanding|mix-up|mixup|confusion|mistaken|misinformation|inaccurate|incorrect|"
    r"false premise)\b",
    r"^\W*+(?:none|n/?a|no recommendations?|nothing)\W*+$",
    r"^\W*+none\W*+(?:by|from|available|found|to recommend)\b",
    r"\bnot (?:in|part of|among|a member of|featured in|credited (?:in|on)) (?:the|this|that|any|a)\b",
)
_LEAD = re.compile(r"^(?:" + "|".join(LEAD_INS) + ")", re.IGNORECASE)
_DENIAL = re.compile(REFUSALS[3], re.IGNORECASE)  # "X did not write Y", "X is not the author of Y"
_CLOSE = re.compile(r"^(?:" + "|".join(CLOSINGS) + ")", re.IGNORECASE)
_REFUSE = re.compile("|".join(REFUSALS), re.IGNORECASE | re.MULTILINE)


def opens_like_chat(line: str) -> bool:
    """Whether a line starts like chat before an answer (`LEAD_INS`: "Sure", "Here's", "Based on …")."""
    return bool(_LEAD.match(line.strip()))


def closes_like_chat(line: str) -> bool:
    """Whether a line starts like chat after an answer (`CLOSINGS`: "Enjoy", "Let me know", "I hope …")."""
    return bool(_CLOSE.match(line.strip()))


def too_long(text: str | None) -> bool:
    """Whether an answer is over `MAX_ANSWER_CHARS` once its reasoning is removed (a family fails it with
    reason `TOO_LONG` instead of reading it)."""
    return len(strip_think(text)) > MAX_ANSWER_CHARS


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


def _plain(line: str) -> str:
    """A line without markdown emphasis or heading marks around it, with straight apostrophes."""
    return line.strip().lstrip("#>").strip().strip("*_ ").translate(_APOSTROPHES)


def _lower_share(words: Sequence[str]) -> float:
    """The share of a line's content words (after its first, of 3 letters or more, not small words) written
    in lower case: a title capitalises them, a sentence does not."""
    content = [w for w in words[1:] if len(w) > 2 and w.casefold() not in _SMALL]
    return sum(w[0].islower() for w in content) / len(content) if len(content) >= 3 else 0.0


def _titled(words: Sequence[str]) -> bool:
    """Whether words are in title case: every word after the first that is not a small word capitalised."""
    return len(words) > 1 and all(w[0].isupper() for w in words[1:] if w.casefold() not in _SMALL)


def _sentences(text: str) -> int:
    """How many sentence breaks a line holds ("… films. However, …"), abbreviations ("Mr. Smith") not
    counted."""
    return sum(
        len(match.group(1)) >= 3 and match.group(1).casefold() not in _ABBREVIATIONS
        for match in _SENTENCE_BREAK.finditer(text)
    )


def is_prose(line: str) -> bool:
    """Whether a line is chat prose, not a name: a lead-in ending in ":", or a line that reads as a sentence
    and opens like chat, declines, or is plainly one (module docstring).

    >>> is_prose("Sure! Here are some you might like:"), is_prose("Happy watching!"), is_prose("Heat")
    (True, True, False)
    >>> is_prose("I Have a Dream"), is_prose("I hope you enjoy these movies"), is_prose("Great Expectations")
    (False, True, False)
    >>> is_prose("Sorry, I do not have any additional cooking books by them to recommend.")
    True
    >>> is_prose("These authors are known for their heartwarming stories, gentle humour and warmth.")
    True
    """
    text = _plain(line)
    if not text:
        return False
    if text.endswith(":"):
        return True
    words = _WORD.findall(_ASIDE.sub(" ", text))
    if not words and not re.search(r"\d", _ASIDE.sub(" ", text)):  # "(No movies to recommend - …)"
        words = _WORD.findall(text)
    if not words:
        return False
    if _NOTE.match(text) or (len(words) >= 5 and (_APOLOGY.match(text) or _DENIAL.search(text))):
        return True
    lower, breaks = _lower_share(words), _sentences(text)
    if len(words) >= 6 and (lower >= 0.5 or (breaks > 0 and len(words) >= 10 and lower >= 0.3)):
        return True  # plainly a sentence ("Spartan Fit!: 30 Days. Transform Your Mind." is a title)
    if len(words) >= 8 and lower >= 0.3 and _CLOSE.match(text):
        return True  # "These movies star Steven Seagal, who also starred in …"
    titled = _titled(words)
    ends = text.rstrip(_QUOTES + ")").endswith((".", "!", "?")) and not titled  # "Hello, Dolly!" is a title
    if not (ends or lower >= 0.5 or (breaks > 0 and not titled)):
        return False  # not a sentence (a title in title case)
    return bool(_LEAD.match(text) or _CLOSE.match(text) or _REFUSE.search(text))


def is_refusal(text: str) -> bool:
    """Whether an answer declines: it apologises, cannot answer, denies the query's premise, or says no item
    fits (straight or curly apostrophes).

    >>> is_refusal("I'm sorry, but Heat is not in the category Crime, so I cannot recommend any movies.")
    True
    >>> is_refusal("There are no such books."), is_refusal("Heat [SEP] Alien")
    (True, False)
    >>> is_refusal("Helen Hayes did not appear in Blank Check."), is_refusal("I couldn’t find any.")
    (True, True)
    """
    return bool(_REFUSE.search(text.translate(_APOSTROPHES)))


def _last_sentence(text: str) -> str:
    """The text after its last sentence break."""
    ends = [match.end() for match in _SENTENCE_BREAK.finditer(text)]
    return text[ends[-1] :] if ends else text


def _serial(rest: str) -> list[str]:
    """Names a sentence lists after its lead-in: "A, B, and C" and "'A', 'B', 'C'" give three, anything else
    one."""
    if rest[:1] in "'\"" and re.search(r"""['"],\s*+['"]""", rest):
        return [part.strip(" .'\"") for part in re.split(r"""['"]\s*+,\s*+(?:and\s++)?['"]""", rest)]
    if not re.search(r",\s++(?:and|or)\s", rest):
        return [rest]
    parts = re.split(r",\s*+(?:and\s++|or\s++)?|\s++(?:and|or)\s++(?=[A-Z\"“])", rest)
    return [part.strip() for part in parts if part.strip()]


def _lead_in(head: str) -> bool:
    """Whether the text before a colon opens like chat, not like a title ("Recommended movies", "Here are
    some books by Jane Roe"; not "Absolutely Fabulous", "If You Want to Write")."""
    text = _plain(head)
    return bool(_LEAD.match(text + ":")) and not _titled(_WORD.findall(text))


def _names_in_prose(line: str, *, lead_in: bool = True) -> list[str]:
    """The names a line of prose recommends after its lead-in, or [] when it recommends none:

    - the quoted names of its last sentence that holds quotes, where that sentence recommends ("you might
      explore: "A", "B" and "C"", "such as "The Prince"") rather than declines or mentions the query's items;
    - else the names after the first colon (outside quotes) whose lead-in is prose and not a refusal
      ("Sorry, X did not star in Y. However, here are some films: Mad Max: Fury Road"; "…, including
      Political Pilgrims: Travels of …" keeps "Political Pilgrims: Travels of …").
    """
    if '"' in line or "“" in line:
        ends = [match.end() for match in _SENTENCE_BREAK.finditer(line)]
        for begin, stop in reversed(list(zip([0, *ends], [*ends, len(line)], strict=True))):
            sentence = line[begin:stop]
            quote = min((i for i in (sentence.find('"'), sentence.find("“")) if i >= 0), default=-1)
            if quote < 0:
                continue
            lead = sentence[:quote]
            if (_RECOMMENDS if lead_in else _INTRODUCES).search(lead) and not is_refusal(lead):
                return [a or b for a, b in _QUOTED_SPAN.findall(sentence)]
            break  # the last sentence that quotes names mentions them (the query's), it does not recommend
    start = 0
    for _ in range(8):  # the first few colons: a lead-in comes first (and the work stays linear)
        colon = line.find(": ", start)
        if colon < 0:
            break
        head, rest = line[:colon], line[colon + 2 :].strip()
        lead = _last_sentence(head)
        if (
            head.count('"') % 2 == 0
            and head[:1] not in _QUOTES
            and rest
            and (_lead_in(head) or (lead_in and is_prose(head)))
            and not is_refusal(lead)
            and not is_prose(rest)
        ):
            named = _NAMED.search(head)  # "…, including Political Pilgrims: Travels of …"
            return _serial(f"{named.group(1)}: {rest}" if named else rest)
        start = colon + 2
    return []


def _unwrap(piece: str) -> str:
    """A name without the quotes around it. A name in double quotes is the name, with a year or an author
    after it kept (``"Heat" (1995)`` gives ``Heat (1995)``, ``"Piranesi" by Susanna Clarke`` gives
    ``Piranesi by Susanna Clarke``) and any other tail, a description, dropped; single quotes are only removed
    (``'E' is for Evidence``); a quote the budget cut (no closing one) goes too."""
    for _ in range(3):
        if len(piece) < 2 or piece[0] not in _PAIRS:
            break
        close = piece.find(_PAIRS[piece[0]], 1)
        if piece[0] in "'’" and close > 0 and piece[close + 1 : close + 2].isalpha():
            close = piece.rfind(_PAIRS[piece[0]])  # an apostrophe inside the name: "'Schindler's List'"
        if close <= 0:
            piece = piece[1:].strip()
            continue
        tail = piece[close + 1 :]
        if piece[0] in '"“«' and close > 2:  # (a quoted letter is part of the name: '"A" is for Alibi')
            kept = _KEPT_TAIL.match(tail)
            tail = kept.group(0) if kept else ""
        piece = (piece[1:close] + " " + tail).strip()
    if piece.count('"') == 1 and piece.endswith('"'):
        piece = piece[:-1].strip()
    return " ".join(piece.split())


def _literal_list(text: str) -> list[str] | None:
    """The entries of a JSON or Python list in the answer (entries that are objects give their ``title``
    or ``name``; a list of quoted names whose apostrophes break Python's syntax is split on its quotes), or
    None."""
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
            for entry in value[:MAX_ENTRIES]:
                if isinstance(entry, dict):
                    entry = entry.get("title", entry.get("name"))
                if isinstance(entry, str | int | float) and not isinstance(entry, bool):
                    out.append(str(entry))
            return out
    inner = chunk[1:-1].strip()
    if len(inner) > 1 and inner[0] in "'\"" and inner[-1] in "'\"" and "\n" not in inner:
        return [piece for piece in re.split(r"""['"]\s*+,\s*+['"]""", inner[1:-1])[:MAX_ENTRIES]]
    return None


def _marker_number(piece: str) -> int | None:
    match = _NUMBER.match(piece)
    return None if match is None else int(next(g for g in match.groups() if g is not None))


def _numbered(pieces: Sequence[str]) -> bool:
    """Whether the pieces' leading numbers read 1, 2, 3, … in order, or in runs that each restart at 1
    (then they are list markers; pieces with a bullet or no marker may sit among them)."""
    numbers = [n for n in map(_marker_number, pieces) if n is not None]
    return bool(numbers) and all(n == 1 if i == 0 or n != numbers[i - 1] + 1 else True
                                 for i, n in enumerate(numbers))  # fmt: skip


def clean_entry(piece: str, *, numbered: bool) -> str:
    """One listed name: its marker (a bullet; a number when the list is `numbered`), the residue of an echoed
    header (``: Title``) and the quotes around it removed; where part of it is bold, that part alone; a
    description after a year ("Heat (1995) - a crime epic") and a sentence's full stop dropped.

    >>> clean_entry("3. **Heat** (1995) - a crime epic", numbered=True)
    'Heat'
    >>> clean_entry("2001: A Space Odyssey", numbered=False), clean_entry('"Heat" (1995)', numbered=False)
    ('2001: A Space Odyssey', 'Heat (1995)')
    >>> clean_entry("The Graduate (1967) - Her iconic role as Mrs. Robinson", numbered=False)
    'The Graduate (1967)'
    """
    piece = _BULLET.sub("", piece.strip().replace('""', '"'))
    if numbered:
        piece = _NUMBER.sub("", piece, count=1)
    piece = _ECHO_RESIDUE.sub("", piece)
    bold = _BOLD.search(piece)
    if bold and (bold.group(1) or bold.group(2)).rstrip().endswith(":"):  # "**Michael Caine:** Alfie (1966)"
        piece = piece[bold.end() :]
    elif bold:  # "**Heat** (1995) - a crime epic": the bold name
        piece = bold.group(1) or bold.group(2)
    if piece.endswith(")") and (open_ := piece.rfind("(")) > 0 and is_prose(piece[open_ + 1 : -1]):
        piece = piece[:open_].rstrip()  # "Title by Author (Note: X is not the author of these books)"
    piece = _described(piece) or piece
    piece = _ITALIC.sub(r"\1", piece)  # "*The Great Escape* (1963)"
    piece = _unwrap(piece.strip().strip("*_").strip())
    if (
        re.search(r"[^\W\d_]{2}[.]$", piece)
        and piece.rsplit(None, 1)[-1][:-1].casefold() not in _ABBREVIATIONS
    ):
        piece = piece[:-1]
    return piece.strip()


def _header_removed(body: str, header: re.Pattern[str] | None) -> str:
    return body if header is None else header.sub("\n", body)


def _lines(piece: str) -> list[str]:
    return [line for line in piece.splitlines() if line.strip()]


def _described(line: str) -> str | None:
    """The name of a line that is a name and a description of it ("Heat (1995) - a crime epic", "The Hobbit -
    a wonderful adventure for young readers", "Pale Blue Dot by Carl Sagan: A thought-provoking sequel …"),
    or None."""
    year = _YEAR_TAIL.search(line)
    if year:
        return line[: year.end() - 2].rstrip(" -\u2013\u2014:")
    dash = _DASH.search(line)
    colon = line.rfind(": ")
    for cut, skip in ((dash.start() if dash else -1, 3), (colon, 2)):
        head = line[:cut]
        if (
            cut > 0
            and " " in head.strip()
            and head.count("(") == head.count(")")
            and head.count('"') % 2 == 0
            and is_prose(line[cut + skip :])
            and not is_prose(head)
            and not is_refusal(head)
        ):
            return line[:cut]
    return None


def _names(lines: Sequence[str]) -> list[str | None]:
    """Each line's names: the line itself (a line of names each with its year gives each), the names a line of
    prose recommends after its lead-in, or None for a line of prose. A line that starts with a list marker
    or a quoted name is judged once cleaned (its description cut)."""
    out: list[str | None] = []
    for line in lines:
        if _BULLET.match(line) or _NUMBER.match(line) or _QUOTED_NAME.match(line):
            out += _years(line)
        elif (named := _described(line)) is not None:
            out.append(named)
        elif not is_prose(line):
            out += _names_in_prose(line, lead_in=False) or _years(line)
        else:
            out += _names_in_prose(line) or [None]
    return out


def _years(line: str) -> list[str]:
    """A line of names each followed by its year ("The 39 Steps (1935), Secret Agent (1936)") as its names."""
    parts = _AFTER_YEAR.split(line)
    return parts if len(parts) > 1 else [line]


def _separated(body: str, separator: str) -> list[str] | None:
    """The pieces of a `separator`-joined list (None: it joins fewer than two names): the preamble before
    the first name (up to its last line of prose) and the closing after the last one (from its first line of
    prose) dropped, and every other line of prose."""
    pieces = [_names(_lines(piece)) for piece in re.split(re.escape(separator), body, flags=re.IGNORECASE)]
    if sum(any(piece) for piece in pieces) < 2:
        return None  # a list on lines with a stray separator, or one name
    out: list[str] = []
    for i, names in enumerate(pieces):
        if i == 0 and len(pieces) > 1 and None in names:
            names = names[len(names) - names[::-1].index(None) :]  # after the preamble's last prose line
        elif i == len(pieces) - 1 and None in names:
            names = names[: names.index(None)]  # before the closing's first prose line
        out += [name for name in names if name]
    return out


def _table_cells(lines: Sequence[str]) -> list[str] | None:
    """A markdown table's names: each row's cell under a title/name/item/movie/book heading (else its longest
    cell that is not a number), or None when the lines hold no table."""
    rows = [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in lines
        if line.strip().startswith("|")
    ]
    rows = [row for row in rows if not all(set(cell) <= set("-: ") for cell in row)]
    if len(rows) < 2:
        return None
    header = [cell.casefold().strip("* ") for cell in rows[0]]
    column = next((i for i, cell in enumerate(header)
                   if re.search(r"title|name|item|movie|film|book|product", cell)), None)  # fmt: skip
    body = rows[1:] if column is not None or not any(re.search(r"\d", c) for c in rows[0]) else rows
    names = []
    for row in body:
        if column is not None and column < len(row):
            names.append(row[column])
        else:
            names.append(max((c for c in row if not re.fullmatch(r"[#\d.\s]*", c)), key=len, default=""))
    return names


def entries(
    text: str | None, separator: str | None = None, *, header: re.Pattern[str] | None = None
) -> list[str] | None:
    """The names an answer lists, in order, with chat prose, markers and an echoed `header` removed; None when
    it lists nothing (no line that is not prose), an empty list when it is one (``[]``). A JSON or Python
    list is read first, then a `separator`-joined list (case-insensitive), then a markdown table, then one
    entry per line. At most `MAX_ENTRIES` names; an answer over `MAX_ANSWER_CHARS` lists nothing (check
    `too_long` first to tell it apart).

    >>> entries("Sure! Here are some you might like:\\n1. Heat\\n2. Alien\\nHappy watching!")
    ['Heat', 'Alien']
    >>> entries("Blade Runner [SEP] 2001: A Space Odyssey [SEP] Alien", "[SEP]")
    ['Blade Runner', '2001: A Space Odyssey', 'Alien']
    >>> entries('Here you go: ["Heat", "Alien"] enjoy'), entries("<think>x</think>"), entries("[]")
    (['Heat', 'Alien'], None, [])
    """
    body = strip_think(text)
    if len(body) > MAX_ANSWER_CHARS:
        return None
    body = _header_removed(body, header)
    listed = _literal_list(body) if "[" in body else None
    if listed is not None and (separator is None or separator.casefold() not in body.casefold()):
        return [name for name in (clean_entry(p, numbered=False) for p in listed) if name]
    pieces = None
    if separator and separator.casefold() in body.casefold():
        pieces = _separated(body, separator)
        if pieces is None:
            body = re.sub(re.escape(separator), "\n", body, flags=re.IGNORECASE)
    if pieces is None:
        lines = _lines(body)
        pieces = _table_cells(lines)
        if pieces is None:
            pieces = [name for name in _names(lines) if name]
            marked = [p for p in pieces if _BULLET.match(p) or _NUMBER.match(p)]
            if (
                marked
                and len(marked) < len(pieces)
                and (_numbered(marked) or all(map(_BULLET.match, marked)))
            ):
                pieces = marked  # a marked list among other lines (section headings): its entries only
    pieces = [p for p in pieces if p.strip()][:MAX_ENTRIES]
    numbered = _numbered(pieces)
    names = [clean_entry(piece, numbered=numbered) for piece in pieces]
    return [name for name in names if name and not is_prose(name)] or None
