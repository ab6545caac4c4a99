"""The request cache: hits and misses, one inner call per step, no stored errors, surviving kills."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from perrec_eval.cache import CachedEngine, key_of, request_key
from perrec_eval.engines import Engine
from perrec_eval.engines.fake import FakeEngine, FakeOptions
from perrec_eval.types import ChatRequest, Completion, GenParams

PARAMS = GenParams(temperature=0.0, max_tokens=16)


def make_request(text: str) -> ChatRequest:
    return ChatRequest(messages=({"role": "system", "content": "rank"}, {"role": "user", "content": text}))


class Recorder:
    """A responder that answers `echo:<query>` and remembers every query it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, request: ChatRequest, params: GenParams, sample_index: int) -> str:
        query = request.messages[-1]["content"]
        self.asked.append(query)
        return f"echo:{query}"


def stored_keys(path: Path) -> list[str]:
    return [json.loads(line)["key"] for line in path.read_text(encoding="utf-8").splitlines()]


def test_cache_second_call_is_served_without_the_engine(tmp_path):
    recorder = Recorder()
    inner = FakeEngine(recorder)
    cache = CachedEngine(inner, tmp_path / "cache.jsonl")
    requests = [make_request(f"q{i}") for i in range(4)]
    first = cache.generate(requests, PARAMS)
    second = cache.generate(requests, PARAMS)
    assert [c.texts for c in first] == [c.texts for c in second] == [(f"echo:q{i}",) for i in range(4)]
    assert (inner.calls, cache.hits, cache.misses) == (1, 4, 4)
    assert (cache.calls, cache.inner_calls) == (2, 1)


def test_cache_sends_all_misses_in_one_call_and_keeps_order(tmp_path):
    recorder = Recorder()
    inner = FakeEngine(recorder)
    cache = CachedEngine(inner, tmp_path / "cache.jsonl")
    cache.generate([make_request("q1"), make_request("q3")], PARAMS)
    mixed = [make_request(f"q{i}") for i in range(5)]
    completions = cache.generate(mixed, PARAMS)
    assert [c.texts[0] for c in completions] == [f"echo:q{i}" for i in range(5)]
    assert inner.calls == 2
    assert recorder.asked == ["q1", "q3", "q0", "q2", "q4"]
    assert (cache.hits, cache.misses) == (2, 5)


def test_cache_sends_duplicate_requests_once(tmp_path):
    recorder = Recorder()
    cache = CachedEngine(FakeEngine(recorder), tmp_path / "cache.jsonl")
    completions = cache.generate([make_request("a"), make_request("b"), make_request("a")], PARAMS)
    assert [c.texts[0] for c in completions] == ["echo:a", "echo:b", "echo:a"]
    assert recorder.asked == ["a", "b"]
    assert len(stored_keys(tmp_path / "cache.jsonl")) == 2


def test_cache_survives_reopening(tmp_path):
    path = tmp_path / "cache.jsonl"
    CachedEngine(FakeEngine(Recorder()), path).generate([make_request("a"), make_request("b")], PARAMS)
    recorder = Recorder()
    reopened = CachedEngine(FakeEngine(recorder), path)
    completions = reopened.generate([make_request("b"), make_request("a")], PARAMS)
    assert [c.texts[0] for c in completions] == ["echo:b", "echo:a"]
    assert recorder.asked == []
    assert len(reopened) == 2


def test_cache_keeps_token_counts_and_extra(tmp_path):
    path = tmp_path / "cache.jsonl"
    answer = Completion(
        texts=("x", "y"), prompt_tokens=11, completion_tokens=7, extra={"finish_reasons": ["stop", "length"]}
    )
    two = GenParams(temperature=0.0, max_tokens=16, n=2)
    CachedEngine(FakeEngine(lambda r, p, i: answer), path).generate([make_request("a")], two)
    (cached,) = CachedEngine(FakeEngine(Recorder()), path).generate([make_request("a")], two)
    assert cached == answer


@pytest.mark.parametrize(
    "change",
    [
        {"params": GenParams(temperature=0.5, max_tokens=16)},
        {"params": GenParams(temperature=0.0, max_tokens=16, seed=1)},
        {"params": GenParams(temperature=0.0, max_tokens=16, n=2)},
        {"model": "other-model"},
        {"adapter": "lora-a"},
        {"text": "a "},
    ],
)
def test_cache_key_covers_model_adapter_params_and_messages(tmp_path, change):
    path = tmp_path / "cache.jsonl"
    CachedEngine(FakeEngine(Recorder(), model="m"), path).generate([make_request("a")], PARAMS)
    recorder = Recorder()
    inner = FakeEngine(recorder, model=change.get("model", "m"), adapter=change.get("adapter"))
    CachedEngine(inner, path).generate([make_request(change.get("text", "a"))], change.get("params", PARAMS))
    assert inner.requests_seen == 1


