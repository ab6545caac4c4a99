"""A scripted engine for tests, smoke runs and benchmarks: a Python callable writes every answer.

`SCRIPTS` holds the named responders that ``--engine fake --model NAME`` can run without any Python code;
`constant` answers every request a task family rendered with that family's fixed, well-formed answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from perrec_eval import registry
from perrec_eval.cliconfig import option
from perrec_eval.engines._common import coerce_fields, split_evenly
from perrec_eval.engines.base import ResultsCallback
from perrec_eval.errors import ConfigError
from perrec_eval.types import ChatRequest, Completion, GenParams

logger = logging.getLogger(__name__)

Responder = Callable[[ChatRequest, GenParams, int], "str | Completion"]
def constant(request: ChatRequest, params: GenParams, sample_index: int) -> str | Completion:
    """The `constant` script: each task family's fixed, well-formed answer to a request of its templates.

    PerRecBench's: ``[User A]`` pairwise, the identity ranking listwise, ``{"predicted_rating": 4}``
    pointwise, a fixed profile (`perrec_eval.tasks.perrecbench.fake`). A request that no family's templates
    wrote gets a failed completion saying so.

    Args:
        request: the chat request.
        params: sampling parameters (unused).
        sample_index: which sample of the request (unused: every sample is the same).

    Returns:
        The answer text, or a failed `Completion`.
    """
    for name in registry.evaluable():
        answer = registry.get(name).constant_answer(request)
        if answer is not None:
            return answer
    return Completion(
        texts=(),
        error="the 'constant' fake script answers only requests rendered from perrec_eval's templates",
    )


SCRIPTS: dict[str, Responder] = {"constant": constant}


@dataclass(frozen=True, slots=True)
class FakeOptions:
    """Options of the fake engine (``--engine-arg KEY=VALUE``)."""

    report_every: int = option(
        "report finished requests to the cache in chunks of this many (a crash mid-call loses at most one)",
        default=256,
    )

    def __post_init__(self) -> None:
        coerce_fields(self)
        if self.report_every < 1:
            raise ConfigError(f"report_every must be >= 1 (a chunk size), got {self.report_every}")


class FakeEngine:
    """Answers each request with ``responder(request, params, sample_index)``, one call per sample.

    The responder returns the sampled text, or a whole `Completion` (e.g. one with ``error`` set, to script a
    failure), which is then used as-is for that request. Token counts are whitespace word counts, so
    downstream accounting can be checked exactly.

    Args:
        responder: ``(request, params, sample_index) -> str | Completion``; None runs the script named by
            `model` (one of `SCRIPTS`).
        model: the name recorded in runs and cache keys (and the script to run when `responder` is None).
        options: see `FakeOptions`; default: its defaults.
        adapter: recorded in cache keys and `info()` only (a script has no weights to adapt).

    Attributes:
        calls: number of `generate` calls so far.
        requests_seen: number of requests received over all calls.

    >>> engine = FakeEngine(lambda request, params, i: f"answer {i}")
    >>> request = ChatRequest(messages=({"role": "user", "content": "hi there"},))
    >>> [c.texts for c in engine.generate([request], GenParams(n=2))]
    [('answer 0', 'answer 1')]
    >>> engine.calls, engine.requests_seen
    (1, 1)
    """

    name = "fake"

    def __init__(
        self,
        responder: Responder | None = None,
        model: str = "fake",
        options: FakeOptions | None = None,
        *,
        adapter: str | None = None,
    ) -> None:
        if responder is None:
            if model not in SCRIPTS:
                raise ConfigError(
                    f"the fake engine has no script {model!r}: choose --model "
                    f"{' or '.join(sorted(SCRIPTS))} (or pass a responder from Python)"
                )
            responder = SCRIPTS[model]
        if not callable(responder):
            raise TypeError(
                "the fake engine needs responder=callable(request, params, sample_index) -> str, "
                f"got {type(responder).__name__}"
            )
        self.responder = responder
        self.model = model
        self.adapter = adapter
        self.options = options or FakeOptions()
        self.calls = 0
        self.requests_seen = 0

    def generate(
        self,
        requests: Sequence[ChatRequest],
        params: GenParams,
        *,
        on_results: ResultsCallback | None = None,
    ) -> list[Completion]:
        """Answer every request in order, reporting each chunk of ``report_every`` finished requests.

        Args:
            requests: the conversations to answer.
            params: sampling parameters, passed to the responder.
            on_results: called with each finished chunk of ``(index, completion)`` pairs.

        Returns:
            One completion per request, in order.
        """
        self.calls += 1
        self.requests_seen += len(requests)
        completions: list[Completion] = []
        for chunk in split_evenly(list(range(len(requests))), self.options.report_every):
            finished: list[tuple[int, Completion]] = []
            try:
                for index in chunk:
                    completion = self._answer(requests[index], params)
                    finished.append((index, completion))
                    completions.append(completion)
            finally:
                # Report what finished even when the responder raised, like a real engine interrupted
                # between requests.
                if on_results is not None and finished:
                    on_results(finished)
        return completions

    def _answer(self, request: ChatRequest, params: GenParams) -> Completion:
        texts: list[str] = []
        for sample_index in range(params.n):
            answer = self.responder(request, params, sample_index)
            if isinstance(answer, Completion):
                return answer
            if not isinstance(answer, str):
                raise TypeError(
                    f"the fake responder must return str or Completion, got {type(answer).__name__}"
                )
            texts.append(answer)
        return Completion(
            texts=tuple(texts),
            prompt_tokens=sum(len(message["content"].split()) for message in request.messages),
            completion_tokens=sum(len(text.split()) for text in texts),
        )

    def with_adapter(self, name: str, path: str) -> FakeEngine:
        """The same script with `adapter` set to `path` (cache keys and run.json tell the runs apart)."""
        return FakeEngine(self.responder, model=self.model, options=self.options, adapter=path)

    def info(self) -> dict[str, Any]:
        """Name, model, adapter and the responder's qualified name."""
        responder = getattr(self.responder, "__qualname__", type(self.responder).__qualname__)
        return {"name": self.name, "model": self.model, "adapter": self.adapter, "responder": responder}
