"""The `evaluate` wrapper in metric/ptc: loads by path offline, agrees with the pure module, doctests run."""

from __future__ import annotations

import doctest
import inspect
import sys
from pathlib import Path

import pytest

from perrec_eval import ptc

ROOT = Path(__file__).resolve().parents[2]
REFERENCES = [[0.9, -0.8], [1.2, -0.3, 0.5], [0.4, -1.0, 1.6, 0.0], [1.0, 0.0, -1.0]]
SCORES = [[4.0, 3.0], [1.0, 1.0, 2.0], [], [0.5, 0.7, 0.1]]
RANKINGS = [[1, 2], [3, 1, 2], [1, 1, 2, 3], [2, 1, 3]]


@pytest.fixture(scope="module")
def evaluate_module():
    """`import evaluate` costs seconds: once per test module."""
    return pytest.importorskip("evaluate")


@pytest.fixture(scope="module")
def load(evaluate_module, tmp_path_factory):
    """evaluate.load by the relative path the docs give, from the repository root, caching under tmp."""
    cache_dir = str(tmp_path_factory.mktemp("evaluate_cache"))

    def load_metric(config_name: str | None = None):
        with pytest.MonkeyPatch.context() as patch:
            patch.chdir(ROOT)
            return evaluate_module.load("metric/ptc", config_name, cache_dir=cache_dir)

    return load_metric


@pytest.fixture(scope="module")
def metric(load):
    return load()


@pytest.mark.parametrize(
    ("predictions", "options"),
    [
        (SCORES, {}),
        (SCORES, {"variant": "paper", "invalid": "skip"}),
        (RANKINGS, {"prediction_format": "ranking", "return_groups": True}),
        (RANKINGS, {"prediction_format": "ranking", "variant": "paper", "confidence_level": 0.9, "seed": 3}),
    ],
)
def test_ptc_evaluate_compute_agrees_with_the_pure_module(metric, predictions, options):
    assert metric.compute(predictions=predictions, references=REFERENCES, **options) == ptc.compute_ptc(
        REFERENCES, predictions, **options
    )


def test_ptc_evaluate_add_batch_then_compute_equals_one_call(metric):
    for start in range(0, len(REFERENCES), 2):
        metric.add_batch(predictions=RANKINGS[start : start + 2], references=REFERENCES[start : start + 2])
    result = metric.compute(prediction_format="ranking", return_groups=True)
    assert result == ptc.compute_ptc(REFERENCES, RANKINGS, prediction_format="ranking", return_groups=True)
    assert result["num_invalid"] == 1
    assert result["groups"][2] is None


def test_ptc_evaluate_accepts_none_and_empty_predictions(metric):
    result = metric.compute(predictions=[[2.0, 1.0], None, []], references=[[1.0, 0.0]] * 3)
    assert result == {"ptc": 1 / 3, "num_groups": 3, "num_invalid": 2}


def test_ptc_evaluate_returns_accuracies_and_rating_errors(metric):
    result = metric.compute(
        predictions=SCORES, references=REFERENCES, return_accuracy=True, return_rating_errors=True
    )
    assert result["pairwise_accuracy"] == ptc.pairwise_accuracy(REFERENCES, SCORES)
    assert result["exact_order_accuracy"] == ptc.exact_order_accuracy(REFERENCES, SCORES)
    errors = ptc.rating_errors(REFERENCES, SCORES)
    assert {key: result[key] for key in errors} == errors


def test_ptc_evaluate_rejects_rating_errors_for_rankings(metric):
    with pytest.raises(ValueError, match="prediction_format='scores'"):
        metric.compute(
            predictions=RANKINGS,
            references=REFERENCES,
            prediction_format="ranking",
            return_rating_errors=True,
        )


def test_ptc_evaluate_default_config_points_to_paired_for_two_systems(metric):
    with pytest.raises(ValueError, match="'paired'"):
        metric.compute(predictions=SCORES, references=REFERENCES, predictions_b=SCORES)


def test_ptc_evaluate_paired_config_agrees_with_the_pure_test(load):
    paired = load("paired")
    paired.add_batch(predictions=SCORES, predictions_b=RANKINGS, references=REFERENCES)
    result = paired.compute(prediction_format_b="ranking", method="bootstrap", n_resamples=300, seed=2)
    expected = ptc.paired_test(
        REFERENCES,
        SCORES,
        RANKINGS,
        prediction_format_b="ranking",
        method="bootstrap",
        n_resamples=300,
        seed=2,
    )
    assert result == expected


def test_ptc_evaluate_unknown_config_is_a_clear_error(load):
    with pytest.raises(ValueError, match="unknown config 'pairs'"):
        load("pairs")


def test_ptc_evaluate_compute_has_explicit_options_only(metric):
    parameters = inspect.signature(type(metric)._compute).parameters.values()
    assert all(p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) for p in parameters)
    pure = set(inspect.signature(ptc.compute_ptc).parameters) - {"references", "predictions"}
    assert pure <= {p.name for p in parameters}


def test_ptc_evaluate_doctests_pass(metric):
    module = sys.modules[type(metric).__module__]
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 10
    assert result.failed == 0


def test_ptc_evaluate_metric_card_has_one_source_linked_from_hub_cards():
    card = (ROOT / "metric" / "ptc" / "README.md").read_bytes()
    linked = ROOT / "hub_cards" / "metric_card.md"
    assert linked.is_symlink() and linked.resolve() == (ROOT / "metric" / "ptc" / "README.md").resolve()
    assert card == linked.read_bytes()
    assert b"arXiv:2501.13391" in card or b"2501.13391" in card


def test_ptc_evaluate_metric_file_has_one_import_per_line():
    for line in (ROOT / "metric" / "ptc" / "ptc.py").read_text().splitlines():
        if line.startswith(("import ", "from ")):
            assert "," not in line, line


def test_ptc_evaluate_metric_card_examples_run(evaluate_module):
    card = (ROOT / "metric" / "ptc" / "README.md").read_text()
    # A closing code fence would otherwise read as expected output: blank it out.
    text = "\n".join("" if line.startswith("```") else line for line in card.splitlines())
    test = doctest.DocTestParser().get_doctest(text, {"evaluate": evaluate_module}, "README.md", None, 0)
    runner = doctest.DocTestRunner()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        result = runner.run(test)
    assert result.attempted >= 8
    assert result.failed == 0


def test_ptc_evaluate_clusters_reach_the_pure_functions(load, metric):
    clusters = ["a", "a", "b", "b"]
    result = metric.compute(
        predictions=SCORES, references=REFERENCES, confidence_level=0.9, n_resamples=200, clusters=clusters
    )
    expected = ptc.compute_ptc(REFERENCES, SCORES, confidence_level=0.9, n_resamples=200, clusters=clusters)
    assert result == expected
    paired = load("paired")
    result = paired.compute(
        predictions=SCORES,
        predictions_b=RANKINGS,
        references=REFERENCES,
        prediction_format_b="ranking",
        clusters=clusters,
    )
    assert result == ptc.paired_test(
        REFERENCES, SCORES, RANKINGS, prediction_format_b="ranking", clusters=clusters
    )
