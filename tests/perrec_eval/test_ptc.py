"""The pure PTC module: properties of the statistic, the paper variant, invalid answers, resampling."""

from __future__ import annotations

import doctest
import itertools
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import kendalltau

from perrec_eval import ptc

SETTINGS = settings(max_examples=150, deadline=None)


@st.composite
def distinct_ratings(draw, min_size: int = 2, max_size: int = 6) -> list[float]:
    """True relative ratings of one group: distinct, as PerRecBench guarantees."""
    n = draw(st.integers(min_size, max_size))
    values = st.floats(-4.0, 4.0, allow_nan=False, allow_infinity=False)
    return draw(st.lists(values, min_size=n, max_size=n, unique=True))


@st.composite
def group_with_scores(draw, min_size: int = 2, max_size: int = 6) -> tuple[list[float], list[float]]:
    """A group and predicted scores that may contain ties."""
    references = draw(distinct_ratings(min_size, max_size))
    scores = draw(st.lists(st.integers(-2, 2), min_size=len(references), max_size=len(references)))
    return references, [float(s) for s in scores]


@st.composite
def group_with_ranking(draw, min_size: int = 2, max_size: int = 6) -> tuple[list[float], list[int]]:
    references = draw(distinct_ratings(min_size, max_size))
    return references, draw(st.permutations(list(range(1, len(references) + 1))))


def best_first(values: list[float]) -> list[int]:
    """1-based user indices from most to least preferred (values distinct)."""
    return [i + 1 for i in sorted(range(len(values)), key=lambda i: -values[i])]


def tau(references, predictions, **options) -> float:
    return ptc.compute_ptc([references], [predictions], **options)["ptc"]


def released_evaluator(references: list[float], scores: list[float]) -> float:
    """The published statistic, written independently: scipy on best-first index lists.

    Tied scores put the higher index first.
    """
    predicted = sorted(range(len(scores)), key=lambda i: (-scores[i], -i))
    return float(kendalltau(predicted, best_first(references)).statistic)


# --- the statistic -----------------------------------------------------------------------------------------


@SETTINGS
@given(distinct_ratings(), st.sampled_from(ptc.VARIANTS))
def test_ptc_identical_order_scores_one(references, variant):
    assert tau(references, references, variant=variant) == pytest.approx(1.0)
    assert tau(references, best_first(references), prediction_format="ranking", variant=variant) == 1.0


@SETTINGS
@given(distinct_ratings())
def test_ptc_reversed_order_scores_minus_one(references):
    assert tau(references, [-r for r in references]) == pytest.approx(-1.0)
    assert tau(references, best_first(references)[::-1], prediction_format="ranking") == -1.0


def test_ptc_paper_variant_can_score_a_reversed_order_above_zero():
    # Truth list [2, 3, 1], fully reversed prediction [1, 3, 2]: the index lists agree on 2 of 3 pairs.
    references = [0.0, 1.0, 0.5]
    assert tau(references, [1, 3, 2], prediction_format="ranking", variant="paper") == pytest.approx(1 / 3)
    assert tau(references, [-r for r in references], variant="paper") == pytest.approx(1 / 3)


@SETTINGS
@given(group_with_scores(), st.randoms(use_true_random=False))
def test_ptc_renumbering_users_leaves_tau_b_unchanged(group, random):
    references, scores = group
    order = list(range(len(references)))
    random.shuffle(order)
    renumbered = tau([references[i] for i in order], [scores[i] for i in order])
    assert renumbered == pytest.approx(tau(references, scores), abs=1e-12)


@SETTINGS
@given(group_with_ranking(), st.randoms(use_true_random=False))
def test_ptc_renumbering_users_leaves_tau_b_unchanged_for_rankings(group, random):
    references, ranking = group
    order = list(range(len(references)))  # new user j is old user order[j]
    random.shuffle(order)
    new_index = {old + 1: new + 1 for new, old in enumerate(order)}
    renumbered = tau(
        [references[i] for i in order], [new_index[u] for u in ranking], prediction_format="ranking"
    )
    assert renumbered == pytest.approx(tau(references, ranking, prediction_format="ranking"), abs=1e-12)


@SETTINGS
@given(distinct_ratings(), st.data())
def test_ptc_is_symmetric(references, data):
    other = data.draw(st.permutations(references))
    assert tau(references, other) == pytest.approx(tau(other, references), abs=1e-12)


