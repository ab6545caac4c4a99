"""Another system's PerRecBench predictions, scored like a run (`perrecbench score --data BUILD --predictions
FILE.jsonl`): the same PTC, intervals and paired tests, in a run folder that reports compare with the
baselines and model runs on the same groups.

A line is ``{"config": LEVEL, "id": GROUP_ID, "prediction": VALUE}``: VALUE is one score per user of the
group, in the order the build lists them (higher: preferred; a predicted rating is one), or ``{"ranking":
[...]}``, the group's users best first as 1-based positions in that order; null is a group the system left
out (it counts as failed). A system's scores are what a pointwise model gives, so they are scored in the
pointwise column of each level, beside the no-LLM baselines. Predictions that repeat the test split's own
ratings are the labels read back, not a prediction: they are flagged in the run and its reports.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perrec_eval.errors import DataError
from perrec_eval.tasks.perrecbench.config import ScoreConfig
from perrec_eval.tasks.perrecbench.records import Group, PredictionRecord
from perrec_eval.tasks.perrecbench.vocabulary import LEVELS

METHOD = "pointwise"  # the column a system's per-user scores are scored in (where the baselines are)
ENGINE = "predictions"  # run.json's engine name of a run scored from a predictions file
# Share of groups whose scores repeat the test ratings (or their relative ratings) from which a file is
# flagged: a system that predicts does not reproduce the labels group after group.
LEAK_SHARE = 0.8


def scores_of(group: Group, value: Any) -> list[float]:
    """A group's per-user scores from a line's VALUE (a ranking becomes n - position).

    Raises:
        ValueError: not one number per user, or not a ranking of the group's users; the message names the
            expected form.

    >>> from types import SimpleNamespace
    >>> group = SimpleNamespace(users=[0, 1, 2])
    >>> scores_of(group, [3.0, 5, 1]), scores_of(group, {"ranking": [2, 1, 3]})
    ([3.0, 5.0, 1.0], [2.0, 3.0, 1.0])
    """
    n = len(group.users)
    if isinstance(value, Mapping) and set(value) == {"ranking"}:
        ranking = value["ranking"]
        if not isinstance(ranking, list) or sorted(ranking) != list(range(1, n + 1)):
            raise ValueError(f"a ranking lists each of the group's {n} users once, as 1..{n}, best first")
        return [float(n - ranking.index(i + 1)) for i in range(n)]
    if isinstance(value, list) and len(value) == n and all(_number(v) for v in value):
        return [float(v) for v in value]
    raise ValueError(
        f'give one score per user ({n} numbers, the group\'s order) or {{"ranking": [...]}} of 1..{n}'
    )


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def read_file(config: ScoreConfig) -> tuple[dict[str, list[Group]], list[PredictionRecord], float]:
    """The groups of every level the file names (a seeded sample of --limit of each) and a record per group
    (None where the file gives no prediction), and the share of scored groups that repeat the test labels.

    Raises:
        DataError: a line that is not such an object, an unknown level or group, a group given twice, a
            value of the wrong shape; the message names the line and the fix.
    """
    from dataset_builder.manifest import check_files
    from perrec_eval.evaluation import line_values, prediction_lines
    from perrec_eval.tasks.perrecbench.context import load_groups

    assert config.data is not None and config.predictions is not None
    check_files(config.data)  # the build the predictions are scored against, as `evaluate` checks it
    lines = prediction_lines(config.predictions)
    levels = [level for level in LEVELS if any(line.subset == level for line in lines)]
    for line in lines:
        if line.subset not in LEVELS:
            raise DataError(
                f"{config.predictions} line {line.number}: PerRecBench has no level {line.subset!r}: use one "
                f"of {', '.join(LEVELS)}"
            )
    groups = {
        level: load_groups(config.data, level, config.split, config.limit, seed=config.seed, history=False)
        for level in levels
    }
    every = {level: {g.group_id for g in load_groups(config.data, level, config.split, history=False)}
             for level in levels} if config.limit is not None else None  # fmt: skip
    by_id = {level: {g.group_id: g for g in level_groups} for level, level_groups in groups.items()}
    if every is not None:  # groups outside the --limit sample are left out, as `evaluate --limit` does
        lines = [line for line in lines if line.id in by_id[line.subset] or line.id not in every[line.subset]]
    values = line_values(
        config.predictions,
        lines,
        by_id,
        lambda _, group, value: None if value is None else scores_of(group, value),
        where=(config.data, config.split, "level", "group", "group_id"),
    )
    from perrec_eval.tasks.perrecbench.scoring import prediction_records

    records: list[PredictionRecord] = []
    leaked = scored = 0
    for level, level_groups in groups.items():
        answers = {g.group_id: _Prediction(values.get((level, g.group_id))) for g in level_groups}
        records += prediction_records(level, METHOD, level_groups, answers)  # clusters as evaluate's
        for group in level_groups:
            scores = answers[group.group_id].value
            if scores is not None:
                scored += 1
                labels = (list(map(float, group.ratings)), list(map(float, group.relative_ratings)))
                leaked += scores in labels
    return groups, records, leaked / scored if scored else 0.0


def score_file(config: ScoreConfig) -> tuple[Any, Any]:
    """The scores of `config.predictions` on the build `config.data` (written as a run into `config.out`),
    and the run as the shared reports load one (`family.FamilyRun`)."""
    from perrec_eval.lock import folder_lock
    from perrec_eval.results import RunInfo
    from perrec_eval.rundir import check_out, claim, versions
    from perrec_eval.secrets import redact
    from perrec_eval.tasks.perrecbench import report
    from perrec_eval.tasks.perrecbench.context import dataset_fingerprint
    from perrec_eval.tasks.perrecbench.results import Metric
    from perrec_eval.tasks.perrecbench.scoring import score_cells

    assert config.predictions is not None and config.data is not None
    label = config.label or Path(config.predictions).stem
    variant, invalid = config.variant or "tau_b", config.invalid or "zero"
    record = redact({**dataclasses.asdict(config), "methods": [METHOD]})
    record.pop("json", None)

    def scored() -> tuple[Any, Any, list[PredictionRecord]]:
        groups, records, leaked = read_file(config)
        scores = score_cells(records, variant=variant, invalid=invalid, seed=config.seed)
        engine = {"name": ENGINE, "model": label, "file": Path(config.predictions).name}
        if leaked >= LEAK_SHARE:
            engine["warning"] = (
                f"{leaked:.0%} of its groups' scores repeat the test split's own ratings: the labels read "
                "back, not predicted (a system may read the users' histories, never their test ratings)"
            )
            print(f"perrecbench score: {label}: {engine['warning']}", file=sys.stderr)
        info = RunInfo(
            config=record,
            metric=Metric(variant, invalid),
            engine=engine,
            versions=versions("perrecbench"),
            dataset_fingerprint=dataset_fingerprint(config.data),
            groups={level: [g.group_id for g in level_groups] for level, level_groups in groups.items()},
            label=label,
        )
        return scores, RunInfo.from_json(redact(info.to_json())), records

    if config.out is None:
        scores, info, records = scored()
        return scores, report.family_run(Path(label), info, scores, records)
    out = Path(config.out)
    check_out(config.out, {"--data": config.data, "--predictions": config.predictions}, command="score")
    with folder_lock(out):
        claim(out, record, overwrite=config.overwrite)
        scores, info, records = scored()
        out.mkdir(parents=True, exist_ok=True)
        report.write_scored(out, info, scores, records)
    return scores, report.family_run(out, info, scores, records)


@dataclasses.dataclass(frozen=True, slots=True)
class _Prediction:
    """A group's answer as `scoring.prediction_records` reads one (a ranker's `Prediction`)."""

    value: list[float] | None
    format: str = "scores"
    predicted_ratings: list[float | None] | None = None
