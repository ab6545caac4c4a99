"""LLMRec's metrics, per doc (one doc = one user's row): hit rate and NDCG at k for a ranking with one
relevant item, and rating errors (RMSE, MAE over every rated doc)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from perrec_eval.stats import mean


def rank_of(ranking: Sequence[str], target: str) -> int | None:
    """The 1-based rank of `target` in `ranking`, or None.

    >>> rank_of(["a", "b"], "b"), rank_of(["a"], "z")
    (2, None)
    """
    return ranking.index(target) + 1 if target in ranking else None


def hit_at(ranking: Sequence[str], target: str, k: int) -> float:
    """1.0 if the target is among the first `k` items, else 0.0 (HR@k of one user).

    >>> hit_at(["a", "b", "c"], "c", 2), hit_at(["a", "b", "c"], "c", 3)
    (0.0, 1.0)
    """
    rank = rank_of(ranking, target)
    return float(rank is not None and rank <= k)


def ndcg_at(ranking: Sequence[str], target: str, k: int) -> float:
    """NDCG@k with one relevant item: ``1 / log2(rank + 1)`` when it is ranked within `k`, else 0.

    >>> ndcg_at(["t"], "t", 5), round(ndcg_at(["a", "b", "t"], "t", 5), 4), ndcg_at(["a", "t"], "t", 1)
    (1.0, 0.5, 0.0)
    """
    rank = rank_of(ranking, target)
    return 1.0 / math.log2(rank + 1) if rank is not None and rank <= k else 0.0


def mae(items: Sequence[float | Sequence[float]]) -> float:
    """Mean absolute error over every error of every doc (a corpus function; a failed doc has none).

    >>> mae([[1.0], [], -3.0])
    2.0
    """
    try:  # the bootstrap calls this once per resample: the common shape (one error per doc) in one step
        errors = np.asarray(items, dtype=np.float64).ravel()
    except ValueError:  # ragged: failed docs have no error
        flat = [e for item in items for e in (item if isinstance(item, list | tuple) else (item,))]
        errors = np.asarray(flat, dtype=np.float64)
    return mean(np.abs(errors)) if errors.size else math.nan
