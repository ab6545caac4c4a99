"""`HFEngine.with_adapter`: several LoRA adapters on one loaded base model, each answering as if alone."""

from __future__ import annotations

import pytest

from perrec_eval.engines import load_engine
from perrec_eval.errors import ConfigError
from perrec_eval.types import ChatRequest, GenParams

pytestmark = pytest.mark.slow

GREEDY = GenParams(temperature=0.0, max_tokens=8)
CPU = {"device": "cpu"}
REQUESTS = [
    ChatRequest(({"role": "system", "content": "Act as a recommender."}, {"role": "user", "content": text}))
    for text in ("great book\nAnswer:", "kitchen pan broke returned", "[User A] or [User B]?")
]


def texts(engine) -> list[tuple[str, ...]]:
    return [completion.texts for completion in engine.generate(REQUESTS, GREEDY)]


@pytest.fixture(scope="module")
def base_alone(tiny_model_dir):
    return texts(load_engine("hf", str(tiny_model_dir), options=CPU))


@pytest.fixture(scope="module")
def shared(tiny_model_dir, random_adapters):
    """One loaded base model and two adapters on it, asked in interleaved order."""
    base = load_engine("hf", str(tiny_model_dir), options=CPU)
    first = base.with_adapter("first", str(random_adapters[0]))
    second = base.with_adapter("second", str(random_adapters[1]))
    answers = {"first": texts(first), "base": texts(base), "second": texts(second)}
    answers["first again"] = texts(first)
    return base, first, second, answers


def test_hf_with_adapter_gives_each_adapter_its_own_answers(shared):
    _, first, second, answers = shared
    assert answers["first"] != answers["second"]
    assert answers["first again"] == answers["first"]  # switching back and forth changes nothing
    assert (first.adapter, second.adapter) != (None, None) and first.lm is second.lm


def test_hf_with_adapter_leaves_the_base_engine_unadapted(shared, base_alone):
    base, _, _, answers = shared
    assert answers["base"] == base_alone and base.adapter is None
    assert answers["first"] != base_alone


def test_hf_with_adapter_equals_the_adapter_loaded_alone(shared, tiny_model_dir, random_adapters):
    _, _, _, answers = shared
    alone = load_engine("hf", str(tiny_model_dir), adapter=str(random_adapters[1]), options=CPU)
    assert texts(alone) == answers["second"]


def test_hf_with_adapter_refuses_a_name_taken_by_another_path(shared, random_adapters):
    base, _, _, _ = shared
    assert base.with_adapter("first", str(random_adapters[0])).adapter == str(random_adapters[0])
    with pytest.raises(ConfigError, match="another name"):
        base.with_adapter("first", str(random_adapters[2]))


def test_hf_with_adapter_refuses_a_name_peft_cannot_hold(shared, random_adapters):
    base, _, _, _ = shared
    with pytest.raises(ConfigError, match="first-v2="):
        base.with_adapter("first.v2", str(random_adapters[0]))


def test_hf_with_adapter_refuses_a_merged_adapter(tiny_model_dir, random_adapters):
    merged = load_engine(
        "hf", str(tiny_model_dir), adapter=str(random_adapters[0]), options={"merge_adapter": True, **CPU}
    )
    with pytest.raises(ConfigError, match="merge_adapter"):
        merged.with_adapter("other", str(random_adapters[1]))
