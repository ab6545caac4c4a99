"""perrec_eval.stats: intervals, paired tests and planning figures over docs, and the metric declaration."""

from __future__ import annotations

import dataclasses
import doctest
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perrec_eval import ptc, stats
from perrec_eval.stats import MetricSpec


def rmse_of_flat(errors: list[float]) -> float:
    return math.sqrt(sum(e * e for e in errors) / len(errors))


def mean_of(items) -> float:
    return float(np.mean(items))


# --- sign-flip and paired bootstrap tests of per-doc differences ----------------------------------------


def test_signflip_test_exact_p_is_the_share_of_sign_patterns():
    # Sums of the 8 patterns of ±1 ±2 ±3: only +++ and --- reach |6|.
    assert stats.signflip_test([1.0, 2.0, 3.0]).p_value == 2 / 8


def test_signflip_test_agrees_with_scipy_exact_permutation_test():
    scipy_stats = pytest.importorskip("scipy.stats")
    d = np.random.default_rng(0).normal(size=10) + 0.3
    expected = scipy_stats.permutation_test(
        (d,), np.mean, permutation_type="samples", n_resamples=np.inf, alternative="two-sided"
    ).pvalue
    assert stats.signflip_test(d, n_resamples=2**10).p_value == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("n", [4, 30])  # exact, then Monte Carlo
def test_signflip_test_identical_systems_give_p_one(n: int):
    result = stats.signflip_test([0.0] * n, n_resamples=1000)
    assert (result.difference, result.p_value, result.ci_low, result.ci_high) == (0.0, 1.0, 0.0, 0.0)


def test_signflip_test_fixed_improvement_gives_the_smallest_p():
    assert stats.signflip_test([0.25] * 40, n_resamples=999).p_value == 1 / 1000


def test_signflip_test_clusters_flip_together():
    result = stats.signflip_test([1.0, 1.0, 1.0, 1.0], ["a", "a", "b", "b"])
    assert (result.p_value, result.num_clusters) == (2 / 4, 2)


def test_signflip_test_draws_signs_in_whole_words_whatever_the_chunking():
    # 102 docs: chunks of 400 resamples are 40,800 signs (whole 32-bit words), so the draws are the
    # unchunked ones; the leaderboard's million-sign chunks (9,803 resamples) leave bytes unused.
    differences = np.linspace(-1.0, 1.1, 102)
    whole = stats.signflip_test(differences, max_draws=102 * 400)
    assert whole == stats.signflip_test(differences, max_draws=10**9)
    assert whole.num_compared == 102 and 0.0 < whole.p_value < 1.0


def test_paired_bootstrap_test_identical_and_improved_systems():
    assert stats.paired_bootstrap_test([0.0] * 12).p_value == 1.0
    improved = stats.paired_bootstrap_test(np.linspace(0.5, 1.5, 12), n_resamples=999)
    assert improved.p_value == 1 / 1000 and improved.ci_low > 0.5


@pytest.mark.parametrize("test", [stats.signflip_test, stats.paired_bootstrap_test])
def test_paired_tests_of_nothing_are_nan(test):
    result = test([])
    assert result.num_compared == 0
    assert all(math.isnan(x) for x in (result.difference, result.p_value, result.ci_low, result.ci_high))


@pytest.mark.parametrize("test", [stats.signflip_test, stats.paired_bootstrap_test])
def test_paired_tests_negate_with_the_systems(test):
    d = np.random.default_rng(1).normal(size=25) + 0.2
    ab, ba = test(d, seed=4), test(-d, seed=4)
    assert ba.difference == -ab.difference and ba.p_value == ab.p_value
    assert (ba.ci_low, ba.ci_high) == pytest.approx((-ab.ci_high, -ab.ci_low), abs=1e-12)


# --- bootstrap interval of a mean --------------------------------------------------------------------------


def test_bootstrap_interval_two_clusters_hand_computed():
    # Clusters of all 0s and all 1s: resampled means 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4.
    assert stats.bootstrap_interval([0.0, 1.0] * 50, ["a", "b"] * 50, n_resamples=4000) == (0.0, 1.0)


def test_bootstrap_interval_one_cluster_per_doc_is_the_plain_bootstrap():
    values = np.random.default_rng(2).normal(size=40)
    distinct = [f"doc{i}" for i in range(40)]
    assert stats.bootstrap_interval(values, distinct, seed=9) == stats.bootstrap_interval(values, seed=9)


def test_bootstrap_interval_takes_a_generator_as_its_seed():
    values = np.random.default_rng(3).normal(size=30)
    assert stats.bootstrap_interval(values, seed=np.random.default_rng(5)) == stats.bootstrap_interval(
        values, seed=5
    )


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-1, 1, allow_nan=False), min_size=1, max_size=30), st.integers(0, 10))
def test_bootstrap_interval_holds_the_mean(values: list[float], seed: int):
    low, high = stats.bootstrap_interval(values, n_resamples=200, seed=seed)
    assert low <= stats.mean(values) <= high


