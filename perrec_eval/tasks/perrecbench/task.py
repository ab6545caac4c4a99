"""PerRecBench as a task family: groups of 2-4 users who reviewed one item, ranked by how much each liked it.

Docs are groups (cluster: the query item, when a large-preset build draws several groups of one item);
cells are level × method; the headline metric is PTC, the mean Kendall tau over groups.
"""

from __future__ import annotations

from perrec_eval.stats import MetricSpec, rmse
from perrec_eval.task import Task
from perrec_eval.tasks.perrecbench import structured
from perrec_eval.tasks.perrecbench.baselines import BASELINES
from perrec_eval.tasks.perrecbench.cf import CF_BASELINES
from perrec_eval.tasks.perrecbench.fake import constant_answer
from perrec_eval.tasks.perrecbench.protocols import PROTOCOLS
from perrec_eval.tasks.perrecbench.results import Metric
from perrec_eval.tasks.perrecbench.vocabulary import LEVELS


def _answer_formats(spec: str) -> tuple[str, dict | None]:
    return structured.answer_regex(spec), structured.json_schema(spec)


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
    # Its own commands: files byte-identical to the ones PerRecBench always wrote.
    handlers={
        command: f"perrec_eval.tasks.perrecbench.commands:{config}:{command}"
        for command, config in (
            ("evaluate", "EvalConfig"),
            ("score", "ScoreConfig"),
            ("profiles", "ProfilesConfig"),
        )
    },
)
