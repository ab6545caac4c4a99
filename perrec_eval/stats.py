"""Statistics of a score over docs, for every task family: intervals, paired tests, planning figures.

A *doc* is what a task scores once (a group of users, a recommendation instance, a query). A metric is
either the **mean** of one value per doc or a **corpus** function of every doc's item (RMSE, BLEU), and
docs may share a **cluster** (several docs drawn from one query item): a cluster's docs are then resampled,
and their signs flipped, together. ``clusters=None``, or every id distinct, is the plain case over docs,
draw for draw.

- Intervals: :func:`bootstrap_interval` (percentile bootstrap of a mean, cluster bootstrap with clusters),
  :func:`corpus_interval` (resample docs, recompute the corpus value) and :func:`average_interval` (a mean
  over cells whose docs fall into strata, each stratum resampled on its own).
- Paired tests of two systems on the same docs: :func:`signflip_test` and :func:`paired_bootstrap_test`
  of per-doc differences, :func:`corpus_paired_test` of a corpus metric. p-values are two-sided; resampled
  ones carry the +1 correction, so are never 0.
- Planning: :func:`design_effect` of clusters (its bound) and :func:`observed_design_effect` (on a run's
  values), :func:`resolution` and :func:`docs_for_half_width` given a
  per-doc variance (normal approximation).
- :class:`MetricSpec`: a metric's declaration (direction, aggregation), which picks its interval and its
  paired test from the above; :func:`rmse` is a corpus function ready for it.

Every resampling statistic takes ``seed``: an int, or a ``numpy.random.Generator`` that is used as it is,
so that two statistics can share one stream. Only numpy and the standard library are imported: the metric
Space bundles this module with ``ptc.py``. The resampling is its own rather than scipy's
(``scipy.stats.bootstrap``, ``permutation_test``): their draws would change every interval and p-value
that earlier runs wrote; the tests check the exact sign-flip p-values against scipy's.

>>> signflip_test([0.5, 0.25, 0.5, 1.0, 0.75, 0.5]).p_value  # exact: 2 of the 2**6 sign patterns
0.03125
>>> bootstrap_interval([0.0, 1.0] * 50, n_resamples=2000)
(0.4, 0.6)
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Literal

import numpy as np

logger = logging.getLogger(__name__)

Corpus = Callable[[Sequence[Any]], float]
Seed = int | np.random.Generator
Aggregation = Literal["mean", "corpus"]

AGGREGATIONS: tuple[str, ...] = ("mean", "corpus")

# Resampling draws at most this many indices at once, so 100k docs x 10k resamples stays in memory.
_RESAMPLE_CHUNK = 2_000_000
# Resampled statistics equal to the observed one up to float rounding count as "at least as extreme".
_TOLERANCE = 1e-12


@dataclass(frozen=True, slots=True)
class PairedTest:
    """A paired comparison of systems a and b on the same docs.

    ``difference`` is a - b, ``p_value`` the two-sided p-value of "no difference", ``ci_low``/``ci_high``
    the (1 - alpha) percentile-bootstrap interval of the difference, ``num_compared`` the docs compared
    and ``num_clusters`` the independent units (docs, or clusters). NaN where no doc was compared.
    """

    difference: float
    p_value: float
    ci_low: float
    ci_high: float
    num_compared: int
    num_clusters: int


def mean(values: Sequence[float] | np.ndarray) -> float:
    """The exactly rounded mean (``math.fsum``): values that cancel give exactly 0. NaN for no values.

    >>> mean([0.1, 0.2, 0.3, -0.1, -0.2, -0.3]), mean([])  # sum() would give 1.1e-16
    (0.0, nan)
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return math.nan
    return math.fsum(values.tolist()) / values.size


def cluster_codes(clusters: Sequence[Any] | None, n: int) -> np.ndarray | None:
    """Cluster index (0..k-1, in order of first appearance) of each of ``n`` docs; None when unclustered.

    ``None`` or one cluster per doc (every id distinct) means the docs are independent, and the
    resampling is the plain one over docs, draw for draw.

    >>> cluster_codes(["a", "b", "a"], 3).tolist(), cluster_codes(["a", "b", "c"], 3), cluster_codes(None, 2)
    ([0, 1, 0], None, None)
    """
    if clusters is None:
        return None
    if len(clusters) != n:
        raise ValueError(f"got {len(clusters)} cluster ids for {n} docs; give one cluster id per doc")
    codes: dict[Any, int] = {}
    out = np.array([codes.setdefault(c, len(codes)) for c in clusters], dtype=np.int64)
    return None if len(codes) == n else out


