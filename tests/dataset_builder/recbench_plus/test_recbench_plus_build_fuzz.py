"""Every option of `perrecbench build --task recbench-plus` through `tests/test_cli_fuzz.py`'s hostile values:
exit 0 or a one-line error, never a traceback (that file discovers no `build` options: they exist only once
`--task` is read)."""

from __future__ import annotations

import dataclasses

import pytest

from dataset_builder.config import BuildSpec
from dataset_builder.recbench_plus.config import BuildConfig
from tests.test_cli_fuzz import HOSTILE, _check

OWN = {
    f.name: f.metadata["flag"] or "--" + f.name.replace("_", "-")
    for f in dataclasses.fields(BuildConfig)
    if f.name not in {g.name for g in dataclasses.fields(BuildSpec)}
}


@pytest.mark.parametrize("name", OWN)
def test_recbench_plus_build_option_refuses_hostile_values_in_one_line(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    base = [
        "build",
        "--task",
        "recbench-plus",
        "--source",
        str(tmp_path / "empty"),
        "--out",
        str(tmp_path / "b"),
    ]
    flag = OWN[name]
    problems = {value: _check([*base, f"{flag}={value}"], capsys) for value in HOSTILE}
    assert {value: problem for value, problem in problems.items() if problem} == {}
    assert not (tmp_path / "b").exists()  # the empty source stops every build before it writes
