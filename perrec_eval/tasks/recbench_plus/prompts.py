"""RecBench+'s prompts (data: `templates/recommend.yaml`, placeholders checked at load) rendered as chat."""

from __future__ import annotations

import hashlib
import json
import string
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

SEPARATOR = "[SEP]"
HISTORY_TITLES = 10  # the released history variant shows the user's 10 titles
_NOUNS = {"Books": ("book", "books", "read"), "Kindle_Store": ("book", "books", "read"),
          "Movies_and_TV": ("movie", "movies", "watched")}  # fmt: skip
_ALLOWED = {"noun", "noun_singular", "query", "k", "history", "verb"}
_REQUIRED = {"default": {"query"}, "k": {"query", "k"}, "history": {"query", "history"}}


@dataclass(frozen=True, slots=True)
class Templates:
    system: str
    variants: dict[str, str]
    sha256: str


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


@cache
def templates() -> Templates:
    """The package's templates, checked: only known placeholders, each variant's required ones present."""
    raw = resources.files(__package__).joinpath("templates/recommend.yaml").read_text(encoding="utf-8")
    data: dict[str, Any] = yaml.safe_load(raw)
    for name, text in {"system": data["system"], **data["variants"]}.items():
        unknown = _fields(text) - _ALLOWED
        missing = _REQUIRED.get(name, set()) - _fields(text)
        if unknown or missing:
            raise ValueError(f"recommend.yaml {name}: unknown {sorted(unknown)}, missing {sorted(missing)}")
    if set(data["variants"]) != set(_REQUIRED):
        raise ValueError(f"recommend.yaml needs the variants {sorted(_REQUIRED)}")
    return Templates(data["system"], dict(data["variants"]), hashlib.sha256(raw.encode()).hexdigest())


def messages(
    query: str, domain: str, history: list[str], *, variant: str = "default", k: int = 5
) -> list[dict[str, str]]:
    """The system and user messages of one query.

    >>> messages("Books by Ann?", "Books", [])[1]["content"]
    'Query: Books by Ann?\\nRecommended books (separated by [SEP]):'
    >>> messages("Q?", "Books", ["A", "B"], variant="history")[1]["content"].splitlines()[0]
    'The user has read the following books:["A", "B"]'
    """
    singular, plural, verb = _NOUNS.get(domain, ("item", "items", "bought"))
    shown = json.dumps(history[-HISTORY_TITLES:], ensure_ascii=False)  # a title's quotes stay readable
    values = {
        "noun": plural,
        "noun_singular": singular,
        "query": query,
        "k": k,
        "history": shown,
        "verb": verb,
    }
    chosen = templates()
    return [
        {"role": "system", "content": chosen.system.format(**values)},
        {"role": "user", "content": chosen.variants[variant].format(**values)},
    ]
