"""Reading model answers: a rating, "A"/"B", or a best-first ranking, with a reason whenever there is none.

`protocols.parse(method, text, n_users)` (each protocol calls its reader here) never raises on model
output: a failure is a `ParseResult` with `ok=False`,
`value=None` and a short machine-readable `reason` (see `REASONS`), plus a human-readable `detail`.

Before reading, the text is cleaned: `<think>…</think>` blocks (also `<thinking>`, `<reasoning>`) are
removed; a closing tag without an opening one (the opening tag was part of the chat template) drops
everything before it; an opening tag that never closes drops everything after it (the reasoning was cut
off), and if nothing remains the reason is `unclosed_think`. Code-fence markers are removed, their content
kept.

- **pointwise**: the last JSON object holding `predicted_rating` (key matched case-insensitively, spaces or
  hyphens for underscores; failing that, a single key containing "rating", as the released code allowed),
  tolerating single quotes, trailing commas and numbers written as strings (also "4/5"). Fallbacks: a
  `predicted_rating: x` pair outside valid JSON (e.g. a truncated object), then an answer that is only a
  number (`4`, `**4.5**`, `Answer: 4`, `Rating: 4/5`). The rating must be finite and within [1, 5];
  nothing is clipped (`out_of_range`).
- **pairwise**: mentions of `User A` / `User B` in any dress (`[User A]`, `**[User B]**`, `UserA`; the
  letter must be a capital); the instruction's own `"[User A]" or "[User B]"` quoted back is ignored. In
  order: (1) the last explicit answer ("Answer: …", "final answer is …") decides, unless it names both
  ("Answer: [User A] or [User B]" is `ambiguous`); (2) if every mention names the same user, that user;
  (3) lines that are just a label (answer first, explanation after): if they agree, that user, if not,
  `ambiguous`; (4) a reply that lists both users as ``User A: …`` / ``User B: …`` lines and whose last
  mention is such a line never chose: `no_choice`, not a vote for the user listed last; (5) otherwise the
  last line mentioning a user decides: one user named there wins; both named there → the bracketed one if
  exactly one user is bracketed, else `ambiguous`. A reply that is just `A` or `B` also counts.
- **listwise** (needs `n_users`): the last JSON object holding `predicted_ranking` (or a single key
  containing "rank"); fallbacks: a `predicted_ranking: [...]` pair outside valid JSON, then a reply that is
  only a list. Items may be ints, integral floats, digit strings or `"User2"`. The list must be a
  permutation of 1..n: duplicates, missing users, out-of-range or 0-based indices fail (`not_permutation`);
  nothing is repaired.

Leniency, side by side (what each parser accepts beyond the exact requested form; docs/engines.md,
"Reading answers"):

- exact form: pointwise ``{"predicted_rating": 4}``; pairwise ``[User A]``.
- variants accepted: pointwise: any JSON object holding the key (the last wins), loose JSON, a
  ``predicted_rating: x`` pair, a reply that is only a number (``4``, ``Rating: 4/5``); pairwise: the label
  in any dress, an explicit "Answer: …", one user named throughout, a lone-label line, the last line naming
  one user.
- prose around the answer: pointwise: only around a JSON object or a key-value pair ("The user's rating is
  5.0." fails, ``no_json``); pairwise: anywhere (the label may sit in a sentence).
- never: pointwise clips, rounds or repairs a rating; pairwise votes when the decisive part names both
  users (``ambiguous``) or only describes both (``no_choice``).

So pairwise is the more lenient of the two: a chatty model parses more often pairwise than pointwise.
`--structured-outputs` removes the difference (every answer is in the exact form).

`protocols.majority(method, values, how=...)` combines the parsed values of self-consistency samples: mean
(default), median or mode of the ratings for pointwise; the most frequent answer for pairwise/listwise,
ties going to the answer seen first.
"""

from __future__ import annotations

import ast
import bisect
import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

