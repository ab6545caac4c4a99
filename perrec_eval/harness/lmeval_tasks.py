"""lm-evaluation-harness tasks of an export: their YAML and hooks (`perrecbench export lm-eval`).

The export folder holds, beside its rows and export.json, one folder per family: a YAML task per cell, the
family's group (``_<family>.yaml``: ``perrecbench``, ``llmrec``, ``recbench_plus``, averaging the
family's headline over its cells as this project's reports do) and a ``utils.py`` whose ``!function``
hooks call the functions below; ``_perrecbench_suite.yaml`` groups the families. ``lm_eval
--include_path DIR --tasks perrecbench --apply_chat_template`` (or ``TaskManager(include_path=DIR)``) finds
them. Each task's rows are its requests: ``description: system`` and ``doc_to_text: prompt`` give the system
and user messages `perrecbench evaluate` sends (with ``--apply_chat_template``); ``process_results`` reads
an answer with the family's reader and ``aggregation`` values the cell with its scorer. This module imports
no lm_eval: the hooks run inside it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from perrec_eval.harness.export import SUITE_GROUP, rows_of
from perrec_eval.harness.families import adapter
from perrec_eval.harness.requests import SCHEMA, Selection
from perrec_eval.registry import get
from perrec_eval.task import Cell

UTILS = "utils.py"


def dataset(export: str | Path, name: str) -> dict[str, Any]:
    """The rows of the exported cell `name` as lm-eval's ``custom_dataset`` returns them."""
    return {"test": rows_of(export, name)}


def process_results(doc: Mapping[str, Any], results: Sequence[str]) -> dict[str, Any]:
    """One row's answer read by its family's reader: each metric's item (`Adapter.read`)."""
    task_name, subset, protocol = doc["cell"].split("/")
    selection = Selection.from_key(doc["selection"])
    text = results[0] if results else None
    return adapter(task_name).read(
        selection, Cell(subset, protocol), doc["doc_id"], json.loads(doc["slot"]), text
    )


def aggregate(task_name: str, metric: str, items: Sequence[Any]) -> float:
    """A cell's value of `metric` by its family's scorer (`Adapter.aggregate`)."""
    return adapter(task_name).aggregate(metric, items)


def function_name(metric: str) -> str:
    """The hook of a metric's aggregation in utils.py.

    >>> function_name("ndcg@10")
    'aggregate_ndcg_10'
    """
    return "aggregate_" + re.sub(r"[^0-9A-Za-z_]", "_", metric)


def write(folder: Path, record: Mapping[str, Any]) -> list[str]:
    """The task files of an export into `folder` (its rows and export.json already there); returns the
    group names, the suite's last."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for cell in record["cells"]:
        groups.setdefault(cell["task"], []).append(cell)
    for task_name, cells in groups.items():
        group = cells[0]["group"]
        where = folder / group
        where.mkdir(parents=True, exist_ok=True)
        metrics = list(dict.fromkeys(m["name"] for cell in cells for m in cell["metrics"]))
        (where / UTILS).write_text(_utils(task_name, metrics), encoding="utf-8")
        for cell in cells:
            _dump(where / f"{cell['name']}.yaml", _task(cell))
        headline = get(task_name).headline
        subtasks = [cell["name"] for cell in cells]
        group_config = {"group": group, "task": subtasks}
        if any(headline.name == m["name"] for cell in cells for m in cell["metrics"]):
            group_config["aggregate_metric_list"] = [
                {"metric": headline.name, "aggregation": "mean", "weight_by_size": False}
            ]
        _dump(where / f"_{group}.yaml", {**group_config, "metadata": {"version": SCHEMA}})
    names = [cells[0]["group"] for cells in groups.values()]
    _dump(
        folder / f"_{SUITE_GROUP}.yaml",
        {"group": SUITE_GROUP, "task": names, "metadata": {"version": SCHEMA}},
    )
    return [*names, SUITE_GROUP]


def _task(cell: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "task": cell["name"],
        "custom_dataset": _Function("utils.dataset"),
        "dataset_kwargs": {"perrecbench_cell": cell["name"]},
        "test_split": "test",
        "output_type": "generate_until",
        "description": "system",
        "doc_to_text": "prompt",
        "doc_to_target": "",
        "process_results": _Function("utils.process_results"),
        "metric_list": [
            {
                "metric": metric["name"],
                "aggregation": _Function(f"utils.{function_name(metric['name'])}"),
                "higher_is_better": metric["higher_is_better"],
            }
            for metric in cell["metrics"]
        ],
        "generation_kwargs": {
            "until": [],
            "do_sample": False,
            "temperature": 0.0,
            "max_gen_toks": cell["max_new_tokens"],
        },
        "num_fewshot": 0,
        "metadata": {"version": SCHEMA, "cell": cell["cell"], "rows": cell["rows"], "docs": cell["docs"]},
    }


def _utils(task_name: str, metrics: Sequence[str]) -> str:
    aggregations = "".join(
        f"\n\ndef {function_name(metric)}(items):\n"
        f"    return hooks.aggregate({task_name!r}, {metric!r}, items)\n"
        for metric in metrics
    )
    return f'''"""Hooks of the exported {task_name} tasks, written by `perrecbench export lm-eval`: its rows,
readers and scorers (perrec_eval.harness.lmeval_tasks)."""

from pathlib import Path

from perrec_eval.harness import lmeval_tasks as hooks

EXPORT = Path(__file__).resolve().parent.parent


def dataset(perrecbench_cell, **metadata):
    return hooks.dataset(EXPORT, perrecbench_cell)


def process_results(doc, results):
    return hooks.process_results(doc, results)
{aggregations}'''


class _Function(str):
    """A ``!function NAME`` hook in a task's YAML."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Function, lambda dumper, value: dumper.represent_scalar("!function", str(value)))


def _dump(path: Path, data: Mapping[str, Any]) -> None:
    path.write_text(
        yaml.dump(dict(data), Dumper=_Dumper, sort_keys=False, allow_unicode=True), encoding="utf-8"
    )


def owned(path: Any) -> bool:
    """Whether a path in an lm-eval export folder is one the export writes."""
    from perrec_eval.harness.export import is_export_file

    parts = path.parts
    return is_export_file(path) or (
        (len(parts) == 1 and path.suffix == ".yaml")
        or (len(parts) == 2 and (path.suffix == ".yaml" or path.name == UTILS))
        or (len(parts) >= 2 and "__pycache__" in parts)
    )
