"""The task registry: families by name, loaded on use; `perrecbench tasks`; `--task` on every command."""

from __future__ import annotations

import json

import pytest

from perrec_eval import registry
from perrec_eval.cli import main
from perrec_eval.errors import ConfigError
from perrec_eval.task import Cell


def test_registry_default_is_perrecbench_with_nine_cells():
    task = registry.get(registry.DEFAULT_TASK)
    assert task.name == "perrecbench"
    assert [str(cell) for cell in task.cells()][:3] == ["easy/pointwise", "easy/pairwise", "easy/listwise"]
    assert len(task.cells()) == 9
    assert task.cells(["hard"], ["listwise"]) == (Cell("hard", "listwise"),)
    assert task.headline.name == "ptc" and task.headline.higher_is_better


def test_registry_unknown_task_is_one_line_naming_the_known_ones():
    with pytest.raises(ConfigError, match="unknown task 'llmrecc'.*perrecbench"):
        registry.get("llmrecc")


def test_registry_answer_formats_resolve_through_the_family():
    assert registry.answer_regex("pairwise") == r"\[User [AB]\]"
    assert registry.json_schema("listwise:3")["properties"]["predicted_ranking"]["maxItems"] == 3
    assert registry.answer_regex("rating") == r"([1-4](\.[0-9])?|5(\.0)?)"  # LLMRec's: 1 to 5
    assert registry.json_schema("rating") == {"type": "number", "minimum": 1, "maximum": 5}
    with pytest.raises(ValueError, match="names no protocol"):
        registry.answer_regex("nope")


def test_registry_refuses_a_second_family_with_a_protocol_name_taken():
    import dataclasses

    clash = dataclasses.replace(registry.get("perrecbench"), name="clash")
    with pytest.raises(ValueError, match="protocol 'pointwise' is declared by tasks perrecbench and clash"):
        registry.register(clash)
    assert "clash" not in registry.names()


def test_tasks_command_lists_cells_metrics_and_baselines(capsys):
    assert main(["tasks"]) == 0
    out = capsys.readouterr().out
    assert "level (easy, medium, hard) × method (pointwise, pairwise, listwise)" in out
    assert "ptc (higher is better, mean)" in out and "item-knn" in out
    assert main(["tasks", "--json"]) == 0
    described = json.loads(capsys.readouterr().out)[0]  # the default family first, then the others
    assert described["name"] == "perrecbench"
    assert described["methods"] == ["pointwise", "pairwise", "listwise"]


@pytest.mark.parametrize(
    "argv",
    [
        ["evaluate", "--data", "x", "--out", "y", "--engine", "fake", "--model", "constant"],
        ["score", "run"],
        ["report", "run"],
    ],
)
def test_task_flag_refuses_an_unknown_family_in_one_line(argv, capsys):
    assert main([*argv, "--task", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown task 'nope'" in err[0]
