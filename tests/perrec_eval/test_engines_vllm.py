"""What the vLLM engine hands to `LLM.chat`, against a stand-in `vllm` module (no vLLM needed)."""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace
from typing import Any

import pytest

from perrec_eval.engines import load_engine
from perrec_eval.engines._common import sample_seed
from perrec_eval.types import ChatRequest, GenParams

SAMPLED = GenParams(temperature=0.7, top_p=0.9, max_tokens=5, n=2, seed=3)


def make_request(text: str) -> ChatRequest:
    return ChatRequest(messages=({"role": "system", "content": "rank"}, {"role": "user", "content": text}))


class StandInLLM:
    """Records each `chat` call; answers every sample with the seed its request was given."""

    def __init__(self, model: str, **options: Any) -> None:
        self.model = model
        self.options = options
        self.calls: list[dict[str, Any]] = []

    def chat(self, conversations, sampling_params, **options):
        self.calls.append({"conversations": conversations, "sampling_params": sampling_params, **options})
        return [
            SimpleNamespace(
                prompt_token_ids=[1, 2, 3],
                outputs=[
                    SimpleNamespace(text=f"seed={params.seed}", token_ids=[7], finish_reason="stop")
                    for _ in range(params.n)
                ],
            )
            for params in sampling_params
        ]


@pytest.fixture
def vllm_engine(monkeypatch):
    module = types.ModuleType("vllm")
    module.LLM = StandInLLM
    module.SamplingParams = SimpleNamespace
    module.__version__ = "0.0-stand-in"
    monkeypatch.setitem(sys.modules, "vllm", module)
    return load_engine("vllm", "some-model", options={"progress": False})


def test_vllm_engine_makes_one_chat_call_with_one_sampling_params_per_request(vllm_engine):
    requests = [make_request(q) for q in ("a", "b", "c")]
    completions = vllm_engine.generate(requests, SAMPLED)
    (call,) = vllm_engine.llm.calls
    assert len(call["conversations"]) == len(call["sampling_params"]) == 3
    params = call["sampling_params"][0]
    assert (params.n, params.temperature, params.top_p, params.max_tokens) == (2, 0.7, 0.9, 5)
    assert (params.top_k, params.min_p, params.repetition_penalty) == (0, 0.0, 1.0)
    assert [c.texts for c in completions] == [(f"seed={sample_seed(3, r)}",) * 2 for r in requests]


def test_vllm_engine_seeds_a_request_the_same_in_any_batch(vllm_engine):
    alone = vllm_engine.generate([make_request("b")], SAMPLED)
    batched = vllm_engine.generate([make_request(q) for q in ("c", "b", "a")], SAMPLED)
    assert batched[1].texts == alone[0].texts
    assert len({c.texts for c in batched}) == 3  # each request its own seed


def test_vllm_engine_does_not_seed_greedy_requests(vllm_engine):
    vllm_engine.generate([make_request("a")], GenParams(temperature=0.0, seed=3))
    (params,) = vllm_engine.llm.calls[0]["sampling_params"]
    assert params.seed is None
