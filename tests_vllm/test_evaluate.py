"""`perrecbench evaluate --engine vllm` end to end: every cell, one LLM.chat per step, a kill and a resume."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests_vllm.conftest import (
    PERRECBENCH,
    VLLM_ARGS,
    answers,
    cache_lines,
    evaluate,
    read_json,
    start,
    stop,
    wait_until,
)


@pytest.fixture(scope="module")
def full_run(assets, tmp_path_factory) -> Path:
    """Every level and method, profiles written by the model, sampled at the paper's temperature 0.1."""
    out = tmp_path_factory.mktemp("full_run")
    evaluate(assets, out, "--engine", "vllm", "--model", str(assets / "model"), *VLLM_ARGS)
    return out


def test_evaluate_with_vllm_writes_all_nine_cells(full_run):
    run = read_json(full_run / "run.json")
    scores = read_json(full_run / "scores.json")
    assert run["complete"] is True, run["engine_errors"]
    assert len(run["engine_calls"]) == 9
    cells = {(cell["subset"], cell["protocol"]) for cell in scores["cells"]}  # the shared layout
    assert cells == {
        (lv, m) for lv in ("easy", "medium", "hard") for m in ("pointwise", "pairwise", "listwise")
    }
    assert run["engine"]["seeding"] == "per_request"


def test_evaluate_with_vllm_sends_each_step_as_one_chat_call(full_run):
    run = read_json(full_run / "run.json")
    steps = sum(run["engine_calls"].values())
    assert run["engine"]["chat_calls"] == steps + 1  # one per ranking step, one for the profiles


def test_evaluate_with_vllm_resumes_after_a_kill_without_repeating_finished_chunks(
    assets, full_run, tmp_path
):
    out = tmp_path / "killed"
    args = [
        "evaluate",
        "--data",
        str(assets / "bench"),
        "--out",
        str(out),
        "--engine",
        "vllm",
        "--model",
        str(assets / "model"),
        "--profiles",
        str(full_run / "profiles.jsonl"),
        "--engine-arg",
        "chunk_size=8",
        *VLLM_ARGS,
    ]
    process = start([str(PERRECBENCH), *args], tmp_path / "killed.log")
    try:
        wait_until(
            lambda: len(cache_lines(out / "cache.jsonl")) >= 24,
            timeout=300,
            what="3 chunks saved",
            process=process,
        )
    finally:
        stop(process, signal.SIGKILL)
    saved = cache_lines(out / "cache.jsonl")
    assert all(json.loads(line)["texts"] for line in saved)  # whole answers: the chunk in flight is lost
    assert not (out / "run.json").exists()

    run = evaluate(assets, out, *args[5:])
    after = cache_lines(out / "cache.jsonl")
    assert run["complete"] is True
    assert after[: len(saved)] == saved
    assert run["cache"]["misses"] == len(after) - len(saved)  # nothing saved was asked again
    assert len({line.split('"key":"')[1][:64] for line in after}) == len(after)
    # Per-request seeds: the killed, resumed run (chunks of 8) drew what the uninterrupted one did.
    assert answers(out) == answers(full_run)
