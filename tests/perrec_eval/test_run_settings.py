"""What a run records about how it generated: answer budgets, structured outputs, its label, its profiles."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from perrec_eval.engines.fake import SCRIPTS, FakeEngine
from perrec_eval.errors import DataError
from perrec_eval.results import read_run_info
from perrec_eval.tasks.perrecbench.config import EvalConfig
from perrec_eval.tasks.perrecbench.leaderboard.runs import settings_of, system_name
from perrec_eval.tasks.perrecbench.run import evaluate
from perrec_eval.types import Completion
from tests.benchmark_fixture import write_tiny_benchmark


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    return write_tiny_benchmark(tmp_path_factory.mktemp("bench") / "perrecbench", n_test=2, n_train=1)


def _config(bench, out, **kwargs) -> EvalConfig:
    return EvalConfig(data=str(bench), engine="fake", model="/models/smol.Q4_1.gguf", out=str(out), **kwargs)


def _run_json(out):
    return json.loads((out / "run.json").read_text())


def _profile_writer(profile_text: str, reason: str = "stop"):
    """Profiles answered with `profile_text` (finish reason `reason`); rankings by the constant script."""
    constant = SCRIPTS["constant"]

    def respond(request, params, sample_index):
        if "create a user profile" in request.messages[-1]["content"]:
            return Completion(texts=(profile_text,), extra={"finish_reasons": [reason]})
        return constant(request, params, sample_index)

    return respond


def test_run_records_budgets_formats_and_label(bench, tmp_path):
    seen = []

    def respond(request, params, sample_index):
        seen.append(params)
        return "[User A]"

    config = _config(
        bench,
        tmp_path,
        no_profile=True,
        levels=("medium",),
        structured_outputs=True,
        max_new_tokens=("listwise=48", "pairwise=8"),
    )
    evaluate(config, FakeEngine(respond, model=config.model))
    generation = _run_json(tmp_path)["generation"]
    assert generation["max_new_tokens"] == {"pointwise": 800, "pairwise": 8, "listwise": 48}
    assert generation["answer_formats"] == {
        "medium/pointwise": "pointwise",
        "medium/pairwise": "pairwise",
        "medium/listwise": "listwise:3",
    }
    assert {(p.answer_format, p.max_tokens) for p in seen} == {
        ("pointwise", 800),
        ("pairwise", 8),
        ("listwise:3", 48),
    }
    info = read_run_info(tmp_path)
    assert info.label == "smol.Q4_1" and system_name(info, tmp_path) == "smol.Q4_1"
    assert settings_of(info, [])["structured"] == "on"


def test_run_label_flag_names_the_rows(bench, tmp_path):
    config = _config(bench, tmp_path, no_profile=True, levels=("easy",), label="smollm2")
    evaluate(config, FakeEngine(model="constant"))
    assert system_name(read_run_info(tmp_path), tmp_path) == "smollm2"
    assert "smollm2" in (tmp_path / "report.md").read_text()


def test_run_counts_cut_and_degenerate_profiles(bench, tmp_path):
    config = _config(bench, tmp_path, levels=("easy",), max_new_tokens=("profile=64",))
    evaluate(
        config, FakeEngine(_profile_writer("Likes " + "tea and cake " * 20, "length"), model=config.model)
    )
    profiles = _run_json(tmp_path)["profiles"]
    assert profiles["max_tokens"] == 64
    assert profiles["quality"]["cut"] == profiles["quality"]["repetitive"] == profiles["quality"]["flagged"]
    assert profiles["quality"]["flagged"] > 0 and profiles["failures"] == 0
    saved = [json.loads(line) for line in (tmp_path / "profiles.jsonl").read_text().splitlines()]
    assert all(record["flags"] == ["cut", "repetitive"] for record in saved)


def test_run_resumed_keeps_the_flags_of_saved_profiles(bench, tmp_path):
    config = _config(bench, tmp_path, levels=("easy",))
    evaluate(config, FakeEngine(_profile_writer("Short but cut", "length"), model=config.model))
    first = _run_json(tmp_path)["profiles"]["quality"]
    (tmp_path / "cache.jsonl").unlink()  # the saved profiles file alone must carry the flags
    evaluate(config, FakeEngine(_profile_writer("never asked"), model=config.model))
    assert _run_json(tmp_path)["profiles"]["quality"] == first and first["cut"] > 0


def test_run_degenerate_profiles_fail_policy_blocks_their_requests(bench, tmp_path):
    config = _config(bench, tmp_path, levels=("easy",), degenerate_profiles="fail")
    scores = evaluate(config, FakeEngine(_profile_writer("Short but cut", "length"), model=config.model))
    info = _run_json(tmp_path)
    assert info["profiles"]["failures"] == info["profiles"]["quality"]["flagged"] > 0
    assert scores.num_engine_errors > 0 and "degenerate profile" in scores.first_engine_error


def test_run_default_settings_keep_the_released_budgets(bench, tmp_path):
    config = _config(bench, tmp_path, no_profile=True, levels=("easy",))
    evaluate(config, FakeEngine(model="constant"))
    info = _run_json(tmp_path)
    assert info["generation"]["max_new_tokens"] == {"pointwise": 800, "pairwise": 512, "listwise": 800}
    assert info["generation"]["structured_outputs"] is False
    assert settings_of(read_run_info(tmp_path), [])["structured"] == "off"


def test_evaluate_warns_of_suspect_profiles_from_run_json(bench, tmp_path, capsys):
    from perrec_eval.tasks.perrecbench.commands import _warn_suspect_profiles

    config = _config(bench, tmp_path, levels=("easy",))
    evaluate(config, FakeEngine(_profile_writer("Short but cut", "length"), model=config.model))
    _warn_suspect_profiles(config)
    flagged = _run_json(tmp_path)["profiles"]["quality"]["flagged"]
    assert f"{flagged} profiles are suspect ({flagged} cut" in capsys.readouterr().err


def _profile_texts(out) -> set[str]:
    return {json.loads(line)["profile"] for line in (out / "profiles.jsonl").read_text().splitlines()}


def test_run_refuses_its_folders_profiles_of_another_model(bench, tmp_path):
    config = _config(bench, tmp_path, levels=("easy",))
    evaluate(config, FakeEngine(_profile_writer("Written by model A."), model="model-a"))
    (tmp_path / "run.json").unlink()  # killed before run.json: the folder reads as unfinished
    other = replace(config, model="model-b")
    with pytest.raises(DataError, match="model='model-a' \\(now 'model-b'\\).*pass --overwrite"):
        evaluate(other, FakeEngine(_profile_writer("Written by model B."), model="model-b"))
    assert _profile_texts(tmp_path) == {"Written by model A."}


def test_run_overwrite_writes_its_own_profiles_instead_of_relabelling(bench, tmp_path):
    config = _config(bench, tmp_path, levels=("easy",))
    evaluate(config, FakeEngine(_profile_writer("Written by model A."), model="model-a"))
    other = replace(config, model="model-b", overwrite=True)
    evaluate(other, FakeEngine(_profile_writer("Written by model B."), model="model-b"))
    assert _profile_texts(tmp_path) == {"Written by model B."}
    saved = {json.loads(line)["model"] for line in (tmp_path / "profiles.jsonl").read_text().splitlines()}
    assert saved == {"model-b"} and _run_json(tmp_path)["profiles"]["writer"]["model"] == "model-b"


def test_run_profiles_of_a_retrained_adapter_are_not_its_own(bench, tmp_path):
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_model.safetensors").write_bytes(b"first weights")
    config = _config(bench, tmp_path / "run", levels=("easy",), adapter=(f"a={adapter}",))
    evaluate(config, FakeEngine(_profile_writer("Written with the first weights."), model=config.model))
    (adapter / "adapter_model.safetensors").write_bytes(b"retrained weights")
    with pytest.raises(DataError, match="adapter_sha256="):
        evaluate(config, FakeEngine(_profile_writer("Written with the new weights."), model=config.model))


def _profiles_file(bench, path, records):
    """Every test user's profile, with `records(i)` updating the i-th line."""
    from tests.benchmark_fixture import write_truth_profiles

    write_truth_profiles(bench, path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**line, **records(i)}) + "\n" for i, line in enumerate(lines)))
    return path


