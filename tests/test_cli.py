"""The `perrecbench` command end to end: synth → build → evaluate → score → report, into tmp_path."""

from __future__ import annotations

import argparse
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


@pytest.fixture(scope="module")
def baselines(built):
    """Every baseline's run under runs/baselines, with what the command printed (the tests below read the runs
    in any order, or alone)."""
    import contextlib
    import io

    out = built / "runs" / "baselines"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
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
    return out, printed.getvalue()


def test_cli_baselines_write_a_table_per_system(baselines):
    out, printed = baselines
    assert "history-affinity" in printed and "rating-bias" in printed
    scores = json.loads((out / "history-affinity" / "scores.json").read_text())
    assert {c["subset"] for c in scores["cells"]} == {"easy", "medium", "hard"}
    assert all(c["num_docs"] == 12 for c in scores["cells"])
    bias = json.loads((out / "rating-bias" / "scores.json").read_text())
    assert all(c["metrics"]["ptc"]["value"] == 0.0 for c in bias["cells"])
    assert "| history-affinity |" in (out / "report.md").read_text()


def test_cli_fake_engine_run_then_rescore_and_report(built, baselines, capsys):
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
    pairwise = [c for c in first["cells"] if c["protocol"] == "pairwise"]
    assert all(c["metrics"]["ptc"]["value"] == 0.0 for c in pairwise)
    assert (out / "profiles.jsonl").read_text().count("\n") > 0

    assert main(args) == 0  # resumes: everything from the cache, same scores
    info = json.loads((out / "run.json").read_text())
    assert info["cache"]["misses"] == 0 and info["cache"]["hits"] > 0
    assert json.loads((out / "scores.json").read_text())["cells"] == first["cells"]

    capsys.readouterr()
    assert main(["score", str(out), "--variant", "paper", "--json"]) == 0
    assert '"variant": "paper"' in capsys.readouterr().out
    assert (
        main(
            [
                "report",
                str(out),
                str(baselines[0] / "history-affinity"),
                "--allow-mixed",  # 4 sampled groups against all 12: two tables
                "--no-plots",
                "--out",
                str(built / "report"),
            ]
        )
        == 0
    )
    table = (built / "report" / "leaderboard.md").read_text()
    assert "| fake:constant |" in table and "| history-affinity |" in table


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
    assert {c["protocol"] for c in scores["cells"]} == {"pointwise", "pairwise", "listwise"}
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


def _commands(parser=None, prefix=()):
    """Every runnable (sub)command path of the CLI, nested ones (``sft train``) included."""
    import argparse

    from perrec_eval.cli import build_parser

    parser = parser or build_parser()
    paths = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                nested = _commands(sub, (*prefix, name))
                paths += nested or [(*prefix, name)]
    return paths


def test_cli_knows_the_documented_commands():
    commands = {" ".join(path) for path in _commands()}
    assert {"synth", "build", "evaluate", "score", "profiles", "report"} <= commands


@pytest.mark.parametrize("command", _commands(), ids=" ".join)
def test_cli_every_flag_has_help_and_a_default(command, capsys):
    with pytest.raises(SystemExit):
        main([*command, "--help"])
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
    assert {c["subset"] for c in scores["cells"]} == {"easy", "hard"}


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


def test_cli_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.startswith("perrecbench ")


@pytest.mark.parametrize("command", _commands(), ids=" ".join)
def test_cli_verbose_debug_and_no_progress_are_accepted_by_every_subcommand(command):
    from perrec_eval.cli import build_parser

    parser = build_parser()
    positional = _positionals(parser, command)
    after = parser.parse_args([*command, *positional, "-v", "--debug", "--no-progress"])
    before = parser.parse_args(["--no-progress", *command, *positional])
    assert after.verbose and after.debug and after.no_progress and before.no_progress


def _positionals(parser, command):
    """A placeholder for each positional argument of `command` (a path such as ``("sft", "train")``)."""
    for name in command:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    return ["X" for action in parser._actions if not action.option_strings]