@SETTINGS
@given(
    st.integers(2, 6).flatmap(lambda n: st.tuples(*[st.lists(st.integers(0, 2), min_size=n, max_size=n)] * 2))
)
def test_ptc_kendall_tau_b_agrees_with_scipy_including_ties(pair):
    x, y = pair
    expected = kendalltau(x, y).statistic
    got = float(ptc.kendall_tau_b([x], [y])[0])
    assert got == (0.0 if math.isnan(expected) else pytest.approx(expected, abs=1e-12))
    assert got == pytest.approx(float(ptc.kendall_tau_b([y], [x])[0]), abs=1e-12)


@SETTINGS
@given(st.lists(group_with_scores(), min_size=1, max_size=12))
def test_ptc_group_taus_agree_with_scipy_per_group_for_mixed_sizes(groups):
    references = [g[0] for g in groups]
    scores = [g[1] for g in groups]
    taus, valid = ptc.group_taus(references, scores)
    assert valid.all()
    for got, (x, y) in zip(taus.tolist(), groups, strict=True):
        expected = kendalltau(x, y).statistic
        assert got == (0.0 if math.isnan(expected) else pytest.approx(expected, abs=1e-12))


@pytest.mark.parametrize("variant", ptc.VARIANTS)
@pytest.mark.parametrize("n", [2, 3, 4])
def test_ptc_all_equal_scores_count_zero_not_nan(variant, n):
    result = ptc.compute_ptc([list(np.linspace(1, -1, n))], [[2.5] * n], variant=variant, return_groups=True)
    assert result["ptc"] == 0.0
    assert result["groups"] == [0.0]
    assert result["num_invalid"] == 0


def test_ptc_groups_come_back_in_input_order_across_sizes():
    references = [[1.0, 0.0, -1.0], [1.0, 0.0], [0.0, 1.0, 2.0, 3.0], [1.0, 0.0]]
    predictions = [[3, 2, 1], [1, 2], [1, 2, 3, 4], [2, 1]]
    groups = ptc.compute_ptc(references, predictions, return_groups=True)["groups"]
    assert groups == [1.0, -1.0, 1.0, 1.0]


def test_ptc_numpy_arrays_give_the_same_result_as_lists():
    rng = np.random.default_rng(3)
    references = rng.normal(size=(50, 4))
    scores = rng.integers(0, 3, size=(50, 4)).astype(float)
    from_lists = ptc.compute_ptc(references.tolist(), scores.tolist(), return_groups=True)
    assert ptc.compute_ptc(references, scores, return_groups=True) == from_lists


# --- the paper variant -------------------------------------------------------------------------------------


def test_ptc_worked_example_paper_minus_one_tau_b_one_third():
    references = [2.0, 1.0, 3.0]  # true best-first list [3, 1, 2]
    assert best_first(references) == [3, 1, 2]
    assert tau(references, [1, 3, 2], prediction_format="ranking", variant="paper") == -1.0
    assert tau(references, [1, 3, 2], prediction_format="ranking") == pytest.approx(1 / 3)


@pytest.mark.parametrize(("n", "differing"), [(2, 0), (3, 8), (4, 296)])
def test_ptc_paper_differs_from_tau_b_on_the_published_share_of_orderings(n, differing):
    orderings = list(itertools.permutations(range(1, n + 1)))
    references, predictions = [], []
    for truth in orderings:
        ratings = [0.0] * n
        for position, user in enumerate(truth):
            ratings[user - 1] = float(n - position)
        for prediction in orderings:
            references.append(ratings)
            predictions.append(list(prediction))
    options = {"prediction_format": "ranking", "return_groups": True}
    tau_b = ptc.compute_ptc(references, predictions, **options)["groups"]
    paper = ptc.compute_ptc(references, predictions, variant="paper", **options)["groups"]
    assert sum(abs(a - b) > 1e-12 for a, b in zip(tau_b, paper, strict=True)) == differing
    assert len(tau_b) == len(orderings) ** 2