REASONS: dict[str, str] = {
    "empty": "no text, or nothing left once reasoning blocks are removed",
    "unclosed_think": "a <think> block never closed: the reasoning was cut off before any answer",
    "no_json": "no JSON object and no accepted fallback form",
    "missing_key": "JSON objects found, but none holds the answer key",
    "not_number": "the rating is not a number",
    "not_finite": "the rating is NaN or infinite",
    "out_of_range": "the rating is outside [1, 5] (never clipped)",
    "no_label": "neither User A nor User B is named",
    "ambiguous": "the decisive part of the answer names both users",
    "no_choice": "the answer describes both users (User A: … / User B: …) and never picks one",
    "not_list": "the ranking is not a list",
    "not_integer": "a ranking entry is not an integer user index",
    "not_permutation": "not a permutation of 1..n: duplicates, missing, out-of-range or 0-based indices",
}

Value = float | str | list[int]
PointwiseAggregate = Literal["mean", "median", "mode"]


@dataclass(frozen=True, slots=True)
class ParseResult:
    """One parsed answer: `value` when `ok`, else `reason` (a key of `REASONS`) and `detail`.

    >>> ParseResult(ok=True, value=4.0)
    ParseResult(ok=True, value=4.0, reason=None, detail=None)
    """

    ok: bool
    value: Value | None = None
    reason: str | None = None
    detail: str | None = None

    def __post_init__(self) -> None:
        if self.ok and (self.value is None or self.reason is not None):
            raise ValueError("a successful ParseResult needs a value and no reason")
        if not self.ok and (self.value is not None or self.reason not in REASONS):
            raise ValueError(f"a failed ParseResult needs value=None and a reason from {sorted(REASONS)}")


def _fail(reason: str, detail: str | None = None) -> ParseResult:
    return ParseResult(ok=False, reason=reason, detail=detail)


_THINK_OPEN = re.compile(r"<(think|thinking|reasoning)>", re.I)
_THINK_CLOSE = re.compile(r"</(think|thinking|reasoning)>", re.I)
_FENCE = re.compile(r"```[\w+-]*")
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)"
_OUT_OF_FIVE = r"(?:(?:/|out\s+of)\s*5(?:\.0)?)?\s*"


def clean(text: str | None) -> tuple[str, ParseResult | None]:
    """Remove reasoning blocks and fence markers; return the text or the failure it already is."""
    if text is None or not text.strip():
        return "", _fail("empty")
    text = _without_blocks(text)
    closers = list(_THINK_CLOSE.finditer(text))
    if closers:
        text = text[closers[-1].end() :]
    opener = _THINK_OPEN.search(text)
    unclosed = opener is not None
    if opener is not None:
        text = text[: opener.start()]
    text = _FENCE.sub("", text)
    if not text.strip():
        return "", _fail("unclosed_think" if unclosed else "empty")
    return text, None


def _without_blocks(text: str) -> str:
    """The text without its closed reasoning blocks (``<think>…</think>``, each closed by its own tag name),
    found in one pass over the tags, so an answer of many unclosed tags is read in linear time.

    >>> _without_blocks("a<think>x</think>b<reasoning>y</REASONING>c<think>open")
    'abc<think>open'
    """
    closes: dict[str, tuple[list[int], list[int]]] = {}
    for match in _THINK_CLOSE.finditer(text):
        starts, ends = closes.setdefault(match.group(1).lower(), ([], []))
        starts.append(match.start())
        ends.append(match.end())
    if not closes:
        return text
    out, position = [], 0
    for match in _THINK_OPEN.finditer(text):
        starts, ends = closes.get(match.group(1).lower(), ([], []))
        found = bisect.bisect_left(starts, match.end())
        if match.start() < position or found == len(starts):
            continue
        out.append(text[position : match.start()])
        position = ends[found]
    return "".join(out) + text[position:]


