"""The llmrec build's own options take hostile values or refuse them in one line (`tests/test_cli_fuzz.py`
fuzzes the default family's parser; these options exist only under `--task llmrec`)."""

from __future__ import annotations

import pytest

from tests.dataset_builder.llmrec.fixture import write_hand_raw
from tests.test_cli_fuzz import HOSTILE, _check

BASE = {"--kcore": "3", "--history-length": "2", "--negatives": "3", "--seed": "0"}


@pytest.mark.parametrize("flag", list(BASE))
def test_build_llmrec_fuzz_option_refuses_hostile_values_in_one_line(flag, tmp_path, capsys, monkeypatch):
    source = write_hand_raw(tmp_path / "raw")
    monkeypatch.chdir(tmp_path)
    problems = []
    for number, value in enumerate(HOSTILE):
        settings = {**BASE, flag: value}
        argv = ["build", "--task", "llmrec", "--source", str(source), "--out", str(tmp_path / f"out{number}")]
        argv += ["--domains", "Books", "--no-progress", *(f"{k}={v}" for k, v in settings.items())]
        problem = _check(argv, capsys)
        if problem:
            problems.append(f"{value!r}: {problem}")
    assert not problems, "\n".join(problems)
