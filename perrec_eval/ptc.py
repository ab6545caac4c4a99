"""Personalization Tau Correlation (PTC): Kendall tau per group, vectorised over groups.

PTC is the PerRecBench score: for every group of users who rated the same item, Kendall's tau between the
predicted and the true preference order of the group's users; then the plain mean over groups.

Inputs, one entry per group:

- ``references[i]``: the true relative ratings of group i's users, in presentation order (no ties).
- ``predictions[i]``: with ``prediction_format="scores"`` one score per user, aligned with the references
  (higher = preferred; ties allowed); with ``prediction_format="ranking"`` a best-first list of 1-based user
  indices. ``[]`` or ``None`` means "the model gave no usable answer"; so does a ranking that is not a
  permutation of ``1..n``. Such a group is *invalid*: it is counted, never silently dropped.

Variants:

- ``"tau_b"`` (default): tau-b between the aligned per-user score vectors. Invariant to how users are
  numbered; ties in the predictions are handled (a group whose predicted scores are all equal scores 0).
- ``"paper"``: the released PerRecBench evaluator's statistic: tau between the two *best-first lists of
  user indices* (pointwise scores become such a list with ties putting the higher index first). It equals
  ``"tau_b"`` for groups of 2 and differs for larger groups, e.g. prediction ``[1, 3, 2]`` against truth
  ``[3, 1, 2]`` gives -1 where the rank correlation is +1/3. It correlates user *ids* position by
  position, so it depends on the numbering: against truth ``[2, 3, 1]`` the fully reversed ``[1, 3, 2]``
  scores +1/3. One deliberate deviation: all-equal predicted scores score 0 here too (the released code
  would score the reversed index order). A ranking that is not a permutation is invalid in both variants
  (the released parser let duplicates such as ``[1, 1, 3]`` through; PROTOCOL §5 makes them failures).

Intervals, paired tests and resolution come from :mod:`perrec_eval.stats` (groups are its docs). Only
numpy is imported besides it (scipy is never needed), so this module loads fast and without ``evaluate``.

>>> compute_ptc([[1.5, -0.5, 0.4]], [[3, 1, 2]], prediction_format="ranking")["ptc"]
0.3333333333333333
>>> compute_ptc([[1.5, -0.5, 0.4]], [[3, 1, 2]], prediction_format="ranking", variant="paper")["ptc"]
-1.0
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from perrec_eval import stats

logger = logging.getLogger(__name__)

PredictionFormat = Literal["scores", "ranking"]
Variant = Literal["tau_b", "paper"]
InvalidPolicy = Literal["zero", "skip", "raise"]
TestMethod = Literal["permutation", "bootstrap"]

PREDICTION_FORMATS: tuple[str, ...] = ("scores", "ranking")
VARIANTS: tuple[str, ...] = ("tau_b", "paper")
INVALID_POLICIES: tuple[str, ...] = ("zero", "skip", "raise")
TEST_METHODS: tuple[str, ...] = ("permutation", "bootstrap")


@dataclass(frozen=True, slots=True)
class _Bucket:
    """The groups of one size n, stacked: rows are groups, columns are users in presentation order."""

    positions: np.ndarray  # (m,) index of each row in the caller's list
    references: np.ndarray  # (m, n) true relative ratings
    scores: np.ndarray  # (m, n) predicted per-user scores, higher = preferred (0 on invalid rows)
    ranking: np.ndarray | None  # (m, n) predicted best-first 0-based user indices, for ranking inputs only
    valid: np.ndarray  # (m,) bool


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")


def _lengths(entries: Sequence[Any], what: str, *, allow_none: bool) -> np.ndarray:
    """len() of every entry as an int array; ``None`` counts as length 0 where ``allow_none``."""

    def length(i: int, entry: Any) -> int:
        if entry is None and allow_none:
            return 0
        if not hasattr(entry, "__len__") or isinstance(entry, str):
            raise ValueError(f"{what}[{i}] = {entry!r} is not a list of numbers; pass one list per group")
        return len(entry)

    if isinstance(entries, np.ndarray) and entries.ndim == 2:
        return np.full(len(entries), entries.shape[1], dtype=np.int64)
    if not any(isinstance(entry, str) for entry in entries):
        try:
            return np.fromiter(map(len, entries), dtype=np.int64, count=len(entries))
        except TypeError:
            pass  # a None or a scalar somewhere: the slow path below says which
    return np.fromiter(itertools.starmap(length, enumerate(entries)), dtype=np.int64, count=len(entries))


def _stack(rows: Sequence[Any], n: int, positions: np.ndarray, what: str) -> np.ndarray:
    """Rows of n numbers each → a finite (len(rows), n) float64 matrix, or an error naming the group."""
    try:
        if isinstance(rows, np.ndarray):
            matrix = rows.astype(np.float64).reshape(len(rows), n)
        else:
            flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.float64, count=len(rows) * n)
            matrix = flat.reshape(len(rows), n)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{what} must contain only numbers: {error}") from None
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        row = int(np.flatnonzero(~finite)[0])
        raise ValueError(
            f"{what}[{positions[row]}] = {list(rows[row])!r} contains NaN or inf; pass finite numbers, "
            "and [] or None for a group whose answer failed"
        )
    return matrix


def _ranking_rows(rankings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Best-first 1-based rankings → (valid mask, 0-based best-first indices, identity where invalid)."""
    n = rankings.shape[1]
    expected = np.arange(1, n + 1, dtype=np.float64)
    valid = (np.sort(rankings, axis=1) == expected).all(axis=1)
    best_first = np.where(valid[:, None], rankings - 1, expected - 1).astype(np.intp)
    return valid, best_first


