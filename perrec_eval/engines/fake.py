"""A scripted engine for tests, smoke runs and benchmarks: a Python callable writes every answer.

`SCRIPTS` holds the named responders that ``--engine fake --model NAME`` can run without any Python code;
`constant` answers every benchmark request with a fixed, well-formed answer.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from perrec_eval.cliconfig import option
from perrec_eval.engines._common import coerce_fields, split_evenly
from perrec_eval.engines.base import ResultsCallback
from perrec_eval.errors import ConfigError
from perrec_eval.tasks.perrecbench import prompts
from perrec_eval.types import ChatRequest, Completion, GenParams

logger = logging.getLogger(__name__)

Responder = Callable[[ChatRequest, GenParams, int], "str | Completion"]
RequestKind = Literal["pointwise", "pairwise", "listwise", "profile"]

CONSTANT_PROFILE = "Likes well-made things; rates generously."


@functools.cache
def _method_of_system_prompt() -> dict[str, str | None]:
    """Each system prompt of the ranking templates → its method (None if two methods shared one)."""
    methods: dict[str, str | None] = {}
    for method, templates in prompts.load_templates().methods.items():
        for variant in templates.variants.values():
            known = methods.setdefault(variant.system, method)
            if known != method:
                methods[variant.system] = None
    return methods


@functools.cache
def _profile_frame() -> tuple[str | None, str, str]:
    """The profile request's system prompt, and the text of its user message before and after the history."""
    template = prompts.load_templates().profile
    before, _, after = template.user.partition("${behaviors}")
    return template.system, before, after


@functools.cache
def _listwise_user_marker() -> re.Pattern[str]:
    """Matches the line that opens each user's block in a listwise prompt, whatever the user's index."""
    block = prompts.load_templates().methods["listwise"].user_block
    first_line = string.Template(block).safe_substitute(index="\0").splitlines()[0]
    return re.compile(r"\d+".join(re.escape(part) for part in first_line.split("\0")))


def request_kind(request: ChatRequest) -> RequestKind | None:
    """Which of the package's templates wrote `request`, told by its system prompt (or its profile frame).

    Args:
        request: a request rendered by `perrec_eval.tasks.perrecbench.prompts.render` or `render_profile`.

    Returns:
        ``pointwise``, ``pairwise``, ``listwise`` or ``profile``; None for a request from anywhere else.

    >>> from perrec_eval.tasks.perrecbench.records import HistoryItem
    >>> request_kind(ChatRequest(tuple(prompts.render_profile([HistoryItem(None, "Dune", None, 5.0, 0)]))))
    'profile'
    >>> request_kind(ChatRequest(({"role": "user", "content": "hello"},))) is None
    True
    """
    messages = request.messages
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else None
    if system is not None and system in _method_of_system_prompt():
        return _method_of_system_prompt()[system]  # type: ignore[return-value]
    profile_system, before, after = _profile_frame()
    last = messages[-1]["content"] if messages else ""
    if system == profile_system and last.startswith(before) and last.endswith(after):
        return "profile"
    return None


def constant(request: ChatRequest, params: GenParams, sample_index: int) -> str | Completion:
    """The `constant` script: the same well-formed answer to every request of a kind.

    Pairwise: ``[User A]``; listwise: the identity ranking ``{"predicted_ranking": [1, ..., N]}``; profile:
    `CONSTANT_PROFILE`; pointwise: ``{"predicted_rating": 4}``. A request that none of the package's
    templates wrote gets a failed completion saying so.

    Args:
        request: the chat request.
        params: sampling parameters (unused).
        sample_index: which sample of the request (unused: every sample is the same).

    Returns:
        The answer text, or a failed `Completion`.
    """
    kind = request_kind(request)
    if kind == "pairwise":
        return "[User A]"
    if kind == "listwise":
        users = len(_listwise_user_marker().findall(request.messages[-1]["content"]))
        return json.dumps({"predicted_ranking": list(range(1, max(1, users) + 1))})
    if kind == "profile":
        return CONSTANT_PROFILE
    if kind == "pointwise":
        return '{"predicted_rating": 4}'
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