def test_run_refuses_a_profiles_file_of_two_writers(bench, tmp_path):
    path = _profiles_file(bench, tmp_path / "p.jsonl", lambda i: {"engine": "hf", "model": f"m{i % 2}"})
    config = _config(bench, tmp_path / "run", levels=("easy",), profiles=str(path))
    with pytest.raises(DataError, match="model='m1' \\(now 'm0'\\).*a file of its own"):
        evaluate(config, FakeEngine(model="constant"))


def test_run_records_the_writer_of_a_profiles_file(bench, tmp_path):
    path = _profiles_file(bench, tmp_path / "p.jsonl", lambda i: {"engine": "hf", "model": "writer"})
    config = _config(bench, tmp_path / "run", levels=("easy",), profiles=str(path))
    evaluate(config, FakeEngine(model="constant"))
    assert _run_json(tmp_path / "run")["profiles"]["writer"] == {"engine": "hf", "model": "writer"}


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"flags": "cut"}, "flags must be a list"),
        ({"profile": None}, "not a text"),
        ({"profile": " "}, "not a text"),
    ],
)
def test_run_refuses_a_profiles_file_with_malformed_records(bench, tmp_path, fields, says):
    path = _profiles_file(bench, tmp_path / "p.jsonl", lambda i: fields if i == 0 else {})
    config = _config(bench, tmp_path / "run", levels=("easy",), profiles=str(path))
    with pytest.raises(DataError, match=says):
        evaluate(config, FakeEngine(model="constant"))