def design_effect(clusters: Sequence[Any] | None) -> float:
    """Upper bound ``Σ m_i² / Σ m_i`` of the variance inflation of a mean over clustered docs.

    With ``m_i`` docs in cluster ``i`` the design effect is ``1 + (m̄ - 1) ρ`` with ``m̄ = Σ m_i² / Σ m_i``
    and ``ρ`` the within-cluster correlation of the docs' values; ρ is unknown (and differs between
    systems), so this is its bound at ρ = 1, the same for every system scored on the same docs. 1 without
    clusters.

    >>> design_effect(None), design_effect(["a", "b"]), design_effect(["a", "a", "b"])
    (1.0, 1.0, 1.6666666666666667)
    """
    if clusters is None or len(clusters) == 0:
        return 1.0
    sizes = Counter(clusters).values()
    return sum(m * m for m in sizes) / len(clusters)


def observed_design_effect(values: Sequence[float] | np.ndarray, clusters: Sequence[Any] | None) -> float:
    """The variance inflation clustering caused on the mean of these values: the cluster bootstrap's
    variance of the mean over the doc bootstrap's.

    In closed form, what the two bootstraps estimate without their resampling noise: the doc bootstrap's
    variance of a mean of ``n`` docs is ``Σ (x - x̄)² / n²``, the cluster bootstrap's (to first order, the
    mean being a ratio of cluster totals) ``Σ_c (Σ_{i in c} (x_i - x̄))² / n²``. Unlike the bound
    :func:`design_effect` it depends on the values (so on the system), and it may fall below 1 (negative
    within-cluster correlation, or noise on few clusters). 1 without clusters or when the values do not vary.

    >>> observed_design_effect([1.0, 1.0, 0.0, 0.0], ["a", "a", "b", "b"])  # equal within items: the bound
    2.0
    >>> observed_design_effect([1.0, 0.0, 1.0, 0.0], ["a", "a", "b", "b"])  # items of equal means
    0.0
    """
    values = _finite(values, "values")
    codes = cluster_codes(clusters, values.size)
    residuals = values - values.mean() if values.size else values
    naive = float(np.dot(residuals, residuals))
    if codes is None or naive == 0.0:
        return 1.0
    sums = np.bincount(codes, weights=residuals)
    return float(np.dot(sums, sums)) / naive


def check_resampling(confidence_level: float | None, n_resamples: int) -> None:
    """Raise a ValueError that states the fix for a confidence level outside (0, 1) or a bad resample count.

    >>> check_resampling(0.95, 1000)
    >>> check_resampling(95, 1000)
    Traceback (most recent call last):
    ...
    ValueError: confidence_level must be in (0, 1), e.g. 0.95; got 95
    """
    if confidence_level is not None and not 0 < confidence_level < 1:
        raise ValueError(f"confidence_level must be in (0, 1), e.g. 0.95; got {confidence_level}")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int | np.integer) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, e.g. 1000; got {n_resamples!r}")


def _check_alpha(alpha: float, n_resamples: int) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), e.g. 0.05; got {alpha}")
    check_resampling(None, n_resamples)


