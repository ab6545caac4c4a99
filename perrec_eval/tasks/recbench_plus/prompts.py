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


@cache
def answer_header() -> re.Pattern[str]:
    """The prompts' own answer header ("Recommended books (separated by [SEP]):", the last line of each user
    message), as a pattern that finds it wherever a model echoes it (any item noun, any case, its colon
    optional): the reader removes it.

    >>> answer_header().sub("|", "Recommended books (separated by [SEP]): Emma [SEP] Dune")
    '| Emma [SEP] Dune'
    """
    headers = set()
    for variant in templates().variants.values():
        line = variant["user"].rsplit("\n", 1)[-1].strip().rstrip(":")
        parts = [
            re.escape(literal) + ("\\w++" if name else "")
            for literal, name, _, _ in string.Formatter().parse(line)
        ]
        headers.add("".join(parts).replace("\\ ", "\\s++"))
    return re.compile("(?:" + "|".join(sorted(headers)) + ")\\s*+:?", re.IGNORECASE)
