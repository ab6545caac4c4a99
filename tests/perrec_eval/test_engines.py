"""The engine registry, the fake engine, and missing-extra errors (no model, no network)."""

from __future__ import annotations

import sys

import pytest

from perrec_eval.engines import ENGINE_NAMES, Engine, load_engine
from perrec_eval.engines.fake import FakeEngine
from perrec_eval.types import ChatRequest, Completion, GenParams


def make_request(text: str) -> ChatRequest:
    return ChatRequest(messages=({"role": "system", "content": "rank"}, {"role": "user", "content": text}))


def echo(request: ChatRequest, params: GenParams, sample_index: int) -> str:
    return f"{request.messages[-1]['content']}#{sample_index}"


def test_load_engine_fake_is_an_engine():
    engine = load_engine("fake", "scripted", responder=echo)
    assert isinstance(engine, Engine)
    assert (engine.name, engine.model, engine.adapter) == ("fake", "scripted", None)


def test_load_engine_unknown_name_lists_the_names():
    with pytest.raises(ValueError) as err:
        load_engine("llamacpp", "m")
    for name in ENGINE_NAMES:
        assert name in str(err.value)
    assert set(ENGINE_NAMES) == {"fake", "hf", "openai", "vllm"}


def test_load_engine_fake_without_responder_says_what_is_missing():
    with pytest.raises(TypeError, match="responder"):
        load_engine("fake", "m")


def test_load_engine_vllm_missing_extra_names_pip_command():
    if "vllm" in sys.modules or _installed("vllm"):
        pytest.skip("vllm is installed here")
    with pytest.raises(ImportError, match=r'pip install "perrecbench\[vllm\]"'):
        load_engine("vllm", "Qwen/Qwen2.5-0.5B-Instruct")


@pytest.mark.parametrize(
    ("engine", "module", "extra"),
    [("openai", "openai", "openai"), ("hf", "transformers", "hf"), ("hf", "torch", "hf")],
)
def test_load_engine_missing_extra_names_pip_command(monkeypatch, engine, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ModuleNotFoundError
    with pytest.raises(ImportError, match=rf'pip install "perrecbench\[{extra}\]"'):
        load_engine(engine, "some-model")


def test_fake_engine_preserves_order_and_samples():
    engine = FakeEngine(echo)
    requests = [make_request(f"q{i}") for i in range(5)]
    completions = engine.generate(requests, GenParams(n=3))
    assert [c.texts for c in completions] == [(f"q{i}#0", f"q{i}#1", f"q{i}#2") for i in range(5)]
    assert all(c.ok for c in completions)


def test_fake_engine_counts_calls_and_requests():
    engine = FakeEngine(echo)
    engine.generate([make_request("a"), make_request("b")], GenParams())
    engine.generate([make_request("c")], GenParams())
    engine.generate([], GenParams())
    assert (engine.calls, engine.requests_seen) == (3, 3)


def test_fake_engine_counts_whitespace_tokens():
    engine = FakeEngine(lambda request, params, i: "two words")
    (completion,) = engine.generate([make_request("three word query")], GenParams(n=2))
    assert completion.prompt_tokens == 1 + 3  # "rank" + the query
    assert completion.completion_tokens == 4


def test_fake_engine_passes_params_and_sample_index():
    seen = []

    def responder(request, params, sample_index):
        seen.append((params.temperature, params.max_tokens, sample_index))
        return "x"

    FakeEngine(responder).generate([make_request("a")], GenParams(temperature=0.7, max_tokens=5, n=2))
    assert seen == [(0.7, 5, 0), (0.7, 5, 1)]


def test_fake_engine_responder_can_script_a_failure():
    failure = Completion(texts=(), error="scripted failure")
    def responder(request, params, sample_index):
        return failure if request.messages[-1]["content"] == "bad" else "fine"

    engine = FakeEngine(responder)
    completions = engine.generate([make_request("good"), make_request("bad")], GenParams())
    assert [c.ok for c in completions] == [True, False]
    assert completions[1].error == "scripted failure"


def test_fake_engine_rejects_non_string_answers():
    with pytest.raises(TypeError, match="str or Completion"):
        FakeEngine(lambda request, params, i: 3).generate([make_request("a")], GenParams())


def test_fake_engine_reports_finished_requests_even_when_the_responder_raises():
    def responder(request, params, sample_index):
        if request.messages[-1]["content"] == "q3":
            raise RuntimeError("boom")
        return "ok"

    reported: list[int] = []
    engine = FakeEngine(responder, report_every=2)
    with pytest.raises(RuntimeError, match="boom"):
        engine.generate(
            [make_request(f"q{i}") for i in range(6)],
            GenParams(),
            on_results=lambda finished: reported.extend(index for index, _ in finished),
        )
    assert reported == [0, 1, 2]


def test_fake_engine_info_names_the_responder():
    assert FakeEngine(echo, model="m").info() == {
        "name": "fake",
        "model": "m",
        "adapter": None,
        "responder": "echo",
    }


def _installed(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None