def test_cache_request_key_is_independent_of_message_key_order():
    forward = ChatRequest(messages=({"role": "user", "content": "a"},))
    backward = ChatRequest(messages=({"content": "a", "role": "user"},))
    assert key_of("hf", "m", None, PARAMS, forward) == key_of("hf", "m", None, PARAMS, backward)


def test_cache_request_key_matches_the_stored_key(tmp_path):
    path = tmp_path / "cache.jsonl"
    cache = CachedEngine(FakeEngine(Recorder(), model="m"), path)
    cache.generate([make_request("a")], PARAMS)
    key = request_key(cache, make_request("a"), PARAMS)
    assert stored_keys(path) == [key]
    assert key == request_key(cache.engine, make_request("a"), PARAMS) == cache.key(make_request("a"), PARAMS)


def test_cache_does_not_store_errors(tmp_path):
    path = tmp_path / "cache.jsonl"

    def fails_on_b(request, params, sample_index):
        if request.messages[-1]["content"] == "b":
            return Completion(texts=(), error="HTTP 500")
        return "fine"

    failing = FakeEngine(fails_on_b)
    first = CachedEngine(failing, path).generate([make_request("a"), make_request("b")], PARAMS)
    assert [c.ok for c in first] == [True, False]
    recorder = Recorder()
    retry = CachedEngine(FakeEngine(recorder), path).generate([make_request("a"), make_request("b")], PARAMS)
    assert recorder.asked == ["b"]
    assert [c.texts[0] for c in retry] == ["fine", "echo:b"]


@pytest.mark.parametrize(
    ("texts", "error"),
    [
        ((), "engine returned no text"),
        ((None,), "engine returned a non-text answer (NoneType)"),
        (("a", "b"), "engine returned 2 text(s) for n=1"),
    ],
)
def test_cache_turns_an_answer_without_text_into_an_error_and_does_not_store_it(tmp_path, texts, error):
    path = tmp_path / "cache.jsonl"
    reported = []
    engine = FakeEngine(lambda request, params, i: Completion(texts=texts, prompt_tokens=3))
    cache = CachedEngine(engine, path)
    (completion,) = cache.generate([make_request("a")], PARAMS, on_results=reported.extend)
    assert completion.error == error and completion.texts == () and completion.prompt_tokens == 3
    assert reported == [(0, completion)]
    assert not path.exists() or path.read_text() == ""
    recorder = Recorder()
    CachedEngine(FakeEngine(recorder), path).generate([make_request("a")], PARAMS)
    assert recorder.asked == ["a"]


def test_cache_keeps_an_empty_string_answer(tmp_path):
    path = tmp_path / "cache.jsonl"
    (completion,) = CachedEngine(FakeEngine(lambda r, p, i: ""), path).generate([make_request("a")], PARAMS)
    assert completion.ok and completion.texts == ("",)  # the model's own answer: it fails to parse later
    assert len(CachedEngine(FakeEngine(Recorder()), path)) == 1


def test_cache_ignores_stored_lines_without_an_answer(tmp_path):
    path = tmp_path / "cache.jsonl"
    key = key_of("fake", "fake", None, PARAMS, make_request("a"))
    path.write_text("".join(json.dumps({"key": key, "texts": texts}) + "\n" for texts in ([], [None])))
    recorder = Recorder()
    (completion,) = CachedEngine(FakeEngine(recorder), path).generate([make_request("a")], PARAMS)
    assert recorder.asked == ["a"] and completion.texts == ("echo:a",)


@pytest.mark.parametrize(
    "field",
    [{"extra": "notadict"}, {"prompt_tokens": "lots"}, {"completion_tokens": -3}, {"prompt_tokens": 1.5}],
)
def test_cache_asks_again_for_a_stored_line_with_a_bad_count_or_extra(tmp_path, field):
    path = tmp_path / "cache.jsonl"
    key = key_of("fake", "fake", None, PARAMS, make_request("a"))
    path.write_text(json.dumps({"key": key, "texts": ["old"], **field}) + "\n")
    recorder = Recorder()
    (completion,) = CachedEngine(FakeEngine(recorder), path).generate([make_request("a")], PARAMS)
    assert recorder.asked == ["a"] and completion.texts == ("echo:a",)


