"""The `perrecbench` command end to end: synth → build → evaluate → score → report, into tmp_path."""

from __future__ import annotations

import json

import pytest

from perrec_eval.cli import main


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    assert (
        main(["synth", "--out", str(root / "raw"), "--reviews-per-domain", "30000", "--domains", "Books"])
        == 0
    )
    code = main(
        [
            "build",
            "--source",
            str(root / "raw"),
            "--out",
            str(root / "perrecbench"),
            "--domains",
            "Books",
            "--test-groups",
            "12",
            "--no-progress",
        ]
    )
    assert code == 0
    return root


def test_cli_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for command in ("synth", "build", "evaluate", "score", "profiles", "report"):
        assert command in out


def test_cli_baselines_write_a_table_per_system(built, capsys):
    out = built / "runs" / "baselines"
    code = main(
        [
            "evaluate",
            "--data",
            str(built / "perrecbench"),
            "--engine",
            "baseline",
            "--model",
            "all",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "history-affinity" in printed and "rating-bias" in printed
    scores = json.loads((out / "history-affinity" / "scores.json").read_text())
    assert {c["level"] for c in scores["cells"]} == {"easy", "medium", "hard"}
    assert all(c["num_groups"] == 12 for c in scores["cells"])
    bias = json.loads((out / "rating-bias" / "scores.json").read_text())
    assert all(c["ptc"] == 0.0 for c in bias["cells"])
    assert "| history-affinity |" in (out / "report.md").read_text()


def test_cli_fake_engine_run_then_rescore_and_report(built, capsys):
    out = built / "runs" / "fake"
    args = [
        "evaluate",
        "--data",
        str(built / "perrecbench"),
        "--engine",
        "fake",
        "--model",
        "constant",
        "--max-groups",
        "4",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    first = json.loads((out / "scores.json").read_text())
    assert len(first["cells"]) == 9
    # Always "[User A]" with all pairs is exactly 0; constant ratings rank by ascending average.
    pairwise = [c for c in first["cells"] if c["method"] == "pairwise"]
    assert all(c["ptc"] == 0.0 for c in pairwise)
    assert (out / "profiles.jsonl").read_text().count("\n") > 0

    assert main(args) == 0  # resumes: everything from the cache, same scores
    info = json.loads((out / "run.json").read_text())
    assert info["cache"]["misses"] == 0 and info["cache"]["hits"] > 0
    assert json.loads((out / "scores.json").read_text())["cells"] == first["cells"]

    capsys.readouterr()
    assert main(["score", str(out), "--variant", "paper"]) == 0
    assert '"variant": "paper"' in capsys.readouterr().out
    assert (
        main(
            [
                "report",
                str(out),
                str(built / "runs" / "baselines" / "history-affinity"),
                "--out",
                str(built / "table.md"),
            ]
        )
        == 0
    )
    table = (built / "table.md").read_text()
    assert "| constant |" in table and "| history-affinity |" in table


def test_cli_profiles_then_evaluate_with_saved_profiles(built):
    profiles = built / "profiles.jsonl"
    assert (
        main(
            [
                "profiles",
                "--data",
                str(built / "perrecbench"),
                "--engine",
                "fake",
                "--model",
                "constant",
                "--max-groups",
                "3",
                "--out",
                str(profiles),
            ]
        )
        == 0
    )
    records = [json.loads(line) for line in profiles.read_text().splitlines()]
    assert records and all(r["profile"] and r["model"] == "constant" for r in records)
    out = built / "runs" / "saved-profiles"
    assert (
        main(
            [
                "evaluate",
                "--data",
                str(built / "perrecbench"),
                "--engine",
                "fake",
                "--model",
                "constant",
                "--max-groups",
                "3",
                "--profiles",
                str(profiles),
                "--methods",
                "listwise",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    sample = json.loads((out / "samples.jsonl").read_text().splitlines()[0])
    assert "Likes well-made things" in json.dumps(sample) or sample["ok"]


def test_cli_missing_profiles_name_the_fix(built, capsys):
    profiles = built / "few.jsonl"
    profiles.write_text(json.dumps({"group_id": "nope", "user_id": "x", "profile": "p"}) + "\n")
    args = ["evaluate", "--data", str(built / "perrecbench"), "--engine", "fake", "--model", "constant"]
    code = main([*args, "--profiles", str(profiles), "--out", str(built / "runs" / "bad")])
    assert code == 2
    assert "perrecbench profiles" in capsys.readouterr().err


def test_cli_missing_benchmark_names_the_build_command(tmp_path, capsys):
    args = ["evaluate", "--data", str(tmp_path / "nowhere"), "--engine", "baseline", "--model", "random"]
    assert main([*args, "--out", str(tmp_path / "run")]) == 2
    assert "perrecbench build" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_hf_engine_on_a_tiny_local_model(built, tiny_model_dir):
    out = built / "runs" / "hf"
    code = main(
        [
            "evaluate",
            "--data",
            str(built / "perrecbench"),
            "--engine",
            "hf",
            "--model",
            str(tiny_model_dir),
            "--levels",
            "easy",
            "--max-groups",
            "2",
            "--no-profile",
            "--temperature",
            "0",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    # A random tiny model cannot follow the format: every failure is recorded, none crashes the run.
    assert len(samples) == 2 * 2 + 2 * 2 + 2
    assert all(s["texts"] for s in samples)
    scores = json.loads((out / "scores.json").read_text())
    assert {c["method"] for c in scores["cells"]} == {"pointwise", "pairwise", "listwise"}
    info = json.loads((out / "run.json").read_text())
    assert info["engine"]["name"] == "hf" and info["versions"]["transformers"]


def _options_of(help_text: str) -> dict[str, str]:
    """Each option of a --help text with its help (continuation lines joined)."""
    options: dict[str, str] = {}
    current = None
    for line in help_text.splitlines():
        stripped = line.strip()
        if line.startswith("  -"):
            current = stripped.split()[0].rstrip(",")
            options[current] = stripped
        elif current and line.startswith(" " * 10) and stripped:
            options[current] += " " + stripped
        else:
            current = None
    return options


@pytest.mark.parametrize("command", ["synth", "build", "evaluate", "score", "profiles", "report"])
def test_cli_every_flag_has_help_and_a_default(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    options = _options_of(capsys.readouterr().out)
    assert "--config" in options
    for flag, text in options.items():
        if flag in ("-h", "--config"):
            continue
        assert "(default:" in text or "(required)" in text, f"{command} {flag}: {text}"


def test_cli_evaluate_reads_a_config_file_and_flags_override_it(built, tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text(
        f"data: {built / 'perrecbench'}\nengine: baseline\nmodel: rating-bias\n"
        f"levels: [easy, hard]\nout: {tmp_path / 'from-file'}\n"
    )
    assert main(["evaluate", "--config", str(config), "--out", str(tmp_path / "from-flag")]) == 0
    assert not (tmp_path / "from-file").exists()
    info = json.loads((tmp_path / "from-flag" / "run.json").read_text())
    assert info["config"]["levels"] == ["easy", "hard"] and info["config"]["model"] == "rating-bias"
    scores = json.loads((tmp_path / "from-flag" / "scores.json").read_text())
    assert {c["level"] for c in scores["cells"]} == {"easy", "hard"}


def test_cli_config_file_with_an_unknown_key_lists_the_valid_ones(tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text("dataset: x\n")
    assert main(["evaluate", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "unknown setting(s) dataset" in err and "data" in err and err.count("\n") == 1


def test_cli_unknown_engine_arg_lists_the_engines_options(built, tmp_path, capsys):
    args = ["evaluate", "--data", str(built / "perrecbench"), "--engine", "fake", "--model", "constant"]
    assert main([*args, "--engine-arg", "batch=4", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "has no option 'batch'" in err and "report_every" in err and err.count("\n") == 1


def test_cli_engine_arg_reaches_the_engine(built, tmp_path):
    args = ["evaluate", "--data", str(built / "perrecbench"), "--engine", "fake", "--model", "constant"]
    out = tmp_path / "run"
    opts = ["--engine-arg", "report_every=2", "--levels", "easy", "--max-groups", "2", "--no-profile"]
    assert main([*args, *opts, "--out", str(out)]) == 0
    assert json.loads((out / "run.json").read_text())["config"]["engine_args"] == ["report_every=2"]
    # The value is typed and validated by the engine's options class.
    assert main([*args, "--engine-arg", "report_every=0", "--out", str(tmp_path / "bad")]) == 2
