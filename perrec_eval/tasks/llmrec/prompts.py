"""LLMRec's prompts: templates as package data (`templates/*.yaml`), placeholders checked at load time."""

from __future__ import annotations

import functools
import hashlib
import json
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

KINDS = ("rating", "sequential", "direct", "explanation", "summarization")
# The prompts of a template file: one per task, and sequential's candidate variant (the sequential rows'
# candidates ranked, as direct's are).
PROMPTS = (*KINDS, "sequential-candidates")
PLACEHOLDERS: dict[str, frozenset[str]] = {
    "rating": frozenset({"user", "history", "title", "category"}),
    "sequential": frozenset({"user", "history"}),
    "sequential-candidates": frozenset({"user", "history", "candidates"}),
    "direct": frozenset({"user", "history", "candidates"}),
    "explanation": frozenset({"user", "history", "title", "rating"}),
    "summarization": frozenset({"user", "review"}),
}
# What a task's prompt must show (P5's rating and direct templates leave the history out).
REQUIRED: dict[str, frozenset[str]] = {
    "rating": frozenset({"user", "title"}),
    "sequential": frozenset({"user", "history"}),
    "sequential-candidates": frozenset({"user", "history", "candidates"}),
    "direct": frozenset({"user", "candidates"}),
    "explanation": frozenset({"user", "title", "rating"}),
    "summarization": frozenset({"user", "review"}),
}
DEFAULT = "offtheshelf.yaml"
# Prompt variants (`--prompts`): LLMRec's off-the-shelf prompts, and P5's templates (the fine-tuning ones).
VARIANTS = {"default": DEFAULT, "p5": "p5.yaml"}


@dataclass(frozen=True, slots=True)
class Template:
    """One task's system prompt and user message (a `string.Template` text)."""

    system: str
    user: str

    def render(self, **values: str) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": string.Template(self.user).substitute(values)},
        ]


@dataclass(frozen=True, slots=True)
class TemplateSet:
    """A prompt variant: its id, its file's sha256 and one template per prompt (`PROMPTS`)."""

    id: str
    sha256: str
    kinds: Mapping[str, Template]


def _placeholders(text: str) -> set[str]:
    return {
        match.group("named") or match.group("braced")
        for match in string.Template.pattern.finditer(text)
        if match.group("named") or match.group("braced")
    }


def parse_templates(text: str, where: str) -> TemplateSet:
    """A template file's text, checked: every prompt (`PROMPTS`) present with exactly its placeholders.

    Raises:
        ValueError: what is wrong and where.
    """
    data = yaml.safe_load(text)
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        raise ValueError(f"{where}: a mapping with an `id` and one entry per prompt ({', '.join(PROMPTS)})")
    kinds = {}
    for kind in PROMPTS:
        entry = data.get(kind)
        if not isinstance(entry, dict) or set(entry) != {"system", "user"}:
            raise ValueError(f"{where}: {kind} needs exactly `system` and `user`")
        found = _placeholders(entry["user"])
        if not REQUIRED[kind] <= found <= PLACEHOLDERS[kind]:
            expected = f"all of {sorted(REQUIRED[kind])} and only of {sorted(PLACEHOLDERS[kind])}"
            raise ValueError(f"{where}: {kind}.user has placeholders {sorted(found)}, expected {expected}")
        kinds[kind] = Template(entry["system"], entry["user"])
    if len({t.system for t in kinds.values()}) != len(kinds):
        raise ValueError(f"{where}: each prompt needs its own system prompt")
    return TemplateSet(data["id"], hashlib.sha256(text.encode()).hexdigest(), kinds)


def variant(name: str) -> TemplateSet:
    """The templates of a prompt variant (:data:`VARIANTS`).

    Raises:
        ValueError: an unknown variant (the message lists the known ones).
    """
    if name not in VARIANTS:
        raise ValueError(f"unknown llmrec prompt variant {name!r}: choose one of {', '.join(VARIANTS)}")
    return load(VARIANTS[name])


@functools.cache
def load(name: str = DEFAULT) -> TemplateSet:
    """A template file of the package."""
    text = resources.files(__package__).joinpath("templates", name).read_text(encoding="utf-8")
    return parse_templates(text, f"perrec_eval/tasks/llmrec/templates/{name}")


def title_list(titles: Sequence[str]) -> str:
    """Titles as a Python list literal (the format the prompts ask for back).

    >>> title_list(['A "B"', "C"])
    '["A \\\\"B\\\\"", "C"]'
    """
    return json.dumps(list(titles), ensure_ascii=False)


def rated_lines(history: Sequence[Mapping[str, Any]]) -> str:
    """The rating prompt's history: one line per item with its rating.

    >>> rated_lines([{"title": "Soap", "rating": 4.0}])
    '1. "Soap": 4 stars'
    """
    return "\n".join(
        f'{i}. "{item["title"]}": {item["rating"]:g} stars' for i, item in enumerate(history, start=1)
    )
