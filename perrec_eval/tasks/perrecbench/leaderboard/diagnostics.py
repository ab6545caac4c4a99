"""What the answers behind a cell looked like, read from samples.jsonl.

Per (level, method) cell:

- ``position_bias``: the share of "[User A]" among the parsed pairwise answers (0.5 = no position
  preference; 1.0 = always the first user shown);
- ``order_consistency``: among user pairs asked in both orders whose two answers parsed, the share whose
  answers agree (name the same user);
- ``truncated_rate``: the share of answers cut at the method's token limit: ``finish_reason == "length"``
  where the samples record finish reasons, else ``completion_tokens`` reaching the limit (with several
  samples per request only requests whose every sample hit the limit can be told: a lower bound);
- ``prompt_tokens_mean`` / ``completion_tokens_mean``: mean tokens per request and per answer.

Requests the engine failed (``error``) are left out of all of these; they are counted in the cell's engine
error rate. Runs without samples.jsonl (the baselines) have no diagnostics.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from perrec_eval.tasks.perrecbench.config import MAX_TOKENS

Cell = tuple[str, str]


@dataclass(slots=True)
class _Tally:
    requests: int = 0
    answers: int = 0
    truncated: int = 0
    prompt_tokens: list[int] = field(default_factory=list)
    completion_tokens: list[float] = field(default_factory=list)
    first_user: int = 0
    pairwise_parsed: int = 0
    orders: dict[tuple[str, int, int, int], dict[tuple[int, int], str]] = field(default_factory=dict)

    def add(self, sample: Mapping[str, Any], method: str) -> None:
        if sample.get("error") is not None:
            return
        texts = sample.get("texts") or []
        self.requests += 1
        self.answers += len(texts)
        self.truncated += _truncated(sample, method, len(texts))
        if sample.get("prompt_tokens") is not None:
            self.prompt_tokens.append(sample["prompt_tokens"])
        if sample.get("completion_tokens") is not None and texts:
            self.completion_tokens.append(sample["completion_tokens"] / len(texts))
        if method == "pairwise":
            self._add_pairwise(sample)

    def _add_pairwise(self, sample: Mapping[str, Any]) -> None:
        for answer in sample.get("parsed") or []:
            if answer in ("A", "B"):
                self.pairwise_parsed += 1
                self.first_user += answer == "A"
        slot = sample.get("slot") or []
        if len(slot) == 3 and sample.get("value") in ("A", "B"):
            _, a, b = slot
            pair = (sample["group_id"], sample.get("step", 0), min(a, b), max(a, b))
            self.orders.setdefault(pair, {})[(a, b)] = sample["value"]

    def result(self) -> dict[str, Any]:
        both = [answers for answers in self.orders.values() if len(answers) == 2]
        # (a, b) answered "A" names a; (b, a) then agrees when it answers "B": the two values differ.
        agree = sum(len(set(answers.values())) == 2 for answers in both)
        return {
            "num_requests": self.requests,
            "position_bias": self.first_user / self.pairwise_parsed if self.pairwise_parsed else None,
            "num_pairwise_answers": self.pairwise_parsed,
            "order_consistency": agree / len(both) if both else None,
            "num_order_pairs": len(both),
            "truncated_rate": self.truncated / self.answers if self.answers else None,
            "prompt_tokens_mean": _mean(self.prompt_tokens),
            "completion_tokens_mean": _mean(self.completion_tokens),
        }


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _truncated(sample: Mapping[str, Any], method: str, n: int) -> int:
    """How many of the request's `n` answers were cut at the token limit."""
    reasons = sample.get("finish_reasons", sample.get("finish_reason"))
    if isinstance(reasons, str):
        reasons = [reasons]
    if reasons:
        return sum(reason == "length" for reason in reasons)
    tokens = sample.get("completion_tokens")
    limit = MAX_TOKENS.get(method)
    if tokens is None or limit is None or n == 0:
        return 0
    return n if tokens >= limit * n else 0


def cell_diagnostics(samples: Iterable[Mapping[str, Any]]) -> dict[Cell, dict[str, Any]]:
    """Diagnostics per (level, method) cell of a run's sample lines.

    >>> first = {"group_id": "g", "level": "easy", "method": "pairwise", "step": 0, "slot": ["pair", 0, 1],
    ...          "texts": ["[User A]"], "parsed": ["A"], "value": "A", "prompt_tokens": 10,
    ...          "completion_tokens": 3}
    >>> lines = [first, {**first, "slot": ["pair", 1, 0], "prompt_tokens": 12}]
    >>> d = cell_diagnostics(lines)[("easy", "pairwise")]
    >>> d["position_bias"], d["order_consistency"], d["truncated_rate"], d["prompt_tokens_mean"]
    (1.0, 0.0, 0.0, 11.0)
    """
    tallies: dict[Cell, _Tally] = {}
    for sample in samples:
        cell = (sample["level"], sample["method"])
        tallies.setdefault(cell, _Tally()).add(sample, sample["method"])
    return {cell: tally.result() for cell, tally in tallies.items()}
