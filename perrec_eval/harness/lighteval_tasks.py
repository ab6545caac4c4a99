"""lighteval custom tasks of an export (`perrecbench export lighteval`).

The tasks file holds two lines that call `tasks_table` on its rows folder: one `LightevalTaskConfig` per
cell, named ``<family>:<cell>`` (``perrecbench:easy_pointwise``: ``perrecbench`` runs every cell of the
family) and again ``perrecbench_suite:<family>_<cell>`` (every cell of every family). A row's prompt is
its request: lighteval has no per-task system message, so the system text opens the user message. Each
cell has one metric grouping: its sample-level function reads an answer with the family's reader
(`Adapter.read`), its corpus-level functions value the cell with the family's scorer
(`Adapter.aggregate`). PerRecBench's rows are requests, not groups: its corpus functions return their
values as a dict, so lighteval bootstraps no standard error over rows (this project's report gives the
intervals over groups).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perrec_eval.harness.export import SUITE_GROUP, read_export
from perrec_eval.harness.families import adapter
from perrec_eval.harness.requests import SCHEMA, Selection
from perrec_eval.task import Cell

MARKER = '"""lighteval custom tasks written by `perrecbench export lighteval`'
PER_ROW = "perrecbench"  # the family whose rows are requests, not docs


def module_text(rows: str) -> str:
    """The custom tasks file of an export whose rows folder is `rows` (beside the file)."""
    return f'''{MARKER}: this project's cells, read and
scored by perrecbench (perrec_eval.harness.lighteval_tasks); the rows are in {rows}/ beside this file."""

from pathlib import Path

from perrec_eval.harness.lighteval_tasks import tasks_table

TASKS_TABLE = tasks_table(Path(__file__).resolve().with_name({rows!r}))
'''


def is_tasks_file(path: Path) -> bool:
    """Whether `path` is a tasks file an export wrote."""
    with path.open(encoding="utf-8") as handle:
        return handle.read(len(MARKER)) == MARKER


def prompt(line: Mapping[str, Any], task_name: str | None = None) -> Any:
    """A row as lighteval's `Doc`: its system text, then its user message, as one query; the row itself
    in `specific` (what the details keep and `perrecbench score` reads back)."""
    from lighteval.tasks.requests import Doc

    if line.get("__few_shots"):
        raise ValueError(f"{task_name}: the perrecbench tasks are zero-shot: run TASK|0")
    query = f"{line['system']}\n\n{line['prompt']}" if line["system"] else line["prompt"]
    row = {key: value for key, value in line.items() if not key.startswith("__")}
    return Doc(query=query, choices=[""], gold_index=0, specific=row, task_name=task_name or "")


def stored(task_name: str, items: Mapping[str, Any]) -> dict[str, Any]:
    """A row's items as lighteval's details store them (a parquet column each): a per-doc mean's value as it
    is, any other item as JSON (BLEU's hold integers wider than 64 bits; PerRecBench's name their group)."""
    return {
        metric: item if _per_doc_mean(task_name, metric) else json.dumps(item)
        for metric, item in items.items()
    }


class Aggregate:
    """A cell's corpus-level value of one metric by its family's scorer, from the rows' `stored` items
    (picklable: lighteval's bootstrap runs it in worker processes)."""

    def __init__(self, task_name: str, metric: str) -> None:
        self.task_name, self.metric = task_name, metric
        self.mean = _per_doc_mean(task_name, metric)
        # lighteval takes a standard error of the mean for a function named so (per-doc values)
        self.__name__ = f"perrecbench_{'mean' if self.mean else 'corpus'}_{metric}"

    def __call__(self, items: Sequence[Any]) -> float | dict[str, float]:
        items = items if self.mean else [json.loads(item) for item in items]
        value = adapter(self.task_name).aggregate(self.metric, items)
        return {self.metric: value} if self.task_name == PER_ROW else value


def _per_doc_mean(task_name: str, metric: str) -> bool:
    from perrec_eval.registry import get

    spec = next(m for m in get(task_name).metrics if m.name == metric)
    return task_name != PER_ROW and spec.aggregation == "mean"


def _grouping(cell: Mapping[str, Any]) -> Any:
    from lighteval.metrics.metrics_sample import SampleLevelComputation
    from lighteval.metrics.utils.metric_utils import (
        CorpusLevelMetricGrouping,
        SampleLevelMetricGrouping,
    )
    from lighteval.tasks.requests import SamplingMethod

    class ReadRow(SampleLevelComputation):
        """One answer read by the family's reader: each metric's item."""

        def compute(self, doc: Any, model_response: Any, **kwargs: Any) -> dict[str, Any]:
            row = doc.specific
            task_name, subset, protocol = row["cell"].split("/")
            text = model_response.text[0] if model_response.text else None
            selection = Selection.from_key(row["selection"])
            items = adapter(task_name).read(
                selection, Cell(subset, protocol), row["doc_id"], json.loads(row["slot"]), text
            )
            return stored(task_name, items)

    names = [metric["name"] for metric in cell["metrics"]]
    kind = CorpusLevelMetricGrouping if cell["task"] == PER_ROW else SampleLevelMetricGrouping
    return kind(
        metric_name=names,
        higher_is_better={m["name"]: m["higher_is_better"] for m in cell["metrics"]},
        category=SamplingMethod.GENERATIVE,
        sample_level_fn=ReadRow(),
        corpus_level_fn={name: Aggregate(cell["task"], name) for name in names},
    )


def tasks_table(rows: str | Path) -> list[Any]:
    """The `LightevalTaskConfig` of every exported cell, under its family's name and the suite's."""
    from lighteval.tasks.lighteval_task import LightevalTaskConfig

    record = read_export(rows)
    table = []
    for cell in record["cells"]:
        short = cell["name"][len(cell["group"]) + 1 :]
        for name in (f"{cell['group']}:{short}", f"{SUITE_GROUP}:{cell['name']}"):
            table.append(
                LightevalTaskConfig(
                    name=name,
                    prompt_function=prompt,
                    hf_repo=str(rows),
                    hf_subset=cell["name"],
                    metrics=[_grouping(cell)],
                    hf_avail_splits=["test"],
                    evaluation_splits=["test"],
                    few_shots_split=None,
                    generation_size=cell["max_new_tokens"],
                    stop_sequence=[],
                    version=SCHEMA,
                )
            )
    return table
