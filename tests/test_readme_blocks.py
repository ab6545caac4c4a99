"""The README's "Evaluate your model in four commands" blocks meet: each family's four commands, run as
written on CPU with the model run capped the way the section says (the same `--limit` on both evaluate
commands) and the fake engine where a block names a model, end in one report holding the model's row beside
every baseline's (PerRecBench's collaborative-filtering baselines included: the block's build keeps their
data).

The quick start's suite command (`evaluate --task all --source RAW`), capped with its `--limit`, ends in one
suite folder and one report too, on raw files of the demo's size.

tests/test_docs.py runs the same blocks but stops before the model run (it needs a model) and so before the
report that reads it; here the whole block runs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from perrec_eval.cli import main
from tests.test_docs import REVIEWS, blocks, commands, shrink

REPO = Path(__file__).resolve().parents[1]
SECTION = "## Evaluate your model in four commands"
MODEL_ENGINES = {"vllm", "hf", "openai"}


def section_text(heading: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


def section() -> str:
    return section_text(SECTION)


def family_blocks() -> dict[str, list[list[str]]]:
    """Each family's block of the section, as argv lists (without the leading ``perrecbench``)."""
    found = {}
    for language, code, _ in blocks(section()):
        argvs = [argv[1:] for argv in commands(code, {}) if argv[0] == "perrecbench"]
        if language == "bash" and argvs:
            build = argvs[0]
            family = build[build.index("--task") + 1] if "--task" in build else "perrecbench"
            found[family] = argvs
    return found


def cap() -> list[str]:
    """The flag the section says caps both evaluate commands alike (``--limit N``)."""
    match = re.search(r"the same `(--limit) (\d+)`", " ".join(section().split()))
    assert match, "the section says how to cap a model run and its baselines alike (the same `--limit N`)"
    return [match.group(1), "4"]  # a few docs of each cell: the README's N is for a real small model


def as_tested(argv: list[str]) -> list[str]:
    """A block's command with the fake engine for the model it names, the cap on every evaluate, and a build
    sized for the small synthetic files (test_docs' `shrink`: fewer negatives)."""
    option = {argv[i]: i for i in range(len(argv)) if argv[i].startswith("--")}
    argv = list(argv)
    if "--engine" in option and argv[option["--engine"] + 1] in MODEL_ENGINES:
        argv[option["--engine"] + 1] = "fake"
        argv[option["--model"] + 1] = "constant"
    if argv[0] == "evaluate":
        argv += cap()  # the suite's --limit too: the docs of each family's cells
    return shrink(argv) if argv[0] == "build" else argv


def test_readme_four_commands_blocks_are_one_per_family():
    assert set(family_blocks()) == {"perrecbench", "llmrec", "recbench-plus"}
    for family, argvs in family_blocks().items():
        assert [argv[0] for argv in argvs] == ["build", "evaluate", "evaluate", "report"], family


def test_readme_perrecbench_build_keeps_the_classic_baselines_data():
    """`--model all` runs mf and item-knn only on a build with interactions: the block builds one."""
    assert "--with-interactions" in family_blocks()["perrecbench"][0]


@pytest.fixture(scope="module")
def raw(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("readme") / "raw"
    argv = ["synth", "--out", str(folder), "--reviews-per-domain", REVIEWS, "--no-progress"]
    assert main(argv) == 0
    return folder


@pytest.mark.parametrize("family", ["perrecbench", "llmrec", "recbench-plus"])
def test_readme_four_commands_end_in_a_report_with_a_capped_model_run(family, raw, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("RAW").symlink_to(raw, target_is_directory=True)
    argvs = [as_tested(argv) for argv in family_blocks()[family]]
    for argv in argvs:
        assert main([*argv, "--no-progress"]) == 0, " ".join(argv)
    report = Path(argvs[-1][argvs[-1].index("--out") + 1])
    assert (report / "index.html").is_file()
    (board,) = json.loads((report / "leaderboard.json").read_text(encoding="utf-8"))  # one family's table
    engines = {row["label"]: row["engine"] for row in board["rows"]}
    assert list(engines.values()).count("fake") == 1 and "baseline" in engines.values(), engines
    if family == "perrecbench":
        assert {"mf", "item-knn"} <= set(engines)


def suite_command() -> list[str]:
    """The README's one command for a model on every family (its quick start)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    found = [
        argv[1:]
        for language, code, _ in blocks(text)
        if language == "bash"
        for argv in commands(code, {})
        if argv[:2] == ["perrecbench", "evaluate"]
        and "--task" in argv
        and argv[argv.index("--task") + 1] == "all"
    ]
    assert len(found) == 1, found
    return found[0]


def test_readme_suite_command_ends_in_one_report_with_a_capped_model_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    demo_size = ["--reviews-per-domain", "60000", "--seed", "0"]  # `make demo`'s raw files (RAW's example)
    assert main(["synth", "--out", "RAW", *demo_size, "--no-progress"]) == 0
    argv = suite_command()
    assert "--limit" in " ".join(section_text("## Quick start").split())
    assert main([*as_tested(argv), "--no-progress"]) == 0
    out = Path(argv[argv.index("--out") + 1])
    boards = json.loads((out / "report" / "leaderboard.json").read_text(encoding="utf-8"))["sections"]
    assert (out / "report" / "index.html").is_file()
    assert {board["task"] for board in boards} == {"perrecbench", "llmrec", "recbench-plus"}
    for board in boards:
        engines = [row["engine"] for row in board["rows"]]
        assert engines.count("fake") == 1 and "baseline" in engines, board["task"]
