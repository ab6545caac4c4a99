# Copyright 2025 The PerRecBench rebuild authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""PTC (Personalization Tau Correlation), the PerRecBench score, as an `evaluate` metric.

The math lives in `perrec_eval.ptc` (package `perrecbench`); this file only declares the inputs and
forwards the options. evaluate reads the import lines to check requirements: one import per line, and the
`# From:` comment makes its missing-dependency hint say `pip install perrecbench`.
"""

import datasets
import evaluate

import perrec_eval.ptc as ptc  # From: perrecbench

_DESCRIPTION = """
PTC (Personalization Tau Correlation) is the score of PerRecBench (Tan et al., 2025). Each group holds
2-4 users who rated the same item at about the same time; their true preference is their relative rating
(item rating minus the user's average rating). A model ranks the users of every group; PTC is Kendall's tau
between the predicted and the true order of the group's users, averaged over groups. It ranges from -1
(every group reversed) through 0 (no information) to 1 (every group exactly right).

The default variant, `tau_b`, is the rank correlation the paper defines: tau-b between aligned per-user
scores, invariant to how users are numbered, ties in the prediction handled. The variant `paper`
reproduces the released evaluator, which correlated the two *best-first lists of user indices* instead:
identical for groups of 2 users, different for 3 or more (prediction [1, 3, 2] against truth [3, 1, 2]
scores -1 there, +1/3 as a rank correlation).

Config `default` scores one system; config `paired` compares two systems on the same groups with a paired
permutation or bootstrap test.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `list` of `float` or `int`): one entry per group. With
        `prediction_format="scores"` one score per user, aligned with `references` (higher = preferred,
        e.g. the predicted rating minus the user's average rating; ties allowed). With
        `prediction_format="ranking"` a best-first list of 1-based user indices. `[]` (or `None`) means
        the model gave no usable answer; so does a ranking that is not a permutation of 1..n.
    references (`list` of `list` of `float`): one entry per group, the true relative ratings of its users
        in presentation order (no ties).
    predictions_b (`list` of `list`): config `paired` only: system b's predictions on the same groups.
    prediction_format (`str`): `"scores"` (default) or `"ranking"`.
    prediction_format_b (`str`): config `paired` only: format of `predictions_b`; default the same.
    variant (`str`): `"tau_b"` (default) or `"paper"` (the released evaluator's statistic).
    invalid (`str`): an invalid group counts as tau 0 (`"zero"`, default), is dropped from the mean
        (`"skip"`, the released behaviour) or raises (`"raise"`).
    return_groups (`bool`): also return `groups`, the per-group taus (`None` for invalid groups).
    return_accuracy (`bool`): also return `pairwise_accuracy` (share of user pairs in the right order,
        a predicted tie counts 1/2) and `exact_order_accuracy` (share of groups ordered exactly right).
    return_rating_errors (`bool`): scores only: also return `mae`, `rmse`, `num_ratings`, `num_missing`
        of predictions vs. references (equal to the errors on absolute ratings when both subtract the
        same user average).
    confidence_level (`float`): if set (e.g. 0.95), add a seeded percentile-bootstrap interval over
        groups (`ptc_ci_low`, `ptc_ci_high`); in config `paired` the level of the interval of the
        difference (default 0.95).
    n_resamples (`int`): bootstrap / permutation resamples; default 1000 (interval), 10000 (`paired`).
    seed (`int`): seed of all resampling (default 0).
    clusters (`list`): optional, one cluster id per group (e.g. its query item when an item gives several
        groups): the interval resamples whole clusters and the paired test flips signs per cluster.
    method (`str`): config `paired` only: `"permutation"` (default) or `"bootstrap"`.
Returns:
    ptc (`float`): mean Kendall tau over groups (NaN only if `invalid="skip"` leaves no group).
    num_groups (`int`): groups given.
    num_invalid (`int`): groups without a usable answer.
    ptc_ci_low, ptc_ci_high (`float`): only with `confidence_level`.
    groups (`list` of `float` or `None`): only with `return_groups=True`.
    pairwise_accuracy, exact_order_accuracy (`float`): only with `return_accuracy=True`.
    mae, rmse (`float`), num_ratings, num_missing (`int`): only with `return_rating_errors=True`.
    Config `paired` returns ptc_a, ptc_b, difference (a - b), p_value, ci_low, ci_high, num_groups,
    num_compared, num_invalid_a, num_invalid_b.
Examples:
    Pointwise scores, one group failed (counts as 0):

        >>> ptc_metric = evaluate.load("metric/ptc")
        >>> references = [[0.9, -0.8], [1.2, -0.3, 0.5], [0.4, -1.0, 1.6]]
        >>> print(ptc_metric.compute(predictions=[[4.0, 3.0], [3.0, 1.0, 2.0], []], references=references))
        {'ptc': 0.6666666666666666, 'num_groups': 3, 'num_invalid': 1}

    Listwise rankings: the corrected statistic and the published one disagree on groups of 3+:

        >>> refs = [[1.5, -0.5, 0.4]]
        >>> print(ptc_metric.compute(predictions=[[1, 3, 2]], references=refs, prediction_format="ranking"))
        {'ptc': 1.0, 'num_groups': 1, 'num_invalid': 0}
        >>> print(ptc_metric.compute(predictions=[[3, 1, 2]], references=refs, prediction_format="ranking"))
        {'ptc': 0.3333333333333333, 'num_groups': 1, 'num_invalid': 0}
        >>> result = ptc_metric.compute(
        ...     predictions=[[3, 1, 2]], references=refs, prediction_format="ranking", variant="paper"
        ... )
        >>> print(result["ptc"])
        -1.0

    Batches, failures dropped as the released evaluator did, per-group taus and accuracies:

        >>> ptc_metric.add_batch(predictions=[[2, 1], [1, 1, 3]], references=[[0.2, 1.0], [0.1, 0.9, -1.0]])
        >>> ptc_metric.add_batch(predictions=[[2, 3, 1]], references=[[0.1, 0.9, -1.0]])
        >>> result = ptc_metric.compute(
        ...     prediction_format="ranking", invalid="skip", return_groups=True, return_accuracy=True
        ... )
        >>> print(result)  # doctest: +NORMALIZE_WHITESPACE
        {'ptc': 0.6666666666666666, 'num_groups': 3, 'num_invalid': 1,
         'groups': [1.0, None, 0.3333333333333333],
         'pairwise_accuracy': 0.8333333333333333, 'exact_order_accuracy': 0.5}

    Two systems on the same groups:

        >>> paired = evaluate.load("metric/ptc", "paired")
        >>> result = paired.compute(
        ...     references=[[1.0, 0.0, -1.0]] * 8, predictions=[[3, 2, 1]] * 8, predictions_b=[[1, 2, 3]] * 8
        ... )
        >>> print(result["difference"], result["p_value"])
        2.0 0.0078125
"""

_CITATION = """\
@article{tan2025perrecbench,
  title={Can Large Language Models Understand Preferences in Personalized Recommendation?},
  author={Tan, Zhaoxuan and Zeng, Zinan and Zeng, Qingkai and Wu, Zhenyu and Liu, Zheyuan and
          Mo, Fengran and Jiang, Meng},
  journal={arXiv preprint arXiv:2501.13391},
  year={2025}
}
"""

_CONFIGS = ("default", "paired")
_GROUP_LIST = datasets.Sequence(datasets.Value("float64"))


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Ptc(evaluate.Metric):
    def _info(self):
        if self.config_name not in _CONFIGS:
            raise ValueError(
                f"unknown config {self.config_name!r}; use evaluate.load(path) for PTC or "
                f"evaluate.load(path, 'paired') to compare two systems"
            )
        features = {"predictions": _GROUP_LIST, "references": _GROUP_LIST}
        if self.config_name == "paired":
            features["predictions_b"] = _GROUP_LIST
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(features),
            reference_urls=["https://arxiv.org/abs/2501.13391"],
        )

    def _compute(
        self,
        predictions,
        references,
        predictions_b=None,
        prediction_format="scores",
        prediction_format_b=None,
        variant="tau_b",
        invalid="zero",
        return_groups=False,
        return_accuracy=False,
        return_rating_errors=False,
        confidence_level=None,
        n_resamples=None,
        seed=0,
        method=None,
        clusters=None,
    ):
        if self.config_name == "paired":
            if return_groups or return_accuracy or return_rating_errors:
                raise ValueError(
                    "return_groups, return_accuracy and return_rating_errors belong to the default config; "
                    "load it with evaluate.load(path) and score each system on its own"
                )
            return ptc.paired_test(
                references,
                predictions,
                predictions_b,
                prediction_format=prediction_format,
                prediction_format_b=prediction_format_b,
                variant=variant,
                invalid=invalid,
                method="permutation" if method is None else method,
                n_resamples=10_000 if n_resamples is None else n_resamples,
                confidence_level=0.95 if confidence_level is None else confidence_level,
                seed=seed,
                clusters=clusters,
            )
        if predictions_b is not None or prediction_format_b is not None or method is not None:
            raise ValueError(
                "predictions_b, prediction_format_b and method compare two systems: load the paired config "
                "with evaluate.load(path, 'paired')"
            )
        result = ptc.compute_ptc(
            references,
            predictions,
            prediction_format=prediction_format,
            variant=variant,
            invalid=invalid,
            return_groups=return_groups,
            confidence_level=confidence_level,
            n_resamples=1000 if n_resamples is None else n_resamples,
            seed=seed,
            clusters=clusters,
        )
        options = {"prediction_format": prediction_format, "invalid": invalid}
        if return_accuracy:
            result["pairwise_accuracy"] = ptc.pairwise_accuracy(references, predictions, **options)
            result["exact_order_accuracy"] = ptc.exact_order_accuracy(references, predictions, **options)
        if return_rating_errors:
            if prediction_format != "scores":
                raise ValueError(
                    "return_rating_errors needs predicted ratings: use prediction_format='scores'"
                )
            result.update(ptc.rating_errors(references, predictions))
        return result
