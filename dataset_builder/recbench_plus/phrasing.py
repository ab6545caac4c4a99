"""LLM phrasing of RecBench+ queries (``build --task recbench-plus --phrasing llm --engine E --model M``).

Every template-phrased row is rewritten in the paper's situational style by any engine of the runner,
through a `CachedEngine` next to the build's stage files, so a killed build resumes without asking again
(as `perrecbench profiles` does). The requests are data (`perrec_eval/tasks/recbench_plus/templates/
phrasing.yaml`). Each rewrite is checked (`problem`): it must keep what the template keeps verbatim (every
condition value of an explicit or misinformed query, the claimed title of a misinformed one, every reference
title of an implicit one, the seed of an interest one) and must not name what the query hides (an implicit
query's values, an interest query's ground-truth titles). A rewrite that fails is asked again with another
sampling seed, up to `retries` times; a row still failing is dropped. Both are counted per query type.
"""

from __future__ import annotations

import dataclasses
import hashlib
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

from dataset_builder.recbench_plus.kg import Fact, value_key
from dataset_builder.recbench_plus.queries import NOUNS, TYPES, leaks
from perrec_eval.tasks.recbench_plus.parsing import normalize_title
from perrec_eval.types import ChatRequest, GenParams

PHRASING_PARAMS = GenParams(temperature=0.7, top_p=1.0, max_tokens=256, n=1, seed=0)
_ALLOWED = {"noun", "query", "keep", "liked"}
PHRASED = (*TYPES, "demographics")  # every config a build writes


@dataclass(frozen=True, slots=True)
class Prompts:
    system: str
    types: dict[str, str]
    sha256: str


@cache
def prompts() -> Prompts:
    """The phrasing requests, checked: every query type present, only known placeholders."""
    package = "perrec_eval.tasks.recbench_plus"
    raw = resources.files(package).joinpath("templates/phrasing.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(raw)
    if set(data["types"]) != set(PHRASED):
        raise ValueError(f"phrasing.yaml needs the types {list(PHRASED)}")
    for name, text in {"system": data["system"], **data["types"]}.items():
        unknown = {field for _, field, _, _ in string.Formatter().parse(text) if field} - _ALLOWED
        if unknown:
            raise ValueError(f"phrasing.yaml {name}: unknown placeholders {sorted(unknown)}")
    return Prompts(data["system"], dict(data["types"]), hashlib.sha256(raw.encode()).hexdigest())


def kept(config: str, row: Mapping[str, Any]) -> list[str]:
    """What a rewrite of `row` must contain verbatim (case and spacing aside).

    >>> kept("misinformed", {"conditions": [{"relation": "author", "value": "Ann"}],
    ...                      "false_claims": [{"title": "Storms"}]})
    ['Ann', 'Storms']
    """
    if config == "implicit":
        return [ref["title"] for ref in row["references"]]
    if config == "interest":
        return [seed["title"] for seed in row["seeds"]]
    claims = [claim["title"] for claim in row["false_claims"]] if config == "misinformed" else []
    return [c["value"] for c in row["conditions"]] + claims


def request(config: str, row: Mapping[str, Any]) -> ChatRequest:
    """The request that rewrites `row` (a row of query type `config`)."""
    chosen = prompts()
    noun = NOUNS.get(row["domain"], "items")
    values = {
        "noun": noun,
        "query": row["query"],
        "keep": "; ".join(f'"{text}"' for text in kept(config, row)),
        "liked": ", ".join(f'"{item["title"]}"' for item in row["ground_truth"]),
    }
    return ChatRequest(
        (
            {"role": "system", "content": chosen.system.format(**values)},
            {"role": "user", "content": chosen.types[config].format(**values)},
        )
    )


def problem(config: str, row: Mapping[str, Any], text: str) -> str | None:
    """Why a rewrite cannot replace the template (``empty``, ``omits``, ``leaks``), or None.

    >>> row = {"conditions": [{"relation": "author", "value": "Ann Lee"}],
    ...        "references": [{"title": "Storms"}]}
    >>> problem("implicit", row, 'Anything like "Storms"?'), problem("implicit", row, "Storms by Ann Lee?")
    (None, 'leaks')
    >>> problem("explicit", row, "Books by Ann?")
    'omits'
    """
    if not text:
        return "empty"
    folded = value_key(text)
    if any(value_key(part) not in folded for part in kept(config, row)):
        return "omits"
    if config == "implicit" and leaks(text, [Fact(c["relation"], c["value"]) for c in row["conditions"]]):
        return "leaks"
    if config in ("interest", "demographics"):
        normalized = f" {normalize_title(text)} "
        if any(f" {normalize_title(item['title'])} " in normalized for item in row["ground_truth"]):
            return "leaks"
    return None


def phrase(
    rows: Mapping[str, Sequence[dict[str, Any]]], engine: Any, counts: dict[str, int], *, retries: int
) -> dict[str, list[dict[str, Any]]]:
    """Rewrite every row of every query type with `engine` (one call per attempt, every row at once).

    Returns the rows kept, each with its rewrite as ``query`` and the template's as ``template_query``;
    `counts` gets ``<type>_phrasing_redone`` (rows asked more than once), ``<type>_phrasing_dropped`` and
    ``<type>_phrasing_<problem>`` (rewrites refused, by reason).

    Raises:
        RuntimeError: the engine failed a request (not cached: the same command asks it again).
    """
    pending = [(config, i) for config in rows for i in range(len(rows[config]))]
    written: dict[tuple[str, int], str] = {}
    asked_again: set[tuple[str, int]] = set()
    for attempt in range(retries + 1):
        if not pending:
            break
        params = dataclasses.replace(PHRASING_PARAMS, seed=attempt)  # another sample for a redo
        completions = engine.generate([request(c, rows[c][i]) for c, i in pending], params)
        failed = [c.error for c in completions if not c.ok]
        if failed:
            raise RuntimeError(f"{len(failed)} phrasing requests failed (first: {failed[0]})")
        retry = []
        for (config, i), completion in zip(pending, completions, strict=True):
            text = completion.texts[0].strip() if completion.texts else ""
            why = problem(config, rows[config][i], text)
            if why is None:
                written[(config, i)] = text
                continue
            counts[f"{config}_phrasing_{why}"] = counts.get(f"{config}_phrasing_{why}", 0) + 1
            retry.append((config, i))
        asked_again.update(retry)
        pending = retry
    for config in rows:
        counts[f"{config}_phrasing_redone"] = sum(c == config for c, _ in asked_again)
        counts[f"{config}_phrasing_dropped"] = sum(c == config for c, _ in pending)
    return {
        config: [
            {**row, "query": written[(config, i)], "template_query": row["query"]}
            for i, row in enumerate(config_rows)
            if (config, i) in written
        ]
        for config, config_rows in rows.items()
    }
