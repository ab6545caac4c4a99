"""Statistics shared by every task family: the metric declaration (the intervals and tests follow)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """A metric as a family declares it: its name, its direction and how it aggregates over docs.

    >>> MetricSpec("rmse", higher_is_better=False, aggregation="corpus").aggregation
    'corpus'
    """

    name: str
    higher_is_better: bool = True
    aggregation: Literal["mean", "corpus"] = "mean"
