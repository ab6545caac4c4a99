"""The engine registry and options, the fake engine and its scripts, missing extras (no model, no network)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from perrec_eval.engines import (
    ENGINE_NAMES,
    Engine,
    MissingExtraError,
    describe_options,
    load_engine,
    options_class,
    parse_options,
)
from perrec_eval.engines.fake import SCRIPTS, FakeEngine, FakeOptions
from perrec_eval.engines.hf import HFOptions
from perrec_eval.engines.openai import OpenAIOptions
from perrec_eval.engines.vllm import VLLMOptions
from perrec_eval.errors import ConfigError, PerrecbenchError
from perrec_eval.tasks.perrecbench import prompts
from perrec_eval.tasks.perrecbench.fake import request_kind
from perrec_eval.tasks.perrecbench.records import HistoryItem, Query, UserView
from perrec_eval.types import ChatRequest, Completion, GenParams


def make_request(text: str) -> ChatRequest:
    return ChatRequest(messages=({"role": "system", "content": "rank"}, {"role": "user", "content": text}))


def echo(request: ChatRequest, params: GenParams, sample_index: int) -> str:
    return f"{request.messages[-1]['content']}#{sample_index}"


def test_load_engine_fake_is_an_engine():
    engine = load_engine("fake", "constant")
    assert isinstance(engine, Engine)
    assert (engine.name, engine.model, engine.adapter) == ("fake", "constant", None)


def test_load_engine_unknown_name_lists_the_names():
    with pytest.raises(ConfigError) as err:
        load_engine("llamacpp", "m")
    for name in ENGINE_NAMES:
        assert name in str(err.value)
    assert set(ENGINE_NAMES) == {"fake", "hf", "openai", "vllm"}


def test_load_engine_fake_unknown_script_names_the_choices():
    with pytest.raises(ConfigError, match="'nope'") as err:
        load_engine("fake", "nope")
    assert all(script in str(err.value) for script in SCRIPTS)


def test_fake_engine_without_responder_runs_the_script_named_by_model():
    engine = FakeEngine(responder=None, model="constant")
    assert engine.responder is SCRIPTS["constant"]
    assert engine.info()["responder"] == "constant"


def test_load_engine_passes_adapter_and_options():
    engine = load_engine("fake", "constant", adapter="lora-a", options={"report_every": "2"})
    assert engine.adapter == "lora-a"
    assert engine.options == FakeOptions(report_every=2)


def test_load_engine_rejects_options_of_another_engine():
    with pytest.raises(ConfigError, match="FakeOptions"):
        load_engine("fake", "constant", options=HFOptions())


def test_load_engine_rejects_an_unknown_option_in_a_mapping():
    with pytest.raises(
        ConfigError, match="the 'fake' engine has no option 'batch_size'; valid ones: report_every"
    ):
        load_engine("fake", "constant", options={"batch_size": 4})


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
    with pytest.raises(ImportError, match=rf'pip install "perrecbench\[{extra}\]"') as err:
        load_engine(engine, "some-model")
    assert f'pip install -e ".[{extra}]"' in str(err.value)  # the form for a clone of the repository
    assert isinstance(err.value, MissingExtraError) and isinstance(err.value, PerrecbenchError)
    assert err.value.name == module


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
    engine = FakeEngine(responder, options=FakeOptions(report_every=2))
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


# --- options -------------------------------------------------------------------------------------------


def test_parse_options_types_values():
    assert parse_options("hf", ["batch_size=4", "merge-adapter=yes", "device=cpu"]) == HFOptions(
        batch_size=4, merge_adapter=True, device="cpu"
    )
    vllm = parse_options("vllm", ["gpu_memory_utilization=0.5", "enforce_eager=false", "max_model_len=none"])
    assert (vllm.gpu_memory_utilization, vllm.enforce_eager, vllm.max_model_len) == (0.5, False, None)


def test_parse_options_later_pairs_win_over_given_values():
    options = parse_options(
        "openai", ["concurrency=2", "concurrency=3"], concurrency=8, base_url="http://h/v1"
    )
    assert (options.concurrency, options.base_url) == (3, "http://h/v1")


def test_parse_options_ignores_given_none_values():
    assert parse_options("openai", base_url=None, api_key_env=None) == OpenAIOptions()


def test_parse_options_rejects_unknown_keys_listing_the_valid_ones():
    with pytest.raises(ConfigError) as err:
        parse_options("hf", ["batch=4"])
    assert str(err.value) == (
        "the 'hf' engine has no option 'batch'; valid ones: "
        "batch_size, max_batch_tokens, device, dtype, merge_adapter, trust_remote_code"
    )


def test_parse_options_rejects_a_given_key_of_another_engine():
    with pytest.raises(ConfigError, match="the 'hf' engine has no option 'base_url'"):
        parse_options("hf", base_url="http://127.0.0.1:8000/v1")


@pytest.mark.parametrize(
    ("name", "pair", "message"),
    [
        ("hf", "batch_size=four", "batch_size='four' is not int"),
        ("hf", "batch_size=0", "batch_size must be >= 1"),
        ("hf", "dtype=float8", "dtype='float8' is not one of 'auto'"),
        ("hf", "batch_size", "is not KEY=VALUE"),
        ("openai", "concurrency=0", "concurrency >= 1"),
        ("openai", "timeout=0", "timeouts must be positive"),
        ("openai", "progress=false", "has no option 'progress'"),  # the global --no-progress instead
        ("openai", "extra_body={top_k: -1}", "extra_body is not valid JSON"),
        ("openai", "extra_body=[1, 2]", "is not a JSON object"),
        ("vllm", "gpu_memory_utilization=90", r"in \(0, 1\]"),
        ("vllm", "tensor_parallel_size=0", "tensor_parallel_size must be >= 1"),
        ("vllm", "enforce_eager=maybe", "enforce_eager='maybe' is not bool"),
        ("fake", "report_every=0", "report_every must be >= 1"),
    ],
)
def test_parse_options_rejects_bad_values(name, pair, message):
    with pytest.raises(ConfigError, match=message):
        parse_options(name, [pair])


def test_options_type_their_fields_when_built_from_python():
    assert HFOptions(batch_size="4").batch_size == 4
    with pytest.raises(ConfigError, match="batch_size cannot be empty"):
        HFOptions(batch_size=None)


def test_openai_options_parse_extra_body():
    assert OpenAIOptions(extra_body='{"top_k": -1}').extra_fields() == {"top_k": -1}
    assert OpenAIOptions().extra_fields() == {}


def test_vllm_options_pass_only_the_llm_options_that_are_set():
    assert VLLMOptions().llm_options() == {"enable_prefix_caching": True}  # on unless turned off
    options = VLLMOptions(tensor_parallel_size=2, dtype="bfloat16", seed=5)
    assert options.llm_options() == {
        "tensor_parallel_size": 2,
        "dtype": "bfloat16",
        "enable_prefix_caching": True,
    }


def test_options_class_of_every_engine_builds_with_defaults_without_heavy_imports():
    script = textwrap.dedent(
        """
        import sys
        from perrec_eval.engines import ENGINE_NAMES, describe_options, options_class

        for name in ENGINE_NAMES:
            options_class(name)()
            describe_options(name)
        print(sorted({"torch", "transformers", "openai", "vllm"} & set(sys.modules)))
        """
    )
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("name", ENGINE_NAMES)
def test_describe_options_has_one_line_per_option(name):
    lines = describe_options(name).splitlines()
    fields = options_class(name).__dataclass_fields__
    assert [line.split()[0] for line in lines] == list(fields)
    assert all("default" in line and line.split("): ", 1)[1] for line in lines)


def test_describe_options_shows_type_and_default():
    assert "  batch_size (int, default 8): requests per forward batch" in describe_options("hf")
    assert "  api_key_env (str or none, default OPENAI_API_KEY): " in describe_options("openai")
    assert "  enforce_eager (bool or none, default none): " in describe_options("vllm")


def test_load_engine_vllm_rejects_bad_options_before_importing_vllm():
    with pytest.raises(ConfigError, match="max_lora_rank"):
        load_engine("vllm", "m", options={"max_lora_rank": 0})


# --- the fake engine's scripts ---------------------------------------------------------------------------

QUERY = Query("Q", "Dune", "Frank Herbert")


def make_user(profile: str = "Reads science fiction.") -> UserView:
    history = (
        HistoryItem(None, "Foundation", "Isaac Asimov", 5.0, 1),
        HistoryItem(None, "Emma", None, 2.0, 2),
    )
    return UserView(history, most_common_rating=5.0, avg_rating=3.5, profile=profile)


def constant_answer(messages: list[dict[str, str]]) -> str | Completion:
    (completion,) = load_engine("fake", "constant").generate([ChatRequest(tuple(messages))], GenParams())
    return completion.texts[0] if completion.ok else completion


@pytest.mark.parametrize("variant", prompts.VARIANTS)
def test_constant_script_answers_pointwise_with_rating_4(variant):
    assert constant_answer(prompts.render("pointwise", QUERY, [make_user()], variant=variant)) == (
        '{"predicted_rating": 4}'
    )


@pytest.mark.parametrize("variant", prompts.VARIANTS)
def test_constant_script_answers_pairwise_with_user_a(variant):
    assert constant_answer(
        prompts.render("pairwise", QUERY, [make_user(), make_user()], variant=variant)
    ) == ("[User A]")


@pytest.mark.parametrize("variant", prompts.VARIANTS)
@pytest.mark.parametrize("users", [2, 3, 5])
def test_constant_script_answers_listwise_with_the_identity_ranking(variant, users):
    messages = prompts.render("listwise", QUERY, [make_user() for _ in range(users)], variant=variant)
    assert json.loads(constant_answer(messages)) == {"predicted_ranking": list(range(1, users + 1))}


def test_constant_script_counts_only_the_users_of_the_last_turn():
    demo = prompts.Demonstration(QUERY, [make_user() for _ in range(4)], [4, 3, 2, 1])
    messages = prompts.render("listwise", QUERY, [make_user(), make_user()], demonstrations=[demo])
    assert json.loads(constant_answer(messages)) == {"predicted_ranking": [1, 2]}


def test_constant_script_answers_a_profile_request_with_its_profile_sentence():
    messages = prompts.render_profile(make_user().history)
    assert constant_answer(messages) == "Likes well-made things; rates generously."


def test_constant_script_fails_a_request_no_template_wrote():
    answer = constant_answer([{"role": "system", "content": "rank"}, {"role": "user", "content": "q"}])
    assert isinstance(answer, Completion) and "templates" in answer.error


def test_request_kind_tells_every_method_by_its_system_prompt():
    kinds = {
        method: request_kind(
            ChatRequest(tuple(prompts.render(method, QUERY, [make_user(), make_user()][:n])))
        )
        for method, n in (("pointwise", 1), ("pairwise", 2), ("listwise", 2))
    }
    assert kinds == {"pointwise": "pointwise", "pairwise": "pairwise", "listwise": "listwise"}
