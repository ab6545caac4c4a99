"""The outside audit replayed (issue 18): hostile paths and configs, kills at chosen points, secrets in every
place a user might put one. Each case failed before its fix; a refusal is one line naming the fix, exit 2.

Sections follow the audit's items; tiny fixtures only (the five-user raw source, the fake engine, the local
OpenAI-compatible stub server).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perrec_eval.cli import main
from tests.dataset_builder.build_fixture import five_user_source


def refused(capsys: pytest.CaptureFixture[str], argv: list[str], *needles: str) -> str:
    """Run the CLI, expect exit 2 with one error line holding every needle; return that line."""
    assert main(argv) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(lines) == 1, lines
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# ------------------------------------------------------------------------------------- 1. build --overwrite


def _build_argv(source: Path, out: Path) -> list[str]:
    flags = "--domains Books --test-groups 1 --threads 1 --memory-limit 1GB --no-progress --overwrite"
    return ["build", "--source", str(source), "--out", str(out), *flags.split()]


def test_build_overwrite_refuses_out_equal_to_source(tmp_path: Path, capsys) -> None:
    source = five_user_source(tmp_path / "raw")
    before = sorted(p.name for p in source.iterdir())
    refused(capsys, _build_argv(source, source), "outside the source")
    assert sorted(p.name for p in source.iterdir()) == before


def test_build_overwrite_refuses_out_containing_source(tmp_path: Path, capsys) -> None:
    source = five_user_source(tmp_path / "data" / "raw")
    refused(capsys, _build_argv(source, tmp_path / "data"), "contains --source")
    assert (source / "Books.jsonl").exists()


def test_build_overwrite_refuses_a_folder_that_is_not_a_build(tmp_path: Path, capsys) -> None:
    source = five_user_source(tmp_path / "raw")
    precious = tmp_path / "thesis"
    precious.mkdir()
    (precious / "chapter1.tex").write_text("years of work")
    refused(capsys, _build_argv(source, precious), "not a perrecbench build", "another --out")
    assert (precious / "chapter1.tex").read_text() == "years of work"


def test_build_overwrite_replaces_an_earlier_build(tmp_path: Path) -> None:
    source = five_user_source(tmp_path / "raw")
    out = tmp_path / "bench"
    assert main(_build_argv(source, out)) == 0
    (out / "stale.txt").write_text("from before")
    assert main(_build_argv(source, out)) == 0
    assert not (out / "stale.txt").exists()
    assert json.loads((out / "manifest.json").read_text())["outputs"]
