"""PerRecBench's scripted answers for the fake engine: which template wrote a request, and a fixed answer.

The general fake engine (`perrec_eval.engines.fake`) asks every task family for its `constant_answer`;
this module is PerRecBench's: it tells a request's method by its system prompt (or the profile frame).
"""

from __future__ import annotations

import functools
import json
import re
import string
from typing import Literal

from perrec_eval.tasks.perrecbench import prompts
from perrec_eval.types import ChatRequest

RequestKind = Literal["pointwise", "pairwise", "listwise", "profile"]

CONSTANT_PROFILE = "Likes well-made things; rates generously."


@functools.cache
def _method_of_system_prompt() -> dict[str, str | None]:
    """Each system prompt of the ranking templates → its method (None if two methods shared one)."""
    methods: dict[str, str | None] = {}
    for method, templates in prompts.load_templates().methods.items():
        for variant in templates.variants.values():
            known = methods.setdefault(variant.system, method)
            if known != method:
                methods[variant.system] = None
    return methods


@functools.cache
def _profile_frame() -> tuple[str | None, str, str]:
    """The profile request's system prompt, and the text of its user message before and after the history."""
    template = prompts.load_templates().profile
    before, _, after = template.user.partition("${behaviors}")
    return template.system, before, after


@functools.cache
def _listwise_user_marker() -> re.Pattern[str]:
    """Matches the line that opens each user's block in a listwise prompt, whatever the user's index."""
    block = prompts.load_templates().methods["listwise"].user_block
    first_line = string.Template(block).safe_substitute(index="\0").splitlines()[0]
    return re.compile(r"\d+".join(re.escape(part) for part in first_line.split("\0")))


def request_kind(request: ChatRequest) -> RequestKind | None:
    """Which of the package's templates wrote `request`, told by its system prompt (or its profile frame).

    Args:
        request: a request rendered by `perrec_eval.tasks.perrecbench.prompts.render` or `render_profile`.

    Returns:
        ``pointwise``, ``pairwise``, ``listwise`` or ``profile``; None for a request from anywhere else.

    >>> from perrec_eval.tasks.perrecbench.records import HistoryItem
    >>> request_kind(ChatRequest(tuple(prompts.render_profile([HistoryItem(None, "Dune", None, 5.0, 0)]))))
    'profile'
    >>> request_kind(ChatRequest(({"role": "user", "content": "hello"},))) is None
    True
    """
    messages = request.messages
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else None
    if system is not None and system in _method_of_system_prompt():
        return _method_of_system_prompt()[system]  # type: ignore[return-value]
    profile_system, before, after = _profile_frame()
    last = messages[-1]["content"] if messages else ""
    if system == profile_system and last.startswith(before) and last.endswith(after):
        return "profile"
    return None


def constant_answer(request: ChatRequest) -> str | None:
    """The `constant` script's answer: the same well-formed answer to every request of a kind.

    Pairwise: ``[User A]``; listwise: the identity ranking ``{"predicted_ranking": [1, ..., N]}``; profile:
    `CONSTANT_PROFILE`; pointwise: ``{"predicted_rating": 4}``; None for a request no template of the
    family wrote.
    """
    kind = request_kind(request)
    if kind == "pairwise":
        return "[User A]"
    if kind == "listwise":
        users = len(_listwise_user_marker().findall(request.messages[-1]["content"]))
        return json.dumps({"predicted_ranking": list(range(1, max(1, users) + 1))})
    if kind == "profile":
        return CONSTANT_PROFILE
    if kind == "pointwise":
        return '{"predicted_rating": 4}'
    return None