def _plain(text: str) -> str:
    """Text without markdown emphasis, headers, backticks and quotes, whitespace collapsed."""
    return " ".join(re.sub(r"[*_`#\"']", " ", text).split())


def _json_spans(text: str) -> list[tuple[int, str]]:
    """(end offset, text) of every balanced top-level `{...}` in order, in one pass.

    Double-quoted strings are tracked from each top-level `{` on, so braces inside them do not count. A
    `{` that never closes is skipped: the objects that did close inside it are returned instead.
    """
    spans: list[tuple[int, str]] = []
    position = 0
    while (start := text.find("{", position)) != -1:
        stack: list[int] = []
        closed: list[tuple[int, int]] = []
        in_string = escaped = False
        for i in range(start, len(text)):
            char = text[i]
            if in_string:
                if escaped:
                    escaped = False
                elif char == "\\":
                    escaped = True
                elif char == '"':
                    in_string = False
            elif char == '"':
                in_string = True
            elif char == "{":
                stack.append(i)
            elif char == "}":
                closed.append((stack.pop(), i))
                if not stack:
                    break
        if not stack:  # the object opened at `start` closed
            spans.append((closed[-1][1] + 1, text[start : closed[-1][1] + 1]))
            position = closed[-1][1] + 1
            continue
        # `start` never closed and the scan reached the end: keep the outermost objects that did close.
        outer_end = -1
        for open_at, close_at in sorted(closed):
            if open_at > outer_end:
                spans.append((close_at + 1, text[open_at : close_at + 1]))
                outer_end = close_at
        break
    return spans


def _loads(span: str) -> Any:
    """JSON, else JSON without trailing commas, else a Python literal (single quotes); None if all fail."""
    try:
        return json.loads(span)
    except ValueError:
        pass
    span = re.sub(r",\s*([}\]])", r"\1", span)
    try:
        return json.loads(span)
    except ValueError:
        pass
    try:
        return ast.literal_eval(span)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


_MISSING = object()


def _normal_key(key: str) -> str:
    return re.sub(r"[\s-]+", "_", key.strip().lower())


def _lookup(obj: Any, key: str, fragment: str) -> Any:
    """The value under `key` (normalized) in `obj` or nested in it, else under its one key with `fragment`."""
    if isinstance(obj, dict):
        normal = {_normal_key(k): v for k, v in obj.items() if isinstance(k, str)}
        if key in normal:
            return normal[key]
        loose = [v for k, v in normal.items() if fragment in k]
        if len(loose) == 1:
            return loose[0]
        children = list(obj.values())
    elif isinstance(obj, list):
        children = obj
    else:
        return _MISSING
    for child in children:
        found = _lookup(child, key, fragment)
        if found is not _MISSING:
            return found
    return _MISSING


def _last_keyed_value(text: str, key: str, fragment: str) -> tuple[Any, int, bool]:
    """(value of the last JSON object with the key or _MISSING, where that object ends, any JSON parsed)."""
    parsed = [(end, obj) for end, span in _json_spans(text) if isinstance(obj := _loads(span), dict | list)]
    for end, obj in reversed(parsed):
        value = _lookup(obj, key, fragment)
        if value is not _MISSING:
            return value, end, True
    return _MISSING, -1, bool(parsed)


def _rating(value: Any) -> ParseResult:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return _fail("not_number", f"rating {value!r}")
    if isinstance(value, str):
        match = re.fullmatch(rf"\s*({_NUMBER}|[-+]?(?:nan|inf|infinity))\s*{_OUT_OF_FIVE}", value, re.I)
        if not match:
            return _fail("not_number", f"rating {value!r}")
        value = float(match.group(1))
    try:
        rating = float(value)
    except OverflowError:  # an integer too large for a float
        return _fail("out_of_range", f"rating {value} outside [1, 5]")
    if not math.isfinite(rating):
        return _fail("not_finite", f"rating {value!r}")
    if not 1 <= rating <= 5:
        return _fail("out_of_range", f"rating {rating} outside [1, 5]")
    return ParseResult(ok=True, value=rating)