def test_cache_never_stores_token_counts_that_are_not_counts(tmp_path):
    path = tmp_path / "cache.jsonl"
    odd = FakeEngine(lambda r, p, i: Completion(texts=("x",), prompt_tokens="lots", completion_tokens=2.5))
    (completion,) = CachedEngine(odd, path).generate([make_request("a")], PARAMS)
    assert completion.ok and (completion.prompt_tokens, completion.completion_tokens) == (None, None)
    (line,) = path.read_text(encoding="utf-8").splitlines()
    assert (json.loads(line)["prompt_tokens"], json.loads(line)["completion_tokens"]) == (None, None)
    recorder = Recorder()
    (again,) = CachedEngine(FakeEngine(recorder), path).generate([make_request("a")], PARAMS)
    assert recorder.asked == [] and again.texts == ("x",)


def test_cache_file_that_is_a_folder_is_one_line_error(tmp_path):
    from perrec_eval.errors import DataError

    (tmp_path / "cache.jsonl").mkdir()
    with pytest.raises(DataError, match="is a folder, not the request cache file"):
        CachedEngine(FakeEngine(Recorder()), tmp_path / "cache.jsonl")


def test_cache_resume_after_crash_repeats_no_completed_request(tmp_path):
    path = tmp_path / "cache.jsonl"
    queries = [f"q{i}" for i in range(10)]
    asked_before: list[str] = []

    def crashes_after_six(request, params, sample_index):
        if len(asked_before) == 6:
            raise KeyboardInterrupt  # like Ctrl-C in the middle of a step
        asked_before.append(request.messages[-1]["content"])
        return "done"

    with pytest.raises(KeyboardInterrupt):
        CachedEngine(FakeEngine(crashes_after_six, options=FakeOptions(report_every=1)), path).generate(
            [make_request(q) for q in queries], PARAMS
        )
    recorder = Recorder()
    resumed = CachedEngine(FakeEngine(recorder), path)
    completions = resumed.generate([make_request(q) for q in queries], PARAMS)
    assert asked_before == queries[:6]
    assert recorder.asked == queries[6:]
    assert all(c.ok for c in completions)


def test_cache_drops_a_truncated_last_line_and_appends_cleanly(tmp_path, caplog):
    path = tmp_path / "cache.jsonl"
    CachedEngine(FakeEngine(Recorder()), path).generate([make_request("a"), make_request("b")], PARAMS)
    good = path.read_bytes()
    with open(path, "ab") as handle:
        handle.write(b'{"key": "4f2a", "texts": ["half a li')  # a write cut by a kill
    with caplog.at_level(logging.WARNING, logger="perrec_eval.cache"):
        recorder = Recorder()
        reopened = CachedEngine(FakeEngine(recorder), path)
    assert "partial or corrupt last line" in caplog.text
    assert path.read_bytes() == good
    reopened.generate([make_request("a"), make_request("c")], PARAMS)
    assert recorder.asked == ["c"]
    assert len(stored_keys(path)) == 3  # every line parses again


def test_cache_drops_a_corrupt_complete_last_line(tmp_path):
    path = tmp_path / "cache.jsonl"
    CachedEngine(FakeEngine(Recorder()), path).generate([make_request("a")], PARAMS)
    good = path.read_bytes()
    path.write_bytes(good + b"\x00\x00garbage\n")
    assert len(CachedEngine(FakeEngine(Recorder()), path)) == 1
    assert path.read_bytes() == good


def test_cache_skips_a_corrupt_middle_line(tmp_path, caplog):
    path = tmp_path / "cache.jsonl"
    CachedEngine(FakeEngine(Recorder()), path).generate([make_request("a")], PARAMS)
    first = path.read_bytes()
    path.write_bytes(b"not json\n" + first)
    with caplog.at_level(logging.WARNING, logger="perrec_eval.cache"):
        reopened = CachedEngine(FakeEngine(Recorder()), path)
    assert "corrupt line 1" in caplog.text
    assert len(reopened) == 1


def test_cache_persists_each_chunk_a_streaming_engine_reports(tmp_path):
    path = tmp_path / "cache.jsonl"
    lines_seen: list[int] = []  # cache lines on disk when each request is answered

    def watching(request, params, sample_index):
        lines_seen.append(len(path.read_bytes().splitlines()) if path.exists() else 0)
        return "ok"

    engine = FakeEngine(watching, options=FakeOptions(report_every=2))
    CachedEngine(engine, path).generate([make_request(f"q{i}") for i in range(5)], PARAMS)
    assert lines_seen == [0, 0, 2, 2, 4]  # each chunk of 2 is on disk before the next one starts
    assert len(stored_keys(path)) == 5


