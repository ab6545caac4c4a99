"""The one small interface every inference backend implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from perrec_eval.types import ChatRequest, Completion, GenParams


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

    def generate(self, requests: Sequence[ChatRequest], params: GenParams) -> list[Completion]: ...

    def info(self) -> dict[str, Any]: ...