def _finite(values: Sequence[float] | np.ndarray, what: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{what} must be one number per doc; got an array of shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{what} contain NaN or inf; give every doc a finite value (a failed doc its score)")
    return array


def _cluster_sums(values: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per cluster: the sum of its docs' values and its number of docs."""
    k = int(codes.max()) + 1
    return np.bincount(codes, weights=values, minlength=k), np.bincount(codes, minlength=k).astype(np.float64)


def _resampled_means(
    values: np.ndarray, n_resamples: int, rng: np.random.Generator, codes: np.ndarray | None = None
) -> np.ndarray:
    """Means of ``n_resamples`` bootstrap resamples (with replacement) of ``values``.

    With cluster ``codes`` whole clusters are drawn (cluster bootstrap) and each resample's mean is its
    docs' total over its number of docs. The draws do not depend on the chunking (64-bit integers come
    from the generator's 32-bit stream one by one).
    """
    if codes is not None:
        sums, sizes = _cluster_sums(values, codes)
        k = sums.size
        chunk = max(1, _RESAMPLE_CHUNK // k)
        means = []
        for start in range(0, n_resamples, chunk):
            draws = rng.integers(0, k, size=(min(chunk, n_resamples - start), k))
            means.append(sums[draws].sum(axis=1) / sizes[draws].sum(axis=1))
        return np.concatenate(means)
    m = values.size
    chunk = max(1, _RESAMPLE_CHUNK // m)
    means = []
    for start in range(0, n_resamples, chunk):
        rows = min(chunk, n_resamples - start)
        means.append(values[rng.integers(0, m, size=(rows, m))].mean(axis=1))
    return np.concatenate(means)


def _percentile(resampled: np.ndarray, estimate: float, alpha: float) -> tuple[float, float]:
    """The (1 - alpha) percentile interval of resampled statistics; only float rounding is trimmed so it
    holds the estimate."""
    low, high = np.quantile(resampled, [alpha / 2, 1 - alpha / 2]).tolist()
    if estimate < low <= estimate + _TOLERANCE:
        low = estimate
    if estimate - _TOLERANCE <= high < estimate:
        high = estimate
    return float(low), float(high)


def _percentile_interval(
    values: np.ndarray,
    estimate: float,
    alpha: float,
    n_resamples: int,
    rng: np.random.Generator,
    codes: np.ndarray | None = None,
) -> tuple[float, float]:
    """The (1 - alpha) percentile bootstrap interval of the mean of ``values``."""
    if values.size == 0:
        return math.nan, math.nan
    return _percentile(_resampled_means(values, n_resamples, rng, codes), estimate, alpha)


def bootstrap_interval(
    values: Sequence[float] | np.ndarray,
    clusters: Sequence[Any] | None = None,
    *,
    confidence_level: float = 0.95,
    n_resamples: int = 1000,
    seed: Seed = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of one value per doc (cluster bootstrap with clusters).

    Vectorised: ``n_resamples x len(values)`` indices are drawn, at most 2,000,000 at once.

    Args:
        values: one finite value per doc.
        clusters: one cluster id per doc, or None: whole clusters are resampled, each resample's mean is
            its docs' total over its number of docs.
        confidence_level: e.g. 0.95.
        n_resamples: bootstrap resamples.
        seed: an int, or a Generator to draw from.

    Returns:
        ``(low, high)``; NaN for no values. The interval holds the mean (float rounding is trimmed).

    >>> bootstrap_interval([1.0, 1.0, 1.0])
    (1.0, 1.0)
    >>> bootstrap_interval([0.0, 1.0] * 50, ["a", "b"] * 50)  # two clusters: resamples of mean 0, 0.5, 1
    (0.0, 1.0)
    """
    check_resampling(confidence_level, n_resamples)
    values = _finite(values, "values")
    rng = np.random.default_rng(seed)
    codes = cluster_codes(clusters, values.size)
    return _percentile_interval(values, mean(values), 1.0 - confidence_level, n_resamples, rng, codes)


def average_interval(
    strata: Sequence[Sequence[Sequence[float]] | np.ndarray],
    clusters: Sequence[Sequence[Any] | None] | None = None,
    *,
    confidence_level: float = 0.95,
    n_resamples: int = 10_000,
    seed: Seed = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of a mean over cells: each cell's mean over its docs, averaged.

    Cells that ask the same docs share a stratum (a PerRecBench level's groups, asked by three methods; a
    RecBench+ query type's queries): each stratum is a docs × cells array, its docs resampled together
    (whole clusters where `clusters` gives its docs' ids), every stratum on its own. One cell per stratum
    and one stratum give `bootstrap_interval`'s interval of that cell.

    Args:
        strata: per stratum, one row per doc and one column per cell of the stratum (finite values).
        clusters: per stratum, one cluster id per doc or None.
        confidence_level: e.g. 0.95.
        n_resamples: bootstrap resamples.
        seed: an int, or a Generator to draw from.

    Returns:
        ``(low, high)``; NaN when a stratum has no doc. The interval holds the estimate.

    >>> average_interval([[[1.0, 0.0], [1.0, 0.0]], [[0.5], [0.5]]])  # cell means 1, 0 and 0.5
    (0.5, 0.5)
    """
    check_resampling(confidence_level, n_resamples)
    arrays = [np.asarray(stratum, dtype=np.float64).reshape(len(stratum), -1) for stratum in strata]
    if not arrays or any(a.shape[0] == 0 for a in arrays):
        return math.nan, math.nan
    for a in arrays:
        _finite(a.ravel(), "values")
    cells = sum(a.shape[1] for a in arrays)
    estimate = math.fsum(math.fsum(a.mean(axis=0).tolist()) for a in arrays) / cells
    rng = np.random.default_rng(seed)
    total = np.zeros(n_resamples)
    for i, a in enumerate(arrays):
        codes = cluster_codes(clusters[i] if clusters else None, a.shape[0])
        sums = a.sum(axis=1)  # a doc's values summed over the stratum's cells
        if codes is None:
            units, sizes = sums, np.ones(a.shape[0])
        else:
            units, sizes = _cluster_sums(sums, codes)
        k = units.size
        chunk = max(1, _RESAMPLE_CHUNK // k)
        for start in range(0, n_resamples, chunk):
            rows = min(chunk, n_resamples - start)
            draws = rng.integers(0, k, size=(rows, k))
            total[start : start + rows] += units[draws].sum(axis=1) / sizes[draws].sum(axis=1)
    return _percentile(total / cells, estimate, 1.0 - confidence_level)


def _signflip_p_value(
    differences: np.ndarray,
    n_resamples: int,
    rng: np.random.Generator,
    codes: np.ndarray | None = None,
    max_draws: int = _RESAMPLE_CHUNK,
) -> float:
    """Two-sided paired permutation test: under H0 each doc's difference is equally likely to flip sign.

    With cluster ``codes`` a cluster's docs flip together (the sign of its summed difference). Exact (all
    2**k sign patterns of the k units) when that is no more than ``n_resamples``, otherwise Monte Carlo with
    the +1 correction, drawing at most ``max_draws`` signs at once. The signs are bytes taken four from each
    32-bit draw, so a chunk whose size is not a multiple of 4 leaves the rest unused: ``max_draws`` is part
    of the result, not only of the memory use.
    """
    m = differences.size
    units = differences if codes is None else _cluster_sums(differences, codes)[0]
    k = units.size
    observed = abs(differences.mean())
    if 2**k <= n_resamples:
        signs = ((np.arange(2**k)[:, None] >> np.arange(k)[None, :]) & 1) * 2 - 1
        return float((np.abs(signs @ units / m) >= observed - _TOLERANCE).mean())
    chunk = max(1, max_draws // k)
    extreme = 0
    for start in range(0, n_resamples, chunk):
        rows = min(chunk, n_resamples - start)
        signs = rng.integers(0, 2, size=(rows, k), dtype=np.int8) * 2 - 1
        extreme += int((np.abs(signs @ units / m) >= observed - _TOLERANCE).sum())
    return (extreme + 1) / (n_resamples + 1)


def _bootstrap_p_value(
    differences: np.ndarray,
    difference: float,
    n_resamples: int,
    rng: np.random.Generator,
    codes: np.ndarray | None,
) -> float:
    """Share of resampled mean differences, centred on the observed one, at least as far from it as the
    observed one is from 0 (+1 correction)."""
    shifted = np.abs(_resampled_means(differences, n_resamples, rng, codes) - difference)
    return (int((shifted >= abs(difference) - _TOLERANCE).sum()) + 1) / (n_resamples + 1)


def _paired_differences(
    differences: Sequence[float] | np.ndarray,
    clusters: Sequence[Any] | None,
    alpha: float,
    n_resamples: int,
    seed: Seed,
    max_draws: int | None,
) -> PairedTest:
    """A paired test of per-doc differences, the p-value and then the interval from one stream: the
    sign-flip test when ``max_draws`` is given, else the paired bootstrap."""
    _check_alpha(alpha, n_resamples)
    d = _finite(differences, "differences")
    codes = cluster_codes(clusters, d.size)
    rng = np.random.default_rng(seed)
    if d.size == 0:
        logger.warning("no docs to compare: the difference and its p-value are NaN")
    difference = mean(d)
    if d.size == 0:
        p_value = math.nan
    elif max_draws is not None:
        p_value = _signflip_p_value(d, n_resamples, rng, codes, max_draws)
    else:
        p_value = _bootstrap_p_value(d, difference, n_resamples, rng, codes)
    low, high = _percentile_interval(d, difference, alpha, n_resamples, rng, codes)
    return PairedTest(
        difference=difference,
        p_value=float(p_value),
        ci_low=low,
        ci_high=high,
        num_compared=int(d.size),
        num_clusters=int(d.size if codes is None else codes.max() + 1),
    )


def signflip_test(
    differences: Sequence[float] | np.ndarray,
    clusters: Sequence[Any] | None = None,
    *,
    alpha: float = 0.05,
    n_resamples: int = 10_000,
    seed: Seed = 0,
    max_draws: int = _RESAMPLE_CHUNK,
) -> PairedTest:
    """Sign-flip (paired permutation) test of mean(differences) = 0, and the difference's interval.

    Under "no difference" each doc's difference a - b is as likely positive as negative; the p-value is the
    share of random sign patterns whose mean is at least as far from 0 as the observed mean. With clusters
    a cluster's docs flip together. Exact (all ``2**k`` patterns of the ``k`` docs or clusters) when that is
    at most ``n_resamples``, else Monte Carlo with the +1 correction. Then, from the same stream, the
    (1 - alpha) percentile (cluster) bootstrap interval of the mean difference.

    Args:
        differences: per doc, the metric of system a minus that of system b (finite).
        clusters: one cluster id per doc, or None.
        alpha: level of the test; the interval is the (1 - alpha) one.
        n_resamples: sign patterns drawn, and bootstrap resamples of the interval.
        seed: an int, or a Generator to draw from.
        max_draws: signs drawn at once. It changes the p-value (signs are bytes taken four from each 32-bit
            draw, so a chunk of a size that is not a multiple of 4 leaves the rest unused): keep it fixed
            for numbers that must be reproduced.

    Returns:
        A :class:`PairedTest`.

    >>> signflip_test([1.0, 1.0, 1.0, 1.0], ["a", "a", "b", "b"]).p_value  # 2 of 4 cluster sign patterns
    0.5
    >>> signflip_test([1.0, -1.0] * 4).p_value
    1.0
    """
    if isinstance(max_draws, bool) or not isinstance(max_draws, int | np.integer) or max_draws < 1:
        raise ValueError(f"max_draws must be a positive integer, e.g. 2_000_000; got {max_draws!r}")
    return _paired_differences(differences, clusters, alpha, n_resamples, seed, max_draws)


def paired_bootstrap_test(
    differences: Sequence[float] | np.ndarray,
    clusters: Sequence[Any] | None = None,
    *,
    alpha: float = 0.05,
    n_resamples: int = 10_000,
    seed: Seed = 0,
) -> PairedTest:
    """Paired bootstrap test of mean(differences) = 0, and the difference's interval.

    Docs (or clusters) are resampled; the p-value is the share of resampled mean differences, centred on
    the observed one, at least as far from it as the observed one is from 0 (+1 correction). Then, from the
    same stream, fresh resamples give the (1 - alpha) percentile interval.

    Args:
        differences: per doc, the metric of system a minus that of system b (finite).
        clusters: one cluster id per doc, or None.
        alpha: level of the test; the interval is the (1 - alpha) one.
        n_resamples: resamples for the p-value, and again for the interval.
        seed: an int, or a Generator to draw from.

    Returns:
        A :class:`PairedTest`.

    >>> paired_bootstrap_test([0.0, 0.0, 0.0]).p_value  # no difference: every resample is as extreme
    1.0
    >>> paired_bootstrap_test([1.0] * 20, n_resamples=999).p_value
    0.001
    """
    return _paired_differences(differences, clusters, alpha, n_resamples, seed, None)


def _resampled_docs(
    n: int, n_resamples: int, rng: np.random.Generator, codes: np.ndarray | None
) -> Iterator[np.ndarray]:
    """The doc indices of each bootstrap resample of ``n`` docs, one resample at a time.

    The indices are those of :func:`bootstrap_interval` with the same generator (drawn in the same chunks
    of at most 2,000,000 integers); with cluster ``codes`` a resample is the drawn clusters' docs.
    """
    if codes is None:
        units, members = n, None
    else:
        order = np.argsort(codes, kind="stable")
        members = np.split(order, np.cumsum(np.bincount(codes))[:-1])
        units = len(members)
    chunk = max(1, _RESAMPLE_CHUNK // units)
    for start in range(0, n_resamples, chunk):
        for draw in rng.integers(0, units, size=(min(chunk, n_resamples - start), units)):
            yield draw if members is None else np.concatenate([members[c] for c in draw.tolist()])


def _corpus_value(corpus: Corpus, items: Sequence[Any]) -> float:
    value = float(corpus(items))
    if math.isnan(value):
        raise ValueError(f"the corpus function gave NaN on {len(items)} docs; it must be defined on any docs")
    return value


def corpus_interval(
    items: Sequence[Any],
    corpus: Corpus,
    clusters: Sequence[Any] | None = None,
    *,
    confidence_level: float = 0.95,
    n_resamples: int = 1000,
    seed: Seed = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of a corpus-level metric: resample docs, recompute the metric.

    ``corpus`` is called once per resample, on a list of ``len(items)`` items: the cost is ``n_resamples``
    times gathering the items and one corpus evaluation, where :func:`bootstrap_interval` is one numpy
    operation (:func:`rmse` of 10,000 one-number docs: about 2 ms a resample on one core, 2 s for 1,000,
    against 0.25 ms for the mean's bootstrap). Keep ``corpus`` vectorised and its items small (per-doc
    n-gram counts for BLEU, not texts to tokenize again). The indices are drawn in chunks of at most
    2,000,000, and they are those :func:`bootstrap_interval` draws with the same seed.

    Args:
        items: one item per doc, whatever ``corpus`` reads (an (error, weight) pair, a (hypothesis,
            reference) pair, sufficient statistics).
        corpus: the metric of a list of items.
        clusters: one cluster id per doc, or None: whole clusters are resampled.
        confidence_level: e.g. 0.95.
        n_resamples: bootstrap resamples.
        seed: an int, or a Generator to draw from.

    Returns:
        ``(low, high)``, holding ``corpus(items)``; NaN for no items.

    >>> def rmse(errors):
    ...     return math.sqrt(sum(e * e for e in errors) / len(errors))
    >>> corpus_interval([1.0, -1.0, 1.0, -1.0], rmse)  # every resample has RMSE 1
    (1.0, 1.0)
    """
    check_resampling(confidence_level, n_resamples)
    if len(items) == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    codes = cluster_codes(clusters, len(items))
    estimate = _corpus_value(corpus, list(items))
    resampled = np.array(
        [
            _corpus_value(corpus, [items[i] for i in docs.tolist()])
            for docs in _resampled_docs(len(items), n_resamples, rng, codes)
        ],
        dtype=np.float64,
    )
    return _percentile(resampled, estimate, 1.0 - confidence_level)


def corpus_paired_test(
    items_a: Sequence[Any],
    items_b: Sequence[Any],
    corpus: Corpus,
    clusters: Sequence[Any] | None = None,
    *,
    alpha: float = 0.05,
    n_resamples: int = 1000,
    seed: Seed = 0,
) -> PairedTest:
    """Paired bootstrap test of a corpus-level metric: corpus(a) - corpus(b) = 0.

    Each resample draws docs (or clusters) once for both systems and recomputes both corpus values; the
    p-value is the share of resampled differences, centred on the observed one, at least as far from it as
    the observed one is from 0 (+1 correction), and the interval the (1 - alpha) percentile interval of
    the same resampled differences. Cost: ``2 x n_resamples`` corpus evaluations (see
    :func:`corpus_interval`).

    Args:
        items_a: system a's item per doc.
        items_b: system b's item per doc, same docs in the same order.
        corpus: the metric of a list of items.
        clusters: one cluster id per doc, or None.
        alpha: level of the test; the interval is the (1 - alpha) one.
        n_resamples: bootstrap resamples.
        seed: an int, or a Generator to draw from.

    Returns:
        A :class:`PairedTest` (``difference`` = corpus(a) - corpus(b)).

    >>> def rmse(errors):
    ...     return math.sqrt(sum(e * e for e in errors) / len(errors))
    >>> corpus_paired_test([0.5, -1.0, 0.25], [0.5, -1.0, 0.25], rmse).p_value  # identical systems
    1.0
    >>> errors = [0.5, -1.0, 0.25, 1.5, -0.75] * 4
    >>> corpus_paired_test(errors, [e * 2 for e in errors], rmse, n_resamples=999).p_value
    0.001
    """
    _check_alpha(alpha, n_resamples)
    if len(items_a) != len(items_b):
        raise ValueError(
            f"got {len(items_a)} items for a but {len(items_b)} for b; score both systems on the same docs"
        )
    n = len(items_a)
    codes = cluster_codes(clusters, n)
    num_clusters = n if codes is None else int(codes.max()) + 1
    if n == 0:
        logger.warning("no docs to compare: the difference and its p-value are NaN")
        return PairedTest(math.nan, math.nan, math.nan, math.nan, 0, 0)
    rng = np.random.default_rng(seed)
    difference = _corpus_value(corpus, list(items_a)) - _corpus_value(corpus, list(items_b))
    resampled = np.array(
        [
            _corpus_value(corpus, [items_a[i] for i in docs])
            - _corpus_value(corpus, [items_b[i] for i in docs])
            for docs in map(np.ndarray.tolist, _resampled_docs(n, n_resamples, rng, codes))
        ],
        dtype=np.float64,
    )
    extreme = int((np.abs(resampled - difference) >= abs(difference) - _TOLERANCE).sum())
    low, high = _percentile(resampled, difference, alpha)
    return PairedTest(
        difference=difference,
        p_value=(extreme + 1) / (n_resamples + 1),
        ci_low=low,
        ci_high=high,
        num_compared=n,
        num_clusters=num_clusters,
    )


def resolution(
    variance: float,
    num_docs: int,
    *,
    design_effect: float = 1.0,
    confidence_level: float = 0.95,
    power: float = 0.8,
) -> dict[str, float]:
    """The precision of a mean over ``num_docs`` docs, given the per-doc variance (normal approximation).

    ``half_width`` is the expected half-width of its confidence interval; ``min_detectable_difference`` the
    smallest true difference between two systems that a two-sided paired test at ``1 - confidence_level``
    finds with probability ``power``, taking the two systems' per-doc values as uncorrelated (correlated
    systems are told apart at smaller differences). ``design_effect`` inflates the variance for clustered
    docs (:func:`design_effect`).

    Args:
        variance: the variance of one doc's value (a planning value, or an observed one).
        num_docs: docs in the mean.
        design_effect: variance inflation of clustered docs; 1 for independent docs.
        confidence_level: of the interval, and 1 - the level of the test.
        power: of the test.

    Returns:
        ``{"half_width", "min_detectable_difference"}``.

    >>> r = resolution(1.0, 200)
    >>> round(r["half_width"], 3), round(r["min_detectable_difference"], 3)
    (0.139, 0.28)
    """
    if num_docs < 1:
        raise ValueError(f"num_docs must be at least 1, got {num_docs}")
    if not 0 < confidence_level < 1 or not 0 < power < 1:
        raise ValueError("confidence_level and power must lie strictly between 0 and 1")
    sigma2 = variance * design_effect
    normal = NormalDist()
    z_alpha = normal.inv_cdf(0.5 + confidence_level / 2)
    z_power = normal.inv_cdf(power)
    return {
        "half_width": z_alpha * math.sqrt(sigma2 / num_docs),
        "min_detectable_difference": (z_alpha + z_power) * math.sqrt(2 * sigma2 / num_docs),
    }


def docs_for_half_width(variance: float, half_width: float, *, confidence_level: float = 0.95) -> int:
    """How many independent docs of per-doc ``variance`` a mean needs for an expected CI half-width.

    >>> docs_for_half_width(1.0, 0.02), docs_for_half_width(0.25, 0.05)
    (9604, 385)
    """
    z_alpha = NormalDist().inv_cdf(0.5 + confidence_level / 2)
    return math.ceil((z_alpha / half_width) ** 2 * variance - 1e-9)


def rmse(items: Sequence[float | Sequence[float]]) -> float:
    """Root mean squared error over every error of every doc: a corpus function for :class:`MetricSpec`.

    Args:
        items: per doc, its error (predicted - true) or the list of its errors (one per rated user, say;
            a doc without a prediction gives an empty list).

    Returns:
        ``sqrt(mean of the squared errors)``, the mean exactly rounded (as :func:`mean`); NaN for no error.

    >>> rmse([[3.0, -1.0], [], 1.0]) == math.sqrt((9.0 + 1.0 + 1.0) / 3)
    True
    """
    try:
        errors = np.asarray(items, dtype=np.float64).ravel()
    except ValueError:  # ragged: docs with different numbers of errors
        errors = np.concatenate([np.atleast_1d(np.asarray(item, dtype=np.float64)) for item in items])
    return math.sqrt(mean(errors**2)) if errors.size else math.nan


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """A metric as a family declares it: its name, its direction and how it aggregates over docs, which
    decide its interval and its paired test.

    - ``aggregation="mean"``: one finite value per doc (a failed doc carries the value its family gives
      it); the metric is their mean, the interval the percentile bootstrap over docs
      (:func:`bootstrap_interval`), the paired test the sign-flip test of per-doc differences
      (:func:`signflip_test`).
    - ``aggregation="corpus"``: one item per doc, whatever ``corpus`` reads; the metric is
      ``corpus(items)``, the interval the corpus bootstrap (:func:`corpus_interval`), the paired test the
      paired bootstrap (:func:`corpus_paired_test`).

    With clusters (one id per doc) the resampling and the sign flips go by cluster.

    >>> accuracy = MetricSpec("accuracy")
    >>> accuracy.value([1.0, 0.0, 1.0, 1.0])
    0.75
    >>> accuracy.paired_test([1.0, 0.5, 0.0], [1.0, 0.5, 0.0]).p_value  # identical systems
    1.0
    >>> accuracy.paired_test([1.0] * 8, [0.0] * 8).p_value  # better on every doc: 2 of the 2**8 sign patterns
    0.0078125
    >>> error = MetricSpec("rmse", higher_is_better=False, aggregation="corpus", corpus=rmse)
    >>> errors = [[0.5, -1.0], [2.0], [0.0, 1.5]]  # per doc, its users' errors
    >>> error.value(errors) == math.sqrt((0.25 + 1.0 + 4.0 + 0.0 + 2.25) / 5)
    True
    >>> error.paired_test(errors, errors).p_value
    1.0
    """

    name: str
    higher_is_better: bool = True
    aggregation: Aggregation = "mean"
    corpus: Corpus | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a metric needs a name, e.g. 'ptc'; got {self.name!r}")
        if not isinstance(self.higher_is_better, bool):
            raise ValueError(f"metric {self.name}: higher_is_better must be True or False")
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(
                f"metric {self.name}: aggregation must be 'mean' or 'corpus'; got {self.aggregation!r}"
            )
        if self.aggregation == "corpus" and not callable(self.corpus):
            raise ValueError(
                f"metric {self.name} aggregates over the corpus: pass corpus=, the function of a list of "
                "per-doc items that gives its value (e.g. stats.rmse)"
            )
        if self.aggregation == "mean" and self.corpus is not None:
            raise ValueError(
                f"metric {self.name} is a mean over docs: drop corpus=, or declare aggregation='corpus'"
            )

    def value(self, items: Sequence[Any]) -> float:
        """The metric of these docs: the mean of their values, or the corpus function of their items.

        NaN for no docs.
        """
        if self.aggregation == "mean":
            return mean(_finite(items, f"values of metric {self.name}"))
        return _corpus_value(self.corpus, list(items)) if len(items) else math.nan

    def interval(
        self,
        items: Sequence[Any],
        clusters: Sequence[Any] | None = None,
        *,
        confidence_level: float = 0.95,
        n_resamples: int = 1000,
        seed: Seed = 0,
    ) -> tuple[float, float]:
        """Percentile bootstrap interval of the metric over docs (by cluster, if given)."""
        if self.aggregation == "mean":
            return bootstrap_interval(
                items, clusters, confidence_level=confidence_level, n_resamples=n_resamples, seed=seed
            )
        return corpus_interval(
            items,
            self.corpus,
            clusters,
            confidence_level=confidence_level,
            n_resamples=n_resamples,
            seed=seed,
        )

    def paired_test(
        self,
        items_a: Sequence[Any],
        items_b: Sequence[Any],
        clusters: Sequence[Any] | None = None,
        *,
        alpha: float = 0.05,
        n_resamples: int = 1000,
        seed: Seed = 0,
    ) -> PairedTest:
        """Paired test of metric(a) - metric(b) on the same docs, in the same order."""
        if self.aggregation == "corpus":
            return corpus_paired_test(
                items_a, items_b, self.corpus, clusters, alpha=alpha, n_resamples=n_resamples, seed=seed
            )
        if len(items_a) != len(items_b):
            raise ValueError(
                f"got {len(items_a)} values for a but {len(items_b)} for b; score both systems on the same "
                "docs"
            )
        what = f"values of metric {self.name}"
        differences = _finite(items_a, what) - _finite(items_b, what)
        return signflip_test(differences, clusters, alpha=alpha, n_resamples=n_resamples, seed=seed)


def resampled_docs(metric: MetricSpec, items: Sequence[Any]) -> list[int]:
    """The docs a metric's interval and paired tests resample: every doc for a mean over docs; for a corpus
    metric, the docs it is defined on alone, since a resample of only the others has no value (a failed
    rating has no error: RMSE is a statistic of the rated docs, and the cell counts the failed ones).

    >>> error = MetricSpec("rmse", higher_is_better=False, aggregation="corpus", corpus=rmse)
    >>> resampled_docs(error, [[1.0], []]), resampled_docs(MetricSpec("hit"), [0.0, 1.0])
    ([0], [0, 1])
    """
    if metric.aggregation != "corpus":
        return list(range(len(items)))
    return [i for i, item in enumerate(items) if math.isfinite(metric.corpus([item]))]
