"""A scripted engine for tests and benchmarks: a Python callable writes every answer."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from perrec_eval.engines._common import ResultsCallback, split_evenly
from perrec_eval.types import ChatRequest, Completion, GenParams

logger = logging.getLogger(__name__)

Responder = Callable[[ChatRequest, GenParams, int], "str | Completion"]


class FakeEngine:
    """Answers each request with ``responder(request, params, sample_index)``, one call per sample.

    The responder returns the sampled text, or a whole `Completion` (e.g. one with ``error`` set, to script a
    failure), which is then used as-is for that request. Token counts are whitespace word counts, so
    downstream accounting can be checked exactly.

    Args:
        responder: ``(request, params, sample_index) -> str | Completion``.
        model: the name recorded in runs and cache keys.
        report_every: report finished requests to ``on_results`` in chunks of this many (a cache persists each
            chunk, so a crash mid-call loses at most one chunk).

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
    supports_on_results = True

    def __init__(self, responder: Responder, model: str = "fake", *, report_every: int = 256) -> None:
        if not callable(responder):
            raise TypeError(
                "the fake engine needs responder=callable(request, params, sample_index) -> str, "
                f"got {type(responder).__name__}"
            )
        if report_every < 1:
            raise ValueError(f"report_every must be >= 1, got {report_every}")
        self.responder = responder
        self.model = model
        self.adapter: str | None = None
        self.report_every = report_every
        self.calls = 0
        self.requests_seen = 0

    def generate(
        self,
        requests: Sequence[ChatRequest],
        params: GenParams,
        *,
        on_results: ResultsCallback | None = None,
    ) -> list[Completion]:
        """Answer every request in order; see the class docstring."""
        self.calls += 1
        self.requests_seen += len(requests)
        completions: list[Completion] = []
        for chunk in split_evenly(list(range(len(requests))), self.report_every):
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

    def info(self) -> dict[str, Any]:
        responder = getattr(self.responder, "__qualname__", type(self.responder).__qualname__)
        return {"name": self.name, "model": self.model, "adapter": self.adapter, "responder": responder}