def test_bootstrap_interval_refuses_nan_and_wrong_cluster_counts():
    with pytest.raises(ValueError, match="finite value"):
        stats.bootstrap_interval([0.5, math.nan])
    with pytest.raises(ValueError, match="one cluster id per doc"):
        stats.bootstrap_interval([0.5, 0.25], ["a"])
    with pytest.raises(ValueError, match="confidence_level"):
        stats.bootstrap_interval([0.5, 0.25], confidence_level=95)


# --- corpus statistics -------------------------------------------------------------------------------------


def test_corpus_interval_rmse_hand_computed():
    # Two docs with errors 1 and 3: resampled RMSEs 1, sqrt(5), 3 with probabilities 1/4, 1/2, 1/4.
    assert stats.corpus_interval([1.0, 3.0], stats.rmse, n_resamples=4000) == (1.0, 3.0)


@pytest.mark.parametrize("clustered", [False, True])
def test_corpus_interval_of_the_mean_is_the_bootstrap_interval(clustered: bool):
    rng = np.random.default_rng(6)
    values = rng.normal(size=60)
    clusters = [f"c{i // 3}" for i in range(60)] if clustered else None
    expected = stats.bootstrap_interval(values, clusters, n_resamples=500, seed=8)
    got = stats.corpus_interval(list(values), mean_of, clusters, n_resamples=500, seed=8)
    assert got == pytest.approx(expected, abs=1e-12)  # the same resamples; sums only differ in rounding


def test_corpus_interval_calls_the_corpus_function_once_per_resample():
    calls = []

    def counted(items):
        calls.append(len(items))
        return mean_of(items)

    stats.corpus_interval([0.1, 0.5, 0.9, 0.4], counted, ["a", "a", "b", "c"], n_resamples=50)
    assert len(calls) == 51  # the estimate, then one per resample


def test_corpus_interval_of_nothing_is_nan_and_nan_values_are_refused():
    assert all(math.isnan(x) for x in stats.corpus_interval([], stats.rmse))
    with pytest.raises(ValueError, match="NaN"):
        stats.corpus_interval([1.0, 2.0], lambda items: math.nan)


def test_corpus_paired_test_identical_systems_give_p_one():
    errors = [[0.5, -1.0], [2.0], [0.25, 0.75, -0.5]] * 5
    result = stats.corpus_paired_test(errors, errors, stats.rmse, n_resamples=300)
    assert (result.difference, result.p_value, result.ci_low, result.ci_high) == (0.0, 1.0, 0.0, 0.0)


def test_corpus_paired_test_fixed_improvement_gives_a_small_p():
    errors = list(np.random.default_rng(7).normal(size=40))
    result = stats.corpus_paired_test(errors, [2 * e for e in errors], stats.rmse, n_resamples=999)
    assert result.difference == pytest.approx(-stats.rmse(errors))
    assert result.p_value == 1 / 1000
    assert result.ci_low <= result.difference <= result.ci_high < 0


def test_corpus_paired_test_negates_with_the_systems():
    rng = np.random.default_rng(8)
    a, b = list(rng.normal(size=30)), list(1.2 * rng.normal(size=30))
    ab = stats.corpus_paired_test(a, b, stats.rmse, n_resamples=400, seed=2)
    ba = stats.corpus_paired_test(b, a, stats.rmse, n_resamples=400, seed=2)
    assert ba.difference == -ab.difference and ba.p_value == ab.p_value
    assert (ba.ci_low, ba.ci_high) == pytest.approx((-ab.ci_high, -ab.ci_low), abs=1e-12)


def test_corpus_paired_test_of_the_mean_matches_the_paired_bootstrap():
    rng = np.random.default_rng(9)
    a, b = rng.normal(size=50) + 0.2, rng.normal(size=50)
    corpus = stats.corpus_paired_test(list(a), list(b), mean_of, n_resamples=2000, seed=3)
    direct = stats.paired_bootstrap_test(a - b, n_resamples=2000, seed=3)
    assert corpus.difference == pytest.approx(direct.difference, abs=1e-12)
    # The p-values count the same first 2,000 resamples (up to ties broken by rounding).
    assert corpus.p_value == pytest.approx(direct.p_value, abs=2 / 2001)


def test_corpus_paired_test_clusters_resample_whole_clusters():
    rng = np.random.default_rng(10)
    a, b = list(rng.normal(size=20)), list(rng.normal(size=20))
    copies = 4
    a4, b4 = [x for x in a for _ in range(copies)], [x for x in b for _ in range(copies)]
    clusters = [f"c{i}" for i in range(20) for _ in range(copies)]
    naive = stats.corpus_paired_test(a4, b4, stats.rmse, n_resamples=1000)
    clustered = stats.corpus_paired_test(a4, b4, stats.rmse, clusters, n_resamples=1000)
    assert clustered.num_clusters == 20 and naive.num_clusters == 80
    assert 1.5 < (clustered.ci_high - clustered.ci_low) / (naive.ci_high - naive.ci_low) < 2.6


