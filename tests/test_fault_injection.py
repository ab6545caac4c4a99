"""The outside audit replayed (issue 18): hostile paths and configs, kills at chosen points, secrets in every
place a user might put one. Each case failed before its fix; a refusal is one line naming the fix, exit 2.

Sections follow the audit's items; tiny fixtures only (the five-user raw source, the fake engine, the local
OpenAI-compatible stub server). Cases that need the tiny trained model sit beside its fixtures: `sft train`
killed after a checkpoint and resumed, overlapping or foreign output folders (tests/sft/test_train.py),
`sft merge` into the base model or over an earlier merge (tests/sft/test_merge.py), adapter names PEFT cannot
hold (tests/sft/test_hf_adapters.py), `sft data` into a folder of something else or killed mid-write
(tests/sft/test_data.py), a second `sft data`/`sft merge` on one --out (tests/sft/test_sft_cli.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perrec_eval.cli import main
from perrec_eval.errors import ConfigError, DataError
from tests.benchmark_fixture import write_tiny_benchmark
from tests.dataset_builder.build_fixture import five_user_source
from tests.lock_holder import held_by_another_process


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
    (out / ".manifest.json.tmp-999999999").write_text("left by a killed writer")  # not the user's
    assert main(_build_argv(source, out)) == 0
    assert not (out / ".manifest.json.tmp-999999999").exists()  # replaced whole
    assert json.loads((out / "manifest.json").read_text())["outputs"]


# ----------------------------------------------------------------------------- synth: files it did not write


def _synth_argv(out: Path, seed: int = 0) -> list[str]:
    flags = f"--reviews-per-domain 200 --domains Books --seed {seed} --no-progress"
    return ["synth", "--out", str(out), *flags.split()]


def test_synth_refuses_to_replace_a_downloaded_file(tmp_path: Path, capsys) -> None:
    out = tmp_path / "raw"
    out.mkdir()
    (out / "Books.jsonl").write_text('{"a real": "download"}\n')
    refused(capsys, _synth_argv(out), "Books.jsonl", "synth did not write", "another --out")
    assert (out / "Books.jsonl").read_text() == '{"a real": "download"}\n'
    assert not (out / "meta_Books.jsonl").exists()


def test_synth_refuses_to_replace_a_file_changed_since_it_wrote_it(tmp_path: Path, capsys) -> None:
    out = tmp_path / "raw"
    assert main(_synth_argv(out)) == 0
    assert main(_synth_argv(out, seed=1)) == 0  # its own files: replaced
    with (out / "Books.jsonl").open("a") as handle:
        handle.write('{"added": "by hand"}\n')
    refused(capsys, _synth_argv(out), "Books.jsonl", "changed since")


def test_synth_killed_before_its_marker_runs_again(tmp_path: Path, monkeypatch) -> None:
    from dataset_builder.synth import writer

    out = tmp_path / "raw"
    assert main(_synth_argv(out)) == 0

    def killed(*args, **kwargs):  # both files of the new seed are in, the marker still has the old hashes
        raise KeyboardInterrupt

    monkeypatch.setattr(writer, "_write_marker", killed)
    assert main(_synth_argv(out, seed=1)) == 130
    monkeypatch.undo()
    assert main(_synth_argv(out, seed=1)) == 0
    marker = json.loads((out / "synth_marker.json").read_text())
    assert "pending" not in marker and marker["files"]["Books.jsonl"]["seed"] == 1


def test_synth_out_that_is_a_file_is_one_line(tmp_path: Path, capsys) -> None:
    out = tmp_path / "raw"
    out.write_text("a file")
    refused(capsys, _synth_argv(out), "is a file")


# --------------------------------------------------------------------- 4, 12, 13. run folders: reuse, kills


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_benchmark(tmp_path_factory.mktemp("fault_bench"))


def _eval_argv(
    bench: Path, out: Path, *extra: str, model: str = "constant", engine: str = "fake"
) -> list[str]:
    flags = "--levels easy --max-groups 2 --no-profile --no-progress"
    methods = [] if engine == "baseline" else ["--methods", "pointwise"]
    argv = ["evaluate", "--data", str(bench), "--engine", engine, "--model", model, "--out", str(out)]
    return [*argv, *methods, *flags.split(), *extra]


def test_evaluate_refuses_a_folder_holding_another_models_run(bench: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    assert main(_eval_argv(bench, out)) == 0
    before = (out / "run.json").read_bytes()
    refused(capsys, _eval_argv(bench, out, engine="baseline", model="random"), "another --out", "--overwrite")
    assert (out / "run.json").read_bytes() == before
    assert main(_eval_argv(bench, out)) == 0  # the same command still resumes
    assert json.loads((out / "run.json").read_text())["cache"]["misses"] == 0
    assert main(_eval_argv(bench, out, "--overwrite", engine="baseline", model="random")) == 0
    assert json.loads((out / "run.json").read_text())["engine"] == {"name": "baseline", "model": "random"}


def test_evaluate_overwrite_killed_at_start_leaves_no_run_json(
    bench: Path, tmp_path: Path, monkeypatch
) -> None:
    from perrec_eval import rundir
    from perrec_eval.tasks.perrecbench import context

    out = tmp_path / "run"
    assert main(_eval_argv(bench, out)) == 0

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(context, "load_groups", killed)
    assert main(_eval_argv(bench, out, "--overwrite", "--k", "2")) == 130
    with pytest.raises(DataError):  # the folder is visibly unfinished, not the old run passing for the new
        rundir.run_folders(out)


def test_evaluate_killed_while_writing_leaves_no_run_json(bench: Path, tmp_path: Path, monkeypatch) -> None:
    from perrec_eval import rundir
    from perrec_eval.tasks.perrecbench import report

    out = tmp_path / "run"
    assert main(_eval_argv(bench, out)) == 0

    def killed(*args, **kwargs):  # after predictions.jsonl and scores.json, before run.json
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "render_run", killed)
    assert main(_eval_argv(bench, out, "--overwrite", "--k", "2")) == 130
    with pytest.raises(DataError):
        rundir.run_folders(out)


def test_evaluate_second_process_on_a_run_folder_is_refused(bench: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    with held_by_another_process(out) as pid:
        refused(capsys, _eval_argv(bench, out), "in use by another perrecbench process", str(pid))
    assert main(_eval_argv(bench, out)) == 0


def test_report_killed_midway_leaves_the_old_report(bench: Path, tmp_path: Path, monkeypatch) -> None:
    from perrec_eval.leaderboard import family

    runs = tmp_path / "runs"
    assert main(_eval_argv(bench, runs / "random", engine="baseline", model="random")) == 0
    assert main(_eval_argv(bench, runs / "quality", engine="baseline", model="item-quality")) == 0
    report = tmp_path / "report"
    assert main(["report", str(runs / "random"), "--out", str(report), "--resamples", "50"]) == 0
    old = {p.relative_to(report): p.read_bytes() for p in report.rglob("*") if p.is_file()}

    def killed(*args, **kwargs):  # after the plots, before the tables and the page
        raise KeyboardInterrupt

    monkeypatch.setattr(family, "latex", killed)
    assert main(["report", str(runs), "--out", str(report), "--resamples", "50"]) == 130
    assert {p.relative_to(report): p.read_bytes() for p in report.rglob("*") if p.is_file()} == old
    monkeypatch.undo()
    assert main(["report", str(runs), "--out", str(report), "--resamples", "50"]) == 0
    assert "item-quality" in (report / "leaderboard.md").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report", "runs"]  # no temp folder left


def test_report_refuses_a_folder_whose_plots_it_did_not_write(bench: Path, tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    assert main(_eval_argv(bench, run, engine="baseline", model="random")) == 0
    paper = tmp_path / "paper"
    (paper / "plots").mkdir(parents=True)
    (paper / "plots" / "figure1.pdf").write_text("months of work")
    (paper / "leaderboard.tex").write_text("my own table")
    argv = ["report", str(run), "--out", str(paper), "--resamples", "20", "--no-plots"]
    refused(capsys, argv, "plots/figure1.pdf", "leaderboard.tex", "did not write", "--out")
    assert (paper / "plots" / "figure1.pdf").read_text() == "months of work"
    assert (paper / "leaderboard.tex").read_text() == "my own table"


def test_report_killed_while_moving_in_is_replaced_by_the_next_one(
    bench: Path, tmp_path: Path, monkeypatch
) -> None:
    run = tmp_path / "run"
    assert main(_eval_argv(bench, run, engine="baseline", model="random")) == 0
    report = tmp_path / "report"
    argv = ["report", str(run), "--out", str(report), "--resamples", "20", "--no-plots"]
    assert main(argv) == 0
    real_rename = Path.rename
    moved = []

    def killed(self, target):  # the old report is gone, one new file is in, the rest is not
        if Path(target).parent == report:
            moved.append(Path(target).name)
            if len(moved) == 2:
                raise KeyboardInterrupt
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", killed)
    assert main(argv) == 130
    monkeypatch.undo()
    assert moved[0] != "index.html" and not (report / "index.html").exists()  # visibly incomplete
    assert main(argv) == 0
    assert {p.name for p in report.iterdir()} >= {"index.html", "leaderboard.md", "leaderboard.json"}


# ------------------------------------------------------------------------------- 5. adapter names


@pytest.mark.parametrize("name", ["../../escape", "/abs/olute", ".", "..", "a/b", "-flag", "sp ace"])
def test_adapter_names_that_are_not_identifiers_are_refused(name: str) -> None:
    from perrec_eval.config import EngineSpec

    with pytest.raises(ConfigError, match="not an identifier"):
        EngineSpec(engine="fake", model="constant", adapter=(f"{name}=/some/adapter",))


def test_adapter_name_escaping_out_is_refused_on_the_command_line(
    bench: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "runs"
    refused(capsys, _eval_argv(bench, out, "--adapter", f"../../x={tmp_path}"), "NAME=PATH")
    assert not (tmp_path.parent / "x").exists() and not out.exists()


def test_adapter_default_name_of_a_dot_path_is_refused() -> None:
    from perrec_eval.config import EngineSpec

    with pytest.raises(ConfigError, match="NAME=PATH"):
        EngineSpec(engine="fake", model="constant", adapter=("..",))
    assert EngineSpec(engine="fake", model="m", adapter=("a.b-1=/x",)).adapters() == {"a.b-1": "/x"}


# ------------------------------------------------------------------------- 6, 7. secrets in files and logs

KEY_IN_URL = "sk-userinfo-SECRET-1111"
KEY_IN_QUERY = "query-SECRET-2222"
KEY_IN_BODY = "body-SECRET-3333"
_STUB_MODEL = {"engine": "openai", "model": "stub-model"}


@pytest.fixture
def stub_factory():
    """``start(script=None)``: a running OpenAI-compatible stub server on 127.0.0.1, stopped afterwards."""
    from tests.perrec_eval.openai_stub import StubServer

    servers = []

    def start(script=None):
        servers.append(StubServer(script).start())
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def test_credentials_in_base_url_reach_no_file_or_log(
    bench: Path, tmp_path: Path, stub_factory, caplog, capsys
):
    server = stub_factory()
    url = server.base_url.replace("http://", f"http://user:{KEY_IN_URL}@") + f"?api-key={KEY_IN_QUERY}"
    out = tmp_path / "run"
    extra = json.dumps({"api_key": KEY_IN_BODY})
    argv = _eval_argv(
        bench, out, "-v", "--base-url", url, "--engine-arg", f"extra_body={extra}", **_STUB_MODEL
    )
    with caplog.at_level("DEBUG"):
        assert main(argv) in (0, 1)
    assert (out / "run.json").is_file()
    written = "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
    captured = capsys.readouterr()
    for where, text in {"files": written, "log": caplog.text, "output": captured.out + captured.err}.items():
        for secret in (KEY_IN_URL, KEY_IN_QUERY, KEY_IN_BODY):
            assert secret not in text, (where, secret)
    config = json.loads((out / "run.json").read_text())["config"]
    assert config["base_url"] == [
        f"http://<redacted>@127.0.0.1:{server.httpd.server_port}/v1?api-key=<redacted>"
    ]


def test_api_key_env_given_a_key_is_refused_without_echoing_it(bench: Path, tmp_path: Path, capsys) -> None:
    key = "sk-proj-pasted-in-the-wrong-place-1234567890"
    argv = _eval_argv(bench, tmp_path / "run", "--api-key-env", key, **_STUB_MODEL)
    line = refused(capsys, argv, "NAME of an environment variable")
    assert key not in line
    assert not (tmp_path / "run").exists()


def test_a_server_echoing_the_key_in_an_answer_does_not_get_it_cached(stub_factory, tmp_path, monkeypatch):
    from perrec_eval.cache import CachedEngine
    from tests.perrec_eval.openai_stub import KEY_ENV, PARAMS, SECRET, make_engine, make_request

    monkeypatch.setenv(KEY_ENV, SECRET)
    server = stub_factory({"echo please": ["echo-key-ok"]})
    cached = CachedEngine(make_engine(server), tmp_path / "cache.jsonl")
    [completion] = cached.generate([make_request("echo please")], PARAMS)
    assert completion.ok and SECRET in server.authorizations[-1]
    assert SECRET not in completion.texts[0] and "<redacted>" in completion.texts[0]
    assert SECRET not in (tmp_path / "cache.jsonl").read_text()


def test_sft_push_refuses_a_folder_that_records_a_token(tmp_path: Path) -> None:
    from sft.config import PushConfig
    from sft.push import push

    info = {
        "kind": "adapter",
        "base_model": "m",
        "recipe": {"trl_args": ["hub_token=hf_abcdefghijklmnopqrstuvw"]},
    }
    (tmp_path / "sft_train.json").write_text(json.dumps(info))
    with pytest.raises(DataError, match="HF_TOKEN"):
        push(PushConfig(adapter=str(tmp_path), repo="org/name", dry_run=True))


def test_secrets_redact_every_shape_a_user_may_give() -> None:
    from perrec_eval.secrets import redact, redact_text

    assert redact_text("--trl-arg hub_token=hf_abc123") == "--trl-arg hub_token=<redacted>"
    assert redact_text("base_url=http://k3y@host/v1") == "base_url=http://<redacted>@host/v1"
    assert redact_text("https://h/v1?key=abc&sig=def&n=1") == "https://h/v1?key=<redacted>&sig=<redacted>&n=1"
    assert redact_text("Authorization: Bearer sk-abc") == "Authorization: Bearer <redacted>"
    assert (
        redact_text("max_tokens=800 api_key_env=OPENAI_API_KEY")
        == "max_tokens=800 api_key_env=OPENAI_API_KEY"
    )
    assert redact({"trl_args": ["hub_token=x"], "password": "p"}) == {
        "trl_args": ["hub_token=<redacted>"],
        "password": "<redacted>",
    }


# ---------------------------------------------------------------------------------- 8. hostile YAML


def test_yaml_config_with_aliases_is_refused_before_it_expands(tmp_path: Path, capsys) -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 9):
        lines.append(f"{chr(97 + i)}: &{chr(97 + i)} [{','.join(['*' + chr(96 + i)] * 9)}]")
    lines.append("model: *i")
    config = tmp_path / "laughs.yaml"
    config.write_text("\n".join(lines) + "\n")
    line = refused(capsys, ["evaluate", "--config", str(config)], "aliases", "not allowed")
    assert len(line) < 600


def test_an_error_quoting_a_huge_value_prints_a_bounded_line(tmp_path: Path, capsys) -> None:
    config = tmp_path / "big.yaml"
    config.write_text(f"k: {'9' * 50 + 'x' * 100_000}\n")
    line = refused(capsys, ["evaluate", "--config", str(config)], "k")
    assert len(line) < 2200


# ----------------------------------------------------- 13. one writer per output: profiles, score, report


def _profiles_argv(bench: Path, out: Path) -> list[str]:
    flags = "--engine fake --model constant --levels easy --max-groups 2 --no-progress"
    return ["profiles", "--data", str(bench), "--out", str(out), *flags.split()]


def test_profiles_second_process_on_one_file_is_refused(bench: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "profiles.jsonl"
    with held_by_another_process(out, "file") as pid:
        refused(capsys, _profiles_argv(bench, out), "in use by another perrecbench process", str(pid))
    assert not out.exists() and not out.with_name(out.name + ".cache.jsonl").exists()  # nothing generated
    assert main(_profiles_argv(bench, out)) == 0
    assert out.read_text().count("\n") == 4  # 2 groups x 2 users


def test_score_write_is_refused_while_another_process_holds_the_run(
    bench: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "run"
    assert main(_eval_argv(bench, out)) == 0
    before = _files(out)
    with held_by_another_process(out) as pid:
        argv = ["score", str(out), "--variant", "paper", "--write"]
        refused(capsys, argv, "in use by another perrecbench process", str(pid))
    assert _files(out) == before


def test_report_second_process_into_one_folder_is_refused(bench: Path, tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    assert main(_eval_argv(bench, run, engine="baseline", model="random")) == 0
    report = tmp_path / "report"
    with held_by_another_process(report) as pid:
        argv = ["report", str(run), "--out", str(report), "--resamples", "20", "--no-plots"]
        refused(capsys, argv, "in use by another perrecbench process", str(pid))
    assert not (report / "index.html").exists()


def test_sweep_holds_its_folder_through_the_report(bench: Path, tmp_path: Path, monkeypatch) -> None:
    from perrec_eval.leaderboard import family
    from perrec_eval.lock import folder_lock

    out = tmp_path / "sweep"
    seen = []

    def report_folder(*args, **kwargs):  # another process cannot take OUT while the report is written
        code = "import sys\nfrom perrec_eval.lock import folder_lock\nwith folder_lock(sys.argv[1]): pass"
        child = subprocess.run(
            [sys.executable, "-c", code, str(out)], capture_output=True, text=True, env=_child_env()
        )
        seen.append(child.returncode != 0 and "in use by another perrecbench process" in child.stderr)
        return real(*args, **kwargs)

    real = family.write
    monkeypatch.setattr(family, "write", report_folder)
    flags = "--engine fake --model constant --methods pointwise --levels easy --max-groups 2 --no-profile"
    argv = ["sweep", "--data", str(bench), "--out", str(out), "--ks", "1", "--shots-grid", "0", "--no-plots"]
    assert main([*argv, *flags.split()]) == 0
    assert seen == [True]
    with folder_lock(out):  # released at the end
        pass


def test_build_second_process_on_one_out_is_refused(tmp_path: Path, capsys) -> None:
    source = five_user_source(tmp_path / "raw")
    out = tmp_path / "bench"
    with held_by_another_process(out, "file") as pid:
        refused(capsys, _build_argv(source, out), "in use by another perrecbench process", str(pid))
    assert not out.exists() and not (tmp_path / "bench.stages").exists()
    assert main(_build_argv(source, out)) == 0


def test_synth_second_process_on_one_folder_is_refused(tmp_path: Path, capsys) -> None:
    out = tmp_path / "raw"
    argv = ["synth", "--out", str(out), "--reviews-per-domain", "200", "--domains", "Books", "--no-progress"]
    with held_by_another_process(out) as pid:
        refused(capsys, argv, "in use by another perrecbench process", str(pid))
    assert [p.name for p in out.iterdir()] == [".perrecbench.lock"]


def test_sweep_refuses_a_report_folder_of_something_else_before_the_grid(
    bench: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "sweep"
    (out / "report" / "plots").mkdir(parents=True)
    (out / "report" / "plots" / "mine.png").write_bytes(b"png")
    flags = "--engine fake --model constant --methods pointwise --levels easy --max-groups 2 --no-profile"
    argv = ["sweep", "--data", str(bench), "--out", str(out), "--ks", "1", "--shots-grid", "0", "--no-plots"]
    refused(capsys, [*argv, *flags.split()], "report/plots/mine.png", "did not write")
    assert sorted(p.name for p in out.iterdir()) == ["report"]  # no grid point run, not even a lock


@pytest.mark.parametrize("lock", ["folder_lock", "file_lock"])
def test_lock_of_an_output_under_a_file_is_one_line_naming_out(tmp_path: Path, lock: str) -> None:
    """Every command takes its output's lock first: an --out that cannot be made fails there, in one line."""
    from perrec_eval import lock as locks

    (tmp_path / "a-file").write_text("x")
    with pytest.raises(DataError, match=r"cannot write .*a-file/out: .* choose another --out"):
        with getattr(locks, lock)(tmp_path / "a-file" / "out"):
            pass


