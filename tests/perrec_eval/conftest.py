"""Fixtures of the engine tests: scripted OpenAI-compatible servers on 127.0.0.1, stopped afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.perrec_eval.openai_stub import StubServer


@pytest.fixture
def stub_factory() -> Iterator[Any]:
    """``start(script=None, max_choices=None, models="ok", default="ok", linger=0.0)``: a running
    `StubServer`, stopped afterwards."""
    servers: list[StubServer] = []

    def start(
        script: dict[str, list[Any]] | None = None,
        max_choices: int | None = None,
        models: Any = "ok",
        default: Any = "ok",
        linger: float = 0.0,
    ) -> StubServer:
        servers.append(StubServer(script, max_choices, models, default, linger).start())
        return servers[-1]

    yield start
    for server in servers:
        server.stop()