@pytest.mark.parametrize("command", _commands(), ids=" ".join)
@pytest.mark.parametrize("before", [True, False], ids=["before", "after"])
def test_cli_no_progress_turns_the_switch_off_for_every_subcommand(command, before, monkeypatch):
    from perrec_eval import cliconfig, progress
    from perrec_eval.cli import build_parser
    from perrec_eval.errors import ConfigError

    def stop(cls, args):
        raise ConfigError("stopped before running")

    monkeypatch.setattr(cliconfig, "from_namespace", stop)
    argv = [*command, *_positionals(build_parser(), command)]
    assert main(["--no-progress", *argv] if before else [*argv, "--no-progress"]) == 2
    assert not progress.enabled()


def test_cli_progress_false_in_a_config_file_turns_the_switch_off(tmp_path, monkeypatch):
    from perrec_eval import progress

    (tmp_path / "run.yaml").write_text("progress: false\n")
    assert main(["score", str(tmp_path / "no-run"), "--config", str(tmp_path / "run.yaml")]) == 2
    assert not progress.enabled()


def test_cli_evaluate_no_progress_draws_no_bars(built, tmp_path, capsys):
    args = ["evaluate", "--data", str(built / "perrecbench"), "--engine", "fake", "--model", "constant"]
    args += ["--levels", "easy", "--methods", "pointwise", "--max-groups", "2", "--no-profile"]
    assert main([*args, "--out", str(tmp_path / "shown")]) == 0
    assert "retrieval" in capsys.readouterr().err
    assert main([*args, "--out", str(tmp_path / "hidden"), "--no-progress"]) == 0
    assert "retrieval" not in capsys.readouterr().err


@pytest.mark.parametrize("bug", [ValueError("a bug"), OSError("a bug"), KeyError("a bug")])
def test_cli_shows_the_traceback_of_an_error_outside_the_project_family(bug, monkeypatch):
    from perrec_eval import cliconfig

    def broken(cls, args):
        raise bug

    monkeypatch.setattr(cliconfig, "from_namespace", broken)
    with pytest.raises(type(bug)):
        main(["score", "RUN_DIR"])


