"""The lockstep driver: every family's requests reach the engine through it, one call per step.

Each doc of a cell has a runner (a state machine: `pending()` slots, `feed(answers)`, `done`,
`prediction()`). At each step the driver collects the pending slots of *every* runner, renders them, sends
them to the engine in one call, reads each answer back and feeds each runner its answers. One-shot
protocols take one step; adaptive ones (PerRecBench's heapsort) take a few, still one call per step.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from perrec_eval import progress
from perrec_eval.cache import request_key
from perrec_eval.engines.base import Engine
from perrec_eval.types import ChatRequest, Completion, GenParams

S = TypeVar("S")


class Runner(Protocol):
    """The state machine of one doc: what to ask next, and its prediction once done."""

    @property
    def done(self) -> bool: ...

    def pending(self) -> list[Any]: ...

    def feed(self, answers: Mapping[Any, Any]) -> None: ...

    def prediction(self) -> Any: ...


class OneShot:
    """The runner of a protocol that asks once: one slot, and the prediction is `finish(answer)`.

    `answer` is what the driver fed for the slot (None: every sample failed).

    >>> runner = OneShot("rating", finish=lambda answer: answer and answer * 2)
    >>> runner.pending(), runner.feed({"rating": 3}), runner.done, runner.prediction()
    (['rating'], None, True, 6)
    """

    def __init__(self, slot: Hashable, finish: Callable[[Any], Any] = lambda answer: answer) -> None:
        self._slot, self._finish = slot, finish
        self._answer: Any = None
        self._done = False

    @property
    def done(self) -> bool:
        return self._done

    def pending(self) -> list[Any]:
        return [] if self._done else [self._slot]

    def feed(self, answers: Mapping[Any, Any]) -> None:
        self._answer, self._done = answers.get(self._slot), True

    def prediction(self) -> Any:
        return self._finish(self._answer)


# (doc id, slot) -> the request, or why it cannot be sent (a str: it fails as an engine error, unsent)
Ask = Callable[[str, Hashable], "ChatRequest | str"]
# (doc id, slot, step, request, completion) -> (the parsed answer fed to the runner, the sample record)
Read = Callable[[str, Hashable, int, "ChatRequest | str", Completion], tuple[Any, S]]


def ask_engine(engine: Engine, requests: Sequence[ChatRequest | str], params: GenParams) -> list[Completion]:
    """Send the renderable requests in one call; a blocked one (its reason as a str) fails without a call."""
    sendable = [request for request in requests if isinstance(request, ChatRequest)]
    answered = iter(engine.generate(sendable, params) if sendable else [])
    return [
        next(answered) if isinstance(request, ChatRequest) else Completion(texts=(), error=request)
        for request in requests
    ]


def drive(
    runners: Mapping[str, Runner],
    ask: Ask,
    read: Read[S],
    engine: Engine,
    params: GenParams,
    *,
    desc: str,
) -> list[S]:
    """Run every runner to the end, all pending requests of a step in one engine call.

    Args:
        runners: doc id -> its runner.
        ask: renders a slot of a doc as a request (or says why it cannot be sent).
        read: parses a completion into the answer its runner is fed, and the sample record kept.
        engine: answers the requests.
        params: sampling parameters of every request.
        desc: the progress bar's label.

    Returns:
        One sample record per request, in the order asked.
    """
    samples: list[S] = []
    step = 0
    with progress.bar(desc=desc, unit="req", disable=not runners) as bar, progress.step(bar):
        while True:
            batch = [
                (doc, slot) for doc, runner in runners.items() if not runner.done for slot in runner.pending()
            ]
            if not batch:
                break
            requests = [ask(doc, slot) for doc, slot in batch]
            bar.total = (bar.total or 0) + len(requests)
            bar.set_description(f"{desc} (step {step + 1})" if step else desc)
            before = bar.n
            completions = ask_engine(engine, requests, params)  # an engine moves the bar per request
            answers: dict[str, dict[Any, Any]] = {}
            for (doc, slot), request, completion in zip(batch, requests, completions, strict=True):
                value, sample = read(doc, slot, step, request, completion)
                answers.setdefault(doc, {})[slot] = value
                samples.append(sample)
            for doc, runner in runners.items():
                if not runner.done and doc in answers:
                    runner.feed(answers[doc])
            bar.update(max(0, len(requests) - (bar.n - before)))  # cached answers; engines that do not report
            step += 1
    return samples


def answer_fields(
    parsed: Sequence[Any],
    combine: Callable[[list[Any]], Any],
    engine: Engine,
    request: ChatRequest | str,
    completion: Completion,
    params: GenParams,
) -> dict[str, Any]:
    """What every family's sample record keeps of one answered request, from its samples' parse results.

    `parsed` are the protocol's results (``ok``, ``value``, ``reason``), one per sample text; `combine` merges
    the successful values (self-consistency). A request that could not be sent (a str) has no cache key.
    """
    good = [p.value for p in parsed if p.ok]
    value = combine(good) if good else None
    reasons = [p.reason for p in parsed if not p.ok]
    reason = completion.error or (reasons[0] if value is None and reasons else None)
    return {
        "key": request_key(engine, request, params) if isinstance(request, ChatRequest) else None,
        "texts": list(completion.texts),
        "parsed": [p.value if p.ok else None for p in parsed],
        "value": value,
        "ok": value is not None,
        "reason": reason if value is None else None,
        "num_failed_samples": len(parsed) - len(good) if completion.ok else params.n,
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "error": completion.error,
        "finish_reasons": completion.extra.get("finish_reasons"),
    }
