"""The first hour of an outside system and a real model: the trips a newcomer met, each replayed."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from perrec_eval.cli import main

REPO = Path(__file__).resolve().parents[1]
CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"
PAGES = ["README.md", "docs/engines.md", "docs/fine-tuning.md"]


def _make_n(*args: str) -> str:
    """What make would run, by the Makefile's own defaults (.ci/run exports TORCH_INDEX= for CI)."""
    command = ["make", "-s", "-n", "-f", str(REPO / "Makefile"), *args]
    env = {name: value for name, value in os.environ.items() if name != "TORCH_INDEX"}
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("page", PAGES)
def test_first_hour_torch_install_command_names_pytorchs_cpu_index(page):
    """From PyPI, torch==2.13.0 is the CUDA build on Linux: the CPU wheels come from PyTorch's own index."""
    text = " ".join((REPO / page).read_text(encoding="utf-8").split())
    commands = re.findall(r"pip install torch==2\.13\.0[^`]*", text)
    assert commands, page
    assert any(CPU_INDEX in command for command in commands), (page, commands)


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_first_hour_make_installs_torch_from_the_cpu_index_or_the_one_named():
    assert f"pip install -q torch==2.13.0 {CPU_INDEX}" in _make_n(".venv/.core", "-B")
    local = _make_n(".venv/.core", "-B", "TORCH_INDEX=")
    assert "pip install -q torch==2.13.0" in local and "--index-url" not in local


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--help"], ("PerRecBench", "LLMRec", "RecBench+", "--task")),
        (["evaluate", "--help"], ("options below are PerRecBench's", "llmrec, recbench-plus")),
        (["evaluate", "--task", "llmrec", "--help"], ("options below are LLMRec's",)),
        (["profiles", "--help"], ("PerRecBench only",)),
    ],
)
def test_first_hour_help_speaks_of_the_three_families(capsys, argv, words):
    with pytest.raises(SystemExit):
        main(argv)
    out = " ".join(capsys.readouterr().out.split())
    assert all(word in out for word in words), out


def test_first_hour_a_build_logs_no_absolute_path_and_no_timings(tmp_path, monkeypatch, caplog):
    """What a newcomer sees of `make demo` besides the summaries: no line naming where the clone lives."""
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.INFO)
    synth = ["synth", "--out", "raw", "--reviews-per-domain", "2000", "--domains", "Books"]
    assert main(["--no-progress", *synth]) == 0
    build = ["build", "--task", "llmrec", "--source", "raw", "--out", "b", "--domains", "Books"]
    assert main(["--no-progress", *build, "--negatives", "19"]) == 0
    lines = [record.getMessage() for record in caplog.records if record.levelno >= logging.INFO]
    assert not [line for line in lines if str(tmp_path) in line or " took " in line], lines


def test_first_hour_readme_says_which_cells_each_average_takes():
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert '"average ndcg@10" is the mean of `sequential/sequential` and `direct/direct`' in readme
    assert '"average recall" is the mean of the four columns' in readme


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_first_hour_recbench_plus_demo_answers_the_condition_count_subsets():
    """The RecBench+ report's recall-by-condition-count table and picture need these subsets' runs."""
    demo = _make_n("-o", ".venv/.core", "demo", "-B").replace("\\\n", " ")
    (line,) = [
        line for line in demo.splitlines() if "--task recbench-plus --data" in line and "evaluate" in line
    ]
    subsets = line.split("--subsets ")[1].split()[0].split(",")
    groups = [f"{kind}-{n}" for kind in ("explicit", "implicit", "misinformed") for n in ("1", "2", "3-4")]
    assert {"explicit", "implicit", "misinformed", "interest", *groups} <= set(subsets)
    page = " ".join((REPO / "docs" / "recbench-plus.md").read_text(encoding="utf-8").split())
    assert "That section needs runs that answer the condition-count subsets (`explicit-1`" in page