def test_corpus_paired_test_needs_the_same_docs():
    with pytest.raises(ValueError, match="same docs"):
        stats.corpus_paired_test([1.0, 2.0], [1.0], stats.rmse)


def test_rmse_is_the_root_of_the_mean_squared_error_bit_for_bit():
    rng = np.random.default_rng(11)
    true, predicted = rng.uniform(1, 5, size=97), rng.uniform(1, 5, size=97)
    errors = (predicted - true).tolist()
    assert stats.rmse(errors) == ptc.rating_errors(true.tolist(), predicted.tolist())["rmse"]
    assert stats.rmse([errors[:40], errors[40:], []]) == stats.rmse(errors)
    assert stats.rmse([1.0, -3.0]) == rmse_of_flat([1.0, -3.0]) and math.isnan(stats.rmse([[]]))


# --- planning figures --------------------------------------------------------------------------------------


def test_resolution_hand_computed_and_equal_to_the_tau_planning():
    z = 1.959963984540054
    assert stats.resolution(1.0, 100)["half_width"] == pytest.approx(z * 0.1, abs=1e-12)
    assert stats.resolution(0.5, 100, design_effect=2.0) == stats.resolution(1.0, 100)
    for users in (2, 3, 4):
        assert ptc.expected_resolution(users, 200) == stats.resolution(ptc.null_tau_variance(users), 200)
        assert ptc.groups_for_half_width(users, 0.02) == stats.docs_for_half_width(
            ptc.null_tau_variance(users), 0.02
        )


def test_design_effect_hand_computed():
    assert stats.design_effect(["a", "a", "b"]) == 5 / 3
    assert stats.design_effect([]) == stats.design_effect(None) == 1.0


# --- the metric declaration --------------------------------------------------------------------------------


def test_metric_spec_mean_dispatches_to_the_bootstrap_and_the_signflip_test():
    metric = MetricSpec("accuracy")
    rng = np.random.default_rng(12)
    a, b = rng.uniform(size=30), rng.uniform(size=30)
    clusters = [f"c{i // 2}" for i in range(30)]
    assert metric.value(a) == stats.mean(a)
    assert metric.interval(a, clusters, seed=1) == stats.bootstrap_interval(a, clusters, seed=1)
    assert metric.paired_test(a, b, clusters, n_resamples=500) == stats.signflip_test(
        a - b, clusters, n_resamples=500
    )


def test_metric_spec_corpus_dispatches_to_the_corpus_bootstrap():
    metric = MetricSpec("rmse", higher_is_better=False, aggregation="corpus", corpus=stats.rmse)
    rng = np.random.default_rng(13)
    a, b = list(rng.normal(size=20)), list(rng.normal(size=20))
    assert metric.value(a) == stats.rmse(a) == pytest.approx(rmse_of_flat(a), abs=1e-12)
    assert metric.interval(a, n_resamples=200) == stats.corpus_interval(a, stats.rmse, n_resamples=200)
    assert metric.paired_test(a, b, n_resamples=200) == stats.corpus_paired_test(
        a, b, stats.rmse, n_resamples=200
    )


def test_metric_spec_of_no_docs_is_nan():
    corpus = MetricSpec("rmse", higher_is_better=False, aggregation="corpus", corpus=stats.rmse)
    assert math.isnan(MetricSpec("ptc").value([])) and math.isnan(corpus.value([]))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"name": ""}, "needs a name"),
        ({"name": "ptc", "aggregation": "median"}, "'mean' or 'corpus'"),
        ({"name": "rmse", "aggregation": "corpus"}, "pass corpus="),
        ({"name": "ptc", "corpus": stats.rmse}, "drop corpus="),
        ({"name": "ptc", "higher_is_better": "yes"}, "True or False"),
    ],
)
def test_metric_spec_refuses_a_bad_declaration(options: dict, message: str):
    with pytest.raises(ValueError, match=message):
        MetricSpec(**options)


def test_metric_spec_is_frozen_and_refuses_misaligned_systems():
    metric = MetricSpec("ptc")
    with pytest.raises(dataclasses.FrozenInstanceError):
        metric.name = "other"  # type: ignore[misc]
    with pytest.raises(ValueError, match="same docs"):
        metric.paired_test([1.0, 0.0], [1.0])
    with pytest.raises(ValueError, match="finite value"):
        metric.value([1.0, None])


# --- packaging ---------------------------------------------------------------------------------------------


def test_stats_module_imports_no_heavy_library():
    heavy = ("evaluate", "datasets", "transformers", "torch", "scipy", "pandas")
    code = f"import sys, perrec_eval.stats; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "[]"


def test_stats_docstring_examples_pass():
    result = doctest.testmod(stats)
    assert result.attempted >= 25
    assert result.failed == 0
