"""Builds of the three families from one small synthetic source, shared by the harness tests (about 10 s),
and the switch that makes the tests of the real harnesses run or skip."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

from perrec_eval.cli import main

# `.ci/run` sets it where the [harness] extra installed: a harness that does not import is then a failure,
# never a silent skip.
REQUIRE = os.environ.get("PERRECBENCH_HARNESS_TESTS") == "require"


def harness(module: str):
    """Import `module` (lm_eval, lighteval), or skip saying how to install it."""
    if REQUIRE:
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"{module} is not installed: pip install -e '.[harness]'")


def _run(*argv: str) -> None:
    assert main(["--no-progress", *argv]) == 0


@pytest.fixture(scope="session")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One build per family (PerRecBench, LLMRec, RecBench+) of one synthetic raw folder."""
    root = tmp_path_factory.mktemp("harness_builds")
    raw = root / "raw"
    _run("synth", "--out", str(raw), "--reviews-per-domain", "6000", "--seed", "0")
    _run("build", "--source", str(raw), "--out", str(root / "perrecbench"), "--test-groups", "20")
    _run("build", "--task", "llmrec", "--source", str(raw), "--out", str(root / "llmrec"),
         "--domains", "Books", "--negatives", "19")  # fmt: skip
    _run("build", "--task", "recbench-plus", "--source", str(raw), "--out", str(root / "recbench-plus"),
         "--domains", "Books", "--users", "20", "--train-users", "0")  # fmt: skip
    return {name: root / name for name in ("perrecbench", "llmrec", "recbench-plus")}
