"""Records shared by every stage of every task family: engine requests, sampling parameters, completions."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": str}


@dataclass(frozen=True, slots=True)
class GenParams:
    """Sampling parameters; every field is sent to the backend explicitly.

    >>> GenParams(max_tokens=512).as_dict()["max_tokens"]
    512
    """

    temperature: float = 0.1
    top_p: float = 1.0
    max_tokens: int = 800
    n: int = 1
    seed: int | None = 0
    # Structured outputs: the answer format every answer must match (a task's protocol names it), or None.
    answer_format: str | None = None

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1 or self.n < 1:
            raise ValueError(f"max_tokens and n must be >= 1, got {self.max_tokens} and {self.n}")

    def as_dict(self) -> dict[str, Any]:
        """The fields as a dict; `answer_format` only when set, so unconstrained cache keys never change.

        >>> "answer_format" in GenParams().as_dict()
        False
        >>> GenParams(answer_format="choice").as_dict()["answer_format"]
        'choice'
        """
        fields = asdict(self)
        if fields["answer_format"] is None:
            del fields["answer_format"]
        return fields


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One chat conversation to complete. `messages` are never pre-templated strings."""

    messages: tuple[Message, ...]

    def __post_init__(self) -> None:
        for message in self.messages:
            if set(message) != {"role", "content"} or message["role"] not in ("system", "user", "assistant"):
                raise ValueError(
                    f"a chat message needs exactly role (system|user|assistant) and content: {message}"
                )


@dataclass(frozen=True, slots=True)
class Completion:
    """The engine's answer to one request: `n` sampled texts, or an error that says why there are none."""

    texts: tuple[str, ...]
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None
