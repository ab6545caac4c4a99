"""Fault injection, replayed: the audit's "wrong results" and "one line, not a traceback" cases (issue 18).

Each test replays one adversarial invocation (a hostile flag or config, a corrupted or truncated file, an
interrupt at a chosen point, a local stub server) and checks that the run either gives the right result or
refuses with one line naming the fix (exit 2). Data-loss, secret and locking cases live in
`tests/test_fault_injection.py`.
"""

from __future__ import annotations

import json
import types

import pytest

from perrec_eval.cache import CachedEngine, key_of, request_key
from perrec_eval.cli import main
from perrec_eval.engines.hf import HFOptions
from perrec_eval.engines.openai import OpenAIOptions
from perrec_eval.engines.vllm import VLLMOptions
from perrec_eval.errors import ConfigError
from perrec_eval.types import ChatRequest, GenParams
from tests.benchmark_fixture import write_manifest, write_tiny_benchmark, write_truth_profiles
from tests.perrec_eval.openai_stub import KEY_ENV, PARAMS, SECRET, StubServer, make_engine, make_request


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    folder = write_tiny_benchmark(tmp_path_factory.mktemp("bench") / "perrecbench")
    profiles = write_truth_profiles(folder, folder.parent / "profiles.jsonl")
    return folder, profiles


@pytest.fixture
def stub():
    server = StubServer().start()
    yield server
    server.stop()


def _one_line_error(capsys, argv, *needles):
    """Run the CLI; it must exit 2 with one line on stderr that contains every needle."""
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    last = err.splitlines()[-1]
    assert "Traceback" not in err and last.startswith("perrecbench "), err
    for needle in needles:
        assert needle in last, last
    return last


# --- 9. the cache key covers every option that changes an answer ----------------------------------------


