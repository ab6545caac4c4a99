"""RecBench+'s per-query metrics, from a prediction already matched to the catalogue.

A prediction is the list of recommended titles in order, each ``{"title", "parent_asin", "satisfies"}``
(``parent_asin`` None: not in the catalogue; ``satisfies``: the item holds every true condition), with
repeats of one item (or of one unmatched title) kept once; an empty list is an answer that **declined**
(a refusal, "no such items", or ``[]``); None is a failed query (nothing could be read: an empty or
cut-off answer, an engine error).

- ``recall``: ground-truth items recommended / ground-truth items;
- ``precision``: ground-truth items recommended / titles recommended;
- ``ndcg``: binary relevance, the ideal list holds every ground-truth item (as released);
- ``condition_match``: recommended catalogue items satisfying every true condition / recommended catalogue
  items (0 when there is none: the released code left such queries out of its mean);
- ``hallucination``: recommended titles not in the catalogue / titles recommended (0 for a failed query);
- ``ftr``: 1 for a query that recommends nothing (declined or failed; a one-item answer is not a
  failure), else 0;
- ``rejection``: 1 for a query that declined, else 0 (higher is better: the model turned down a query
  built on a false claim, the paper's reading of FTR on misinformed queries); defined on misinformed
  queries only. An answer that could not be read is no rejection: it counts in FTR only.

Recall, precision and NDCG score a declined or failed query 0; so do condition match and hallucination
(it named nothing). `defined` says which metrics a query type has: an
interest query names no condition, so it has no condition match.

>>> truth = {"ground_truth": [{"parent_asin": "a"}, {"parent_asin": "b"}]}
>>> prediction = [{"title": "A", "parent_asin": "a", "satisfies": True},
...               {"title": "Z", "parent_asin": None, "satisfies": False}]
>>> [value(m, prediction, truth) for m in ("recall", "precision", "condition_match", "hallucination", "ftr")]
[0.5, 0.5, 1.0, 0.5, 0.0]
>>> round(value("ndcg", prediction, truth), 4)  # 1 / (1 + 1/log2(3))
0.6131
>>> [value(m, [], truth) for m in ("ftr", "rejection")], [value(m, None, truth) for m in ("ftr", "rejection")]
([1.0, 1.0], [1.0, 0.0])
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

METRICS = ("recall", "precision", "ndcg", "condition_match", "hallucination", "ftr", "rejection")
CONDITION_GROUPS = ("1", "2", "3-4")


def condition_group(n: int) -> str:
    """The condition-count group of a query with `n` conditions, as the paper's Table 1 groups them.

    >>> [condition_group(n) for n in (1, 2, 3, 4)]
    ['1', '2', '3-4', '3-4']
    """
    return str(n) if n < 3 else "3-4"


def defined(metric: str, query_type: str) -> bool:
    """Whether `metric` is defined on queries of `query_type`.

    >>> [defined("rejection", t) for t in ("explicit", "misinformed")], defined("condition_match", "interest")
    ([False, True], False)
    """
    if metric == "rejection":
        return query_type == "misinformed"
    return not (metric == "condition_match" and query_type == "interest")


def value(metric: str, prediction: Sequence[Mapping[str, Any]] | None, truth: Mapping[str, Any]) -> float:
    """One query's value of `metric` (see the module docstring)."""
    if prediction is None:
        return 1.0 if metric == "ftr" else 0.0
    if not prediction:
        return 1.0 if metric in ("ftr", "rejection") else 0.0
    relevant = {item["parent_asin"] for item in truth["ground_truth"]}
    hits = [entry["parent_asin"] in relevant for entry in prediction]
    found = [entry for entry in prediction if entry["parent_asin"] is not None]
    if metric == "recall":
        return sum(hits) / len(relevant)
    if metric == "precision":
        return sum(hits) / len(prediction)
    if metric == "ndcg":
        dcg = sum(1.0 / math.log2(rank + 2) for rank, hit in enumerate(hits) if hit)
        return dcg / sum(1.0 / math.log2(rank + 2) for rank in range(len(relevant)))
    if metric == "condition_match":
        return sum(entry["satisfies"] for entry in found) / len(found) if found else 0.0
    if metric == "hallucination":
        return 1.0 - len(found) / len(prediction)
    if metric in ("ftr", "rejection"):
        return 0.0
    raise ValueError(f"unknown RecBench+ metric {metric!r}; known: {', '.join(METRICS)}")