def test_cli_failed_requests_exit_nonzero_with_one_line_and_provisional_scores(
    built, tmp_path, capsys, monkeypatch
):
    from perrec_eval.engines import fake
    from perrec_eval.types import Completion

    def down(request, params, i):
        return Completion(texts=(), error="HTTP 503 from http://127.0.0.1:9/v1: try later")

    monkeypatch.setitem(fake.SCRIPTS, "down", down)
    out = tmp_path / "run"
    args = ["evaluate", "--data", str(built / "perrecbench"), "--engine", "fake", "--model", "down"]
    options = ["--levels", "easy", "--max-groups", "2", "--no-profile", "--no-progress"]
    code = main([*args, *options, "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 1
    assert captured.err.count("\n") == 1 and "HTTP 503" in captured.err
    assert "requests failed" in captured.err and "run the same command again" in captured.err
    assert "(provisional)" in captured.out
    assert json.loads((out / "run.json").read_text())["complete"] is False


def test_cli_score_write_updates_the_run_json_metric(baselines):
    run = baselines[0] / "history-affinity"
    assert main(["score", str(run), "--variant", "paper", "--write"]) == 0
    info = json.loads((run / "run.json").read_text())
    assert info["metric"]["variant"] == "paper"
    assert json.loads((run / "scores.json").read_text())["extras"]["variant"] == "paper"
    assert main(["score", str(run), "--variant", "tau_b", "--write"]) == 0


def test_cli_report_and_score_understand_a_folder_of_baseline_runs(baselines, tmp_path, capsys):
    baselines = baselines[0]
    assert not any(baselines.glob("*/samples.jsonl"))  # baselines send no requests
    assert main(["report", str(baselines), "--no-plots", "--out", str(tmp_path / "report")]) == 0
    table = (tmp_path / "report" / "leaderboard.md").read_text()
    assert all(
        f"| {name} |" in table
        for name in ("random", "rating-bias", "item-quality", "constant", "history-affinity")
    )
    capsys.readouterr()
    assert main(["score", str(baselines)]) == 2
    err = capsys.readouterr().err
    assert "holds 5 runs" in err and "history-affinity" in err


def test_cli_baselines_record_only_the_pointwise_method(baselines):
    info = json.loads((baselines[0] / "random" / "run.json").read_text())
    assert info["config"]["methods"] == ["pointwise"]


def test_cli_mistyped_data_folder_fails_fast_with_the_fix(tmp_path, capsys, monkeypatch, slept):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # even when the Hub could be asked
    (tmp_path / "demo_out").mkdir()
    args = ["evaluate", "--data", str(tmp_path / "demo_out" / "perrecbnch"), "--engine", "baseline"]
    assert main([*args, "--model", "random", "--out", str(tmp_path / "run")]) == 2
    assert slept == []  # no Hub retry loop
    err = capsys.readouterr().err
    assert "no such folder" in err and "perrecbench build" in err and err.count("\n") == 1


def test_cli_profiles_refuse_to_mix_writers_in_one_file(built, tmp_path, capsys):
    out = tmp_path / "profiles.jsonl"
    args = ["profiles", "--data", str(built / "perrecbench"), "--engine", "fake", "--model", "constant"]
    assert main([*args, "--max-groups", "2", "--levels", "easy", "--out", str(out)]) == 0
    assert main([*args, "--max-groups", "2", "--levels", "easy", "--max-items", "10", "--out", str(out)]) == 2
    assert "other settings" in capsys.readouterr().err


def test_cli_profiles_refuse_to_add_profiles_of_a_retrained_adapter(built, tmp_path, capsys):
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_model.safetensors").write_bytes(b"first weights")
    out = tmp_path / "profiles.jsonl"
    args = ["profiles", "--data", str(built / "perrecbench"), "--engine", "fake", "--model", "constant"]
    args += ["--max-groups", "2", "--levels", "easy", "--adapter", str(adapter), "--out", str(out)]
    assert main(args) == 0
    assert {json.loads(line)["adapter"] for line in out.read_text().splitlines()} == {"adapter"}
    (adapter / "adapter_model.safetensors").write_bytes(b"retrained weights")
    assert main(args) == 2
    assert "adapter_sha256=" in capsys.readouterr().err


def test_cli_several_adapters_share_one_engine_and_get_a_run_folder_each(built, tmp_path, monkeypatch):
    from perrec_eval.engines import fake

    loads = []
    original = fake.FakeEngine.__init__

    def counting_init(self, *args, **kwargs):
        loads.append(kwargs.get("adapter"))
        original(self, *args, **kwargs)

    monkeypatch.setattr(fake.FakeEngine, "__init__", counting_init)
    out = tmp_path / "adapters"
    args = ["evaluate", "--data", str(built / "perrecbench"), "--engine", "fake", "--model", "constant"]
    options = ["--levels", "easy", "--max-groups", "2", "--no-profile", "--no-progress"]
    adapters = ["--adapter", "point=/adapters/point", "--adapter", "pair=/adapters/pair"]
    assert main([*args, *options, *adapters, "--out", str(out)]) == 0
    assert loads[0] is None and loads[1:] == ["/adapters/point", "/adapters/pair"]  # base once, then views
    for name in ("point", "pair"):
        info = json.loads((out / name / "run.json").read_text())
        assert info["config"]["adapter"] == [f"{name}=/adapters/{name}"]
        assert info["engine"]["adapter"] == f"/adapters/{name}"
    keys = [
        {json.loads(line)["key"] for line in (out / name / "samples.jsonl").read_text().splitlines()}
        for name in ("point", "pair")
    ]
    assert keys[0].isdisjoint(keys[1])  # the adapter is part of every cache key
    report = (out / "report.md").read_text()
    assert "| fake:constant + point |" in report and "| fake:constant + pair |" in report  # model + adapter


def test_cli_adapter_names_must_be_distinct(built, tmp_path, capsys):
    args = ["evaluate", "--data", str(built / "perrecbench"), "--engine", "fake", "--model", "constant"]
    adapters = ["--adapter", "/a/lora", "--adapter", "/b/lora"]
    assert main([*args, *adapters, "--out", str(tmp_path / "x")]) == 2
    assert "NAME=PATH" in capsys.readouterr().err
