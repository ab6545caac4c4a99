"""The transformers engine on a tiny random chat model built locally (CPU, offline)."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from perrec_eval.cache import CachedEngine
from perrec_eval.engines import load_engine
from perrec_eval.engines.hf import HFOptions
from perrec_eval.types import ChatRequest, GenParams

pytestmark = pytest.mark.slow

GREEDY = GenParams(temperature=0.0, max_tokens=10)
CPU = {"device": "cpu"}


def make_request(words: int, topic: str = "great book") -> ChatRequest:
    return ChatRequest(
        messages=(
            {"role": "system", "content": "Act as a personalized product recommender system."},
            {"role": "user", "content": " ".join([topic] * words) + "\nAnswer:"},
        )
    )


MIXED = [
    make_request(words, topic)
    for words, topic in [(1, "a"), (9, "b"), (3, "c"), (14, "d"), (2, "e"), (6, "f"), (11, "g")]
]


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    return load_engine("hf", str(tiny_model_dir), options=HFOptions(batch_size=3, device="cpu"))


def test_hf_engine_preserves_order_with_mixed_lengths(engine):
    completions = engine.generate(MIXED, GREEDY)
    assert [c.prompt_tokens for c in completions] == [len(engine.encode(request)) for request in MIXED]
    assert len({c.prompt_tokens for c in completions}) == len(MIXED)  # the check above can tell them apart
    one_by_one = [engine.generate([request], GREEDY)[0].texts for request in MIXED]
    assert [c.texts for c in completions] == one_by_one


def test_hf_engine_reports_each_batch(engine):
    reported: list[list[int]] = []
    engine.generate(MIXED, GREEDY, on_results=lambda finished: reported.append([i for i, _ in finished]))
    assert [len(batch) for batch in reported] == [3, 3, 1]
    assert reported[0] == [3, 6, 1]  # longest prompts first
    assert sorted(i for batch in reported for i in batch) == list(range(len(MIXED)))


def test_hf_engine_batches_hold_at_most_max_batch_tokens_prompt_tokens(tiny_model_dir):
    """The prefill's memory grows with a batch's rows × its longest prompt: a batch holds at most
    `max_batch_tokens` of them (a longer prompt goes alone), whatever `batch_size` allows."""
    lengths = {}
    engine = load_engine("hf", str(tiny_model_dir), options=HFOptions(batch_size=8, max_batch_tokens=60))
    for index, request in enumerate(MIXED):
        lengths[index] = len(engine.encode(request))
    reported: list[list[int]] = []
    completions = engine.generate(
        MIXED, GREEDY, on_results=lambda done: reported.append([i for i, _ in done])
    )
    assert sorted(i for batch in reported for i in batch) == list(range(len(MIXED)))
    for batch in reported:
        assert len(batch) == 1 or len(batch) * max(lengths[i] for i in batch) <= 60, (batch, lengths)
    assert len(reported) > 1  # batch_size alone would have made one batch
    assert [c.texts for c in completions] == [c.texts for c in load_engine(
        "hf", str(tiny_model_dir), options=HFOptions(batch_size=8, device="cpu")
    ).generate(MIXED, GREEDY)]  # fmt: skip


def test_hf_engine_greedy_is_deterministic_and_repeats_for_n(engine):
    single = engine.generate(MIXED[:2], GREEDY)
    repeated = engine.generate(MIXED[:2], GenParams(temperature=0.0, max_tokens=10, n=3))
    for one, three in zip(single, repeated, strict=True):
        assert three.texts == one.texts * 3
        assert three.completion_tokens == 3 * one.completion_tokens
    assert engine.generate(MIXED[:2], GREEDY) == single


def test_hf_engine_samples_n_seeded(engine):
    params = GenParams(temperature=1.0, top_p=1.0, max_tokens=8, n=4, seed=7)
    first = engine.generate(MIXED[:3], params)
    again = engine.generate(MIXED[:3], params)
    other_seed = engine.generate(MIXED[:3], GenParams(temperature=1.0, max_tokens=8, n=4, seed=8))
    assert all(len(c.texts) == 4 for c in first)
    assert [c.texts for c in first] == [c.texts for c in again]
    assert [c.texts for c in first] != [c.texts for c in other_seed]
    assert any(len(set(c.texts)) > 1 for c in first)  # n samples, not one repeated


SAMPLED = GenParams(temperature=1.0, top_p=0.9, max_tokens=8, n=2, seed=5)


def test_hf_engine_samples_a_request_the_same_alone_and_in_any_batch(engine):
    batched = [c.texts for c in engine.generate(MIXED, SAMPLED)]
    alone = [engine.generate([request], SAMPLED)[0].texts for request in MIXED]
    reversed_order = [c.texts for c in engine.generate(MIXED[::-1], SAMPLED)][::-1]
    assert batched == alone == reversed_order
    assert len(set(batched)) == len(MIXED)


def test_hf_engine_samples_the_same_after_a_resume(engine, tiny_model_dir, tmp_path):
    expected = [c.texts for c in engine.generate(MIXED, SAMPLED)]
    path = tmp_path / "cache.jsonl"
    CachedEngine(engine, path).generate(MIXED[::2], SAMPLED)  # a run stopped after some of the requests
    reloaded = load_engine("hf", str(tiny_model_dir), options=HFOptions(batch_size=2, **CPU))
    resumed = CachedEngine(reloaded, path)
    assert [c.texts for c in resumed.generate(MIXED, SAMPLED)] == expected
    assert resumed.misses == len(MIXED[1::2])


def test_hf_engine_first_samples_do_not_depend_on_n(engine):
    one = engine.generate(MIXED[:3], GenParams(temperature=1.0, max_tokens=8, n=1, seed=5))
    three = engine.generate(MIXED[:3], GenParams(temperature=1.0, max_tokens=8, n=3, seed=5))
    assert [c.texts[0] for c in one] == [c.texts[0] for c in three]


def test_hf_engine_unseeded_sampling_differs_between_calls(engine):
    unseeded = GenParams(temperature=1.0, max_tokens=8, seed=None)
    assert engine.generate(MIXED, unseeded) != engine.generate(MIXED, unseeded)


def test_hf_engine_counts_tokens_and_respects_max_tokens(engine):
    completions = engine.generate(MIXED, GenParams(temperature=1.0, max_tokens=5, n=2, seed=0))
    for completion in completions:
        assert 2 <= completion.completion_tokens <= 2 * 5
        assert set(completion.extra["finish_reasons"]) <= {"stop", "length"}
        if completion.extra["finish_reasons"] == ["length", "length"]:
            assert completion.completion_tokens == 2 * 5
    assert any(c.extra["finish_reasons"] == ["length", "length"] for c in completions)


def test_hf_engine_passes_every_sampling_parameter(engine, monkeypatch):
    from transformers import TemperatureLogitsWarper, TopPLogitsWarper

    from perrec_eval.engines.hf import SeededSampler

    seen = []
    original = engine.lm.generate

    def spy(*args, **kwargs):
        seen.append(kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(engine.lm, "generate", spy)
    engine.generate(MIXED[:1], GenParams(temperature=0.3, top_p=0.9, max_tokens=6, n=2, seed=1))
    engine.generate(MIXED[:1], GenParams(temperature=0.0, max_tokens=4))
    sampled, greedy = seen
    config = sampled["generation_config"]
    assert (config.do_sample, config.max_new_tokens, config.num_return_sequences) == (False, 6, 1)
    assert (config.top_k, config.repetition_penalty, config.no_repeat_ngram_size) == (None, 1.0, 0)
    temperature, top_p, sampler = sampled["logits_processor"]  # in this order, nothing else
    assert isinstance(temperature, TemperatureLogitsWarper) and temperature.temperature == 0.3
    assert isinstance(top_p, TopPLogitsWarper) and top_p.top_p == 0.9
    assert isinstance(sampler, SeededSampler) and len(sampler.generators) == 2  # one row per sample
    assert sampled["input_ids"].shape[0] == 2
    config = greedy["generation_config"]
    assert (config.do_sample, config.max_new_tokens, config.num_return_sequences) == (False, 4, 1)
    assert greedy["logits_processor"] is None and greedy["input_ids"].shape[0] == 1


def test_hf_engine_ignores_the_checkpoint_generation_defaults(engine, tiny_model_dir, tmp_path):
    leaky = tmp_path / "leaky"
    shutil.copytree(tiny_model_dir, leaky)
    config_path = leaky / "generation_config.json"
    config = json.loads(config_path.read_text())
    config.update(do_sample=True, temperature=3.0, top_k=2, repetition_penalty=5.0, max_new_tokens=2)
    config_path.write_text(json.dumps(config))
    leaky_engine = load_engine("hf", str(leaky), options=HFOptions(batch_size=3, device="cpu"))
    assert leaky_engine.info()["ignored_generation_defaults"]["repetition_penalty"] == 5.0
    assert leaky_engine.generate(MIXED, GREEDY) == engine.generate(MIXED, GREEDY)


def test_hf_engine_reports_too_long_prompts_as_failures(engine, monkeypatch):
    monkeypatch.setattr(engine, "max_positions", len(engine.encode(MIXED[1])) + GREEDY.max_tokens - 1)
    completions = engine.generate([MIXED[0], MIXED[1]], GREEDY)
    assert completions[0].ok
    assert not completions[1].ok
    assert "exceeds the model's" in completions[1].error


def test_hf_engine_splits_a_batch_on_out_of_memory(engine, monkeypatch):
    import torch

    expected = engine.generate(MIXED, GREEDY)
    original = engine.lm.generate
    sizes = []

    def small_memory(*args, **kwargs):
        sizes.append(kwargs["input_ids"].shape[0])
        if kwargs["input_ids"].shape[0] > 1:
            raise torch.OutOfMemoryError("simulated")
        return original(*args, **kwargs)

    monkeypatch.setattr(engine.lm, "generate", small_memory)
    assert engine.generate(MIXED, GREEDY) == expected
    assert max(sizes) == 3 and sizes.count(1) == len(MIXED)


def test_hf_engine_info_records_versions(engine, tiny_model_dir):
    info = engine.info()
    assert info["name"] == "hf" and info["model"] == str(tiny_model_dir) and info["adapter"] is None
    assert info["device"] == "cpu" and info["transformers_version"] and info["torch_version"]


def test_hf_engine_applies_a_lora_adapter(engine, tiny_model_dir, tmp_path):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "o_proj"])
    peft_model = get_peft_model(base, lora)
    torch.manual_seed(0)
    with torch.no_grad():
        for name, parameter in peft_model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0.0, 0.5)  # a fresh LoRA is a no-op (B = 0); make it change the model
    adapter_dir = tmp_path / "adapter"
    peft_model.save_pretrained(adapter_dir)

    adapted = load_engine("hf", str(tiny_model_dir), adapter=str(adapter_dir), options=CPU)
    merged = load_engine(
        "hf", str(tiny_model_dir), adapter=str(adapter_dir), options={"merge_adapter": True, **CPU}
    )
    with_adapter = [c.texts for c in adapted.generate(MIXED, GREEDY)]
    assert with_adapter != [c.texts for c in engine.generate(MIXED, GREEDY)]
    assert with_adapter == [c.texts for c in merged.generate(MIXED, GREEDY)]
    assert adapted.info()["adapter"] == str(adapter_dir) and adapted.info()["peft_version"]


def test_hf_engine_requires_a_chat_template(tiny_model_dir, tmp_path):
    bare = tmp_path / "bare"
    shutil.copytree(tiny_model_dir, bare)
    (bare / "chat_template.jinja").unlink()
    config_path = bare / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config.pop("chat_template", None)
    config_path.write_text(json.dumps(config))
    with pytest.raises(ValueError, match="no chat template"):
        load_engine("hf", str(bare), options=CPU)


def test_hf_engine_a_folder_without_a_model_is_one_config_error(tmp_path):
    from perrec_eval.errors import ConfigError

    with pytest.raises(ConfigError, match=f"--model {tmp_path} cannot be loaded .*: pass a folder or Hub id"):
        load_engine("hf", str(tmp_path), options=CPU)


@pytest.mark.parametrize("answer_format", ["pointwise", "pairwise", "listwise:3"])
def test_hf_engine_structured_outputs_keep_every_answer_in_format(engine, answer_format):
    from perrec_eval.tasks.perrecbench import protocols, structured

    greedy = GenParams(temperature=0.0, max_tokens=64, answer_format=answer_format)
    sampled = GenParams(temperature=1.0, max_tokens=64, n=2, answer_format=answer_format)
    method = answer_format.split(":")[0]
    for completion in [*engine.generate(MIXED[:4], greedy), *engine.generate(MIXED[:2], sampled)]:
        for text, reason in zip(completion.texts, completion.extra["finish_reasons"], strict=True):
            assert reason == "stop", (text, reason)
            assert re.fullmatch(structured.answer_regex(answer_format), text), text
            assert protocols.parse(method, text, n_users=3).ok, text
    assert answer_format in engine.info()["structured_outputs"]["formats"]


def test_hf_engine_unconstrained_answers_are_not_in_format(engine):
    from perrec_eval.tasks.perrecbench import structured

    texts = [c.texts[0] for c in engine.generate(MIXED[:4], GenParams(temperature=0.0, max_tokens=12))]
    pairwise = structured.answer_regex("pairwise")
    assert not any(re.fullmatch(pairwise, text) for text in texts)  # the constraint did the work