_RATING_PAIR = re.compile(rf"predicted[\s_-]?rating[\"']?\s*[:=]\s*[\"']?\s*({_NUMBER})", re.I)
_BARE_RATING = re.compile(
    rf"(?:(?:final\s+)?(?:answer|(?:predicted\s+)?rating)\s*(?:is\s*)?[:=-]?\s*)?({_NUMBER})\s*{_OUT_OF_FIVE}\.?",
    re.I,
)


def parse_rating(text: str) -> ParseResult:
    value, end, any_json = _last_keyed_value(text, "predicted_rating", "rating")
    pairs = list(_RATING_PAIR.finditer(text))
    if pairs and pairs[-1].start() >= end:  # a later, unparsable (e.g. truncated) answer
        return _rating(pairs[-1].group(1))
    if value is not _MISSING:
        return _rating(value)
    bare = _BARE_RATING.fullmatch(_plain(text))
    if bare:
        return _rating(bare.group(1))
    if any_json:
        return _fail("missing_key", "no JSON object holds 'predicted_rating'")
    return _fail("no_json", 'no {"predicted_rating": x} and the reply is not a bare number')


_LABEL = re.compile(r"(\[\s*)?\b(?i:user)[ \t_-]*([AB])\b(\s*\])?")
_EXPLICIT = re.compile(
    r"\b(?i:answer)\b(?:\s+(?i:is)\b)?[\s:*_#\"'`=-]*(\[\s*)?\b(?i:user)[ \t_-]*([AB])\b(\s*\])?",
)
# The instruction's own wording, quoted back by a model ("my final answer in "[User A]" or "[User B]" is…").
_ECHOED_OPTIONS = re.compile(r'"\[User A\]"\s+or\s+"\[User B\]"')
_LONE_LABEL = re.compile(r"\[?\s*(?i:user)[ \t-]*([AB])\s*\]?\s*\.?")
_OR_OTHER = re.compile(r"[\s\]\"'*.,`]*(?i:or)\b")
# A line that describes one user ("User A: rates thrillers 5.0", "- [User B]: ..."), not a choice.
_LISTING = re.compile(r"[-•\s]*\[?\s*(?i:user)[ \t-]*([AB])\s*\]?\s*:\s*\S")
_BARE_LABEL = re.compile(r"(?:(?i:(?:final\s+)?answer)\s*(?i:is)?\s*:?\s*)?\[?\s*([AB])\s*\]?\s*\.?")


def parse_label(text: str) -> ParseResult:
    text = _ECHOED_OPTIONS.sub(" ", text)
    mentions = list(_LABEL.finditer(text))
    if not mentions:
        bare = _BARE_LABEL.fullmatch(_plain(text))
        if bare:
            return ParseResult(ok=True, value=bare.group(1))
        return _fail("no_label", "neither User A nor User B is named")
    explicit = list(_EXPLICIT.finditer(text))
    if explicit:
        last = explicit[-1]
        if _OR_OTHER.match(text, last.end()):
            return _fail("ambiguous", f"the answer names both users: {last.group(0)!r}…")
        return ParseResult(ok=True, value=last.group(2))
    labels = {m.group(2) for m in mentions}
    if len(labels) == 1:
        return ParseResult(ok=True, value=labels.pop())
    lone = {match.group(1) for line in text.splitlines() if (match := _LONE_LABEL.fullmatch(_plain(line)))}
    if len(lone) == 1:
        return ParseResult(ok=True, value=lone.pop())
    if len(lone) == 2:
        return _fail("ambiguous", "lines consisting of just a label name both users")
    line_start = text.rfind("\n", 0, mentions[-1].start()) + 1
    listed = {match.group(1) for line in text.splitlines() if (match := _LISTING.match(_plain(line)))}
    if len(listed) == 2 and _LISTING.match(_plain(text[line_start:].split("\n", 1)[0])):
        return _fail("no_choice", "both users are listed (User A: … / User B: …) and neither is chosen")
    in_line = [m for m in mentions if m.start() >= line_start]
    labels = {m.group(2) for m in in_line}
    if len(labels) == 1:
        return ParseResult(ok=True, value=labels.pop())
    bracketed = {m.group(2) for m in in_line if m.group(1) and m.group(3)}
    if len(bracketed) == 1:
        return ParseResult(ok=True, value=bracketed.pop())
    line = text[line_start:].split("\n", 1)[0].strip()
    return _fail("ambiguous", f"the last line naming a user names both: {line[:120]!r}")


