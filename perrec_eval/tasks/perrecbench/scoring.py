"""Scoring: rankings → PTC per (level, method) cell, with confidence intervals, failures and rating errors."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from perrec_eval import ptc, stats
from perrec_eval.tasks.perrecbench.profiles import permanent_fix
from perrec_eval.tasks.perrecbench.rankers import ListSlot, Prediction
from perrec_eval.tasks.perrecbench.records import Group, PredictionRecord, SampleRecord, clusters_of
from perrec_eval.tasks.perrecbench.results import CellScore, Scores
from perrec_eval.tasks.perrecbench.vocabulary import LEVELS, METHODS, Method

CONFIDENCE_LEVEL = 0.95
# 10,000 resamples: with 1,000 the interval's ends moved by about +-0.006 between seeds.
N_RESAMPLES = 10_000
CI_METHOD = "percentile bootstrap over groups"
# Runs whose levels hold several groups of one query item (large-preset builds) resample whole items.
CLUSTERED_CI_METHOD = "percentile cluster bootstrap over query items"
CLUSTERED_BY = "query item"
RESOLUTION_BASIS = "null tau variance"


def prediction_records(
    level: str, method: Method, groups: Sequence[Group], predictions: Mapping[str, Prediction]
) -> list[PredictionRecord]:
    """The metric's inputs and the truth, one record per group (predictions.jsonl).

    When some query item has several groups in `groups` (large-preset builds), each record names its item as
    its cluster; otherwise no record has one and the lines are those of an unclustered run.
    """
    items = [f"{group.domain}:{group.query.parent_asin or group.group_id}" for group in groups]
    clustered = len(set(items)) < len(items)
    records = []
    for group, item in zip(groups, items, strict=True):
        pred = predictions[group.group_id]
        records.append(
            PredictionRecord(
                level=level,
                method=method,
                group_id=group.group_id,
                format=pred.format,
                prediction=pred.value,
                predicted_ratings=pred.predicted_ratings,
                references=group.relative_ratings,
                true_ratings=group.ratings,
                cluster=item if clustered else None,
            )
        )
    return records


def score_cells(
    records: Iterable[PredictionRecord],
    samples: Iterable[SampleRecord] = (),
    *,
    variant: str = "tau_b",
    invalid: str = "zero",
    seed: int = 0,
) -> Scores:
    """Score every (level, method) cell found in the prediction records (a run's scores.json)."""
    cells: dict[tuple[str, str], list[PredictionRecord]] = {}
    for record in records:
        cells.setdefault((record.level, record.method), []).append(record)
    samples = list(samples)
    counts: dict[tuple[str, str], _Counts] = {}
    for sample in samples:
        counts.setdefault((sample.level, sample.method), _Counts()).add(sample)
    out = []
    for (level, method), group_records in sorted(cells.items(), key=_cell_order):
        formats = {r.format for r in group_records}
        if len(formats) != 1:
            raise ValueError(f"cell {level}/{method} mixes prediction formats {sorted(formats)}")
        clusters = clusters_of(group_records)
        result = ptc.compute_ptc(
            [r.references for r in group_records],
            [r.prediction or [] for r in group_records],
            prediction_format=formats.pop(),
            variant=variant,
            invalid=invalid,
            confidence_level=CONFIDENCE_LEVEL,
            n_resamples=N_RESAMPLES,
            seed=seed,
            clusters=clusters,
        )
        count = counts.get((level, method), _Counts())
        value = _finite(result["ptc"])
        effect = observed_design_effect(group_records, variant=variant, invalid=invalid)
        out.append(
            CellScore(
                level=level,
                method=method,
                ptc=value,
                ptc_ci_low=_finite(result.get("ptc_ci_low")),
                ptc_ci_high=_finite(result.get("ptc_ci_high")),
                num_groups=result["num_groups"],
                num_invalid=result["num_invalid"],
                min_detectable_difference=cell_resolution(
                    len(group_records[0].references), result["num_groups"], effect or 1.0
                ),
                parse_failure_rate=count.parse_failed / count.answered if count.answered else 0.0,
                num_requests=count.requests,
                num_engine_errors=count.engine_errors,
                engine_error_rate=count.engine_errors / count.requests if count.requests else 0.0,
                ptc_missing=None if value is not None else _nothing_scored(invalid),
                num_clusters=None if clusters is None else len(set(clusters)),
                design_effect=effect,
                design_effect_bound=None if clusters is None else stats.design_effect(clusters),
                **_rating_errors(group_records),
                constant_floor=constant_floor(group_records, variant=variant, invalid=invalid)
                if method == "pointwise"
                else None,
                **(listwise_position_bias(group_records, count.listwise) if method == "listwise" else {}),
            )
        )
    values = [c.ptc for c in out if c.ptc is not None]
    engine_errors = sum(c.num_engine_errors for c in out)
    errors = [s.error for s in samples if s.error is not None]
    permanent = [error for error in errors if permanent_fix(error) is not None]
    clustered = any(c.design_effect is not None for c in out)
    return Scores(
        variant=variant,
        invalid=invalid,
        confidence_level=CONFIDENCE_LEVEL,
        ci_method=CLUSTERED_CI_METHOD if clustered else CI_METHOD,
        n_resamples=N_RESAMPLES,
        resolution_basis=RESOLUTION_BASIS,
        complete=engine_errors == 0,
        num_engine_errors=engine_errors,
        first_engine_error=errors[0] if errors else None,
        num_permanent_errors=len(permanent),
        first_permanent_error=permanent[0] if permanent else None,
        first_transient_error=next((e for e in errors if permanent_fix(e) is None), None),
        cells=tuple(out),
        average=sum(values) / len(values) if values else None,
        average_min_detectable_difference=average_resolution(
            [(len(cells[(c.level, c.method)][0].references), c.num_groups) for c in out],
            max((c.design_effect or 1.0 for c in out), default=1.0),
        ),
        clustered_by=CLUSTERED_BY if clustered else None,
    )


def constant_floor(
    records: Sequence[PredictionRecord], *, variant: str = "tau_b", invalid: str = "zero"
) -> float:
    """The pointwise PTC of a model that answers the same rating for every user, on these groups.

    Pointwise ranks by predicted rating minus the user's average, so a constant answer ranks users by
    minus their averages; users with low averages tend to have higher relative ratings, so this is not 0.
    The average is recovered from the records as true rating minus relative rating.

    >>> record = PredictionRecord("easy", "pointwise", "g", "scores", None, None, [1.0, -1.0], [5.0, 3.0])
    >>> constant_floor([record])  # averages 4.0 and 4.0: tied, no information
    0.0
    >>> constant_floor([PredictionRecord("easy", "pointwise", "g", "scores", None, None, [1.0, -1.0],
    ...                                  [4.0, 3.0])])  # averages 3.0 and 4.0: the lower average first
    1.0
    """
    scores = [[r - t for t, r in zip(rec.true_ratings, rec.references, strict=True)] for rec in records]
    result = ptc.compute_ptc([rec.references for rec in records], scores, variant=variant, invalid=invalid)
    return _finite(result["ptc"])


def observed_design_effect(
    records: Sequence[PredictionRecord], *, variant: str = "tau_b", invalid: str = "zero"
) -> float | None:
    """The design effect clustering by query item had on this cell's PTC, at least 1; None unclustered.

    `perrec_eval.stats.observed_design_effect` of the groups' taus as the metric averages them (failed
    groups 0 or dropped, by `invalid`). A value under 1 (negative correlation within items, or noise on few
    items) counts as 1: the detectable difference is never claimed finer than on independent groups.
    """
    clusters = clusters_of(records)
    if clusters is None:
        return None
    taus, valid = ptc.group_taus(
        [r.references for r in records],
        [r.prediction or [] for r in records],
        prediction_format=records[0].format,
        variant=variant,
    )
    rows = zip(taus.tolist(), valid.tolist(), clusters, strict=True)
    kept = [(tau, cluster) for tau, ok, cluster in rows if ok or invalid != "skip"]
    return max(1.0, stats.observed_design_effect([t for t, _ in kept], [c for _, c in kept]))


def cell_resolution(num_users: int, num_groups: int, design_effect: float = 1.0) -> float:
    """The smallest PTC difference a paired test tells apart (95%, power 0.8) on `num_groups` groups.

    The planning value of `perrec_eval.ptc.expected_resolution` with the null tau variance (a system that
    knows nothing; weak systems spread about as much), so every run on the same groups gets the same value.
    Clustered groups pass the design effect: `observed_design_effect` (what the cluster bootstrap saw on
    the run), or `perrec_eval.stats.design_effect`, the bound Σm²/Σm (taus of one item's groups perfectly
    correlated), for the worst case.

    >>> round(cell_resolution(2, 200), 3), round(cell_resolution(4, 200), 3)
    (0.28, 0.137)
    >>> round(cell_resolution(2, 200, design_effect=2.0), 3)  # pairs of groups of one item
    0.396
    """
    resolution = ptc.expected_resolution(num_users, num_groups, design_effect=design_effect)
    return resolution["min_detectable_difference"]


def average_resolution(cells: Sequence[tuple[int, int]], design_effect: float = 1.0) -> float | None:
    """`cell_resolution` of the mean over cells of (users per group, groups), the same groups in each cell.

    Each group's difference is then the mean of its cells' differences; taking the cells' null taus as
    independent, its variance is the sum of the cells' null variances over the number of cells squared;
    clustered runs multiply it by their largest cell's design effect.

    >>> round(average_resolution([(2, 200), (3, 200), (4, 200)]), 3)
    0.12
    """
    if not cells:
        return None
    variance = sum(ptc.null_tau_variance(users) for users, _ in cells) / len(cells) ** 2 * design_effect
    groups = min(groups for _, groups in cells)
    return ptc.expected_resolution(2, groups, variance=variance)["min_detectable_difference"]


@dataclass(slots=True)
class _Counts:
    """Requests of one cell: engine errors apart from the samples that came back and failed to parse."""

    requests: int = 0
    engine_errors: int = 0
    answered: int = 0
    parse_failed: int = 0
    listwise: list[SampleRecord] = field(default_factory=list)

    def add(self, sample: SampleRecord) -> None:
        self.requests += 1
        if sample.method == "listwise" and sample.ok:
            self.listwise.append(sample)
        if sample.error is not None:
            self.engine_errors += 1
        else:
            self.answered += len(sample.texts)
            self.parse_failed += sample.num_failed_samples


def _nothing_scored(invalid: str) -> str:
    return f"every group of the cell failed and invalid={invalid!r} drops failed groups: nothing scored"


def _finite(value: float | None) -> float | None:
    """None for a missing or NaN value: JSON has no NaN."""
    return None if value is None or math.isnan(value) else float(value)


def _cell_order(item: tuple[tuple[str, str], Any]) -> tuple[int, int]:
    level, method = item[0]
    return (
        LEVELS.index(level) if level in LEVELS else 99,
        METHODS.index(method) if method in METHODS else 99,
    )


def _rating_errors(records: Sequence[PredictionRecord]) -> dict[str, float]:
    """MAE/RMSE of predicted vs true ratings where a run predicted ratings (pointwise, baselines)."""
    true, pred = [], []
    for record in records:
        for t, p in zip(record.true_ratings, record.predicted_ratings or [], strict=False):
            if p is not None:
                true.append(t)
                pred.append(p)
    if not pred:
        return {}
    errors = ptc.rating_errors(true, pred)
    return {"mae": errors["mae"], "rmse": errors["rmse"]}


def listwise_position_bias(
    records: Iterable[PredictionRecord], samples: Iterable[SampleRecord]
) -> dict[str, float | int | None]:
    """How often a listwise answer puts the first-shown user first, against how often that user truly is.

    Over the requests whose answer parsed: ``first_shown_first`` is the share of answers that rank the user
    shown as User1 first, ``first_shown_truly_first`` the share where that user has the group's highest
    relative rating (about 1/n under any random presentation). A model without position preference has the
    two close; always answering ``[1, ...]`` gives 100% against about 1/n.

    >>> record = PredictionRecord("easy", "listwise", "g", "ranking", [1, 2], None, [0.5, -0.5], [4.0, 3.0])
    >>> sample = SampleRecord("g", "easy", "listwise", 0, ["list", 1, 0], "k", ["t"], [[1, 2]], [1, 2], True,
    ...                       None, 0, None, None)
    >>> listwise_position_bias([record], [sample])
    {'first_shown_first': 1.0, 'first_shown_truly_first': 0.0, 'num_listwise_answers': 1}
    """
    references = {record.group_id: record.references for record in records}
    answers = truly = counted = 0
    for sample in samples:
        refs = references.get(sample.group_id)
        if not sample.ok or refs is None:
            continue
        first = ListSlot.shown_order(sample.slot, len(refs))[0]
        counted += 1
        answers += sample.value[0] == 1
        truly += refs[first] == max(refs)
    return {
        "first_shown_first": answers / counted if counted else None,
        "first_shown_truly_first": truly / counted if counted else None,
        "num_listwise_answers": counted,
    }
