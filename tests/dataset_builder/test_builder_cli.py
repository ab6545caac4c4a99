"""`perrecbench synth` and `build` as commands: flags from the configs, `--config FILE.yaml`, help, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from perrec_eval.cli import main as cli_main
from tests.dataset_builder.build_fixture import five_user_source


def write_yaml(path: Path, settings: dict) -> Path:
    path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return path


def help_text(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        cli_main([command, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_builder_cli_build_reads_yaml_and_flags_override_it(tmp_path: Path, capsys) -> None:
    source = five_user_source(tmp_path / "raw")
    settings = {
        "source": str(source),
        "out": str(tmp_path / "bench"),
        "domains": ["Books"],
        "min_history": 10,
        "test-groups": 7,
        "threads": 1,
        "memory_limit": "1GB",
    }
    config_file = write_yaml(tmp_path / "build.yaml", settings)
    code = cli_main(["build", "--config", str(config_file), "--test-groups", "1"])
    assert code == 0
    assert "PerRecBench built in" in capsys.readouterr().out
    parameters = json.loads((tmp_path / "bench" / "manifest.json").read_text())["parameters"]
    assert parameters["min_history"] == 10  # from the file
    assert parameters["test_groups"] == 1  # the flag wins over the file's 7
    assert parameters["domains"] == ["Books"]


def test_builder_cli_unknown_yaml_key_lists_the_valid_ones(tmp_path: Path, capsys) -> None:
    config_file = write_yaml(tmp_path / "build.yaml", {"source": "raw", "out": "bench", "windows_days": 3})
    assert cli_main(["build", "--config", str(config_file)]) == 2
    err = capsys.readouterr().err
    assert "unknown setting(s) windows_days" in err
    assert "valid ones:" in err and "window_days" in err and "min_gap" in err
    assert len(err.strip().splitlines()) == 1


def test_builder_cli_bad_setting_is_one_line_with_exit_2(tmp_path: Path, capsys) -> None:
    code = cli_main(["build", "--source", str(tmp_path), "--out", str(tmp_path / "o"), "--domains", "Toys"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("perrecbench build: error: unknown domain(s) ['Toys']; choose from all or the")
    assert "Toys_and_Games" in err and "Video_Games" in err and "Unknown" in err
    assert len(err.strip().splitlines()) == 1


def test_builder_cli_out_of_memory_is_one_line_with_exit_2(tmp_path: Path, capsys) -> None:
    source = five_user_source(tmp_path / "raw")
    args = ["build", "--source", str(source), "--out", str(tmp_path / "o"), "--domains", "Books"]
    assert cli_main([*args, "--test-groups", "1", "--memory-limit", "1MB", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perrecbench build: error: DuckDB ran out of memory in Books: read reviews")
    assert "--memory-limit 1MB" in err and "raise --memory-limit" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_builder_cli_synth_help_lists_defaults(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one line per flag
    text = help_text("synth", capsys).split("common options:")[0]
    assert "--reviews-per-domain REVIEWS_PER_DOMAIN" in text and "(default: 60000)" in text
    assert "(default: Books,Clothing_Shoes_and_Jewelry,Home_and_Kitchen,Electronics)" in text
    assert "(default: 0)" in text and "--config FILE.yaml" in text
    assert "--gzip" in text and "--dirty" in text and "--twins" in text
    assert text.count("(default: off)") == 3  # the three switches


def test_builder_cli_build_help_shows_every_flag_with_a_default(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    flags: dict[str, str] = {}  # flag -> its help entry (a long flag's text starts on the next line)
    text = help_text("build", capsys)
    assert "--no-progress" in text.split("common options:")[1]  # the process-wide switch
    options = text.split("common options:")[0].split("options:", 1)[1]  # the family's and the shared ones
    for line in options.splitlines():
        if line.strip().startswith("--"):
            flag = line.split()[0]
            flags[flag] = line
        elif flags:
            flags[flag] += line
    expected = {
        "--source", "--out", "--domains", "--window-days", "--min-history", "--min-gap", "--group-size",
        "--test-groups", "--split-rule", "--avg-scope", "--seed", "--threads", "--memory-limit",
        "--on-bad-line", "--overwrite", "--work-dir", "--push-to-hub", "--config",
        "--with-interactions",
        "--preset", "--train-fraction", "--max-groups-per-item", "--keep-twins", "--task",
    }  # fmt: skip
    assert set(flags) == expected
    for flag, line in flags.items():
        assert "(default:" in line or "(required)" in line or flag == "--config", line