def _scores_from_best_first(best_first: np.ndarray) -> np.ndarray:
    """The user at best-first position p of n gets score n - p."""
    n = best_first.shape[1]
    scores = np.empty(best_first.shape, dtype=np.float64)
    np.put_along_axis(scores, best_first, np.arange(n, 0, -1, dtype=np.float64)[None, :], axis=1)
    return scores


def _best_first_from_scores(scores: np.ndarray) -> np.ndarray:
    """Descending scores; ties put the higher index first (a stable ascending sort, reversed)."""
    return np.argsort(scores, axis=1, kind="stable")[:, ::-1]


def _buckets(
    references: Sequence[Sequence[float]],
    predictions: Sequence[Sequence[float] | None],
    prediction_format: str,
) -> list[_Bucket]:
    """Validate the inputs and stack the groups by size."""
    _check_choice("prediction_format", prediction_format, PREDICTION_FORMATS)
    if len(references) != len(predictions):
        raise ValueError(
            f"got {len(references)} references but {len(predictions)} predictions; pass one entry per group"
        )
    if len(references) == 0:
        raise ValueError("no groups to score; pass at least one (references, predictions) pair")
    sizes = _lengths(references, "references", allow_none=False)
    if (sizes < 2).any():
        i = int(np.flatnonzero(sizes < 2)[0])
        raise ValueError(f"references[{i}] has {sizes[i]} user(s); a group needs at least 2 users")
    answer_sizes = _lengths(predictions, "predictions", allow_none=True)
    wrong = (answer_sizes != sizes) & (answer_sizes != 0)
    if prediction_format == "scores" and wrong.any():
        i = int(np.flatnonzero(wrong)[0])
        raise ValueError(
            f"predictions[{i}] has {answer_sizes[i]} scores for {sizes[i]} users; pass one score per user "
            "in presentation order, or [] for a failed answer"
        )

    buckets = []
    for n in np.unique(sizes).tolist():
        positions = np.flatnonzero(sizes == n)
        everything = len(positions) == len(references)
        refs = _stack(
            references if everything else [references[i] for i in positions], n, positions, "references"
        )
        ordered = np.sort(refs, axis=1)
        tied = (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)
        if tied.any():
            i = int(positions[np.flatnonzero(tied)[0]])
            raise ValueError(
                f"references[{i}] has tied ratings {list(references[i])}; the true order must be strict "
                "(PerRecBench groups differ by > 0.6): drop or fix that group"
            )
        # A ranking of the wrong length is a failed answer, not a caller bug: it stays unshaped and invalid.
        shaped = answer_sizes[positions] == n
        if everything and shaped.all():
            rows = predictions
        else:
            filler = [0.0] * n
            rows = [
                predictions[i] if ok else filler
                for i, ok in zip(positions.tolist(), shaped.tolist(), strict=True)
            ]
        preds = _stack(rows, n, positions, "predictions")
        if prediction_format == "scores":
            valid = shaped
            scores = np.where(valid[:, None], preds, 0.0)
            ranking = None
        else:
            valid, ranking = _ranking_rows(preds)
            valid &= shaped
            scores = np.where(valid[:, None], _scores_from_best_first(ranking), 0.0)
        buckets.append(_Bucket(positions, refs, scores, ranking, valid))
    return buckets


