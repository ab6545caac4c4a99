"""The one small interface every inference backend implements, and the check of what it returns.

An engine error is a `Completion` with ``error`` set (and no texts): the server failed, timed out or sent
nothing usable. It is never an answer: a caller counts it apart from answers that do not parse, and the
cache never stores it, so a resumed run asks again. `checked` turns a completion that claims success but
carries no usable text into such an error.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from perrec_eval.types import ChatRequest, Completion, GenParams

# An engine reports finished requests through this callback, as (index into the `requests` it was given,
# completion) pairs, as soon as they finish, so a cache can persist them before the whole call returns: a
# run killed mid-call then loses only the requests still in flight. Every request is reported exactly once;
# an engine that cannot stream reports all of them in one call.
ResultsCallback = Callable[[list[tuple[int, Completion]]], None]


@runtime_checkable
class Engine(Protocol):
    """List in, list out: `generate` returns one Completion per request, in the same order.

    `name` is the backend (`fake`, `hf`, `openai`, `vllm`, `baseline`), `model` the model id or path,
    `adapter` an optional LoRA adapter. `info()` returns what run.json records (versions, endpoints
    without secrets).
    """

    name: str
    model: str
    adapter: str | None

    def generate(
        self,
        requests: Sequence[ChatRequest],
        params: GenParams,
        *,
        on_results: ResultsCallback | None = None,
    ) -> list[Completion]:
        """Complete every request.

        Args:
            requests: the conversations to complete.
            params: sampling parameters, applied to every request.
            on_results: called with each group of finished ``(index, completion)`` pairs as it finishes.

        Returns:
            One completion per request, in the order of `requests`.
        """
        ...

    def info(self) -> dict[str, Any]:
        """What run.json records about this engine (no secrets)."""
        ...

    def with_adapter(self, name: str, path: str) -> Engine:
        """This engine answering with LoRA adapter `path` (called `name`), on the same loaded base model.

        Several adapters are evaluated in one run this way, without loading the base model again. The
        returned engine's `adapter` names the adapter (so the cache keeps their answers apart).

        Raises:
            ConfigError: the engine cannot apply an adapter (the message says what to do instead).
        """
        ...


def answer_options(engine: Any) -> dict[str, Any]:
    """The engine options that change answers and are not at their defaults (part of every cache key).

    An engine's options object may define ``answer_options()`` (e.g. openai's ``extra_body``, vLLM's
    ``chat_template_kwargs`` and ``dtype``, hf's ``dtype``); an engine without one has none. Options at their
    defaults are left out, so the keys of runs with default options stay what they always were.

    >>> answer_options(object())
    {}
    """
    describe = getattr(getattr(engine, "options", None), "answer_options", None)
    return dict(describe()) if callable(describe) else {}


def checked(completion: Completion, n: int) -> Completion:
    """`completion`, or an engine error if it claims success without exactly `n` texts.

    Args:
        completion: what an engine returned for one request.
        n: the number of samples asked for (`GenParams.n`).

    Returns:
        `completion` itself when it has an error or `n` string texts (an empty string is an answer: the
        model's own, which then fails to parse); otherwise a copy with no texts and ``error`` saying why.
        Token counts that are not counts (a server's ``"usage": {"prompt_tokens": "lots"}``) become None.

    >>> checked(Completion(texts=("a",)), 1).ok
    True
    >>> checked(Completion(texts=()), 1).error
    'engine returned no text'
    >>> checked(Completion(texts=(None,)), 1).error
    'engine returned a non-text answer (NoneType)'
    >>> checked(Completion(texts=("a",)), 2).error
    'engine returned 1 text(s) for n=2'
    >>> checked(Completion(texts=("a",), prompt_tokens="lots"), 1).prompt_tokens is None
    True
    """
    completion = _usable_counts(completion)
    if not completion.ok:
        return completion
    texts = completion.texts
    if not texts:
        problem = "engine returned no text"
    elif any(not isinstance(text, str) for text in texts):
        wrong = next(text for text in texts if not isinstance(text, str))
        problem = f"engine returned a non-text answer ({type(wrong).__name__})"
    elif len(texts) != n:
        problem = f"engine returned {len(texts)} text(s) for n={n}"
    else:
        return completion
    return Completion(
        texts=(),
        prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens,
        error=problem,
        extra=completion.extra,
    )


def is_count(value: Any) -> bool:
    """Whether `value` is a token count: a non-negative int (not a bool).

    >>> is_count(3), is_count(None), is_count("3"), is_count(True), is_count(-1)
    (True, False, False, False, False)
    """
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _usable_counts(completion: Completion) -> Completion:
    """`completion` with token counts that are no counts (a server's ``"prompt_tokens": "lots"``) as
    unknown and a non-mapping `extra` as empty: such values would be cached and break every later sum."""
    prompt = completion.prompt_tokens if is_count(completion.prompt_tokens) else None
    answer = completion.completion_tokens if is_count(completion.completion_tokens) else None
    extra = completion.extra if isinstance(completion.extra, dict) else {}
    if (prompt, answer, extra) == (completion.prompt_tokens, completion.completion_tokens, completion.extra):
        return completion
    return dataclasses.replace(completion, prompt_tokens=prompt, completion_tokens=answer, extra=extra)


# A family names its own options that shorten its prompts in place of SHORTER_PROMPTS (PerRecBench: --k).
SHORTER_PROMPTS = "show less in each prompt (the task's options that shorten it)"
_CONTEXT_FIX = (
    f"the prompt does not fit the model's context: {SHORTER_PROMPTS}, or use a model with a longer context"
)
_TOO_LONG = re.compile(r"context length|context window|maximum context|too long|too many tokens")
_CLIENT_ERROR = re.compile(r"^HTTP (4\d\d) from ")


def permanent_fix(error: str) -> str | None:
    """The fix for an engine error that asking again cannot cure, or None for a transient one.

    A prompt longer than the model's context fails again on every retry, and so does a request the server
    rejects as invalid (HTTP 400, 404, 413, 422); timeouts, connection errors, rate limits and server errors
    (5xx) may pass on their own.

    Args:
        error: a `Completion.error` (as recorded in samples.jsonl).

    Returns:
        One sentence naming what to change, or None when running the same command again may succeed.

    >>> permanent_fix("no answer within 600s") is None
    True
    >>> permanent_fix("prompt of 900 tokens + max_tokens 800 exceeds the model's 1024 positions")[:34]
    "the prompt does not fit the model'"
    >>> permanent_fix("HTTP 404 from http://h/v1: model 'x' not found")[:43]
    'the server does not serve this model (HTTP '
    """
    if "max_model_len" in error:
        return (
            "the prompt does not fit max_model_len: raise --engine-arg max_model_len (up to the model's "
            f"context), or {SHORTER_PROMPTS}"
        )
    if "exceeds the model's" in error and "positions" in error:
        return _CONTEXT_FIX
    status = _CLIENT_ERROR.match(error)
    if status is None or status.group(1) in ("408", "409", "429"):
        return None
    if _TOO_LONG.search(error.lower()):
        return _CONTEXT_FIX
    if status.group(1) == "404":
        return (
            "the server does not serve this model (HTTP 404): pass --model (or the adapter name) exactly as "
            "the server's /v1/models lists it"
        )
    return (
        f"the server rejects these requests as invalid (HTTP {status.group(1)}); asking again will not help: "
        "check --engine-arg extra_body and the server's limits"
    )
