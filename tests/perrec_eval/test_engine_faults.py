"""Engine errors are errors, never answers: a fault-injecting server on 127.0.0.1 against the openai engine.

Every fault ends in one of three ways: a retry that succeeds, a `Completion` with ``error`` set and no texts
(which the cache never stores), or, before any generation, one exception from the project's error family.
"""

from __future__ import annotations

import json
import logging
from collections import Counter

import pytest

from perrec_eval.cache import CachedEngine
from perrec_eval.engines.openai import (
    OpenAIEngine,
    OpenAIOptions,
    ServerRejectedKeyError,
    ServerUnreachableError,
)
from perrec_eval.errors import PerrecbenchError
from perrec_eval.types import Completion, GenParams
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


def generate_one(server, query: str, **options) -> Completion:
    (completion,) = make_engine(server, **options).generate([make_request(query)], PARAMS)
    return completion


def test_openai_engine_retries_a_500_then_answers(stub_factory):
    server = stub_factory({"q": [("status", 500, {}, "boom"), "ok"]})
    completion = generate_one(server, "q")
    assert completion.ok and completion.texts == (answer("q"),)
    assert server.attempts["q"] == 2


def test_openai_engine_500_forever_is_an_error_after_max_retries(stub_factory, slept):
    server = stub_factory({"q": [("status", 500, {}, "database on fire")]})
    completion = generate_one(server, "q", max_retries=3)
    assert sum(slept) < 0.1  # the server's retry-after-ms: 1, three times
    assert not completion.ok and completion.texts == ()
    assert completion.error == (
        f'HTTP 500 from {server.base_url}: {{"error": {{"message": "database on fire"}}}} '
        "(gave up after 4 attempts)"
    )
    assert server.attempts["q"] == 4


def test_openai_engine_error_quotes_at_most_200_characters_of_the_body(stub_factory):
    server = stub_factory({"q": [("status", 503, {}, "x" * 5000)]})
    completion = generate_one(server, "q", max_retries=0)
    body = completion.error.split(": ", 1)[1].removesuffix(" (gave up after 1 attempt)")
    assert len(body) == 200


def test_openai_engine_429_that_never_clears_is_an_error(stub_factory):
    server = stub_factory({"q": [("status", 429, {"Retry-After": "0"}, "quota")]})
    completion = generate_one(server, "q", max_retries=2)
    assert completion.error.startswith("HTTP 429 from ") and "(gave up after 3 attempts)" in completion.error
    assert server.attempts["q"] == 3


@pytest.mark.parametrize("status", [400, 404, 422])
def test_openai_engine_does_not_retry_a_rejected_request(stub_factory, status):
    server = stub_factory({"q": [("status", status, {}, "unsupported parameter: top_k")]})
    completion = generate_one(server, "q", max_retries=5)
    assert not completion.ok and completion.texts == ()
    assert completion.error.startswith(f"HTTP {status} from ") and completion.error.endswith("(not retried)")
    assert "unsupported parameter: top_k" in completion.error
    assert server.attempts["q"] == 1


def test_openai_engine_timeout_is_an_error_after_retries(stub_factory):
    server = stub_factory({"q": [("sleep", 2.0)]})
    completion = generate_one(server, "q", timeout=0.2, max_retries=1)
    assert completion.error == "no answer within 0.2s (gave up after 2 attempts)"


def test_openai_engine_retries_empty_choices_then_answers(stub_factory):
    server = stub_factory({"q": ["empty", "ok"]})
    completion = generate_one(server, "q")
    assert completion.ok and completion.texts == (answer("q"),)
    assert server.attempts["q"] == 2


def test_openai_engine_empty_choices_forever_is_an_error(stub_factory):
    server = stub_factory({"q": ["empty"]})
    completion = generate_one(server, "q", max_retries=2)
    assert completion.error == "empty choices (gave up after 3 attempts)" and completion.texts == ()
    assert server.attempts["q"] == 3


def test_openai_engine_content_null_is_an_error_not_an_empty_answer(stub_factory):
    server = stub_factory({"q": [("null", "length")]})
    completion = generate_one(server, "q")
    assert completion.error == "content null (finish_reason=length) (not retried)"
    assert completion.texts == ()


