"""The Makefile's recipes, run as make would run them (`make -n` prints them; the commands go to the CLI)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from perrec_eval.cli import main
from tests.benchmark_fixture import write_tiny_benchmark

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def recipe(target: str, cwd: Path, **variables: str) -> list[str]:
    """The shell lines `make TARGET` would run in `cwd` (continuations joined), the venv taken as made."""
    command = ["make", "-s", "-n", "-f", str(REPO / "Makefile"), "-o", ".venv/.full", "-o", ".venv/.core"]
    command += [target, *(f"{name}={value}" for name, value in variables.items())]
    printed = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=True).stdout
    return printed.replace("\\\n", " ").splitlines()


def perrecbench_commands(lines: list[str], subcommand: str) -> list[list[str]]:
    return [
        shlex.split(line)[1:]
        for line in lines
        if line.startswith(".venv/bin/perrecbench ") and shlex.split(line)[1] == subcommand
    ]


def test_make_demo_llm_runs_again_with_other_llm_groups(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_tiny_benchmark(tmp_path / "demo_out" / "perrecbench")
    for groups in ("2", "3"):  # the README invites changing LLM_GROUPS
        lines = recipe("demo-llm", tmp_path, LLM_GROUPS=groups)
        (baselines,) = [argv for argv in perrecbench_commands(lines, "evaluate") if "baseline" in argv]
        assert main([*baselines, "--model", "random", "--no-progress"]) == 0, capsys.readouterr().err

    assert all("--overwrite" in argv for argv in perrecbench_commands(lines, "evaluate"))


def test_make_clean_removes_what_the_demo_commands_leave(tmp_path):
    made = ["demo_out/runs/baselines", "runs/mf", "runs/item-knn", "runs/sft", "build/lib", "sft_data"]
    for folder in made:
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "file").write_text("x")
    (tmp_path / "runs" / "mine").mkdir()  # a run of the user's own: kept, and runs/ with it
    (tmp_path / "runs" / "mine" / "run.json").write_text("{}")
    subprocess.run(["make", "-s", "-f", str(REPO / "Makefile"), "clean"], cwd=tmp_path, check=True)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "runs",
        "runs/mine",
        "runs/mine/run.json",
    ]