def test_lock_beside_an_output_named_perrecbench_is_not_its_folders_lock(tmp_path: Path) -> None:
    from perrec_eval.lock import file_lock

    with held_by_another_process(tmp_path), file_lock(tmp_path / "perrecbench"):  # build --out X/perrecbench
        assert (tmp_path / ".perrecbench.perrecbench.lock").is_file()


def test_baselines_all_refuse_a_run_folder_another_process_holds(bench: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "baselines"
    with held_by_another_process(out / "random") as pid:  # e.g. a `score --write` on that run
        argv = _eval_argv(bench, out, engine="baseline", model="all")
        refused(capsys, argv, "in use by another perrecbench process", str(pid))
    assert not list(out.glob("*/run.json"))


def _child_env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}


# ---------------------------------------------------------------- 12. score --write killed mid-way


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and p.name != ".perrecbench.lock"}


def test_score_write_killed_while_writing_leaves_the_old_run(bench: Path, tmp_path: Path, monkeypatch):
    from perrec_eval import fileio

    out = tmp_path / "run"
    assert main(_eval_argv(bench, out)) == 0
    before = _files(out)
    real_fsync = os.fsync
    calls = []

    def killed(fd):  # the second temp file (report.md) is being written
        calls.append(fd)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real_fsync(fd)

    monkeypatch.setattr(fileio.os, "fsync", killed)
    assert main(["score", str(out), "--variant", "paper", "--write"]) == 130
    assert _files(out) == before  # no temp file left either