def test_cache_another_extra_body_is_asked_again(stub, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    request = make_request("q")
    first = CachedEngine(make_engine(stub, extra_body='{"top_k": 5}'), tmp_path / "cache.jsonl")
    first.generate([request], PARAMS)
    second = CachedEngine(make_engine(stub, extra_body='{"top_k": 50}'), tmp_path / "cache.jsonl")
    second.generate([request], PARAMS)
    assert second.misses == 1 and len(stub.bodies) == 2
    assert stub.bodies[1]["top_k"] == 50
    again = CachedEngine(make_engine(stub, extra_body='{"top_k":5}'), tmp_path / "cache.jsonl")
    again.generate([request], PARAMS)
    assert again.hits == 1 and len(stub.bodies) == 2  # the same object, written differently, still hits


def test_cache_another_structured_outputs_mode_is_asked_again(stub, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    request, params = make_request("q"), GenParams(temperature=0.0, max_tokens=16, answer_format="pointwise")
    CachedEngine(make_engine(stub), tmp_path / "cache.jsonl").generate([request], params)
    other = CachedEngine(make_engine(stub, structured_outputs="response_format"), tmp_path / "cache.jsonl")
    other.generate([request], params)
    assert other.misses == 1 and len(stub.bodies) == 2
    assert "response_format" in stub.bodies[1] and "structured_outputs" not in stub.bodies[1]


def test_cache_keys_of_older_versions_stay_byte_identical():
    """Old run folders resume: the keys of runs without an adapter and with default options never change."""
    request = ChatRequest(messages=({"role": "user", "content": "hi"},))
    engine = types.SimpleNamespace(name="hf", model="m", adapter=None, options=HFOptions())
    assert request_key(engine, request, GenParams()) == (
        "89cc18acf20fd90113dd0a9ffeab02acb4557388cff132b0c95f79ecbe4aa1c6"
    )
    options = OpenAIOptions(extra_body='{"top_k": 5}')
    engine = types.SimpleNamespace(name="openai", model="m", adapter=None, options=options)
    assert request_key(engine, request, GenParams(answer_format="pairwise")) == (
        "098ccec86afc89c55e815488f35dbf8f9ab6c82f3e8594806e03a5b63fb7fc6f"
    )


def test_cache_overwrite_keeps_only_answers_whose_keys_cover_every_setting(tmp_path):
    from perrec_eval.cache import KEYS, CachedEngine
    from perrec_eval.engines.fake import FakeEngine
    from perrec_eval.rundir import claim

    cache = CachedEngine(FakeEngine(lambda request, params, index: "an answer"), tmp_path / "cache.jsonl")
    cache.generate([make_request("new")], PARAMS)
    (new,) = (tmp_path / "cache.jsonl").read_text().splitlines()
    assert json.loads(new)["keys"] == KEYS
    old = json.dumps({"key": "k", "texts": ["an answer of an older version"]})  # its key may cover less
    (tmp_path / "cache.jsonl").write_text(f"{old}\n{new}\n")
    (tmp_path / "run.json").write_text(json.dumps({"config": {"model": "a"}}))
    claim(tmp_path, {"model": "a"}, overwrite=True)  # the same settings resume: every answer stays
    assert (tmp_path / "cache.jsonl").read_text() == f"{old}\n{new}\n"
    claim(tmp_path, {"model": "b"}, overwrite=True)
    assert (tmp_path / "cache.jsonl").read_text() == f"{new}\n" and not (tmp_path / "run.json").exists()


def test_cache_key_of_default_options_is_unchanged():
    request = make_request("q")
    old_formula = key_of("openai", "stub-model", None, PARAMS, request)
    for options in (OpenAIOptions(), HFOptions(), VLLMOptions()):
        engine = types.SimpleNamespace(name="openai", model="stub-model", adapter=None, options=options)
        assert request_key(engine, request, PARAMS) == old_formula


@pytest.mark.parametrize(
    "options",
    [
        HFOptions(dtype="float16"),
        VLLMOptions(chat_template_kwargs='{"enable_thinking": false}'),
        VLLMOptions(dtype="bfloat16"),
        OpenAIOptions(extra_body='{"top_k": 1}'),
    ],
)
def test_cache_key_covers_answer_changing_engine_options(options):
    request = make_request("q")
    engine = types.SimpleNamespace(name="x", model="m", adapter=None, options=options)
    assert request_key(engine, request, PARAMS) != key_of("x", "m", None, PARAMS, request)


@pytest.mark.parametrize("field", ["model", "messages", "n", "temperature", "seed"])
def test_openai_extra_body_cannot_override_what_the_run_sets(field):
    with pytest.raises(ConfigError, match=f"extra_body may not set {field}"):
        OpenAIOptions(extra_body=json.dumps({field: "other"}))


def test_cli_extra_body_naming_another_model_is_refused(bench, tmp_path, capsys):
    folder, profiles = bench
    argv = ["evaluate", "--data", str(folder), "--engine", "openai", "--model", "m", "--out", str(tmp_path)]
    argv += ["--base-url", "http://127.0.0.1:9/v1", "--engine-arg", 'extra_body={"model": "other"}']
    _one_line_error(capsys, argv, "extra_body may not set model")


# --- 10. a level or method named twice is refused -------------------------------------------------------


@pytest.mark.parametrize("flag,value", [("--levels", "easy,easy"), ("--methods", "pointwise,pointwise")])
def test_cli_evaluate_refuses_a_level_or_method_named_twice(bench, tmp_path, capsys, flag, value):
    folder, profiles = bench
    argv = ["evaluate", "--data", str(folder), "--engine", "fake", "--model", "constant"]
    argv += ["--out", str(tmp_path / "run"), "--profiles", str(profiles), flag, value]
    _one_line_error(capsys, argv, f"{flag} lists", "more than once")
    assert not (tmp_path / "run" / "scores.json").exists()


def test_sweep_refuses_a_grid_point_named_twice(bench, tmp_path):
    from perrec_eval.tasks.perrecbench.config import SweepConfig
    from perrec_eval.tasks.perrecbench.leaderboard.sweep import run_grid

    folder, profiles = bench
    settings = dict(data=str(folder), engine="fake", model="m", out=str(tmp_path), profiles=str(profiles))
    with pytest.raises(ConfigError, match="--ks lists 4 more than once"):
        run_grid(SweepConfig(**settings, ks=(4, 4)))


def test_cli_profiles_refuses_a_split_named_twice(bench, tmp_path, capsys):
    folder, _ = bench
    argv = ["profiles", "--data", str(folder), "--engine", "fake", "--model", "constant"]
    argv += ["--out", str(tmp_path / "p.jsonl"), "--splits", "test,test"]
    _one_line_error(capsys, argv, "--splits lists test more than once")


# --- 14. files checked against the build, predictions checked against the run, baselines without LLM flags


@pytest.fixture(scope="module")
def fake_run(bench, tmp_path_factory):
    folder, profiles = bench
    out = tmp_path_factory.mktemp("fake_run") / "run"
    argv = ["evaluate", "--data", str(folder), "--engine", "fake", "--model", "constant", "--out", str(out)]
    assert main([*argv, "--profiles", str(profiles), "--no-progress"]) == 0
    return out


def _copy_run(run, tmp_path):
    import shutil

    return shutil.copytree(run, tmp_path / "run")


def _copy_bench(bench, tmp_path):
    import shutil

    return shutil.copytree(bench[0], tmp_path / "bench")


def _with_manifest(data):
    """The build's manifest.json (its `outputs`) for a hand-made benchmark folder."""
    outputs = {}
    for path in data.glob("*/*.parquet"):
        outputs.setdefault(path.parent.name, {})[path.name.split("-")[0]] = f"{path.parent.name}/{path.name}"
    (data / "manifest.json").write_text(json.dumps({"outputs": outputs}))
    return data


def test_cli_evaluate_reads_a_benchmark_whose_files_match_the_manifest(bench, tmp_path, capsys):
    data = _with_manifest(_copy_bench(bench, tmp_path))
    argv = ["evaluate", "--data", str(data), "--engine", "baseline", "--model", "random"]
    assert main([*argv, "--out", str(tmp_path / "run"), "--no-progress"]) == 0


def test_cli_evaluate_refuses_a_level_file_copied_over_another(bench, tmp_path, capsys):
    data = _with_manifest(_copy_bench(bench, tmp_path))
    (easy,) = (data / "easy").glob("test-*.parquet")
    (medium,) = (data / "medium").glob("test-*.parquet")
    medium.write_bytes(easy.read_bytes())
    argv = ["evaluate", "--data", str(data), "--engine", "baseline", "--model", "random"]
    _one_line_error(capsys, [*argv, "--out", str(tmp_path / "run")], str(medium), "--overwrite")


def test_cli_evaluate_refuses_a_file_missing_from_the_manifest(bench, tmp_path, capsys):
    data = _copy_bench(bench, tmp_path)
    (easy,) = (data / "easy").glob("test-*.parquet")
    outputs = {"easy": {"test": "easy/test-000000000000.parquet"}}
    (data / "manifest.json").write_text(json.dumps({"outputs": outputs}))
    argv = ["evaluate", "--data", str(data), "--engine", "baseline", "--model", "random", "--levels", "easy"]
    _one_line_error(capsys, [*argv, "--out", str(tmp_path / "run")], "test-000000000000.parquet is missing")


@pytest.mark.parametrize("command", [["score"], ["report"]])
def test_cli_refuses_samples_whose_token_counts_are_no_numbers(fake_run, tmp_path, capsys, command):
    run = _copy_run(fake_run, tmp_path)
    lines = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    lines[0]["prompt_tokens"] = "many"
    (run / "samples.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    argv = [command[0], str(run)]
    argv += ["--out", str(tmp_path / "report"), "--no-plots"] if command == ["report"] else []
    _one_line_error(capsys, argv, "samples.jsonl line 1: prompt_tokens is 'many', not a token count")


@pytest.mark.parametrize("command", [["score"], ["score", "--write"], ["report"]])
def test_cli_refuses_predictions_with_missing_lines(fake_run, tmp_path, capsys, command):
    run = _copy_run(fake_run, tmp_path)
    lines = (run / "predictions.jsonl").read_text().splitlines()
    (run / "predictions.jsonl").write_text("\n".join(lines[1:]) + "\n")
    before = (run / "scores.json").read_text()
    argv = [command[0], str(run), *command[1:]]
    argv += ["--out", str(tmp_path / "report")] if command == ["report"] else []
    _one_line_error(capsys, argv, "lacks 1 of the", "predictions.jsonl")
    assert (run / "scores.json").read_text() == before


@pytest.mark.parametrize(
    "flags",
    [["--cot"], ["--shots", "1"], ["--samples", "3"], ["--temperature", "0.7"], ["--profiles", "p.jsonl"]],
)
def test_cli_baselines_refuse_llm_only_settings(bench, tmp_path, capsys, flags):
    argv = ["evaluate", "--data", str(bench[0]), "--engine", "baseline", "--model", "all"]
    _one_line_error(capsys, [*argv, "--out", str(tmp_path / "b"), *flags], flags[0], "is an LLM setting")
    assert not (tmp_path / "b").exists()


# --- 15. damaged run folders: one line naming the file, never a traceback -------------------------------


@pytest.mark.parametrize("command", ["score", "report"])
@pytest.mark.parametrize(
    "name,content,needle",
    [
        ("run.json", "{}", "run.json has no 'config' part"),
        ("run.json", "[]", "run.json is not a run's record"),
        ("run.json", '{"config": {', "run.json is not valid JSON"),
        ("predictions.jsonl", "", "predictions.jsonl is empty"),
        ("predictions.jsonl", "[1]\n", "predictions.jsonl line 1 is not a JSON object"),
    ],
)
def test_cli_damaged_run_folder_is_one_line(fake_run, tmp_path, capsys, command, name, content, needle):
    run = _copy_run(fake_run, tmp_path)
    (run / name).write_text(content)
    argv = [command, str(run)] + (["--out", str(tmp_path / "report")] if command == "report" else [])
    _one_line_error(capsys, argv, needle)


@pytest.mark.parametrize("command", ["score", "report"])
@pytest.mark.parametrize(
    "line,needle", [("{}", "has no 'group_id'"), ("5", "is not a JSON object"), ('{"a": ', "not valid JSON")]
)
def test_cli_damaged_samples_line_is_one_line_naming_it(fake_run, tmp_path, capsys, command, line, needle):
    run = _copy_run(fake_run, tmp_path)
    count = len((run / "samples.jsonl").read_text().splitlines())
    with (run / "samples.jsonl").open("a") as handle:
        handle.write(line + "\n")
    argv = [command, str(run)] + (["--out", str(tmp_path / "report")] if command == "report" else [])
    _one_line_error(capsys, argv, f"samples.jsonl line {count + 1}", needle)


def test_cli_profiles_into_a_damaged_profiles_file_is_one_line(bench, tmp_path, capsys):
    out = tmp_path / "profiles.jsonl"
    first = {"group_id": "t0000", "user_id": "U0_0", "profile": "x", "engine": "fake", "model": "constant"}
    from perrec_eval.tasks.perrecbench.profiles import DEFAULT_MAX_CHARS, DEFAULT_MAX_ITEMS

    first |= {"max_items": DEFAULT_MAX_ITEMS, "max_chars": DEFAULT_MAX_CHARS}
    out.write_text(json.dumps(first) + '\n{"group_id": ')
    argv = ["profiles", "--data", str(bench[0]), "--engine", "fake", "--model", "constant", "--out", str(out)]
    _one_line_error(capsys, argv, f"{out}:2")


def test_cli_report_refuses_a_non_numeric_score(fake_run, tmp_path, capsys):
    run = _copy_run(fake_run, tmp_path)
    scores = json.loads((run / "scores.json").read_text())
    scores["cells"][0]["metrics"]["ptc"]["value"] = "abc"
    (run / "scores.json").write_text(json.dumps(scores))
    argv = ["report", str(run), "--out", str(tmp_path / "report")]
    _one_line_error(capsys, argv, "scores.json", "ptc value='abc', not a number", "score")


def test_cli_score_names_the_line_of_a_non_numeric_prediction(fake_run, tmp_path, capsys):
    run = _copy_run(fake_run, tmp_path)
    lines = (run / "predictions.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["references"] = ["a"] * len(first["references"])
    (run / "predictions.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    _one_line_error(capsys, ["score", str(run)], "predictions.jsonl line 1: references")


# --- 15. build: interrupts, cut and unreadable inputs, impossible settings -------------------------------


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    root = tmp_path_factory.mktemp("raw")
    argv = ["synth", "--out", str(root / "raw"), "--reviews-per-domain", "6000", "--domains", "Books"]
    assert main([*argv, "--no-progress"]) == 0
    return root / "raw"


def _build(source, out, *flags):
    argv = ["build", "--source", str(source), "--out", str(out), "--domains", "Books", "--test-groups", "4"]
    return [*argv, "--no-progress", *flags]


@pytest.mark.parametrize("flags", [[], ["--on-bad-line", "skip"]])
def test_cli_build_of_a_cut_gzip_file_is_one_line(raw, tmp_path, capsys, flags):
    import gzip
    import shutil

    source = tmp_path / "raw"
    source.mkdir()
    shutil.copy(raw / "meta_Books.jsonl", source)
    whole = gzip.compress((raw / "Books.jsonl").read_bytes())
    (source / "Books.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    _one_line_error(capsys, _build(source, tmp_path / "out", *flags), "Books.jsonl.gz", "download it again")


def test_cli_build_of_an_unreadable_input_is_one_line(raw, tmp_path, capsys):
    import shutil

    source = tmp_path / "raw"
    source.mkdir()
    shutil.copy(raw / "meta_Books.jsonl", source)
    (source / "Books.jsonl").mkdir()  # a name the build must read that cannot be read as a file
    _one_line_error(capsys, _build(source, tmp_path / "out"), "Books: read reviews: cannot read the input")


def test_cli_build_refuses_an_infinite_window(raw, tmp_path, capsys):
    _one_line_error(capsys, _build(raw, tmp_path / "out", "--window-days", "inf"), "--window-days")


@pytest.mark.parametrize("kind", ["runtime", "duckdb"])
def test_cli_build_interrupted_inside_a_duckdb_query_exits_130(raw, tmp_path, capsys, monkeypatch, kind):
    import duckdb

    from dataset_builder.perrecbench import selection

    def interrupted(*args, **kwargs):
        # What DuckDB raises for Ctrl-C inside a query (the Python API's RuntimeError, or its own class).
        if kind == "runtime":
            raise RuntimeError("Query interrupted")
        raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")

    monkeypatch.setattr(selection, "_run", interrupted)
    assert main(_build(raw, tmp_path / "out")) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and "run the same command again to resume" in err


def test_cli_other_runtime_errors_keep_their_traceback(raw, tmp_path, monkeypatch):
    from dataset_builder.perrecbench import selection

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(selection, "_run", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        main(_build(raw, tmp_path / "out"))


# --- 15 + 17. evaluate: damaged data, empty --data, devices and weights it does not have -----------------


def test_cli_evaluate_of_a_corrupted_parquet_page_is_one_line(bench, tmp_path, capsys):
    data = _copy_bench(bench, tmp_path)
    (easy,) = (data / "easy").glob("test-*.parquet")
    damaged = bytearray(easy.read_bytes())
    for i in range(200, 600):
        damaged[i] ^= 0x5A
    easy.unlink()  # a new name: datasets would serve its cached copy of the old one (PITFALLS 1)
    (data / "easy" / "test-damaged.parquet").write_bytes(bytes(damaged))
    card = (data / "README.md").read_text()
    (data / "README.md").write_text(card.replace(f"easy/{easy.name}", "easy/test-damaged.parquet"))
    write_manifest(data)  # the damage recorded as the build's: what is refused is the parquet itself
    argv = ["evaluate", "--data", str(data), "--engine", "baseline", "--model", "random", "--levels", "easy"]
    _one_line_error(capsys, [*argv, "--out", str(tmp_path / "run")], "a data file is damaged")


@pytest.mark.parametrize("command", ["evaluate", "profiles"])
def test_cli_empty_data_is_one_line(tmp_path, capsys, command):
    argv = [command, "--data", "", "--engine", "fake", "--model", "constant", "--out", str(tmp_path / "x")]
    _one_line_error(capsys, argv, "--data is empty")


def _hf_argv(bench, model, out):
    folder, profiles = bench
    argv = ["evaluate", "--data", str(folder), "--engine", "hf", "--model", str(model), "--out", str(out)]
    return [*argv, "--profiles", str(profiles), "--levels", "easy", "--methods", "pointwise", "--no-progress"]


def test_cli_hf_device_without_cuda_is_one_line(bench, tiny_model_dir, tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    argv = [*_hf_argv(bench, tiny_model_dir, tmp_path / "run"), "--engine-arg", "device=cuda:7"]
    _one_line_error(capsys, argv, "device=cuda:7", "device=cpu")


def test_cli_hf_cut_weights_file_is_one_line(bench, tiny_model_dir, tmp_path, capsys):
    import shutil

    model = shutil.copytree(tiny_model_dir, tmp_path / "model")
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    _one_line_error(capsys, _hf_argv(bench, model, tmp_path / "run"), "cannot read the weights", str(model))


def test_cli_hf_mistyped_model_path_says_the_path_does_not_exist(bench, tmp_path, capsys):
    argv = _hf_argv(bench, tmp_path / "no-such-model", tmp_path / "run")
    last = _one_line_error(capsys, argv, "no-such-model: no such folder")
    assert "Repo id" not in last


def test_cli_hf_negative_temperature_is_refused_before_loading(bench, tmp_path, capsys, monkeypatch):
    from perrec_eval.engines import hf

    def never(*args, **kwargs):
        raise AssertionError("the model was loaded before the settings were checked")

    monkeypatch.setattr(hf.HFEngine, "__init__", never)
    argv = [*_hf_argv(bench, tmp_path / "model", tmp_path / "run"), "--temperature", "-1"]
    _one_line_error(capsys, argv, "--temperature must be >= 0")


def test_cli_profiles_out_folder_is_refused_before_generating(bench, tmp_path, capsys):
    argv = ["profiles", "--data", str(bench[0]), "--engine", "fake", "--model", "constant"]
    _one_line_error(capsys, [*argv, "--out", str(tmp_path)], "is a folder", "profiles.jsonl")
    assert not list(tmp_path.iterdir())


# --- 15. sft train: --drop-long that drops everything --------------------------------------------------


def test_cli_sft_train_drop_long_of_every_example_is_one_line(tiny_model_dir, tmp_path, capsys):
    from tests.sft.conftest import write_sft_benchmark

    bench_dir = write_sft_benchmark(tmp_path / "bench")
    data = tmp_path / "data"
    argv = [
        "sft",
        "data",
        "--data",
        str(bench_dir),
        "--format",
        "pairwise",
        "--no-profile",
        "--out",
        str(data),
    ]
    assert main([*argv, "--no-progress"]) == 0
    argv = ["sft", "train", "--model_name_or_path", str(tiny_model_dir), "--data", str(data)]
    argv += ["--output_dir", str(tmp_path / "a"), "--max-length", "8", "--drop-long"]
    _one_line_error(capsys, argv, "all", "--max_length")


# --- 16. a failure that asking again cannot cure gets its fix, not "run the same command again" ------------


class _EveryRequest(dict):
    """A stub script that gives every request the same actions."""

    def __init__(self, actions):
        super().__init__({"*": actions})  # not empty: the stub replaces a falsy script with {}
        self.actions = actions

    def get(self, key, default=None):
        return self.actions


def _openai_argv(bench, server, out):
    folder, profiles = bench
    argv = ["evaluate", "--data", str(folder), "--engine", "openai", "--model", "stub-model"]
    argv += ["--base-url", server.base_url, "--out", str(out), "--profiles", str(profiles)]
    argv += ["--levels", "easy", "--methods", "pointwise", "--max-groups", "2", "--no-progress"]
    return [*argv, "--engine-arg", "max_retries=0"]


def test_cli_prompt_over_the_context_names_the_fix_not_a_rerun(bench, tmp_path, capsys):
    refusal = ("status", 400, {}, "This model's maximum context length is 2048 tokens")
    server = StubServer(_EveryRequest([refusal])).start()
    try:
        assert main(_openai_argv(bench, server, tmp_path / "run")) == 1
    finally:
        server.stop()
    err = capsys.readouterr().err
    assert "fail the same way on every try" in err and "--k" in err and "longer context" in err
    assert "run the same command again" not in err
    report = (tmp_path / "run" / "report.md").read_text()
    assert "need the fix `perrecbench evaluate` printed" in report


def test_cli_transient_failures_still_say_run_again(bench, tmp_path, capsys):
    server = StubServer(_EveryRequest([("status", 503, {}, "overloaded")])).start()
    try:
        assert main(_openai_argv(bench, server, tmp_path / "run")) == 1
    finally:
        server.stop()
    err = capsys.readouterr().err
    assert "run the same command again to retry them" in err and "every try" not in err


@pytest.mark.parametrize(
    "error,transient",
    [
        ("no answer within 600s (gave up after 7 attempts)", True),
        ("HTTP 503 from http://h/v1: busy (gave up after 7 attempts)", True),
        ("HTTP 429 from http://h/v1: slow down (gave up after 7 attempts)", True),
        ("HTTP 400 from http://h/v1: prompt is too long (not retried)", False),
        (
            "profile request failed: prompt of 9 tokens + max_tokens 800 exceeds the model's 64 positions",
            False,
        ),
    ],
)
def test_engine_errors_are_told_permanent_from_transient(error, transient):
    from perrec_eval.tasks.perrecbench.profiles import permanent_fix

    assert (permanent_fix(error) is None) is transient


# --- 17. what users see: help texts, bars, leftovers of killed runs, permissions, card paths -------------


def _help(capsys, *command):
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(
    "command,flag,says",
    [
        (["sweep"], "--no-plots", "(needs the report extra) (default: on; this flag turns it off"),
        (["report"], "--no-plots", "(default: on; this flag turns it off"),
    ],
)
def test_cli_help_of_a_no_switch_says_it_turns_the_setting_off(capsys, command, flag, says):
    text = _help(capsys, *command)
    assert flag in text and says in text
    assert "option_strings" not in text  # a bare % in a help text made argparse print its own internals


def test_cli_synth_no_progress_draws_no_bars(tmp_path, capsys):
    argv = ["synth", "--out", str(tmp_path / "raw"), "--reviews-per-domain", "3000", "--domains", "Books"]
    assert main([*argv, "--no-progress"]) == 0
    assert "synth Books" not in capsys.readouterr().err


def _dead_pid():
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_fileio_a_later_write_removes_the_leftovers_of_a_killed_writer(tmp_path):
    import os

    from perrec_eval import fileio

    target = tmp_path / "scores.json"
    dead = tmp_path / f".scores.json.tmp-{_dead_pid()}"
    dead.write_text("half")
    live = tmp_path / f".scores.json.tmp-{os.getppid()}"  # a process that is running: left alone
    live.write_text("busy")
    fileio.write_json(target, {"a": 1})
    assert not dead.exists() and live.exists() and json.loads(target.read_text()) == {"a": 1}


def test_fileio_a_result_moved_aside_by_a_killed_writer_is_moved_back(tmp_path):
    from perrec_eval import fileio

    report = tmp_path / "report"
    old = tmp_path / f".report.old-{_dead_pid()}"  # killed between moving the old out and the new in
    old.mkdir()
    (old / "index.html").write_text("old report")
    half = tmp_path / f".report.tmp-{_dead_pid()}"
    half.mkdir()
    fileio.remove_stale(report)
    assert (report / "index.html").read_text() == "old report" and not old.exists() and not half.exists()


def test_cli_report_removes_the_leftovers_of_a_killed_report(fake_run, tmp_path, capsys):
    out = tmp_path / "report"
    half = tmp_path / f".report.tmp-{_dead_pid()}"
    (half / "plots").mkdir(parents=True)
    assert main(["report", str(fake_run), "--out", str(out), "--no-plots"]) == 0
    assert not half.exists() and (out / "index.html").is_file()


def test_cli_build_removes_the_folder_of_a_killed_build(raw, tmp_path, capsys):
    out = tmp_path / "bench"
    dead = tmp_path / f".bench.tmp-{_dead_pid()}"
    (dead / "easy").mkdir(parents=True)
    (dead / "easy" / "test-0.parquet").write_bytes(b"x" * 1000)
    assert main(_build(raw, out)) == 0
    assert not dead.exists() and (out / "manifest.json").is_file()


def test_cli_build_refuses_the_current_folder_before_selecting(raw, tmp_path, capsys, monkeypatch):
    from dataset_builder.perrecbench import selection

    def never(*args, **kwargs):
        raise AssertionError("the selection ran before --out was checked")

    monkeypatch.setattr(selection, "_run", never)
    monkeypatch.chdir(tmp_path)
    _one_line_error(capsys, _build(raw, ".", "--overwrite"), "--out . is the current folder")


def test_fileio_json_errors_name_the_file(tmp_path):
    from perrec_eval import fileio
    from perrec_eval.errors import DataError

    broken = tmp_path / "runs" / "m1" / "run.json"
    broken.parent.mkdir(parents=True)
    broken.write_text('{"config": ')
    with pytest.raises(DataError, match="m1/run.json is not valid JSON"):
        fileio.read_json(broken)
    lines = tmp_path / "samples.jsonl"
    lines.write_text('{"a": 1}\n{"a": \n')
    with pytest.raises(DataError, match="samples.jsonl line 2"):
        fileio.read_jsonl(lines)


def test_fileio_open_permissions_undoes_safetensors_private_mode(tmp_path):
    import os

    from perrec_eval import fileio

    weights = tmp_path / "adapter" / "adapter_model.safetensors"
    weights.parent.mkdir()
    weights.write_bytes(b"w")
    weights.chmod(0o600)
    mask = os.umask(0o022)
    try:
        fileio.open_permissions(tmp_path / "adapter")
    finally:
        os.umask(mask)
    assert weights.stat().st_mode & 0o777 == 0o644


def test_sft_model_card_shows_no_local_paths(tmp_path):
    from sft.card import model_card

    base = tmp_path / "home" / "me" / "models" / "tiny-chat"
    base.mkdir(parents=True)
    info = {
        "kind": "adapter",
        "base_model": str(base),
        "perrecbench": "0",
        "data": {
            "format": "pairwise",
            "variant": "no_profile",
            "examples": 3,
            "examples_per_format": {"pairwise": 3},
            "groups": 1,
            "levels": ["easy"],
            "k": 4,
            "path": str(tmp_path / "data"),
            "source": {"data": str(tmp_path / "bench"), "source_kind": "synthetic"},
        },
        "recipe": {
            "lora_r": 16,
            "lora_alpha": 32,
            "lora_dropout": 0.05,
            "target_modules": ["q_proj"],
            "epochs": 1,
            "max_steps": -1,
            "batch_size": 8,
            "per_device_batch_size": 8,
            "gradient_accumulation": 1,
            "world_size": 1,
            "learning_rate": 1e-4,
            "lr_scheduler": "linear",
            "warmup": 0.0,
            "max_length": 512,
            "precision": "fp32",
            "dtype": "auto",
            "seed": 0,
        },
        "dropped_long": 0,
    }
    card = model_card(info, name="pw")
    assert str(tmp_path) not in card and "tiny-chat" in card


# --- 19. a cell where (most) answers failed looks like it everywhere, and is never "best" ---------------


@pytest.fixture(scope="module")
def failed_and_reverse(bench, tmp_path_factory):
    from perrec_eval.engines.fake import FakeEngine
    from perrec_eval.tasks.perrecbench.config import EvalConfig
    from perrec_eval.tasks.perrecbench.run import evaluate
    from tests.benchmark_fixture import truth_responder

    folder, profiles = bench
    root = tmp_path_factory.mktemp("failed_runs")
    runs = {}
    for name, responder in [("rambler", lambda request, params, i: "I like books."), ("reverse", None)]:
        config = EvalConfig(
            data=str(folder),
            engine="fake",
            model=name,
            out=str(root / name),
            profiles=str(profiles),
            methods=("pointwise",),
        )
        evaluate(config, FakeEngine(responder or truth_responder(-1.0), model=name))
        runs[name] = root / name
    return runs


def test_cli_score_table_shows_the_failure_share(failed_and_reverse, capsys):
    assert main(["score", str(failed_and_reverse["rambler"])]) == 0
    out = capsys.readouterr().out  # the table, as evaluate prints it (--json: the scores)
    assert "| rambler | all 6 failed |" in out  # as every family shows a cell where every doc failed
    assert "all 6 failed" in (failed_and_reverse["rambler"] / "report.md").read_text()


def test_cli_report_never_marks_a_failed_cell_best(failed_and_reverse, tmp_path, capsys):
    runs = [str(failed_and_reverse["rambler"]), str(failed_and_reverse["reverse"])]
    assert main(["report", *runs, "--out", str(tmp_path / "report"), "--no-plots"]) == 0
    board = (tmp_path / "report" / "leaderboard.md").read_text()
    rambler = next(line for line in board.splitlines() if line.startswith("| rambler"))
    reverse = next(line for line in board.splitlines() if line.startswith("| reverse"))
    assert "**" not in rambler and "all 6 failed" in rambler and "3 of 3 cells mostly failed" in rambler
    assert "**-1.000" in reverse  # the worst real answers are still the best of the usable ones
    assert "all N failed: no doc answered" in board
    tex = (tmp_path / "report" / "leaderboard.tex").read_text()
    assert r"\textbf{0.000" not in tex and "all 6 failed" in tex


def test_report_mostly_failed_means_more_than_half_the_groups():
    from perrec_eval.tasks.perrecbench.leaderboard.board import MOSTLY_FAILED, mostly_failed

    assert MOSTLY_FAILED == 0.5
    assert mostly_failed({"num_groups": 5, "num_invalid": 3})
    assert not mostly_failed({"num_groups": 6, "num_invalid": 3})


# --- 18 and 20. the README and the docs pages walked top to bottom by a newcomer ----------------------------

REPO = __import__("pathlib").Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
# the README and every page of docs/ (a new page is covered as soon as it exists)
PAGES = {
    p.relative_to(REPO).as_posix(): p.read_text(encoding="utf-8")
    for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
}


def _paragraphs(text):
    return [block for block in text.split("\n\n") if block.strip()]


def test_readme_says_install_torch_first_wherever_torch_comes_in():
    torch_extras = [
        (name, p)
        for name, text in PAGES.items()
        for p in _paragraphs(text)
        if '".[train]"' in p or "`[hf]`" in p or '".[hf' in p
    ]
    assert {"README.md", "docs/engines.md", "docs/fine-tuning.md"} <= {name for name, _ in torch_extras}
    for name, paragraph in torch_extras:
        assert "torch==2.13.0" in paragraph, (name, paragraph)


def test_readme_installs_from_the_clone():
    assert "pip install -e ." in README
    assert "pip install perrecbench" not in README and 'pip install "perrecbench' not in README
    for name, text in PAGES.items():
        blocks = [block.split("```")[0] for block in text.split("```bash")[1:]]
        for line in (line for block in blocks for line in block.splitlines()):
            words = line.split("#")[0].split()
            if words[:2] != ["pip", "install"]:
                continue
            # torch alone, or the clone as an editable install: a plain `pip install .` would replace the
            # editable install (later edits in the clone ignored) and leave build/ behind (issue 27, trip 2)
            assert words[2].startswith("torch==") or words[2] == "-e", (name, line)


def test_readme_profiles_commands_write_train_profiles_for_shots():
    commands = [
        (text, line)
        for text in PAGES.values()
        for line in text.splitlines()
        if "perrecbench profiles --" in line
    ]
    assert commands
    for text, line in commands:
        block = text[text.index(line) : text.index(line) + 400]
        assert "--splits train,test" in block, line


def test_cli_shots_without_train_profiles_names_the_splits(bench, tmp_path, capsys):
    folder, profiles = bench
    test_only = tmp_path / "test-users.jsonl"
    lines = profiles.read_text().splitlines()
    test_only.write_text("\n".join(line for line in lines if '"group_id": "t' in line) + "\n")
    argv = ["evaluate", "--data", str(folder), "--engine", "fake", "--model", "constant", "--shots", "1"]
    argv += ["--profiles", str(test_only), "--out", str(tmp_path / "run"), "--no-progress"]
    _one_line_error(capsys, argv, "--splits train,test")


def test_cli_shots_hint_writes_the_missing_profiles_as_printed(bench, tmp_path, capsys):
    import shlex

    folder, _ = bench
    profiles = tmp_path / "test-users.jsonl"
    writer = ["--engine", "fake", "--model", "constant"]
    argv = ["profiles", "--data", str(folder), *writer, "--splits", "test", "--out", str(profiles)]
    assert main([*argv, "--no-progress"]) == 0
    evaluate = ["evaluate", "--data", str(folder), *writer, "--shots", "1", "--methods", "pointwise"]
    evaluate += ["--profiles", str(profiles), "--out", str(tmp_path / "run"), "--no-progress"]
    hint = _one_line_error(capsys, evaluate, "--splits train,test").split("`")[1]
    assert main([*shlex.split(hint)[1:], "--no-progress"]) == 0, capsys.readouterr().err  # as printed
    assert main(evaluate) == 0


def test_readme_links_the_protocol():
    assert "(docs/PROTOCOL.md)" in README and (REPO / "docs" / "PROTOCOL.md").is_file()


@pytest.mark.parametrize(
    "page,term,explained",
    [
        ("README.md", "tau-b", "handles tied scores"),
        ("README.md", "leak-free", "no test user's test review"),
        ("README.md", "sign-flip", "random sign flips"),
        ("docs/perrecbench.md", "BM25", "keyword-overlap"),
        ("docs/perrecbench.md", "tau-b", "handles tied scores"),
        ("docs/perrecbench.md", "leak-free", "no test user's test review"),
        ("docs/reports.md", "sign-flip", "random sign flips"),
        ("docs/fine-tuning.md", "factor-mean", "two LoRA factors separately"),
        ("docs/fine-tuning.md", "--method cat", "exact mean of their weight updates"),
    ],
)
def test_readme_explains_each_term_where_it_first_appears(page, term, explained):
    text = " ".join(PAGES[page].split())  # where the lines break does not matter
    first = text.index(term)
    assert explained in text[max(0, first - 300) : first + 400], term


def test_readme_loop_folders_are_ignored_and_cleaned():
    loop = PAGES["docs/fine-tuning.md"]
    roots = {
        word.split("/")[0]
        for line in loop.splitlines()
        if "--out" in line
        for word in line.split("--out", 1)[1].split()[:1]
        if not word.startswith("$")
    }
    assert {"sft_data", "adapters", "runs", "report_sft"} <= roots
    ignored = (REPO / ".gitignore").read_text()
    clean = (REPO / "Makefile").read_text().split("\nclean:", 1)[1].split("\n\n", 1)[0]
    for root in ("sft_data", "adapters", "runs", "report_sft"):
        assert f"/{root}/" in ignored, root
        assert root in clean, root


def test_cli_score_says_whether_it_saved(fake_run, tmp_path, capsys):
    run = _copy_run(fake_run, tmp_path)
    assert main(["score", str(run), "--variant", "paper"]) == 0
    assert "not saved: add --write" in capsys.readouterr().err
    assert json.loads((run / "scores.json").read_text())["extras"]["variant"] == "tau_b"
    assert main(["score", str(run), "--variant", "paper", "--write"]) == 0
    assert "written to" in capsys.readouterr().err
    assert json.loads((run / "scores.json").read_text())["extras"]["variant"] == "paper"


def test_cli_evaluate_next_hint_names_the_folder_just_written(bench, tmp_path, capsys):
    out = tmp_path / "runs" / "baselines"
    argv = [
        "evaluate",
        "--data",
        str(bench[0]),
        "--engine",
        "baseline",
        "--model",
        "random",
        "--out",
        str(out),
    ]
    assert main([*argv, "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert f"next: perrecbench report {out} --out {tmp_path / 'report'}" in printed
    assert main([*argv[:-1], str(tmp_path / "mine"), "--no-progress"]) == 0
    assert f"--out {tmp_path / 'mine'}-report" in capsys.readouterr().out


def test_cli_report_without_plots_does_not_claim_plots(fake_run, tmp_path, capsys):
    assert main(["report", str(fake_run), "--out", str(tmp_path / "r"), "--no-plots"]) == 0
    printed = capsys.readouterr().out
    assert "plots/" not in printed.splitlines()[-1] and not (tmp_path / "r" / "plots").exists()


def test_readme_quick_start_commands_run_as_written(tmp_path, monkeypatch, capsys):
    import shlex

    monkeypatch.chdir(tmp_path)
    demo = "demo_out"
    # `make demo` with less data (its commands are checked by the Makefile itself)
    setup = [
        ["synth", "--out", f"{demo}/raw", "--reviews-per-domain", "8000", "--domains", "Books"],
        ["build", "--source", f"{demo}/raw", "--out", f"{demo}/perrecbench", "--domains", "Books"],
        ["evaluate", "--data", f"{demo}/perrecbench", "--engine", "baseline", "--model", "all"],
    ]
    setup[1] += ["--test-groups", "6", "--overwrite"]
    setup[2] += ["--out", f"{demo}/runs/baselines"]
    for argv in setup:
        assert main([*argv, "--no-progress"]) == 0, argv
    page = PAGES["docs/perrecbench.md"]
    block = page.split("Then, on the demo's output", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line.startswith("perrecbench ")]
    assert [c.split()[1] for c in commands] == ["score", "evaluate", "report"]
    for command in commands:
        argv = shlex.split(command)[1:]
        if argv[0] == "evaluate":
            argv += ["--levels", "easy"]  # a smaller run: the command is otherwise as written
        assert main([*argv, "--no-progress"]) == 0, command
    capsys.readouterr()
    assert (tmp_path / demo / "report-all" / "index.html").is_file()
