"""LLMRec's metrics against hand-computed values, and which cell has which metric."""

from __future__ import annotations

import math

import pytest

from perrec_eval.tasks.llmrec import metrics
from perrec_eval.tasks.llmrec.task import TASK, score_doc


@pytest.mark.parametrize(
    ("ranking", "hr1", "hr5", "hr10", "ndcg5", "ndcg10"),
    [
        (["t", "a"], 1.0, 1.0, 1.0, 1.0, 1.0),
        (["a", "b", "t"], 0.0, 1.0, 1.0, 0.5, 0.5),
        ([*"abcdef", "t"], 0.0, 0.0, 1.0, 0.0, 1 / 3),  # rank 7: 1 / log2(8)
        (["a"] * 3 + ["t"], 0.0, 1.0, 1.0, 1 / math.log2(5), 1 / math.log2(5)),
        ([*"abcdefghij", "t"], 0.0, 0.0, 0.0, 0.0, 0.0),
    ],
)
def test_metrics_ranking_match_hand_computed_values(ranking, hr1, hr5, hr10, ndcg5, ndcg10) -> None:
    values = [score_doc(name, ranking, "t") for name in ("hr@1", "hr@5", "hr@10", "ndcg@5", "ndcg@10")]
    assert values == pytest.approx([hr1, hr5, hr10, ndcg5, ndcg10])


def test_metrics_rating_errors_and_failures() -> None:
    items = [score_doc("rmse", p, t) for p, t in ((4.0, 5.0), (2.0, 5.0), (None, 1.0))]
    assert items == [[-1.0], [-3.0], []]  # a failed doc adds no error (it is counted as failed)
    rmse, mae = (next(m for m in TASK.metrics if m.name == n) for n in ("rmse", "mae"))
    assert rmse.value(items) == pytest.approx(math.sqrt(5.0)) and mae.value(items) == pytest.approx(2.0)


def test_metrics_a_failed_ranking_scores_zero_and_other_tasks_metrics_are_none() -> None:
    assert score_doc("ndcg@10", None, "t") == 0.0
    assert score_doc("ndcg@10", 4.0, 5.0) is None and score_doc("rmse", ["t"], "t") is None


def test_metrics_headline_is_ndcg_at_10_and_mae_has_no_error_for_no_doc() -> None:
    assert TASK.headline.name == "ndcg@10"
    assert math.isnan(metrics.mae([[], []]))