@pytest.mark.parametrize("renamed", [1, 2])
def test_score_write_killed_between_renames_is_refused_on_read(
    bench: Path, tmp_path: Path, monkeypatch, capsys, renamed: int
) -> None:
    from perrec_eval import fileio
    from perrec_eval.tasks.perrecbench import rundir as run_files

    out = tmp_path / "run"
    assert main(_eval_argv(bench, out)) == 0
    real_replace = os.replace
    calls = []

    def killed(src, dst):  # scores.json (and report.md) renamed, run.json not
        calls.append(dst)
        if len(calls) > renamed:
            raise KeyboardInterrupt
        real_replace(src, dst)

    monkeypatch.setattr(fileio.os, "replace", killed)
    assert main(["score", str(out), "--variant", "paper", "--write"]) == 130
    monkeypatch.undo()
    assert json.loads((out / "scores.json").read_text())["extras"]["variant"] == "paper"
    assert json.loads((out / "run.json").read_text())["metric"]["variant"] == "tau_b"
    with pytest.raises(DataError, match="score --write. was interrupted"):
        run_files.load_scores(out)
    refused(capsys, ["report", str(out)], "interrupted", f"perrecbench score {out} --write")
    assert not [p for p in out.iterdir() if ".tmp-" in p.name]
    assert main(["score", str(out), "--write"]) == 0  # the fix the message names
    assert run_files.load_scores(out).variant == "tau_b"