@SETTINGS
@given(st.one_of(group_with_scores(2, 2), group_with_ranking(2, 2)))
def test_ptc_paper_equals_tau_b_for_groups_of_two(group):
    references, predictions = group
    fmt = "ranking" if isinstance(predictions[0], int) else "scores"
    paper = tau(references, predictions, prediction_format=fmt, variant="paper")
    assert paper == tau(references, predictions, prediction_format=fmt)


@SETTINGS
@given(group_with_scores(2, 5))
def test_ptc_paper_reproduces_the_released_evaluator_on_scores(group):
    references, scores = group
    expected = 0.0 if len(set(scores)) == 1 else released_evaluator(references, scores)
    assert tau(references, scores, variant="paper") == pytest.approx(expected, abs=1e-12)


def test_ptc_paper_breaks_score_ties_with_the_higher_index_first():
    # Scores [1, 1, 0] → list [2, 1, 3]; truth [2, 1, 3] → +1 (tau_b sees the tie: 0.8165).
    references = [0.5, 0.9, -1.0]
    assert tau(references, [1.0, 1.0, 0.0], variant="paper") == 1.0
    assert tau(references, [1.0, 1.0, 0.0]) == pytest.approx(2 / math.sqrt(6))


# --- invalid answers and validation ------------------------------------------------------------------------

REFERENCES = [[0.9, -0.8], [1.2, -0.3, 0.5], [0.4, -1.0, 1.6], [1.0, 0.0, -1.0]]


@pytest.mark.parametrize(
    "failed", [[], None, [1, 1, 3], [1, 2], [0, 1, 2], [1, 2, 4], [1.5, 2, 3], [1, 2, 3, 4]], ids=repr
)
def test_ptc_non_permutation_ranking_is_counted_invalid(failed):
    predictions = [[1, 2], [1, 3, 2], failed, [1, 2, 3]]
    result = ptc.compute_ptc(REFERENCES, predictions, prediction_format="ranking", return_groups=True)
    assert result["num_invalid"] == 1
    assert result["groups"][2] is None
    assert result["ptc"] == pytest.approx(3 / 4)


def test_ptc_invalid_zero_counts_failed_groups_as_zero():
    result = ptc.compute_ptc(REFERENCES, [[2.0, 1.0], [], None, [3.0, 2.0, 1.0]])
    assert result == {"ptc": 0.5, "num_groups": 4, "num_invalid": 2}


def test_ptc_invalid_skip_drops_failed_groups_from_the_mean():
    result = ptc.compute_ptc(REFERENCES, [[2.0, 1.0], [], None, [1.0, 2.0, 3.0]], invalid="skip")
    assert result == {"ptc": 0.0, "num_groups": 4, "num_invalid": 2}


def test_ptc_invalid_raise_names_the_group():
    with pytest.raises(ValueError, match=r"predictions\[1\]"):
        ptc.compute_ptc(REFERENCES, [[2.0, 1.0], [], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0]], invalid="raise")


def test_ptc_invalid_skip_with_nothing_left_is_nan():
    assert math.isnan(ptc.compute_ptc(REFERENCES[:2], [[], None], invalid="skip")["ptc"])


@pytest.mark.parametrize(
    ("references", "predictions", "options", "message"),
    [
        ([[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]], {}, "1 references but 2 predictions"),
        ([], [], {}, "no groups"),
        ([[1.0]], [[1.0]], {}, "at least 2 users"),
        ([[1.0, 1.0]], [[1.0, 0.0]], {}, "tied ratings"),
        ([[1.0, float("nan")]], [[1.0, 0.0]], {}, "NaN or inf"),
        ([[1.0, 0.0]], [[float("inf"), 0.0]], {}, "NaN or inf"),
        ([[1.0, 0.0]], [[1, float("nan")]], {"prediction_format": "ranking"}, "NaN or inf"),
        ([[1.0, 0.0, 2.0]], [[1.0, 0.0]], {}, "2 scores for 3 users"),
        ([[1.0, 0.0]], [["a", "b"]], {}, "only numbers"),
        ([None], [[1.0, 0.0]], {}, "is not a list"),
        ([[1.0, 0.0]], [3.0], {}, "is not a list"),
        ([[1.0, 0.0]], [[1.0, 0.0]], {"variant": "tau_a"}, "variant must be one of"),
        ([[1.0, 0.0]], [[1.0, 0.0]], {"prediction_format": "list"}, "prediction_format must be one of"),
        ([[1.0, 0.0]], [[1.0, 0.0]], {"invalid": "drop"}, "invalid must be one of"),
        ([[1.0, 0.0]], [[1.0, 0.0]], {"confidence_level": 95}, "confidence_level"),
        ([[1.0, 0.0]], [[1.0, 0.0]], {"confidence_level": 0.9, "n_resamples": 0}, "n_resamples"),
    ],
)
def test_ptc_bad_input_raises_a_clear_error(references, predictions, options, message):
    with pytest.raises(ValueError, match=message):
        ptc.compute_ptc(references, predictions, **options)


