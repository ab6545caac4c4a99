"""One number, two paths: the numbers a harness reports through the exported hooks equal `perrecbench
score` of its logged answers, cell by cell; the scored run sits beside the baselines in a report.

These tests write the harness's files as lm-eval and lighteval write them (the hooks compute what the
harness would report); `test_lm_eval.py` and `test_lighteval.py` run the harnesses themselves."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perrec_eval.cli import main
from perrec_eval.harness.export import read_export, rows_of
from perrec_eval.harness.families import adapter
from perrec_eval.harness.lighteval_tasks import Aggregate, stored
from perrec_eval.harness.requests import Selection
from perrec_eval.task import Cell
from tests.perrec_eval.harness import scripted
from tests.perrec_eval.harness.outputs import (
    DATE,
    assert_same,
    cell_metrics,
    scored,
    write_lm_eval_samples,
)

FAMILIES = ("perrecbench", "llmrec", "recbench-plus")


@pytest.fixture(scope="module")
def exported(builds, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export_scores") / "tasks"
    argv = ["export", "lm-eval", *(str(builds[f]) for f in FAMILIES), "--out", str(out), "--max-docs", "6"]
    assert (
        main(
            ["--no-progress", *argv, "--subsets", "easy,hard,rating,direct,explanation,explicit,misinformed"]
        )
        == 0
    )
    return out


@pytest.mark.parametrize("task", FAMILIES)
def test_scores_lm_eval_samples_give_the_harness_numbers(exported, builds, tmp_path, task):
    harness = write_lm_eval_samples(exported, tmp_path / "out", scripted.answer)
    cells = cell_metrics(exported, task)
    values = [v for name in cells for v in harness[name].values()]
    assert any(0 < v < 1 for v in values if v == v)  # answers that make the numbers tell something
    assert assert_same(harness, scored(task, builds[task], tmp_path / "out"), cells) >= len(cells)


@pytest.mark.parametrize("task", ["perrecbench", "llmrec"])
def test_scores_a_limited_run_scores_the_rows_it_answered(exported, builds, tmp_path, task):
    """A harness run with --limit answers some rows (PerRecBench: some requests of a group): both sides
    score the docs answered, a request without an answer failed."""
    keep = lambda row: hashlib.sha256(row["request"].encode()).digest()[0] % 3 != 0  # noqa: E731
    harness = write_lm_eval_samples(exported, tmp_path / "out", scripted.answer, keep)
    cells = cell_metrics(exported, task)
    assert assert_same(harness, scored(task, builds[task], tmp_path / "out"), cells) >= len(cells)


def _details(export: Path, out: Path, task: str) -> dict[str, dict[str, float]]:
    """lighteval's ``--save-details`` files of `task`'s cells answered by `scripted.answer`, and the numbers
    its metric groupings report (`Adapter.read` per row, stored as lighteval's details can hold them,
    `Aggregate` per metric)."""
    folder = out / "details" / "model" / DATE
    folder.mkdir(parents=True)
    values = {}
    for cell in read_export(export)["cells"]:
        if cell["task"] != task:
            continue
        subset, protocol = cell["cell"].split("/")
        rows = rows_of(export, cell["name"]).to_list()
        details, items = [], {}
        for row in rows:
            text = scripted.answer(row)
            result = adapter(task).read(Selection.from_key(row["selection"]), Cell(subset, protocol),
                                        row["doc_id"], json.loads(row["slot"]), text)  # fmt: skip
            result = stored(task, result)
            for metric, item in result.items():
                items.setdefault(metric, []).append(item)
            details.append({"doc": {"specific": row, "generation_size": cell["max_new_tokens"]},
                            "model_response": {"text": [text]}, "metric": result})  # fmt: skip
        short = cell["name"][len(cell["group"]) + 1 :]
        pq.write_table(
            pa.Table.from_pylist(details), folder / f"details_{cell['group']}:{short}|0_{DATE}.parquet"
        )
        values[cell["name"]] = {}
        for metric, metric_items in items.items():
            value = Aggregate(task, metric)(metric_items)
            values[cell["name"]] |= value if isinstance(value, dict) else {metric: value}
    return values


@pytest.mark.parametrize("task", FAMILIES)
def test_scores_lighteval_details_give_the_harness_numbers(exported, builds, tmp_path, task):
    harness = _details(exported, tmp_path / "out", task)
    cells = cell_metrics(exported, task)
    assert assert_same(harness, scored(task, builds[task], tmp_path / "out"), cells) >= len(cells)


def test_scores_run_folder_sits_beside_the_baselines_in_a_report(exported, builds, tmp_path):
    write_lm_eval_samples(exported, tmp_path / "out", scripted.answer)
    runs = tmp_path / "runs"
    common = ["--no-progress", "--data", str(builds["perrecbench"])]
    assert main(["score", *common, "--predictions", str(tmp_path / "out"), "--out", str(runs / "h"),
                 "--label", "tiny-lm-eval"]) == 0  # fmt: skip
    assert main(["evaluate", *common, "--engine", "baseline", "--model", "constant", "--levels", "easy,hard",
                 "--max-groups", "6", "--out", str(runs / "b")]) == 0  # fmt: skip
    assert (
        main(["--no-progress", "report", str(runs / "h"), str(runs / "b"), "--out", str(tmp_path / "r")]) == 0
    )
    board = (tmp_path / "r" / "leaderboard.md").read_text()
    table = board[board.index("## PerRecBench") :].split("\n## ")[0]
    assert "| tiny-lm-eval |" in table and "| constant |" in table  # one table: the same groups and build
    info = json.loads((runs / "h" / "run.json").read_text())
    assert info["engine"]["name"] == "lm-eval" and info["config"]["pairwise_strategy"] == "allpairs"


def test_scores_general_run_folder_sits_beside_the_baselines(exported, builds, tmp_path):
    write_lm_eval_samples(exported, tmp_path / "out", scripted.answer)
    runs, data = tmp_path / "runs", ["--task", "llmrec", "--data", str(builds["llmrec"])]
    assert main(["--no-progress", "score", *data, "--predictions", str(tmp_path / "out"), "--out",
                 str(runs / "h"), "--label", "tiny-lm-eval"]) == 0  # fmt: skip
    assert main(["--no-progress", "evaluate", *data, "--engine", "baseline", "--model", "popularity",
                 "--subsets", "direct", "--max-docs", "6", "--out", str(runs / "b")]) == 0  # fmt: skip
    assert (
        main(["--no-progress", "report", str(runs / "h"), str(runs / "b"), "--out", str(tmp_path / "r")]) == 0
    )
    board = (tmp_path / "r" / "leaderboard.md").read_text()
    assert "| tiny-lm-eval |" in board and "| popularity |" in board


def test_scores_refuse_answers_of_another_build_or_with_a_selection_of_their_own(
    exported, builds, tmp_path, capsys
):
    write_lm_eval_samples(exported, tmp_path / "out", scripted.answer)
    argv = ["score", "--task", "llmrec", "--predictions", str(tmp_path / "out")]
    assert main([*argv, "--data", str(builds["llmrec"]), "--max-docs", "2"]) == 2
    assert "--max-docs: a harness's answers carry their cells and docs" in capsys.readouterr().err
    assert main(["score", "--data", str(builds["recbench-plus"]), "--predictions", str(tmp_path / "out"),
                 "--task", "recbench-plus", "--json"]) == 0  # fmt: skip
    capsys.readouterr()
    other = tmp_path / "other"
    shutil.copytree(builds["llmrec"], other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["parameters"]["seed"] += 1
    (other / "manifest.json").write_text(json.dumps(manifest))
    assert main([*argv, "--data", str(other)]) == 2
    assert "answers the build" in capsys.readouterr().err


def test_scores_refuse_a_few_shot_run_and_a_folder_of_two_runs(exported, builds, tmp_path, capsys):
    out = tmp_path / "out"
    write_lm_eval_samples(exported, out, scripted.answer)
    (out / f"results_{DATE}.json").write_text(
        json.dumps({"n-shot": {"llmrec_rating": 2}, "chat_template": "x"})
    )
    argv = ["score", "--task", "llmrec", "--data", str(builds["llmrec"]), "--predictions", str(out)]
    assert main(argv) == 2
    assert "the exported tasks are zero-shot" in capsys.readouterr().err
    (out / f"results_{DATE}.json").unlink()
    first = next(out.glob("samples_llmrec_rating_*.jsonl"))
    first.rename(out / "samples_llmrec_rating_2026-02-02T00-00-00.000000.jsonl")
    assert main(argv) == 2
    assert "holds the answers of 2 runs" in capsys.readouterr().err
