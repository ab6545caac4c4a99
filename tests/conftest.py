"""Shared test setup: offline, single-threaded, and a tiny chat model and a RecBench+ build made once per
session."""

from __future__ import annotations

import os
from pathlib import Path

# Before anything imports torch, tokenizers or huggingface_hub: never download; one thread (2 CI cores).
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
# Tests only talk to servers they start on 127.0.0.1: never through a proxy from the environment.
os.environ["NO_PROXY"] = os.environ["no_proxy"] = ",".join(
    filter(None, [os.environ.get("NO_PROXY", ""), "127.0.0.1", "localhost"])
)

import pytest  # noqa: E402

from tests.tiny_model import build_tiny_chat_model  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama chat model (tokenizer with chat template and pad token) saved in a temp folder."""
    return build_tiny_chat_model(tmp_path_factory.mktemp("tiny_chat_model"))


@pytest.fixture(scope="session")
def rbp_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A RecBench+ build of the fixture's synthetic raw files, made once per session (copy it to edit it)."""
    from tests.dataset_builder.recbench_plus import fixture

    root = tmp_path_factory.mktemp("rbp_build")
    return fixture.build(root / "rbp", fixture.synth(root / "raw"))


@pytest.fixture(autouse=True)
def _progress_on():
    """`--no-progress` turns the process-wide switch off: every test starts with it on again."""
    yield
    from perrec_eval import progress

    progress.enable()


@pytest.fixture
def slept(monkeypatch) -> list[float]:
    """Every `time.sleep` asked for during the test (seconds; the sleeps still happen): "fails fast" is
    asserted on the waits the code chose, never on a wall clock a busy machine stretches."""
    import time

    waits: list[float] = []
    real_sleep = time.sleep

    def recording_sleep(seconds: float) -> None:
        waits.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", recording_sleep)
    return waits