# --- bootstrap interval ------------------------------------------------------------------------------------


def _random_run(seed: int, groups: int = 60) -> tuple[list[list[float]], list[list[float]]]:
    rng = np.random.default_rng(seed)
    references = rng.normal(size=(groups, 3)).tolist()
    return references, rng.integers(0, 3, size=(groups, 3)).astype(float).tolist()


def test_ptc_bootstrap_interval_is_reproducible_with_a_seed():
    references, predictions = _random_run(0)
    first = ptc.compute_ptc(references, predictions, confidence_level=0.95, seed=7)
    assert ptc.compute_ptc(references, predictions, confidence_level=0.95, seed=7) == first
    other = ptc.compute_ptc(references, predictions, confidence_level=0.95, seed=8)
    assert (other["ptc_ci_low"], other["ptc_ci_high"]) != (first["ptc_ci_low"], first["ptc_ci_high"])
    assert other["ptc"] == first["ptc"]


@settings(max_examples=60, deadline=None)
@given(st.lists(group_with_scores(2, 4), min_size=1, max_size=30), st.integers(0, 2**32 - 1))
def test_ptc_bootstrap_interval_contains_the_point_estimate(groups, seed):
    references = [g[0] for g in groups]
    scores = [g[1] for g in groups]
    result = ptc.compute_ptc(references, scores, confidence_level=0.9, n_resamples=200, seed=seed)
    assert -1.0 <= result["ptc_ci_low"] <= result["ptc"] <= result["ptc_ci_high"] <= 1.0


def test_ptc_bootstrap_interval_narrows_with_more_groups():
    small = ptc.compute_ptc(*_random_run(1, 30), confidence_level=0.95)
    large = ptc.compute_ptc(*_random_run(1, 3000), confidence_level=0.95)
    assert large["ptc_ci_high"] - large["ptc_ci_low"] < small["ptc_ci_high"] - small["ptc_ci_low"]


# --- companion statistics ----------------------------------------------------------------------------------


@SETTINGS
@given(st.lists(group_with_ranking(2, 5), min_size=1, max_size=10))
def test_ptc_pairwise_accuracy_is_half_of_tau_plus_one_without_ties(groups):
    references = [g[0] for g in groups]
    rankings = [g[1] for g in groups]
    mean_tau = ptc.compute_ptc(references, rankings, prediction_format="ranking")["ptc"]
    accuracy = ptc.pairwise_accuracy(references, rankings, prediction_format="ranking")
    assert accuracy == pytest.approx((mean_tau + 1) / 2, abs=1e-12)


@SETTINGS
@given(st.lists(group_with_scores(2, 5), min_size=1, max_size=10))
def test_ptc_exact_order_accuracy_counts_groups_with_tau_one(groups):
    references = [g[0] for g in groups]
    scores = [g[1] for g in groups]
    taus, _ = ptc.group_taus(references, scores)
    expected = float(np.mean(np.isclose(taus, 1.0)))
    assert ptc.exact_order_accuracy(references, scores) == pytest.approx(expected)


def test_ptc_accuracies_follow_the_invalid_policy():
    references = [[1.0, 0.0], [1.0, 0.0, -1.0]]
    predictions = [[2.0, 1.0], []]
    assert ptc.pairwise_accuracy(references, predictions) == 0.75  # a failed group counts as all tied
    assert ptc.pairwise_accuracy(references, predictions, invalid="skip") == 1.0
    assert ptc.exact_order_accuracy(references, predictions) == 0.5
    assert ptc.exact_order_accuracy(references, predictions, invalid="skip") == 1.0
    with pytest.raises(ValueError, match=r"predictions\[1\]"):
        ptc.exact_order_accuracy(references, predictions, invalid="raise")


