"""The one small interface every inference backend implements."""

from __future__ import annotations

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
