"""A harness's outputs for the tests: its per-cell numbers (from its results file, or computed by the
hooks it calls) and `perrecbench score`'s numbers of its logged answers, keyed alike for comparing."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable, Mapping
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from perrec_eval.cli import main
from perrec_eval.harness import lmeval_tasks
from perrec_eval.harness.export import read_export, rows_of

DATE = "2026-01-02T03-04-05.678901"


def write_lm_eval_samples(
    export: Path, out: Path, answer: Callable[[dict], str], keep: Callable[[dict], bool] = lambda row: True
) -> dict[str, dict[str, float]]:
    """lm-eval's ``--log_samples`` files of a run answering each kept row with `answer`, and the numbers
    that run reports (each row through `process_results`, each metric through its `aggregation`)."""
    out.mkdir(parents=True, exist_ok=True)
    values = {}
    for cell in read_export(export)["cells"]:
        items: dict[str, list[Any]] = {}
        lines = []
        for number, row in enumerate(rows_of(export, cell["name"]).to_list()):
            if not keep(row):
                continue
            text = answer(row)
            result = lmeval_tasks.process_results(row, [text])
            for metric, item in result.items():
                items.setdefault(metric, []).append(item)
            arguments = {
                "gen_args_0": {"arg_0": "<prompt>", "arg_1": {"max_gen_toks": cell["max_new_tokens"]}}
            }
            lines.append(
                {"doc_id": number, "doc": row, "target": "", "arguments": arguments, "resps": [[text]],
                 "filtered_resps": [text], "filter": "none", "metrics": list(result), **result}
            )  # fmt: skip
        if lines:
            path = out / f"samples_{cell['name']}_{DATE}.jsonl"
            path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
            values[cell["name"]] = {m: lmeval_tasks.aggregate(cell["task"], m, v) for m, v in items.items()}
    return values


def lm_eval_results(out: Path) -> dict[str, dict[str, float]]:
    """The per-task metrics of lm-eval's results file in `out` (``metric,none`` keys)."""
    (path,) = out.rglob("results_*.json")
    results = json.loads(path.read_text())["results"]
    return {
        task: {
            key.split(",")[0]: value
            for key, value in metrics.items()
            if key.endswith(",none") and "_stderr" not in key
        }
        for task, metrics in results.items()
    }


def lighteval_results(out: Path) -> dict[str, dict[str, float]]:
    """The per-task metrics of lighteval's results file in `out`, keyed by the export's cell names."""
    (path,) = out.rglob("results_*.json")
    results = json.loads(path.read_text())["results"]
    named = {}
    for task, metrics in results.items():
        name = task.rpartition("|")[0]
        if ":" in name and not name.endswith(":_average"):
            group, _, short = name.partition(":")
            named[f"{group}_{short}"] = {k: v for k, v in metrics.items() if not k.endswith("_stderr")}
    return named


def scored(task: str, build: Path, predictions: Path, *extra: str) -> dict[str, dict[str, float | None]]:
    """`perrecbench score --predictions` of a harness's answers: each cell's metrics, by the export's name."""
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        code = main(["--no-progress", "score", "--task", task, "--data", str(build), "--predictions",
                     str(predictions), "--json", *extra])  # fmt: skip
    assert code == 0
    scores = json.loads(buffer.getvalue())
    group = task.replace("-", "_")
    out = {}
    for cell in scores["cells"]:  # every family's scores in the shared layout (PerRecBench: level/method)
        subset, protocol = cell["subset"], cell["protocol"]
        short = subset if subset == protocol else f"{subset}_{protocol}"
        out[f"{group}_{short}".replace("-", "_")] = {m: v["value"] for m, v in cell["metrics"].items()}
    return out


def cell_metrics(export: Path, task: str) -> dict[str, list[str]]:
    """The harness names of `task`'s exported cells, each with its metrics."""
    cells = read_export(export)["cells"]
    return {cell["name"]: [m["name"] for m in cell["metrics"]] for cell in cells if cell["task"] == task}


def assert_same(
    harness: Mapping[str, Mapping[str, float]],
    ours: Mapping[str, Mapping[str, Any]],
    cells: Mapping[str, list[str]],
) -> int:
    """Each metric of each cell in `cells` the harness reports is the same in `ours`, to 1e-9 (a harness's
    NaN is this project's None or a metric its scores leave out: undefined on those docs). Returns how many
    values were compared."""
    compared = 0
    for name, metrics in cells.items():
        if name not in harness:
            continue
        assert name in ours, (name, sorted(ours))
        for metric in metrics:
            value, mine = harness[name][metric], ours[name].get(metric)  # absent: no value on these docs
            if mine is None or (isinstance(value, float) and math.isnan(value)):
                assert mine is None and math.isnan(value), (name, metric, value, mine)
            else:
                assert abs(value - mine) <= 1e-9, (name, metric, value, mine)
            compared += 1
    return compared
