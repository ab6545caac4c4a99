"""A small synthetic RecBench+ build shared by the builder's and the task's tests (about 2 s)."""

from __future__ import annotations

from pathlib import Path

from perrec_eval.cli import main

BUILD_ARGS = ["--domains", "Books", "--users", "30", "--train-users", "20", "--threads", "1"]


def synth(folder: Path) -> Path:
    """Synthetic raw Books files (`perrecbench synth`, 3,000 reviews)."""
    assert main(["--no-progress", "synth", "--out", str(folder), "--reviews-per-domain", "3000"
                 , "--domains", "Books"]) == 0  # fmt: skip
    return folder


def build(folder: Path, raw: Path, *extra: str) -> Path:
    """`perrecbench build --task recbench-plus` of `raw` into `folder`."""
    args = ["--no-progress", "build", "--task", "recbench-plus", "--source", str(raw), "--out", str(folder)]
    assert main([*args, *BUILD_ARGS, *extra]) == 0
    return folder
