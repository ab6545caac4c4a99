"""RecBench+'s prompts (data: `templates/recommend.yaml`, placeholders checked at load) rendered as chat."""

from __future__ import annotations

import hashlib
import re
import string
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

SEPARATOR = "[SEP]"
HISTORY_TITLES = 10  # the released history variant shows the user's 10 titles
_NOUNS = {"Books": ("book", "books", "read"), "Kindle_Store": ("book", "books", "read"),
          "Movies_and_TV": ("movie", "movies", "watched"),
          "MovieLens-1M": ("movie", "movies", "watched")}  # fmt: skip
_ALLOWED = {"noun", "noun_singular", "query", "k", "history", "verb"}
_REQUIRED = {
    "default": {"query"},
    "k": {"query", "k"},
    "history": {"query", "history"},
    "history-k": {"query", "history", "k"},
}


@dataclass(frozen=True, slots=True)
class Templates:
    variants: dict[str, dict[str, str]]  # variant -> {"system": ..., "user": ...}
    sha256: str


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


@cache
def templates() -> Templates:
    """The package's templates, checked: each variant a system and a user message, only known
    placeholders, each variant's required ones present."""
    raw = resources.files(__package__).joinpath("templates/recommend.yaml").read_text(encoding="utf-8")
    data: dict[str, Any] = yaml.safe_load(raw)
    if set(data["variants"]) != set(_REQUIRED):
        raise ValueError(f"recommend.yaml needs the variants {sorted(_REQUIRED)}")
    for name, variant in data["variants"].items():
        if set(variant) != {"system", "user"}:
            raise ValueError(f"recommend.yaml {name}: give a system and a user message")
        used = _fields(variant["system"]) | _fields(variant["user"])
        unknown, missing = used - _ALLOWED, _REQUIRED[name] - used
        if unknown or missing:
            raise ValueError(f"recommend.yaml {name}: unknown {sorted(unknown)}, missing {sorted(missing)}")
    return Templates(dict(data["variants"]), hashlib.sha256(raw.encode()).hexdigest())


def messages(
    query: str, domain: str, history: list[str], *, variant: str = "default", k: int = 5
) -> list[dict[str, str]]:
    """The system and user messages of one query (the history as the release wrote it: a Python list).

    >>> messages("Books by Ann?", "Books", [])[1]["content"]
    'Query: Books by Ann?\\nRecommended books (separated by [SEP]):'
    >>> print(messages("Q?", "Books", ["A", "B's"], variant="history")[1]["content"].splitlines()[0])
    The user has read the following books:['A', "B's"]
    >>> messages("Q?", "Movies_and_TV", [], variant="k")[0]["content"].split(". ")[-1]
    'Please output 5 recommended movies directly, do not output other content.'
    """
    singular, plural, verb = _NOUNS.get(domain, ("item", "items", "bought"))
    values = {
        "noun": plural,
        "noun_singular": singular,
        "query": query,
        "k": k,
        "history": str(list(history[-HISTORY_TITLES:])),
        "verb": verb,
    }
    chosen = templates().variants[variant]
    return [
        {"role": "system", "content": chosen["system"].format(**values)},
        {"role": "user", "content": chosen["user"].format(**values)},
    ]


def _pattern(line: str) -> str:
    """A template line as a pattern: its placeholders any word, its spaces any run of spaces."""
    fields = string.Formatter().parse(line)
    parts = [re.escape(text) + ("\\w++" if name else "") for text, name, _, _ in fields]
    return "".join(parts).replace("\\ ", "\\s++")


@cache
def answer_header() -> re.Pattern[str]:
    """The prompts' own lines, as a pattern that finds them wherever a model echoes them (any item noun, any
    case): the answer header ("Recommended books (separated by [SEP]):", the last line of each user message;
    its colon optional), which the reader removes, and the lines before it ("The user has read the following
    books:[…]", "Query: …"), which it removes with the rest of their line (an echoed history is no answer).

    >>> answer_header().sub("|", "Recommended books (separated by [SEP]): Emma [SEP] Dune")
    '| Emma [SEP] Dune'
    >>> answer_header().sub("|", "The user has read the following books: ['A', 'B']\\nEmma [SEP] Dune")
    '|\\nEmma [SEP] Dune'
    """
    headers, lines = set(), set()
    for variant in templates().variants.values():
        *before, last = variant["user"].split("\n")
        headers.add(_pattern(last.strip().rstrip(":")))
        for line in before:  # each up to its history or query
            lines.add(_pattern(re.split(r"\{(?:history|query)\}", line, maxsplit=1)[0].strip()))
    echoed = "(?m:^[^\\S\\n]*+(?:" + "|".join(sorted(lines)) + ")[^\\n]*+)"
    return re.compile(f"{echoed}|(?:{'|'.join(sorted(headers))})\\s*+:?", re.IGNORECASE)
