"""Structured outputs: the answer format of each method as a regular expression every engine can enforce.

``--structured-outputs`` constrains each answer to exactly what its method's prompt asks for, so a model
cannot fail to parse (it can still fail by running into its token cap). A format is named by a short spec,
part of `GenParams` and so of every cache key:

- ``pointwise``: ``{"predicted_rating": R}`` with R in 1..5 (one decimal allowed: 1, 3.5, 5.0);
- ``pairwise``: ``[User A]`` or ``[User B]``;
- ``listwise:N``: ``{"predicted_ranking": [...]}`` holding a permutation of 1..N. A JSON schema cannot say
  "permutation", so the regex lists the N! orders (N ≤ 5: at most 120 alternatives);
- a ``+cot`` suffix (with ``--cot``) allows any text before the final answer: only the answer is constrained,
  and the model still decides when to stop reasoning (its token cap is the limit).

Engines: vLLM offline (``SamplingParams(structured_outputs=StructuredOutputsParams(regex=...))``), vLLM's
OpenAI-compatible server (``extra_body={"structured_outputs": {"regex": ...}}``; other servers: see the
openai engine's ``structured_outputs`` option) and transformers through outlines (the ``[structured]`` extra).

This is a different setting from the paper's (which let models answer freely and counted failures): runs
with and without it are never in the same leaderboard row, and the report names the setting.
"""

from __future__ import annotations

from typing import Any

from perrec_eval.tasks.perrecbench.protocols import MAX_LISTWISE_USERS, get, split_format

__all__ = ["MAX_LISTWISE_USERS", "answer_format", "answer_regex", "json_schema"]

_COT_PREFIX = r"[\s\S]*"


def answer_format(method: str, n_users: int, *, cot: bool = False) -> str:
    """The spec of `method`'s answer format for a prompt about `n_users` users.

    >>> answer_format("listwise", 3), answer_format("pairwise", 2, cot=True)
    ('listwise:3', 'pairwise+cot')
    """
    return get(method).answer_format(n_users, cot=cot)


def answer_regex(spec: str) -> str:
    """The regular expression an answer of format `spec` must match in full.

    >>> answer_regex("pairwise")
    '\\\\[User [AB]\\\\]'
    >>> import re
    >>> bool(re.fullmatch(answer_regex("listwise:3"), '{"predicted_ranking": [2, 3, 1]}'))
    True
    >>> bool(re.fullmatch(answer_regex("listwise:3"), '{"predicted_ranking": [2, 2, 1]}'))
    False
    >>> bool(re.fullmatch(answer_regex("pointwise+cot"), 'Step 1 ...\\n{"predicted_rating": 4.5}'))
    True
    """
    protocol, n_users, cot = split_format(spec)
    answer = protocol.answer_regex(n_users)
    return (_COT_PREFIX + answer) if cot else answer


def json_schema(spec: str) -> dict[str, Any] | None:
    """A JSON schema for servers that only take ``response_format`` (None for pairwise and CoT formats).

    The listwise schema cannot require a permutation: it fixes the length and the range of the entries
    only (the parser still refuses repeats).

    >>> json_schema("pointwise")["properties"]["predicted_rating"]["maximum"]
    5
    >>> json_schema("pairwise") is None
    True
    """
    protocol, n_users, cot = split_format(spec)
    return None if cot else protocol.json_schema(n_users)
