"""The Makefile's recipes, run as make would run them (`make -n` prints them; the commands go to the CLI)."""

from __future__ import annotations

import re
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


def test_make_demo_llm_is_one_suite_command_of_the_model_beside_every_familys_baselines(tmp_path):
    from perrec_eval import registry
    from perrec_eval.cliconfig import load_settings

    _builds(tmp_path, empty=True)
    lines = recipe("demo-llm", tmp_path)
    (suite,) = perrecbench_commands(lines, "evaluate")
    assert (_flag(suite, "--task"), _flag(suite, "--engine"), _flag(suite, "--limit")) == ("all", "hf", "3")
    assert _flag(suite, "--label") == "smollm2-135m" and {"--structured-outputs", "--overwrite"} <= set(suite)
    sections = load_settings(REPO / _flag(suite, "--config"))
    assert set(sections) == set(registry.evaluable())  # every family's cells, from the config file
    assert not perrecbench_commands(lines, "report")  # the suite writes its report
    assert not any("tests." in line or "tests/" in line for line in lines)  # no user path needs the tests


def test_make_demo_llm_runs_again_with_another_llm_limit(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _builds(tmp_path)
    for limit in ("2", "3"):  # the docs invite changing LLM_LIMIT
        (suite,) = perrecbench_commands(recipe("demo-llm", tmp_path, LLM_LIMIT=limit), "evaluate")
        # the fake engine stands in for the model: count what it would be asked
        model = suite.index("--model") + 1
        suite[suite.index("--engine") + 1], suite[model] = "fake", "constant"
        suite[suite.index("--config") + 1] = str(REPO / "perrec_eval" / "suites" / "demo-llm.yaml")
        assert main([*suite, "--dry-run", "--no-progress"]) == 0, capsys.readouterr().err
        assert "| perrecbench | " in capsys.readouterr().out
    assert not (tmp_path / "demo_out" / "suite-llm").exists()  # a dry run writes nothing


def _flag(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def _builds(root: Path, *, empty: bool = False) -> None:
    """The demo's builds (`make -n` runs the line that makes the demo when one lacks): folders, or tiny
    real builds of every family."""
    if empty:
        for name in ("perrecbench", "llmrec", "recbench-plus"):
            (root / "demo_out" / name).mkdir(parents=True, exist_ok=True)
        return
    from tests.dataset_builder.llmrec.fixture import synth_build
    from tests.dataset_builder.recbench_plus.fixture import build as recbench_build
    from tests.dataset_builder.recbench_plus.fixture import synth as recbench_synth

    write_tiny_benchmark(root / "demo_out" / "perrecbench")
    synth_build(root / "work").rename(root / "demo_out" / "llmrec")
    recbench_build(root / "demo_out" / "recbench-plus", recbench_synth(root / "work" / "rb-raw"))


def _written(page: str) -> set[str]:
    """The paths the bash blocks of `page` write (their --out), with a build's ``.stages`` cache beside it;
    capitalised placeholders (``--out X``) are the reader's own."""
    from tests.test_docs import blocks, commands, outputs

    env: dict[str, str] = {}
    found = set()
    for language, code, _ in blocks((REPO / page).read_text(encoding="utf-8")):
        for argv in commands(code, env) if language == "bash" else ():
            for path in outputs(argv):
                found |= {path, f"{path}.stages"} if argv[1:2] == ["build"] else {path}
    return {path for path in found if not re.fullmatch(r"[A-Z][A-Z_-]*(-\w+)?", path.split("/")[0])}


def test_make_clean_removes_what_the_demo_and_the_readme_commands_leave(tmp_path):
    made = ["demo_out/runs/baselines", "runs/mf", "runs/item-knn", "build/lib", *_written("README.md")]
    made += _written("docs/fine-tuning.md")
    assert "llmrec.stages" in made and "report-recbench-plus" in made
    for folder in made:
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "file").write_text("x")
    (tmp_path / ".llmrec.perrecbench.lock").write_text("1")  # a killed build's
    (tmp_path / "runs" / "mine").mkdir()  # a run of the user's own: kept, and runs/ with it
    (tmp_path / "runs" / "mine" / "run.json").write_text("{}")
    subprocess.run(["make", "-s", "-f", str(REPO / "Makefile"), "clean"], cwd=tmp_path, check=True)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "runs",
        "runs/mine",
        "runs/mine/run.json",
    ]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_gitignore_holds_every_output_of_the_documented_commands():
    pages = ["README.md", *(p.relative_to(REPO).as_posix() for p in sorted((REPO / "docs").glob("*.md")))]
    written = sorted(
        {path for page in pages for path in _written(page)} | {"demo_out", ".x.perrecbench.lock"}
    )
    assert "perrecbench" in written and "report-llmrec" in written
    asked = [path if path.endswith(".lock") else f"{path}/" for path in written]
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", *asked], cwd=REPO, capture_output=True, text=True
    )
    assert sorted(set(asked) - set(done.stdout.split())) == []
