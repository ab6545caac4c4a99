"""PerRecBench as a task family: groups of 2-4 users who reviewed one item, ranked by how much each liked it.

Docs are groups (cluster: the query item, when a large-preset build draws several groups of one item);
cells are level × method; the headline metric is PTC, the mean Kendall tau over groups.
"""

from __future__ import annotations

from typing import Any

from perrec_eval.stats import MetricSpec, rmse
from perrec_eval.task import Task
from perrec_eval.tasks.perrecbench import structured
from perrec_eval.tasks.perrecbench.baselines import BASELINES
from perrec_eval.tasks.perrecbench.cf import CF_BASELINES
from perrec_eval.tasks.perrecbench.fake import constant_answer
from perrec_eval.tasks.perrecbench.leaderboard import hooks
from perrec_eval.tasks.perrecbench.protocols import PROTOCOLS
from perrec_eval.tasks.perrecbench.results import Metric, legacy_scores
from perrec_eval.tasks.perrecbench.rundir import doc_predictions
from perrec_eval.tasks.perrecbench.vocabulary import LEVELS


def _answer_formats(spec: str) -> tuple[str, dict | None]:
    return structured.answer_regex(spec), structured.json_schema(spec)


def _score_doc(metric: str, prediction: Any, truth: Any) -> float | None:
    """A group's tau under its run's metric (`rundir.GroupAnswer`); the other metrics are over users."""
    if metric != "ptc" or prediction is None:
        return None
    return prediction.tau


def _fingerprint(data: str) -> str:
    from perrec_eval.tasks.perrecbench.context import dataset_fingerprint

    return dataset_fingerprint(data)


TASK = Task(
    name="perrecbench",
    title="PerRecBench",
    description="groups of 2-4 users who reviewed the same item, ranked by how much each liked it "
    "(relative to their own average rating); PTC = Kendall's tau against the true order",
    subset_axis="level",
    protocol_axis="method",
    subsets=LEVELS,
    protocols=PROTOCOLS,
    metrics=(
        MetricSpec(name="ptc", higher_is_better=True),
        MetricSpec(name="mae", higher_is_better=False),
        MetricSpec(name="rmse", higher_is_better=False, aggregation="corpus", corpus=rmse),
    ),
    baselines=(*BASELINES, *CF_BASELINES),
    builder="dataset_builder.perrecbench",
    answer_formats=_answer_formats,
    constant_answer=constant_answer,
    hub_description=(
        "Can LLMs understand personal preferences once rating bias and item quality are removed? Each "
        "group holds users who rated the same item at about the same time; a model ranks them by how "
        "much each liked it. Score: PTC, Kendall's tau between the predicted and the true order, "
        "averaged over groups (-1 to 1). One task per level (config) and ranking method."
    ),
    read_metric=Metric.from_json,
    score_doc=_score_doc,
    legacy_scores=legacy_scores,
    read_predictions=doc_predictions,
    harness="perrec_eval.tasks.perrecbench.harness:ADAPTER",
    fingerprint=_fingerprint,
    report=hooks,
    average_over="cells",
    summary=(("ptc", "average"),),
    evaluate="perrec_eval.tasks.perrecbench.run:evaluate_any",
    selection=("split", "levels", "max_groups", "seed"),
    # every level and method on the paper's 200 test groups per level (docs/suites.md: the hour's arithmetic)
    suite_defaults={"limit": 200},
    suite_build={"with_interactions": True},
    # Its own commands: its rankers, profiles and prediction records (scores in the shared layout).
    handlers={
        command: f"perrec_eval.tasks.perrecbench.commands:{config}:{command}"
        for command, config in (
            ("evaluate", "EvalConfig"),
            ("score", "ScoreConfig"),
            ("profiles", "ProfilesConfig"),
            ("sweep", "SweepConfig"),
        )
    }
    | {"sft data": "sft.perrecbench.cli:DataConfig:run_data"},
)