_RANK_ITEM = r"[\"']?\s*(?:(?i:user)\s*)?\d+\s*[\"']?"
_RANK_LIST = rf"\[\s*{_RANK_ITEM}(?:\s*,\s*{_RANK_ITEM})*\s*,?\s*\]"
_RANKING_PAIR = re.compile(rf"predicted[\s_-]?ranking[\"']?\s*[:=]\s*({_RANK_LIST})", re.I)
_BARE_RANKING = re.compile(
    rf"(?:(?:final\s+)?(?:answer|(?:predicted\s+)?ranking)\s*(?:is\s*)?[:=-]?\s*)?({_RANK_LIST})\s*\.?", re.I
)


def _list_items(text: str) -> list[str]:
    inner = text.strip()[1:-1]
    return [part.strip().strip("\"'").strip() for part in inner.split(",") if part.strip()]


def _index(item: Any) -> int | None:
    if isinstance(item, bool):
        return None
    if isinstance(item, int):
        return item
    if isinstance(item, float):
        return int(item) if item.is_integer() else None
    if isinstance(item, str):
        match = re.fullmatch(r"\s*(?:user\s*)?(\d+)\s*", item, re.I)
        return int(match.group(1)) if match else None
    return None


def _ranking(value: Any, n_users: int) -> ParseResult:
    if isinstance(value, str) and re.fullmatch(rf"\s*{_RANK_LIST}\s*", value):
        value = _list_items(value)
    if not isinstance(value, list | tuple):
        return _fail("not_list", f"ranking {value!r}")
    indices = [_index(item) for item in value]
    if any(i is None for i in indices):
        return _fail("not_integer", f"ranking {list(value)!r}")
    ranking = [int(i) for i in indices if i is not None]
    if sorted(ranking) != list(range(1, n_users + 1)):
        hint = " (0-based?)" if sorted(ranking) == list(range(n_users)) else ""
        return _fail("not_permutation", f"ranking {ranking} is not a permutation of 1..{n_users}{hint}")
    return ParseResult(ok=True, value=ranking)


def parse_ranking(text: str, n_users: int) -> ParseResult:
    value, end, any_json = _last_keyed_value(text, "predicted_ranking", "rank")
    pairs = list(_RANKING_PAIR.finditer(text))
    if pairs and pairs[-1].start() >= end:  # a later, unparsable (e.g. truncated) answer
        return _ranking(_list_items(pairs[-1].group(1)), n_users)
    if value is not _MISSING:
        return _ranking(value, n_users)
    bare = _BARE_RANKING.fullmatch(" ".join(re.sub(r"[*_`#]", " ", text).split()))
    if bare:
        return _ranking(_list_items(bare.group(1)), n_users)
    if any_json:
        return _fail("missing_key", "no JSON object holds 'predicted_ranking'")
    return _fail("no_json", 'no {"predicted_ranking": [...]} and the reply is not a bare list')


def first_most_common(values: Sequence[Any]) -> Any:
    """The most frequent value; among equally frequent ones, the one seen first."""
    counts = Counter(values)
    best = max(counts.values())
    return next(v for v in values if counts[v] == best)