class OneShotEngine:
    """The least an engine must do: answer everything, then report all results in one callback."""

    name = "one-shot"
    model = "m"
    adapter = None

    def __init__(self, path: Path) -> None:
        self.path = path
        self.reports: list[list[int]] = []
        self.lines_on_return = -1

    def generate(self, requests, params, *, on_results=None):
        completions = [Completion(texts=(f"echo:{r.messages[-1]['content']}",)) for r in requests]
        if on_results is not None:
            on_results(list(enumerate(completions)))
            self.reports.append(list(range(len(completions))))
        self.lines_on_return = len(self.path.read_bytes().splitlines()) if self.path.exists() else 0
        return completions

    def info(self):
        return {"name": self.name, "model": self.model, "adapter": self.adapter}

    def with_adapter(self, name, path):
        raise NotImplementedError("no weights to adapt")


def test_cache_persists_a_non_streaming_engine_once(tmp_path):
    path = tmp_path / "cache.jsonl"
    engine = OneShotEngine(path)
    assert isinstance(engine, Engine)
    completions = CachedEngine(engine, path).generate([make_request(q) for q in ("a", "b", "c")], PARAMS)
    assert [c.texts[0] for c in completions] == ["echo:a", "echo:b", "echo:c"]
    assert engine.reports == [[0, 1, 2]]
    assert engine.lines_on_return == 3  # persisted by the callback, before the engine returned
    assert len(stored_keys(path)) == 3


def test_cache_stores_results_an_engine_forgot_to_report(tmp_path, caplog):
    class Forgetful(OneShotEngine):
        def generate(self, requests, params, *, on_results=None):
            return super().generate(requests, params)  # drops the callback

    path = tmp_path / "cache.jsonl"
    with caplog.at_level(logging.WARNING, logger="perrec_eval.cache"):
        CachedEngine(Forgetful(path), path).generate([make_request("a"), make_request("b")], PARAMS)
    assert "did not report 2" in caplog.text
    assert len(stored_keys(path)) == 2


def test_cached_engine_is_an_engine_that_reports_hits_and_misses_by_position(tmp_path):
    cache = CachedEngine(
        FakeEngine(Recorder(), options=FakeOptions(report_every=1)), tmp_path / "cache.jsonl"
    )
    cache.generate([make_request("b")], PARAMS)
    assert isinstance(cache, Engine)
    reported: list[list[tuple[int, str]]] = []
    requests = [make_request(q) for q in ("a", "b", "c", "a")]
    completions = cache.generate(
        requests, PARAMS, on_results=lambda done: reported.append([(i, c.texts[0]) for i, c in done])
    )
    assert reported == [[(1, "echo:b")], [(0, "echo:a"), (3, "echo:a")], [(2, "echo:c")]]
    assert [c.texts[0] for c in completions] == ["echo:a", "echo:b", "echo:c", "echo:a"]


def test_cache_wraps_a_cache(tmp_path):
    recorder = Recorder()
    outer = CachedEngine(
        CachedEngine(FakeEngine(recorder), tmp_path / "inner.jsonl"), tmp_path / "outer.jsonl"
    )
    outer.generate([make_request("a"), make_request("b")], PARAMS)
    assert recorder.asked == ["a", "b"]
    assert len(stored_keys(tmp_path / "inner.jsonl")) == len(stored_keys(tmp_path / "outer.jsonl")) == 2


_KILLED_RUN = textwrap.dedent(
    """
    import sys, time
    from perrec_eval.cache import CachedEngine
    from perrec_eval.engines.fake import FakeEngine, FakeOptions
    from perrec_eval.types import ChatRequest, GenParams

    def slow(request, params, sample_index):
        time.sleep(0.02)
        return "echo:" + request.messages[-1]["content"]

    requests = [
        ChatRequest(messages=({"role": "system", "content": "rank"}, {"role": "user", "content": f"q{i}"}))
        for i in range(int(sys.argv[2]))
    ]
    CachedEngine(FakeEngine(slow, options=FakeOptions(report_every=1)), sys.argv[1]).generate(
        requests, GenParams(temperature=0.0, max_tokens=16)
    )
    """
)


@pytest.mark.slow
def test_cache_resume_after_sigkill_repeats_no_completed_request(tmp_path):
    path = tmp_path / "cache.jsonl"
    total = 400
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    process = subprocess.Popen([sys.executable, "-c", _KILLED_RUN, str(path), str(total)], env=env)
    try:
        for _ in range(600):  # up to ~60 s for the child to start and finish a few requests
            if path.exists() and path.read_bytes().count(b"\n") >= 10:
                break
            if process.poll() is not None:
                break
            time.sleep(0.1)
        assert process.poll() is None, "the child finished before it could be killed"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL

    recorder = Recorder()
    resumed = CachedEngine(FakeEngine(recorder), path)
    done_before = len(resumed)
    queries = [f"q{i}" for i in range(total)]
    completions = resumed.generate([make_request(q) for q in queries], PARAMS)
    assert 10 <= done_before < total
    assert len(recorder.asked) == total - done_before
    assert recorder.asked == queries[done_before:]  # the killed run finished a prefix, in order
    assert [c.texts[0] for c in completions] == [f"echo:{q}" for q in queries]