def test_openai_engine_content_null_is_not_cached_and_asked_again(stub_factory, tmp_path):
    server = stub_factory({"null": [("null", "length"), "ok"]})
    path = tmp_path / "cache.jsonl"
    requests = [make_request("fine"), make_request("null")]
    first = CachedEngine(make_engine(server), path).generate(requests, PARAMS)
    assert [c.ok for c in first] == [True, False]
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["texts"] for line in lines] == [[answer("fine")]]
    second = CachedEngine(make_engine(server), path).generate(requests, PARAMS)
    assert [c.texts for c in second] == [(answer("fine"),), (answer("null"),)]
    assert server.attempts == Counter({"fine": 1, "null": 2})


def test_openai_engine_unreachable_server_fails_fast_before_generating(slept):
    port = free_port()  # nothing listens there
    engine = OpenAIEngine("m", OpenAIOptions(base_url=f"http://127.0.0.1:{port}/v1", api_key_env=None))
    with pytest.raises(ServerUnreachableError) as err:
        engine.generate([make_request(f"q{i}") for i in range(40)], PARAMS)  # default retries and delays
    assert slept == []  # no retry waits
    assert isinstance(err.value, PerrecbenchError)  # the CLI prints one line and exits 2
    assert f"http://127.0.0.1:{port}/v1" in str(err.value) and "--base-url" in str(err.value)


def test_openai_engine_rejected_key_fails_before_generating(stub_factory):
    server = stub_factory(models=("status", 401, {}, "invalid api key"))
    with pytest.raises(ServerRejectedKeyError, match="--api-key-env") as err:
        make_engine(server).generate([make_request("q")], PARAMS)
    assert isinstance(err.value, PerrecbenchError)
    assert KEY_ENV in str(err.value) and SECRET not in str(err.value)
    assert server.bodies == []  # no chat request was sent


@pytest.mark.parametrize("status", [404, 500])  # unsupported; `transformers serve` without $HF_HOME/hub
def test_openai_engine_goes_on_when_the_server_cannot_list_models(stub_factory, caplog, status):
    server = stub_factory(models=("status", status, {}, "no model list here"))
    with caplog.at_level(logging.WARNING, logger="perrec_eval.engines.openai"):
        completion = generate_one(server, "q")
    assert completion.ok
    assert f"could not list the models at {server.base_url} (HTTP {status} from" in caplog.text


def test_openai_engine_checks_the_server_once(stub_factory):
    server = stub_factory()
    engine = make_engine(server)
    engine.generate([make_request("a")], PARAMS)
    engine.generate([make_request("b")], PARAMS)
    assert server.model_lists == 1


def test_openai_engine_warns_when_the_server_does_not_list_the_model(stub_factory, caplog):
    server = stub_factory()
    with caplog.at_level(logging.WARNING, logger="perrec_eval.engines.openai"):
        make_engine(server, adapter="missing-lora").check()
    assert "does not list 'missing-lora' (it serves stub-model)" in caplog.text


def test_openai_engine_sends_each_request_its_own_seed_whatever_the_batch(stub_factory):
    server = stub_factory()
    engine = make_engine(server)
    alone = engine.generate([make_request("a")], PARAMS)
    batched = engine.generate([make_request(q) for q in ("c", "a", "b")], PARAMS)
    assert batched[1].texts == alone[0].texts == (answer("a"),)
    assert len({body["seed"] for body in server.bodies}) == 3  # a, b, c: three different seeds
    unseeded = engine.generate([make_request("a")], GenParams(temperature=0.1, seed=None))
    assert "seed" not in server.bodies[-1] and unseeded[0].texts == ("a|seed=None|0",)


@pytest.fixture
def http_loggers():
    """The loggers the engine quiets, unset for the test; theirs and the root's levels restored after."""
    names = ("openai", "httpx", "httpx2")
    root = logging.getLogger()
    levels = {name: logging.getLogger(name).level for name in names}
    root_level = root.level
    for name in names:
        logging.getLogger(name).setLevel(logging.NOTSET)
    yield names
    root.setLevel(root_level)
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def test_openai_engine_quiets_the_per_request_http_log(http_loggers, stub_factory):
    logging.getLogger().setLevel(logging.INFO)
    make_engine(stub_factory())
    assert all(logging.getLogger(name).level == logging.WARNING for name in http_loggers)


def test_openai_engine_keeps_the_http_log_when_debugging(http_loggers, stub_factory):
    logging.getLogger().setLevel(logging.DEBUG)
    make_engine(stub_factory())
    assert all(logging.getLogger(name).level == logging.NOTSET for name in http_loggers)
