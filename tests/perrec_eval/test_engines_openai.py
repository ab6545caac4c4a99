"""The OpenAI-compatible engine against a scripted stub server and against a real `transformers serve`."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from perrec_eval.cache import CachedEngine
from perrec_eval.engines import load_engine
from perrec_eval.engines._common import sample_seed
from perrec_eval.engines.openai import (
    OpenAIEngine,
    OpenAIOptions,
    ServerRejectedKeyError,
    ServerUnreachableError,
)
from perrec_eval.types import GenParams
from tests.perrec_eval.openai_stub import (
    KEY_ENV,
    PARAMS,
    SECRET,
    answer,
    free_port,
    make_engine,
    make_request,
)


@pytest.fixture(autouse=True)
def api_key(monkeypatch) -> str:
    monkeypatch.setenv(KEY_ENV, SECRET)
    return SECRET


def test_openai_engine_preserves_order_and_bounds_concurrency(stub_factory):
    queries = [f"q{i}" for i in range(24)]
    server = stub_factory({q: [("sleep", 0.01 * (i % 5))] for i, q in enumerate(queries)})
    completions = make_engine(server, concurrency=4).generate([make_request(q) for q in queries], PARAMS)
    assert [c.texts for c in completions] == [(answer(q),) for q in queries]
    assert server.max_in_flight <= 4
    assert [c.prompt_tokens for c in completions] == [len(q) for q in queries]
    assert all(c.completion_tokens == 2 for c in completions)


def test_stub_counts_a_request_in_flight_only_until_its_answer_is_written(stub_factory):
    # a busy machine may run the client's next request before the server thread that answered returns
    server = stub_factory(linger=0.3)
    queries = ["a", "b", "c"]
    completions = make_engine(server, concurrency=1).generate([make_request(q) for q in queries], PARAMS)
    assert [c.texts for c in completions] == [(answer(q),) for q in queries]
    assert server.max_in_flight == 1  # one at a time, as the client sent them


@pytest.mark.timeout(60)
def test_openai_engine_finishes_with_progress_bars_hidden(stub_factory):
    # a hidden tqdm bar counts nothing: the engine once waited on it forever under --no-progress
    from perrec_eval import progress

    server = stub_factory()
    progress.disable()
    requests = [make_request(f"q{i}") for i in range(5)]
    completions = make_engine(server, concurrency=2).generate(requests, PARAMS)
    assert [c.texts for c in completions] == [(answer(f"q{i}"),) for i in range(5)]


def test_openai_engine_sends_every_sampling_parameter(stub_factory):
    server = stub_factory()
    engine = make_engine(server, extra_body='{"top_k": -1}')
    engine.generate([make_request("a")], GenParams(temperature=0.0, top_p=0.5, max_tokens=7, n=2, seed=11))
    (body,) = server.bodies
    assert body["model"] == "stub-model"
    assert body["messages"] == [{"role": "system", "content": "rank"}, {"role": "user", "content": "a"}]
    seed = sample_seed(11, make_request("a"))  # the request's own seed, derived from --seed and its messages
    expected = {"temperature": 0.0, "top_p": 0.5, "max_tokens": 7, "n": 2, "seed": seed, "top_k": -1}
    assert {key: body[key] for key in expected} == expected


def test_openai_engine_sends_structured_outputs_as_vllm_regex_by_default(stub_factory):
    from perrec_eval.tasks.perrecbench.structured import answer_regex

    server = stub_factory()
    engine = make_engine(server, extra_body='{"top_k": -1}')
    engine.generate([make_request("a")], GenParams(max_tokens=7, answer_format="listwise:3"))
    engine.generate([make_request("b")], GenParams(max_tokens=7))
    constrained, free = server.bodies
    assert constrained["structured_outputs"] == {"regex": answer_regex("listwise:3")}
    assert constrained["top_k"] == -1 and "structured_outputs" not in free
    assert "response_format" not in constrained


def test_openai_engine_sends_a_json_schema_where_one_can_say_the_format(stub_factory):
    server = stub_factory()
    engine = make_engine(server, structured_outputs="response_format")
    engine.generate([make_request("a")], GenParams(max_tokens=7, answer_format="pointwise"))
    engine.generate([make_request("b")], GenParams(max_tokens=7, answer_format="pairwise"))
    pointwise, pairwise = server.bodies
    schema = pointwise["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["predicted_rating"]
    assert "response_format" not in pairwise and "structured_outputs" not in pairwise


def test_openai_engine_asks_for_a_served_adapter_by_name(stub_factory):
    server = stub_factory()
    engine = make_engine(server, adapter="pointwise-lora")
    engine.generate([make_request("a")], PARAMS)
    assert server.bodies[0]["model"] == "pointwise-lora"
    assert engine.info()["adapter"] == "pointwise-lora"


def test_openai_engine_retries_429_500_garbage_and_timeouts_then_succeeds(stub_factory):
    flaky = [
        ("status", 429, {"Retry-After": "0"}, "slow down"),
        ("status", 500, {}, "internal error"),
        ("status", 503, {}, "overloaded"),
        "garbage",
        "html",
        ("sleep", 3.0),  # longer than the client timeout
        "ok",
    ]
    server = stub_factory({"flaky": flaky})
    (completion,) = make_engine(server, timeout=0.5, max_retries=6).generate([make_request("flaky")], PARAMS)
    assert completion.ok, completion.error
    assert completion.texts == (answer("flaky"),)
    assert server.attempts["flaky"] == 7


def test_openai_engine_waits_as_long_as_retry_after_says(stub_factory):
    server = stub_factory({"limited": [("status", 429, {"Retry-After": "1"}, "later"), "ok"]})
    (completion,) = make_engine(server).generate([make_request("limited")], PARAMS)
    assert completion.ok and completion.texts == (answer("limited"),)
    first, second = server.times["limited"]
    assert second - first >= 0.9  # the server's wait, not the client's own backoff (0.5 s at first)


@pytest.mark.parametrize("max_retries", [1, 6])
def test_openai_engine_does_not_wait_a_retry_after_of_hours(stub_factory, max_retries):
    server = stub_factory({"limited": [("status", 429, {"Retry-After": "100000"}, "quota"), "ok"]})
    (completion,) = make_engine(server, max_retries=max_retries).generate([make_request("limited")], PARAMS)
    assert completion.error.startswith("HTTP 429 from ")
    # a wait of a day is not taken, and the error says so instead of "gave up after 1 attempt"
    assert completion.error.endswith(
        "(not retried: the server asks to wait 100000s, longer than the 120s a retry waits; run again later)"
    )
    assert server.attempts["limited"] == 1


def test_openai_engine_gives_up_with_a_failure_completion(stub_factory):
    script = {
        "broken": [("status", 500, {}, "always broken")],
        "nonsense": ["garbage"],
        "rejected": [("status", 400, {}, "context length exceeded")],
    }
    server = stub_factory(script)
    completions = make_engine(server, max_retries=2).generate(
        [make_request(q) for q in ("fine", "broken", "nonsense", "rejected")], PARAMS
    )
    fine, broken, nonsense, rejected = completions
    assert fine.ok and fine.texts == (answer("fine"),)
    assert not broken.ok and broken.texts == ()
    assert broken.error.startswith(f"HTTP 500 from {server.base_url}: ")
    assert "always broken" in broken.error and broken.error.endswith("(gave up after 3 attempts)")
    assert "invalid response" in nonsense.error and "3 attempts" in nonsense.error
    assert "HTTP 400" in rejected.error and "context length exceeded" in rejected.error
    assert rejected.error.endswith("(not retried)")
    assert server.attempts == Counter({"fine": 1, "broken": 3, "nonsense": 3, "rejected": 1})


def test_openai_engine_failures_are_not_cached_and_retried_on_resume(stub_factory, tmp_path):
    server = stub_factory({"flaky": [("status", 500, {}, "down")] * 3 + ["ok"]})
    engine = make_engine(server, max_retries=2)
    cache_path = tmp_path / "cache.jsonl"
    first = CachedEngine(engine, cache_path).generate([make_request("ok"), make_request("flaky")], PARAMS)
    assert [c.ok for c in first] == [True, False]
    second = CachedEngine(engine, cache_path).generate([make_request("ok"), make_request("flaky")], PARAMS)
    assert [c.ok for c in second] == [True, True]
    assert server.attempts == Counter({"ok": 1, "flaky": 4})


def test_openai_engine_unreachable_server_raises_naming_the_url():
    port = free_port()  # nothing listens there
    engine = OpenAIEngine(
        "m", OpenAIOptions(base_url=f"http://127.0.0.1:{port}/v1", api_key_env=None, max_retries=2)
    )
    with pytest.raises(ServerUnreachableError, match=rf"http://127\.0\.0\.1:{port}/v1"):
        engine.generate([make_request(f"q{i}") for i in range(40)], PARAMS)


def test_openai_engine_connect_timeouts_count_as_unreachable(stub_factory, monkeypatch):
    import openai

    server = stub_factory()
    engine = make_engine(server, max_retries=1)
    engine.check()
    client = openai.OpenAI(api_key="k", base_url=server.base_url)
    request = client._client.build_request("POST", server.base_url)
    http = sys.modules[type(request).__module__.split(".")[0]]  # httpx, or the fork the SDK ships with

    def black_hole(self, **kwargs):
        try:
            raise http.ConnectTimeout("timed out", request=request)
        except http.ConnectTimeout as err:
            raise openai.APITimeoutError(request=request) from err

    monkeypatch.setattr(openai.resources.chat.Completions, "create", black_hole)
    with pytest.raises(ServerUnreachableError, match="connection attempt timed out"):
        engine.generate([make_request("a")], PARAMS)


def test_openai_engine_rejected_key_raises_naming_the_variable(stub_factory):
    server = stub_factory({"q": [("echo-auth", 401)]})
    with pytest.raises(ServerRejectedKeyError, match=KEY_ENV) as err:
        make_engine(server).generate([make_request("q")], PARAMS)
    assert SECRET not in str(err.value)
    assert server.attempts["q"] == 1


def test_openai_engine_never_exposes_the_api_key(stub_factory, tmp_path, caplog):
    server = stub_factory({"leaky": [("echo-auth", 500)]})
    engine = make_engine(server, max_retries=1)
    with caplog.at_level(logging.DEBUG):
        completions = CachedEngine(engine, tmp_path / "cache.jsonl").generate(
            [make_request("fine"), make_request("leaky")], PARAMS
        )
    assert server.authorizations[0] == f"Bearer {SECRET}"  # the key is sent...
    assert "<redacted>" in completions[1].error  # ...the server echoed it back, and it was scrubbed
    exposed = [json.dumps(engine.info()), repr(engine), caplog.text, completions[1].error]
    exposed += [path.read_text() for path in tmp_path.iterdir()]
    assert all(SECRET not in text for text in exposed)
    assert engine.info()["api_key_env"] == KEY_ENV


def test_openai_engine_info_strips_credentials_from_the_url(stub_factory):
    engine = OpenAIEngine(
        "m", OpenAIOptions(base_url="https://user:pw@example.com/v1?api-key=abc", api_key_env=KEY_ENV)
    )
    assert engine.info()["base_url"] == "https://example.com/v1"


def test_openai_engine_local_server_needs_no_key(stub_factory, monkeypatch):
    monkeypatch.delenv("PERREC_UNSET_KEY", raising=False)
    server = stub_factory()
    (completion,) = make_engine(server, api_key_env="PERREC_UNSET_KEY").generate([make_request("a")], PARAMS)
    assert completion.ok
    assert server.authorizations == ["Bearer EMPTY"]


def test_openai_engine_tops_up_when_the_server_ignores_n(stub_factory):
    server = stub_factory(max_choices=1)
    (completion,) = make_engine(server).generate([make_request("a")], GenParams(temperature=0.7, n=3, seed=5))
    assert completion.texts == tuple(answer("a", seed=5, sample=sample) for sample in range(3))
    assert [body["n"] for body in server.bodies] == [3, 2, 1]
    assert completion.prompt_tokens == 1 and completion.completion_tokens == 6


def test_openai_engine_reports_each_finished_request(stub_factory):
    server = stub_factory()
    reported: list[int] = []
    make_engine(server).generate(
        [make_request(f"q{i}") for i in range(6)],
        PARAMS,
        on_results=lambda finished: reported.extend(index for index, _ in finished),
    )
    assert sorted(reported) == list(range(6))


# --- a real server: `transformers serve` running the tiny model ------------------------------------------


@pytest.fixture(scope="module")
def transformers_server(tiny_model_dir, tmp_path_factory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("hf_home")
    (home / "hub").mkdir()  # without it /v1/models answers 500 (PITFALLS 6)
    port = free_port()
    env = {**os.environ, "HF_HOME": str(home), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    command = [
        str(Path(sys.executable).parent / "transformers"),
        "serve",
        str(tiny_model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--device",
        "cpu",
        "--log-level",
        "warning",
    ]
    log_path = home / "serve.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(240):  # up to ~120 s on a busy CI machine
            if process.poll() is not None:
                pytest.fail(f"transformers serve exited early:\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail(f"transformers serve did not come up:\n{log_path.read_text()[-3000:]}")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)


@pytest.mark.slow
def test_openai_engine_against_transformers_serve_matches_the_hf_engine(transformers_server, tiny_model_dir):
    requests = [make_request("great book " * words + "Answer:") for words in (1, 6, 3)]
    greedy = GenParams(temperature=0.0, max_tokens=8)
    served = OpenAIEngine(
        str(tiny_model_dir),
        OpenAIOptions(base_url=transformers_server, api_key_env=None, concurrency=2),
    ).generate(requests, greedy)
    local = load_engine("hf", str(tiny_model_dir), options={"device": "cpu"}).generate(requests, greedy)
    assert all(c.ok for c in served), [c.error for c in served]
    assert [c.texts for c in served] == [c.texts for c in local]
    assert [c.prompt_tokens for c in served] == [c.prompt_tokens for c in local]


@pytest.mark.slow
def test_openai_engine_against_transformers_serve_gets_n_samples(transformers_server, tiny_model_dir):
    engine = OpenAIEngine(str(tiny_model_dir), OpenAIOptions(base_url=transformers_server, api_key_env=None))
    (completion,) = engine.generate(
        [make_request("great book")], GenParams(temperature=1.0, max_tokens=6, n=2)
    )
    assert completion.ok, completion.error
    assert len(completion.texts) == 2  # the server ignores `n`; the engine asks again for the rest


@pytest.mark.slow
def test_openai_engine_against_transformers_serve_rejects_another_model_name(transformers_server):
    engine = OpenAIEngine(
        "not-the-pinned-model", OpenAIOptions(base_url=transformers_server, api_key_env=None)
    )
    (completion,) = engine.generate([make_request("great book")], GenParams(temperature=0.0, max_tokens=4))
    assert not completion.ok
    assert "HTTP 400" in completion.error and "(not retried)" in completion.error


def test_openai_engine_redacts_a_key_echoed_in_finish_reason(stub_factory, tmp_path):
    server = stub_factory({"q": ["echo-finish"]})
    (completion,) = CachedEngine(make_engine(server), tmp_path / "cache.jsonl").generate(
        [make_request("q")], PARAMS
    )
    assert completion.ok and server.authorizations[-1] == f"Bearer {SECRET}"
    assert completion.extra["finish_reasons"] == ["Bearer <redacted>"]
    assert SECRET not in (tmp_path / "cache.jsonl").read_text()


def test_openai_engine_redacts_the_basic_header_of_credentials_in_the_url(stub_factory, tmp_path):
    import base64

    server = stub_factory({"answer": ["echo-key-ok"], "fail": [("echo-auth", 500)], "end": ["echo-finish"]})
    url = server.base_url.replace("http://", "http://alice:PW@SECRET-111@")
    engine = make_engine(server, base_url=url, api_key_env=None, max_retries=0)
    completions = CachedEngine(engine, tmp_path / "cache.jsonl").generate(
        [make_request(q) for q in ("answer", "fail", "end")], PARAMS
    )
    basic = base64.b64encode(b"alice:PW@SECRET-111").decode()
    assert server.authorizations[-1] == f"Basic {basic}"  # httpx sends the userinfo so; the server echoes it
    written = [json.dumps([c.texts, c.error, c.extra]) for c in completions]
    written.append((tmp_path / "cache.jsonl").read_text())
    assert all(basic not in text and "SECRET-111" not in text for text in written)
    assert "Basic <redacted>" in written[0] and "Basic <redacted>" in written[1]


def test_openai_engine_sends_the_query_of_base_url_as_the_query(stub_factory):
    server = stub_factory()
    (completion,) = make_engine(server, base_url=f"{server.base_url}?api-key=QSECRET-9999").generate(
        [make_request("q")], PARAMS
    )
    assert completion.ok
    assert server.paths == ["/v1/chat/completions?api-key=QSECRET-9999"]  # not /v1/?api-key=...chat/...


@pytest.mark.timeout(120)  # a guard only: before the fix the attempt lasted as long as the trickle (hours)
def test_openai_engine_timeout_bounds_a_whole_attempt_of_a_trickling_server(stub_factory):
    server = stub_factory({"slow": [("trickle", 0.5)]})  # about 150 bytes: 75 s for the whole answer
    engine = make_engine(server, timeout=2.0, max_retries=0)
    engine.check()
    (completion,) = engine.generate([make_request("slow")], PARAMS)
    assert completion.error == "no answer within 2s (gave up after 1 attempt)"