def _adapter(folder: Path, weights: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_model.safetensors").write_bytes(weights)
    return folder


def test_cache_an_adapter_retrained_in_place_is_asked_again(tmp_path):
    adapter = _adapter(tmp_path / "adapter", b"first weights")
    recorder = Recorder()
    CachedEngine(FakeEngine(recorder, adapter=str(adapter)), tmp_path / "cache.jsonl").generate(
        [make_request("q")], PARAMS
    )
    _adapter(adapter, b"retrained weights")
    again = CachedEngine(FakeEngine(recorder, adapter=str(adapter)), tmp_path / "cache.jsonl")
    again.generate([make_request("q")], PARAMS)
    assert (again.hits, again.misses, recorder.asked) == (0, 1, ["q", "q"])


def test_cache_an_adapter_is_keyed_by_its_weights_not_its_path(tmp_path):
    first = _adapter(tmp_path / "adapter", b"weights")
    moved = _adapter(tmp_path / "elsewhere" / "adapter", b"weights")
    recorder = Recorder()
    CachedEngine(FakeEngine(recorder, adapter=str(first)), tmp_path / "cache.jsonl").generate(
        [make_request("q")], PARAMS
    )
    again = CachedEngine(FakeEngine(recorder, adapter=str(moved)), tmp_path / "cache.jsonl")
    again.generate([make_request("q")], PARAMS)
    assert (again.hits, recorder.asked) == (1, ["q"])


def test_cache_stores_a_servers_bad_usage_counts_as_unknown(tmp_path):
    def bad_usage(request, params, sample_index):
        return Completion(texts=("ok",), prompt_tokens="lots", completion_tokens=-3, extra="notadict")

    path = tmp_path / "cache.jsonl"
    (answer,) = CachedEngine(FakeEngine(bad_usage), path).generate([make_request("a")], PARAMS)
    assert (answer.prompt_tokens, answer.completion_tokens, answer.extra) == (None, None, {})
    (line,) = [json.loads(line) for line in path.read_text().splitlines()]
    assert (line["prompt_tokens"], line["completion_tokens"], line["extra"]) == (None, None, {})


@pytest.mark.parametrize("field", [{"prompt_tokens": "lots"}, {"extra": "notadict"}])
def test_cache_asks_again_for_a_stored_line_with_bad_counts(tmp_path, field):
    path = tmp_path / "cache.jsonl"
    CachedEngine(FakeEngine(Recorder()), path).generate([make_request("a")], PARAMS)
    (line,) = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text(json.dumps({**line, **field}) + "\n")
    recorder = Recorder()
    reopened = CachedEngine(FakeEngine(recorder), path)
    (answer,) = reopened.generate([make_request("a")], PARAMS)
    assert recorder.asked == ["a"] and answer.texts == ("echo:a",)


def test_cache_an_adapter_served_by_name_is_keyed_by_its_local_weights(tmp_path):
    import types

    folder = _adapter(tmp_path / "adapter", b"first weights")
    served = types.SimpleNamespace(name="openai", model="m", adapter="served-name", adapter_path=str(folder))
    first = request_key(served, make_request("q"), PARAMS)
    _adapter(folder, b"retrained weights")
    assert request_key(served, make_request("q"), PARAMS) != first
    by_name = types.SimpleNamespace(name="openai", model="m", adapter="served-name")
    assert request_key(by_name, make_request("q"), PARAMS) == key_of(
        "openai", "m", "served-name", PARAMS, make_request("q")
    )


def test_cache_lines_of_older_versions_still_answer_a_resume(tmp_path):
    recorder = Recorder()
    engine = FakeEngine(recorder)
    key = request_key(engine, make_request("q"), PARAMS)
    old = {"key": key, "texts": ["stored by an older version"], "prompt_tokens": 3, "completion_tokens": 1}
    (tmp_path / "cache.jsonl").write_text(json.dumps({**old, "extra": {}}) + "\n")  # no "keys" field
    (answer,) = CachedEngine(engine, tmp_path / "cache.jsonl").generate([make_request("q")], PARAMS)
    assert answer.texts == ("stored by an older version",) and recorder.asked == []
