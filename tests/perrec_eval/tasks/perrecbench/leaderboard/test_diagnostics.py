"""Per-cell diagnostics read from samples.jsonl: position bias, both-order agreement, cut answers, tokens."""

from __future__ import annotations

import pytest

from perrec_eval.tasks.perrecbench.leaderboard.diagnostics import cell_diagnostics
from perrec_eval.tasks.perrecbench.leaderboard.runs import load_run


def test_diagnostics_always_user_a_is_fully_position_biased_and_never_consistent(runs):
    diagnostics = cell_diagnostics(load_run(runs["always_a"]).samples())
    for level in ("easy", "medium", "hard"):
        cell = diagnostics[(level, "pairwise")]
        assert cell["position_bias"] == 1.0
        assert cell["order_consistency"] == 0.0 and cell["num_order_pairs"] > 0


def test_diagnostics_truth_engine_agrees_with_itself_in_both_orders(runs):
    cell = cell_diagnostics(load_run(runs["truth"]).samples())[("medium", "pairwise")]
    assert cell["order_consistency"] == 1.0
    assert cell["position_bias"] == pytest.approx(0.5)  # every pair asked in both orders


def test_diagnostics_answers_at_the_token_limit_count_as_cut(runs):
    diagnostics = cell_diagnostics(load_run(runs["cut"]).samples())
    assert diagnostics[("easy", "pairwise")]["truncated_rate"] == 1.0
    assert diagnostics[("easy", "pairwise")]["completion_tokens_mean"] == 512
    assert cell_diagnostics(load_run(runs["truth"]).samples())[("easy", "pairwise")]["truncated_rate"] == 0.0


def test_diagnostics_finish_reasons_are_used_where_samples_carry_them():
    line = {
        "group_id": "g",
        "level": "easy",
        "method": "listwise",
        "texts": ["a", "b"],
        "parsed": [None, None],
        "value": None,
        "completion_tokens": 3,
        "prompt_tokens": 9,
        "finish_reasons": ["length", "stop"],
    }
    assert cell_diagnostics([line])[("easy", "listwise")]["truncated_rate"] == 0.5


def test_diagnostics_engine_errors_are_left_out():
    failed = {
        "group_id": "g",
        "level": "easy",
        "method": "pointwise",
        "texts": [],
        "parsed": [],
        "value": None,
        "completion_tokens": None,
        "prompt_tokens": None,
        "error": "HTTP 500",
    }
    cell = cell_diagnostics([failed])[("easy", "pointwise")]
    assert cell["num_requests"] == 0 and cell["prompt_tokens_mean"] is None and cell["truncated_rate"] is None


def test_diagnostics_tokens_are_means_per_request(runs):
    cell = cell_diagnostics(load_run(runs["truth"]).samples())[("easy", "listwise")]
    assert cell["prompt_tokens_mean"] > 50 and cell["completion_tokens_mean"] >= 1