def _pair_signs(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Signs of x_i - x_j and y_i - y_j for every user pair i < j of every row: two (m, n(n-1)/2) arrays."""
    first, second = np.triu_indices(x.shape[1], k=1)
    return np.sign(x[:, first] - x[:, second]), np.sign(y[:, first] - y[:, second])


def kendall_tau_b(
    x: Sequence[Sequence[float]] | np.ndarray, y: Sequence[Sequence[float]] | np.ndarray
) -> np.ndarray:
    """Kendall's tau-b between the rows of two (m, n) arrays; 0 where a row has no untied pair.

    Agrees with ``scipy.stats.kendalltau`` (variant b) wherever that is defined; where scipy returns NaN
    (one vector constant) this returns 0: a constant prediction carries no information.

    Args:
        x: (m, n) array, one row per group.
        y: (m, n) array of the same shape.

    Returns:
        (m,) float64 array of taus in [-1, 1].

    >>> kendall_tau_b([[1, 2, 3], [1, 2, 3], [1, 2, 3]], [[1, 2, 3], [3, 2, 1], [5, 5, 5]]).tolist()
    [1.0, -1.0, 0.0]
    >>> round(float(kendall_tau_b([[1, 2, 3, 4]], [[1, 1, 2, 3]])[0]), 6)
    0.912871
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or x.shape != y.shape or x.shape[1] < 2:
        raise ValueError(
            f"x and y must be (m, n) arrays of the same shape with n >= 2; got {x.shape}, {y.shape}"
        )
    sx, sy = _pair_signs(x, y)
    numerator = (sx * sy).sum(axis=1)
    denominator = np.sqrt(np.count_nonzero(sx, axis=1).astype(np.float64) * np.count_nonzero(sy, axis=1))
    safe = np.where(denominator > 0, denominator, 1.0)
    return np.where(denominator > 0, numerator / safe, 0.0)


def _bucket_taus(bucket: _Bucket, variant: str) -> np.ndarray:
    if variant == "tau_b":
        taus = kendall_tau_b(bucket.references, bucket.scores)
    else:
        truth = _best_first_from_scores(bucket.references)
        predicted = _best_first_from_scores(bucket.scores) if bucket.ranking is None else bucket.ranking
        taus = kendall_tau_b(predicted, truth)
        constant = (bucket.scores == bucket.scores[:, :1]).all(axis=1)
        taus = np.where(constant, 0.0, taus)
    return np.where(bucket.valid, taus, 0.0)


def _scatter(
    buckets: list[_Bucket], per_bucket: list[np.ndarray], total: int
) -> tuple[np.ndarray, np.ndarray]:
    values = np.zeros(total, dtype=np.float64)
    valid = np.zeros(total, dtype=bool)
    for bucket, bucket_values in zip(buckets, per_bucket, strict=True):
        values[bucket.positions] = bucket_values
        valid[bucket.positions] = bucket.valid
    return values, valid


def group_taus(
    references: Sequence[Sequence[float]],
    predictions: Sequence[Sequence[float] | None],
    *,
    prediction_format: PredictionFormat = "scores",
    variant: Variant = "tau_b",
) -> tuple[np.ndarray, np.ndarray]:
    """Per-group Kendall tau, in input order.

    Args:
        references: per group, the true relative ratings of its users in presentation order (no ties).
        predictions: per group, scores aligned with the users or a best-first 1-based ranking (see
            ``prediction_format``); ``[]``/``None`` for a failed answer.
        prediction_format: ``"scores"`` or ``"ranking"``.
        variant: ``"tau_b"`` or ``"paper"`` (module docstring).

    Returns:
        ``(taus, valid)``: float64 taus (0.0 where invalid) and the bool mask of valid groups.

    >>> taus, valid = group_taus([[0.9, -0.8], [1.0, 0.0, -1.0]], [[2.0, 1.0], []])
    >>> taus.tolist(), valid.tolist()
    ([1.0, 0.0], [True, False])
    """
    _check_choice("variant", variant, VARIANTS)
    buckets = _buckets(references, predictions, prediction_format)
    return _scatter(buckets, [_bucket_taus(b, variant) for b in buckets], len(references))


def _apply_policy(
    values: np.ndarray, valid: np.ndarray, invalid: str, predictions: Sequence[Any], fill: float
) -> np.ndarray:
    """The per-group values that enter the mean: invalid groups become ``fill``, are dropped, or raise."""
    _check_choice("invalid", invalid, INVALID_POLICIES)
    if invalid == "raise" and not valid.all():
        i = int(np.flatnonzero(~valid)[0])
        raise ValueError(
            f"predictions[{i}] = {predictions[i]!r} is not a usable answer (empty, None, or not a "
            "permutation of 1..n); use invalid='zero' or invalid='skip' to score runs with failures"
        )
    if invalid == "skip":
        return values[valid]
    return np.where(valid, values, fill)


def _mean(values: np.ndarray, what: str) -> float:
    if values.size == 0:
        logger.warning("%s: no valid group left to average; the result is NaN", what)
    # An exactly rounded sum: taus that cancel (a balanced presentation's pairs) give exactly 0.
    return stats.mean(values)


def _kept_clusters(clusters: Sequence[Any] | None, keep: np.ndarray, invalid: str) -> Sequence[Any] | None:
    """The cluster ids of the groups that enter the mean (all, or the kept ones under ``invalid="skip"``)."""
    if clusters is None:
        return None
    if len(clusters) != keep.size:
        raise ValueError(
            f"got {len(clusters)} cluster ids for {keep.size} groups; give one cluster id per group"
        )
    if invalid == "skip":
        return [c for c, kept in zip(clusters, keep.tolist(), strict=True) if kept]
    return clusters


def compute_ptc(
    references: Sequence[Sequence[float]],
    predictions: Sequence[Sequence[float] | None],
    *,
    prediction_format: PredictionFormat = "scores",
    variant: Variant = "tau_b",
    invalid: InvalidPolicy = "zero",
    return_groups: bool = False,
    confidence_level: float | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    clusters: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """PTC: the mean over groups of Kendall's tau between predicted and true preferences.

    Args:
        references: per group, the true relative ratings of its users in presentation order (no ties).
        predictions: per group, one score per user (``prediction_format="scores"``) or a best-first list of
            1-based user indices (``"ranking"``); ``[]``/``None`` for a failed answer.
        prediction_format: ``"scores"`` (default) or ``"ranking"``.
        variant: ``"tau_b"`` (default, the rank correlation) or ``"paper"`` (the released evaluator).
        invalid: what an invalid group (failed answer, non-permutation ranking) counts as: ``"zero"``
            (default, tau 0), ``"skip"`` (dropped from the mean, the released behaviour) or ``"raise"``.
        return_groups: also return ``groups``, the per-group taus in input order, ``None`` for invalid groups.
        confidence_level: if set (e.g. 0.95), add a seeded percentile-bootstrap interval over groups,
            ``ptc_ci_low`` / ``ptc_ci_high``.
        n_resamples: bootstrap resamples for the interval.
        seed: seed of the bootstrap.
        clusters: one cluster id per group (e.g. its query item, when an item gives several groups): the
            interval then resamples whole clusters (cluster bootstrap). None, or every id distinct: groups.

    Returns:
        Plain Python values: ``ptc`` (float; NaN only if ``invalid="skip"`` leaves no group), ``num_groups``
        (all groups given), ``num_invalid``, and the optional keys above.

    >>> refs = [[0.9, -0.8], [1.2, -0.3, 0.5], [0.4, -1.0, 1.6]]
    >>> compute_ptc(refs, [[4.0, 3.0], [3, 1, 2], []], prediction_format="scores")
    {'ptc': 0.6666666666666666, 'num_groups': 3, 'num_invalid': 1}
    >>> compute_ptc(refs, [[4.0, 3.0], [3, 1, 2], []], invalid="skip")["ptc"]
    1.0
    >>> compute_ptc(refs, [[1, 2], [1, 3, 2], [2, 2, 3]], prediction_format="ranking", return_groups=True)
    {'ptc': 0.6666666666666666, 'num_groups': 3, 'num_invalid': 1, 'groups': [1.0, 1.0, None]}
    """
    stats.check_resampling(confidence_level, n_resamples)
    taus, valid = group_taus(references, predictions, prediction_format=prediction_format, variant=variant)
    values = _apply_policy(taus, valid, invalid, predictions, 0.0)
    result: dict[str, Any] = {
        "ptc": _mean(values, "ptc"),
        "num_groups": len(references),
        "num_invalid": int((~valid).sum()),
    }
    if confidence_level is not None:
        low, high = stats.bootstrap_interval(
            values,
            _kept_clusters(clusters, valid, invalid),
            confidence_level=confidence_level,
            n_resamples=n_resamples,
            seed=seed,
        )
        result["ptc_ci_low"], result["ptc_ci_high"] = low, high
    if return_groups:
        result["groups"] = [t if ok else None for t, ok in zip(taus.tolist(), valid.tolist(), strict=True)]
    return result


def _concordance(bucket: _Bucket) -> tuple[np.ndarray, np.ndarray, int]:
    """Per row: concordant pairs, pairs tied in the prediction, and the number of pairs."""
    sx, sy = _pair_signs(bucket.references, bucket.scores)
    return (sx * sy > 0).sum(axis=1), (sy == 0).sum(axis=1), sx.shape[1]


def pairwise_accuracy(
    references: Sequence[Sequence[float]],
    predictions: Sequence[Sequence[float] | None],
    *,
    prediction_format: PredictionFormat = "scores",
    invalid: InvalidPolicy = "zero",
) -> float:
    """Mean over groups of the share of user pairs ordered as in the truth; a predicted tie counts 1/2.

    An invalid group counts as an all-tied prediction under ``invalid="zero"`` (0.5, matching tau 0), is
    dropped under ``"skip"``, raises under ``"raise"``. For groups of 2 this is ``(tau + 1) / 2``.

    Args:
        references: as in :func:`compute_ptc`.
        predictions: as in :func:`compute_ptc`.
        prediction_format: ``"scores"`` or ``"ranking"``.
        invalid: ``"zero"``, ``"skip"`` or ``"raise"``.

    Returns:
        A float in [0, 1] (NaN only if ``"skip"`` leaves no group).

    >>> pairwise_accuracy([[1.5, -0.5, 0.4], [0.9, -0.8]], [[3, 1, 2], [2, 1]], prediction_format="ranking")
    0.3333333333333333
    >>> pairwise_accuracy([[1.5, -0.5, 0.4]], [[1.0, 1.0, 0.0]])  # pairs: tie 1/2, right 1, wrong 0
    0.5
    """
    buckets = _buckets(references, predictions, prediction_format)
    per_bucket = []
    for bucket in buckets:
        concordant, tied, pairs = _concordance(bucket)
        per_bucket.append((concordant + 0.5 * tied) / pairs)
    values, valid = _scatter(buckets, per_bucket, len(references))
    return _mean(_apply_policy(values, valid, invalid, predictions, 0.5), "pairwise_accuracy")


def exact_order_accuracy(
    references: Sequence[Sequence[float]],
    predictions: Sequence[Sequence[float] | None],
    *,
    prediction_format: PredictionFormat = "scores",
    invalid: InvalidPolicy = "zero",
) -> float:
    """Share of groups whose predicted order is exactly the true order (any predicted tie is a miss).

    An invalid group counts as a miss under ``invalid="zero"``, is dropped under ``"skip"``, raises under
    ``"raise"``.

    Args:
        references: as in :func:`compute_ptc`.
        predictions: as in :func:`compute_ptc`.
        prediction_format: ``"scores"`` or ``"ranking"``.
        invalid: ``"zero"``, ``"skip"`` or ``"raise"``.

    Returns:
        A float in [0, 1] (NaN only if ``"skip"`` leaves no group).

    >>> refs = [[1.5, -0.5, 0.4], [0.9, -0.8]]
    >>> exact_order_accuracy(refs, [[1, 3, 2], [2, 1]], prediction_format="ranking")
    0.5
    """
    buckets = _buckets(references, predictions, prediction_format)
    per_bucket = []
    for bucket in buckets:
        concordant, _, pairs = _concordance(bucket)
        per_bucket.append((concordant == pairs).astype(np.float64))
    values, valid = _scatter(buckets, per_bucket, len(references))
    return _mean(_apply_policy(values, valid, invalid, predictions, 0.0), "exact_order_accuracy")


def _flatten_ratings(true_ratings: Sequence[Any], predicted_ratings: Sequence[Any]) -> tuple[list, list, int]:
    if len(true_ratings) != len(predicted_ratings):
        raise ValueError(
            f"got {len(true_ratings)} true and {len(predicted_ratings)} predicted entries; pass one per entry"
        )
    truth: list[float] = []
    predicted: list[float] = []
    missing = 0
    for i, (t, p) in enumerate(zip(true_ratings, predicted_ratings, strict=True)):
        nested = isinstance(t, Sequence | np.ndarray)
        if p is None or (nested and isinstance(p, Sequence | np.ndarray) and len(p) == 0):
            missing += len(t) if nested else 1
        elif nested != isinstance(p, Sequence | np.ndarray) or (nested and len(p) != len(t)):
            raise ValueError(
                f"entry {i}: true {t!r} and predicted {p!r} do not align; pass one predicted rating per "
                "user, None for a failed one, or [] for a failed group"
            )
        elif nested:
            truth.extend(t)
            predicted.extend(p)
        else:
            truth.append(t)
            predicted.append(p)
    return truth, predicted, missing


def rating_errors(
    true_ratings: Sequence[float] | Sequence[Sequence[float]],
    predicted_ratings: Sequence[float | None] | Sequence[Sequence[float] | None],
) -> dict[str, Any]:
    """MAE and RMSE of predicted vs. true ratings (the paper's Figure 1/3 analysis of pointwise runs).

    Relative ratings give the same errors as absolute ones when both subtract the same user average
    (``(x - avg) - (y - avg) = x - y``), so pointwise PTC inputs can be passed as they are.

    Args:
        true_ratings: one rating per user, flat or nested per group.
        predicted_ratings: the same structure; ``None`` (a user) or ``None``/``[]`` (a group) for a failed
            prediction, which is left out and counted in ``num_missing``.

    Returns:
        ``{"mae", "rmse", "num_ratings", "num_missing"}`` as plain Python values (NaN if nothing is left).

    >>> rating_errors([4.0, 5.0, 2.0], [3.0, 5.0, None])
    {'mae': 0.5, 'rmse': 0.7071067811865476, 'num_ratings': 2, 'num_missing': 1}
    >>> rating_errors([[1.0, -1.0], [0.5, 0.0]], [[0.0, -1.0], []])["mae"]
    0.5
    """
    truth, predicted, missing = _flatten_ratings(true_ratings, predicted_ratings)
    errors = np.asarray(predicted, dtype=np.float64) - np.asarray(truth, dtype=np.float64)
    if not np.isfinite(errors).all():
        raise ValueError("ratings contain NaN or inf; pass finite numbers, and None for a failed prediction")
    return {
        "mae": _mean(np.abs(errors), "mae"),
        "rmse": math.sqrt(_mean(errors**2, "rmse")),
        "num_ratings": int(errors.size),
        "num_missing": missing,
    }


def paired_test(
    references: Sequence[Sequence[float]],
    predictions_a: Sequence[Sequence[float] | None],
    predictions_b: Sequence[Sequence[float] | None],
    *,
    prediction_format: PredictionFormat = "scores",
    prediction_format_b: PredictionFormat | None = None,
    variant: Variant = "tau_b",
    invalid: InvalidPolicy = "zero",
    method: TestMethod = "permutation",
    n_resamples: int = 10_000,
    confidence_level: float = 0.95,
    seed: int = 0,
    clusters: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """Paired significance test of PTC(a) - PTC(b) for two systems scored on the same groups.

    ``method="permutation"`` flips the sign of each group's tau difference at random (paired
    randomisation test; exact when ``2**num_compared <= n_resamples``); ``"bootstrap"`` resamples groups
    and counts resampled differences, centred on the observed one, at least as far from it as the observed
    one is from 0 (``stats.signflip_test`` and ``stats.paired_bootstrap_test`` of the per-group
    differences). Both p-values are two-sided; resampled ones carry the +1 correction, so are never 0.
    The interval is always the paired percentile bootstrap of the difference. With ``invalid="skip"`` only
    groups valid for *both* systems are compared (so ``ptc_a`` / ``ptc_b`` can differ from
    :func:`compute_ptc` with ``"skip"``).

    Args:
        references: as in :func:`compute_ptc`.
        predictions_a: system a's predictions, as in :func:`compute_ptc`.
        predictions_b: system b's predictions on the same groups, in the same order.
        prediction_format: the format of ``predictions_a``.
        prediction_format_b: the format of ``predictions_b``; default: the same as a (pointwise vs.
            listwise comparisons pass ``"scores"`` and ``"ranking"``).
        variant: ``"tau_b"`` or ``"paper"``.
        invalid: ``"zero"``, ``"skip"`` or ``"raise"``.
        method: ``"permutation"`` or ``"bootstrap"``.
        n_resamples: resamples for the p-value and for the interval.
        confidence_level: level of the interval of the difference.
        seed: seed of all resampling.
        clusters: one cluster id per group, as in :func:`compute_ptc`: signs flip, and the bootstraps
            resample, per cluster.

    Returns:
        Plain Python values: ``ptc_a``, ``ptc_b``, ``difference`` (a - b), ``p_value``, ``ci_low``,
        ``ci_high``, ``num_groups`` (given), ``num_compared`` (entering the test), ``num_invalid_a``,
        ``num_invalid_b``.

    >>> refs = [[1.0, 0.0, -1.0]] * 8
    >>> result = paired_test(refs, [[3, 2, 1]] * 8, [[1, 2, 3]] * 8)
    >>> result["difference"], result["p_value"], result["ci_low"]  # exact: 2 of the 2**8 sign patterns
    (2.0, 0.0078125, 2.0)
    """
    _check_choice("method", method, TEST_METHODS)
    stats.check_resampling(confidence_level, n_resamples)
    if len(predictions_a) != len(predictions_b):
        raise ValueError(
            f"got {len(predictions_a)} predictions for a but {len(predictions_b)} for b; score both systems "
            "on the same groups in the same order"
        )
    format_b = prediction_format if prediction_format_b is None else prediction_format_b
    taus_a, valid_a = group_taus(
        references, predictions_a, prediction_format=prediction_format, variant=variant
    )
    taus_b, valid_b = group_taus(references, predictions_b, prediction_format=format_b, variant=variant)
    both = valid_a & valid_b
    _apply_policy(taus_a, valid_a, invalid, predictions_a, 0.0)
    _apply_policy(taus_b, valid_b, invalid, predictions_b, 0.0)
    if invalid == "skip":
        taus_a, taus_b = taus_a[both], taus_b[both]
    test = stats.signflip_test if method == "permutation" else stats.paired_bootstrap_test
    result = test(
        taus_a - taus_b,
        _kept_clusters(clusters, both, invalid),
        alpha=1.0 - confidence_level,
        n_resamples=n_resamples,
        seed=seed,
    )
    return {
        "ptc_a": _mean(taus_a, "paired_test"),
        "ptc_b": _mean(taus_b, "paired_test"),
        "difference": result.difference,
        "p_value": result.p_value,
        "ci_low": result.ci_low,
        "ci_high": result.ci_high,
        "num_groups": len(references),
        "num_compared": result.num_compared,
        "num_invalid_a": int((~valid_a).sum()),
        "num_invalid_b": int((~valid_b).sum()),
    }


def null_tau_variance(num_users: int) -> float:
    """Variance of one group's Kendall tau when the predicted order is uniformly random (no ties).

    ``2 (2n + 5) / (9 n (n - 1))`` for ``n`` users: 1 for pairs, 0.41 for triples, 0.24 for groups of 4. It is
    the spread of a system that knows nothing, and close to that of the weak systems the benchmark compares,
    so it is the planning value for the resolution a benchmark of a given size can have.

    >>> null_tau_variance(2), round(null_tau_variance(3), 4), round(null_tau_variance(4), 4)
    (1.0, 0.4074, 0.2407)
    """
    if num_users < 2:
        raise ValueError(f"a group has at least 2 users, got {num_users}")
    return 2 * (2 * num_users + 5) / (9 * num_users * (num_users - 1))


def expected_resolution(
    num_users: int,
    num_groups: int,
    *,
    variance: float | None = None,
    design_effect: float = 1.0,
    confidence_level: float = 0.95,
    power: float = 0.8,
) -> dict[str, float]:
    """The precision a PTC cell of ``num_groups`` groups can have (normal approximation).

    ``half_width`` is the expected half-width of the cell's confidence interval; ``min_detectable_difference``
    the smallest true PTC difference between two systems that a two-sided paired test at
    ``1 - confidence_level`` finds with probability ``power``, taking the two systems' per-group taus as
    uncorrelated (correlated systems are told apart at smaller differences). ``design_effect`` inflates the
    variance for clustered groups (several groups of one query item); ``variance`` replaces the planning
    value :func:`null_tau_variance` with an observed per-group variance.

    >>> r = expected_resolution(2, 200)
    >>> round(r["half_width"], 3), round(r["min_detectable_difference"], 3)
    (0.139, 0.28)
    >>> round(expected_resolution(4, 2_400)["half_width"], 3)
    0.02
    """
    if num_groups < 1:
        raise ValueError(f"num_groups must be at least 1, got {num_groups}")
    return stats.resolution(
        null_tau_variance(num_users) if variance is None else variance,
        num_groups,
        design_effect=design_effect,
        confidence_level=confidence_level,
        power=power,
    )


def groups_for_half_width(num_users: int, half_width: float, *, confidence_level: float = 0.95) -> int:
    """How many groups of ``num_users`` users a cell needs for an expected CI half-width of ``half_width``.

    >>> groups_for_half_width(2, 0.02), groups_for_half_width(3, 0.02), groups_for_half_width(4, 0.02)
    (9604, 3913, 2312)
    """
    return stats.docs_for_half_width(
        null_tau_variance(num_users), half_width, confidence_level=confidence_level
    )
