"""What a run records about how it generated: answer budgets, structured outputs, its label, its profiles."""

from __future__ import annotations

import json

import pytest

from perrec_eval.config import EvalConfig
from perrec_eval.engines.fake import SCRIPTS, FakeEngine
from perrec_eval.leaderboard.runs import settings_of, system_name
from perrec_eval.results import read_run_info
from perrec_eval.run import evaluate
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
    from perrec_eval.commands import _warn_suspect_profiles

    config = _config(bench, tmp_path, levels=("easy",))
    evaluate(config, FakeEngine(_profile_writer("Short but cut", "length"), model=config.model))
    _warn_suspect_profiles(config)
    flagged = _run_json(tmp_path)["profiles"]["quality"]["flagged"]
    assert f"{flagged} profiles are suspect ({flagged} cut" in capsys.readouterr().err