def test_score_write_records_the_new_metric_in_run_json(bench: Path, tmp_path: Path) -> None:
    from perrec_eval.tasks.perrecbench import rundir as run_files

    out = tmp_path / "run"
    assert main(_eval_argv(bench, out)) == 0
    assert main(["score", str(out), "--variant", "paper", "--invalid", "skip", "--write"]) == 0
    scores = run_files.load_scores(out)
    assert (scores.variant, scores.invalid) == ("paper", "skip")
    assert json.loads((out / "run.json").read_text())["metric"] == {"variant": "paper", "invalid": "skip"}


# ------------------------------------------------------------------ 6. secrets in tracebacks (--debug)


def test_debug_traceback_hides_credentials_of_a_base_url(tmp_path: Path) -> None:
    key = "sk-debug-SECRET-4444"
    (tmp_path / "data").mkdir()
    argv = ["--debug", "evaluate", "--data", str(tmp_path / "data"), "--engine", "openai", "--model", "m"]
    argv += ["--base-url", f"http://user:{key}@127.0.0.1:9/v1,", "--out", str(tmp_path / "run")]
    child = subprocess.run(
        [sys.executable, "-m", "perrec_eval", *argv], capture_output=True, text=True, env=_child_env()
    )
    assert child.returncode == 1
    assert "Traceback" in child.stderr and "ConfigError" in child.stderr  # --debug still shows it whole
    assert key not in child.stderr and "http://<redacted>@127.0.0.1:9/v1" in child.stderr


def test_thread_errors_and_uncaught_errors_are_redacted(monkeypatch, capsys) -> None:
    import logging
    import threading

    from perrec_eval.secrets import redact_tracebacks

    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    redact_tracebacks()
    logging.captureWarnings(False)
    url = "http://me:sk-thread-SECRET-5555@h/v1"

    def fail() -> None:
        raise RuntimeError(f"cannot reach {url}")

    thread = threading.Thread(target=fail)
    thread.start()
    thread.join()
    try:
        raise ValueError(url)
    except ValueError as err:
        sys.excepthook(type(err), err, err.__traceback__)
    err = capsys.readouterr().err
    assert "cannot reach" in err and "ValueError" in err
    assert "sk-thread-SECRET-5555" not in err and err.count("http://<redacted>@h/v1") == 2