def test_ptc_rating_errors_known_values():
    result = ptc.rating_errors([[1.0, -1.0], [0.5, 0.0, 2.0]], [[0.0, -1.0], [0.5, 3.0, 2.0]])
    assert result == {"mae": 0.8, "rmse": pytest.approx(math.sqrt(2.0)), "num_ratings": 5, "num_missing": 0}


def test_ptc_rating_errors_skip_and_count_missing_predictions():
    result = ptc.rating_errors([[1.0, -1.0], [0.5, 0.0], [3.0, 1.0]], [[0.0, -1.0], [], None])
    assert result == {"mae": 0.5, "rmse": pytest.approx(math.sqrt(0.5)), "num_ratings": 2, "num_missing": 4}


@pytest.mark.parametrize(
    ("truth", "predicted", "message"),
    [
        ([1.0, 2.0], [1.0], "2 true and 1 predicted"),
        ([[1.0, 2.0]], [[1.0]], "do not align"),
        ([1.0], [float("nan")], "NaN or inf"),
    ],
)
def test_ptc_rating_errors_reject_bad_input(truth, predicted, message):
    with pytest.raises(ValueError, match=message):
        ptc.rating_errors(truth, predicted)


# --- paired test -------------------------------------------------------------------------------------------


def test_ptc_paired_test_of_a_system_with_itself_finds_nothing():
    references, predictions = _random_run(2)
    for method in ptc.TEST_METHODS:
        result = ptc.paired_test(references, predictions, predictions, method=method, n_resamples=500)
        assert result["difference"] == 0.0
        assert result["p_value"] == 1.0
        assert result["ci_low"] == result["ci_high"] == 0.0


def test_ptc_paired_test_exact_sign_flip_p_value_for_few_groups():
    references = [[1.0, 0.0, -1.0]] * 6
    result = ptc.paired_test(references, [[1, 2, 3]] * 6, [[3, 2, 1]] * 6, prediction_format="ranking")
    assert result["difference"] == 2.0
    assert result["p_value"] == 2 / 2**6


@pytest.mark.parametrize("method", ptc.TEST_METHODS)
def test_ptc_paired_test_detects_a_clearly_better_system_and_is_seeded(method):
    rng = np.random.default_rng(5)
    references = rng.normal(size=(200, 4)).tolist()
    good = (np.array(references) + rng.normal(scale=0.3, size=(200, 4))).tolist()
    noise = rng.normal(size=(200, 4)).tolist()
    result = ptc.paired_test(references, good, noise, method=method, n_resamples=2000, seed=1)
    assert result == ptc.paired_test(references, good, noise, method=method, n_resamples=2000, seed=1)
    assert result["p_value"] < 0.01
    assert result["ci_low"] <= result["difference"] <= result["ci_high"]
    assert result["ci_low"] > 0
    assert result["difference"] == pytest.approx(result["ptc_a"] - result["ptc_b"])


def test_ptc_paired_test_accepts_different_formats_and_skip_keeps_common_groups():
    references = [[1.0, 0.0, -1.0], [1.0, 0.0], [0.0, 1.0]]
    scores = [[3.0, 2.0, 1.0], [], [1.0, 2.0]]
    rankings = [[3, 2, 1], [1, 2], [2, 1]]
    result = ptc.paired_test(
        references, scores, rankings, prediction_format_b="ranking", invalid="skip", n_resamples=100
    )
    assert (result["num_compared"], result["num_invalid_a"], result["num_invalid_b"]) == (2, 1, 0)
    assert (result["ptc_a"], result["ptc_b"], result["difference"]) == (1.0, 0.0, 1.0)


def test_ptc_paired_test_rejects_systems_of_different_lengths():
    with pytest.raises(ValueError, match="same groups"):
        ptc.paired_test([[1.0, 0.0]], [[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]])


# --- packaging ---------------------------------------------------------------------------------------------


def test_ptc_pure_module_imports_no_heavy_library():
    heavy = ("evaluate", "datasets", "transformers", "torch", "scipy")
    code = f"import sys, perrec_eval.ptc; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "[]"


def test_ptc_docstring_examples_pass():
    result = doctest.testmod(ptc)
    assert result.attempted >= 10
    assert result.failed == 0

