"""The outside audit replayed (issue 18): hostile paths and configs, kills at chosen points, secrets in every
place a user might put one. Each case failed before its fix; a refusal is one line naming the fix, exit 2.

Sections follow the audit's items; tiny fixtures only (the five-user raw source, the fake engine, the local
OpenAI-compatible stub server). Cases that need the tiny trained model sit beside its fixtures: `sft train`
killed after a checkpoint and resumed, overlapping or foreign output folders (tests/sft/test_train.py),
`sft merge` into the base model or over an earlier merge (tests/sft/test_merge.py), adapter names PEFT cannot
hold (tests/sft/test_hf_adapters.py).
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
    from perrec_eval import context, rundir

    out = tmp_path / "run"
    assert main(_eval_argv(bench, out)) == 0

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(context, "load_groups", killed)
    assert main(_eval_argv(bench, out, "--overwrite", "--k", "2")) == 130
    with pytest.raises(DataError):  # the folder is visibly unfinished, not the old run passing for the new
        rundir.run_folders(out)


def test_evaluate_killed_while_writing_leaves_no_run_json(bench: Path, tmp_path: Path, monkeypatch) -> None:
    from perrec_eval import report, rundir

    out = tmp_path / "run"
    assert main(_eval_argv(bench, out)) == 0

    def killed(*args, **kwargs):  # after predictions.jsonl and scores.json, before run.json
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "write_report", killed)
    assert main(_eval_argv(bench, out, "--overwrite", "--k", "2")) == 130
    with pytest.raises(DataError):
        rundir.run_folders(out)


def test_evaluate_second_process_on_a_run_folder_is_refused(bench: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(out)], stdout=subprocess.PIPE, text=True, env=_child_env()
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        refused(capsys, _eval_argv(bench, out), "in use by another perrecbench process", str(holder.pid))
    finally:
        holder.kill()  # kill -9: the operating system drops the lock with the process
        holder.wait()
    assert main(_eval_argv(bench, out)) == 0


_HOLD_LOCK = """
import sys, time
from perrec_eval.lock import folder_lock
with folder_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(120)
"""


def _child_env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}


def test_report_killed_midway_leaves_the_old_report(bench: Path, tmp_path: Path, monkeypatch) -> None:
    from perrec_eval.leaderboard import render

    runs = tmp_path / "runs"
    assert main(_eval_argv(bench, runs / "random", engine="baseline", model="random")) == 0
    assert main(_eval_argv(bench, runs / "quality", engine="baseline", model="item-quality")) == 0
    report = tmp_path / "report"
    assert main(["report", str(runs / "random"), "--out", str(report), "--resamples", "50"]) == 0
    (tmp_path / "report" / "notes.txt").write_text("mine")
    old = {p.relative_to(report): p.read_bytes() for p in report.rglob("*") if p.is_file()}

    def killed(*args, **kwargs):  # after the plots, before the tables and the page
        raise KeyboardInterrupt

    monkeypatch.setattr(render, "latex", killed)
    assert main(["report", str(runs), "--out", str(report), "--resamples", "50"]) == 130
    assert {p.relative_to(report): p.read_bytes() for p in report.rglob("*") if p.is_file()} == old
    monkeypatch.undo()
    assert main(["report", str(runs), "--out", str(report), "--resamples", "50"]) == 0
    assert "item-quality" in (report / "leaderboard.md").read_text()
    assert (report / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report", "runs"]  # no temp folder left


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
