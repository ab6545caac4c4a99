"""`perrecbench sweep`: a k x shots grid of runs for one engine, and its report."""

from __future__ import annotations

import json

import pytest

from perrec_eval.cli import main
from perrec_eval.engines.fake import FakeEngine
from perrec_eval.errors import ConfigError
from perrec_eval.tasks.perrecbench.config import SweepConfig
from perrec_eval.tasks.perrecbench.leaderboard import analyses
from perrec_eval.tasks.perrecbench.leaderboard.board import build_table
from perrec_eval.tasks.perrecbench.leaderboard.runs import load_runs
from perrec_eval.tasks.perrecbench.leaderboard.sweep import run_grid
from tests.benchmark_fixture import truth_responder


def test_sweep_runs_every_point_into_its_folder(bench, tmp_path):
    folder, profiles = bench
    config = SweepConfig(
        data=str(folder),
        engine="fake",
        model="m",
        out=str(tmp_path),
        profiles=str(profiles),
        levels=("easy",),
        methods=("pointwise", "listwise"),
        ks=(1, 2),
        shots_grid=(0, 1),
    )
    results = run_grid(config, FakeEngine(truth_responder(1.0)))
    assert [name for name, _ in results] == ["k1-shots0", "k1-shots1", "k2-shots0", "k2-shots1"]
    info = json.loads((tmp_path / "k2-shots1" / "run.json").read_text())
    assert info["config"]["k"] == 2 and info["config"]["shots"] == 1 and "ks" not in info["config"]
    table = build_table(load_runs([tmp_path]))
    assert {row.label for row in table.rows} == {f"fake (k={k}, shots={s})" for k in (1, 2) for s in (0, 1)}
    (grid,) = analyses.k_shots(table)
    assert (
        grid["ks"] == [1, 2]
        and grid["shots"] == [0, 1]
        and grid["ptc"]["average"] == [[1.0, 1.0], [1.0, 1.0]]
    )


def test_sweep_command_writes_the_grid_and_its_report(bench, tmp_path, capsys):
    folder, _ = bench
    out = tmp_path / "grid"
    args = [
        "sweep",
        "--data",
        str(folder),
        "--engine",
        "fake",
        "--model",
        "constant",
        "--no-profile",
        "--levels",
        "easy",
        "--ks",
        "1,2",
        "--shots-grid",
        "0",
        "--out",
        str(out),
        "--no-progress",
    ]
    assert main(args) == 0
    assert (out / "k1-shots0" / "run.json").is_file() and (out / "k2-shots0" / "run.json").is_file()
    assert (out / "report" / "index.html").is_file() and (
        out / "report" / "plots" / "t1_k_shots_1.png"
    ).is_file()
    assert str(out / "report" / "index.html") in capsys.readouterr().out


@pytest.mark.parametrize(("given", "use"), [(["--k", "3"], "--ks"), (["--shots", "2"], "--shots-grid")])
def test_sweep_refuses_k_and_shots_naming_the_grid_flag(tmp_path, capsys, given, use):
    args = ["sweep", "--data", "d", "--engine", "fake", "--model", "m", "--out", str(tmp_path)]
    assert main([*args, *given]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{given[0]} is not a setting of this command: use {use}" in err
    (tmp_path / "grid.yaml").write_text(f"{given[0][2:]}: {given[1]}\n")
    assert main([*args, "--config", str(tmp_path / "grid.yaml")]) == 2
    assert f"use {use}" in capsys.readouterr().err


def test_sweep_help_offers_no_k_or_shots(capsys):
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    flags = {word.strip("[],") for word in capsys.readouterr().out.split() if word.startswith(("--", "[--"))}
    assert {"--ks", "--shots-grid"} <= flags and not {"--k", "--shots"} & flags


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"engine": "baseline", "model": "random", "profiles": None}, "varies prompts"),
        ({"profiles": None}, "--profiles FILE"),
        ({"ks": ()}, "--ks"),
        ({"shots_grid": (-1,)}, "--shots-grid"),
    ],
)
def test_sweep_refuses_grids_that_cannot_run(bench, tmp_path, changes, message):
    folder, profiles = bench
    settings = {
        "data": str(folder),
        "engine": "fake",
        "model": "m",
        "out": str(tmp_path),
        "profiles": str(profiles),
    }
    with pytest.raises(ConfigError, match=message):
        run_grid(SweepConfig(**(settings | changes)))


def test_sweep_every_flag_has_help_and_a_default(capsys):
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    text = capsys.readouterr().out
    for flag in ("--ks", "--shots-grid", "--no-plots", "--engine-arg"):
        assert flag in text
    assert "(default: 2,4,8)" in text and "(default: 0,1,2,3)" in text
