"""The openai engine over several servers (``--base-url`` repeated): spread, per-server limits, failover."""

from __future__ import annotations

import logging
import re
from collections import Counter

import pytest

from perrec_eval.engines.openai import OpenAIOptions, ServerUnreachableError
from perrec_eval.errors import ConfigError
from tests.perrec_eval.openai_stub import KEY_ENV, PARAMS, SECRET, answer, make_engine, make_request


@pytest.fixture(autouse=True)
def api_key(monkeypatch) -> str:
    monkeypatch.setenv(KEY_ENV, SECRET)
    return SECRET


def two_servers(stub_factory, *scripts):
    servers = [stub_factory(script) for script in (scripts or ({}, {}))]
    return servers, ",".join(server.base_url for server in servers)


def test_openai_engine_spreads_requests_over_servers_with_concurrency_per_server(stub_factory):
    queries = [f"q{i}" for i in range(24)]
    slow = {q: [("sleep", 0.02)] for q in queries}
    (first, second), urls = two_servers(stub_factory, slow, slow)
    completions = make_engine(first, base_url=urls, concurrency=3).generate(
        [make_request(q) for q in queries], PARAMS
    )
    assert [c.texts for c in completions] == [(answer(q),) for q in queries]
    assert len(first.bodies) + len(second.bodies) == 24
    assert min(len(first.bodies), len(second.bodies)) >= 6
    assert first.max_in_flight <= 3 and second.max_in_flight <= 3
    assert max(first.max_in_flight, second.max_in_flight) >= 2  # both servers ran requests side by side


def test_openai_engine_checks_every_server_once(stub_factory):
    (first, second), urls = two_servers(stub_factory)
    engine = make_engine(first, base_url=urls)
    engine.generate([make_request("a")], PARAMS)
    engine.generate([make_request("b")], PARAMS)
    assert (first.model_lists, second.model_lists) == (1, 1)


def test_openai_engine_check_names_the_server_that_does_not_answer(stub_factory):
    (first, second), urls = two_servers(stub_factory)
    dead = second.base_url
    second.stop()
    with pytest.raises(ServerUnreachableError, match=dead.replace(".", r"\.")):
        make_engine(first, base_url=urls).generate([make_request("a")], PARAMS)
    assert first.bodies == []


def test_openai_engine_fails_over_when_a_server_stops_answering(stub_factory, caplog):
    (first, second), urls = two_servers(stub_factory)
    engine = make_engine(first, base_url=urls, concurrency=2, max_retries=1)
    engine.check()
    second.stop()
    queries = [f"q{i}" for i in range(10)]
    with caplog.at_level(logging.WARNING):
        completions = engine.generate([make_request(q) for q in queries], PARAMS)
    assert [c.texts for c in completions] == [(answer(q),) for q in queries]
    assert Counter(body["messages"][-1]["content"] for body in first.bodies) == Counter(queries)
    assert f"the server at {second.base_url} stopped answering" in caplog.text


def test_openai_engine_retries_a_server_error_on_the_server_that_gave_it(stub_factory):
    flaky = {"q": [("status", 500, {}, "sick"), "ok"]}
    (first, second), urls = two_servers(stub_factory, flaky, flaky)
    (completion,) = make_engine(first, base_url=urls, max_retries=1).generate([make_request("q")], PARAMS)
    assert completion.ok and completion.texts == (answer("q"),)
    assert sorted([first.attempts["q"], second.attempts["q"]]) == [0, 2]


def test_openai_engine_raises_only_when_every_server_is_down(stub_factory):
    (first, second), urls = two_servers(stub_factory)
    engine = make_engine(first, base_url=urls, max_retries=1)
    engine.check()
    first.stop()
    second.stop()
    with pytest.raises(ServerUnreachableError, match="none answers"):
        engine.generate([make_request(f"q{i}") for i in range(6)], PARAMS)


def test_openai_engine_info_lists_every_server_without_credentials(stub_factory):
    engine = make_engine(stub_factory(), base_url="https://u:pw@a.example/v1,https://b.example/v1?key=1")
    assert engine.info()["base_url"] == "https://a.example/v1,https://b.example/v1"


@pytest.mark.parametrize(
    ("base_url", "problem"),
    [("http://a/v1,,http://b/v1", "empty entry"), ("http://a/v1,http://a/v1/", "twice")],
)
def test_openai_options_reject_a_bad_server_list(base_url, problem):
    with pytest.raises(ConfigError, match=problem):
        OpenAIOptions(base_url=base_url)


@pytest.mark.parametrize(
    ("base_url", "problem"),
    [
        ("", "--base-url is empty"),
        ("  ", "--base-url is empty"),
        ("http://alice:PWSECRET111@[::1", "not a valid URL"),
        ("http://127.0.0.1:99999/v1", "not a valid URL (the port is not a number from 0 to 65535)"),
        ("http://alice:PW/SECRET111@host/v1", "not a valid URL (the port is not"),
        ("127.0.0.1:8000/v1", "not a valid URL (not http(s)"),
    ],
)
def test_openai_options_reject_a_malformed_base_url_in_one_line(base_url, problem):
    with pytest.raises(ConfigError, match=re.escape(problem)) as err:
        OpenAIOptions(base_url=base_url)
    assert "SECRET111" not in str(err.value) and "\n" not in str(err.value)
