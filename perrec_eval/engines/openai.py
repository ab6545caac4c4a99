"""Any OpenAI-compatible chat server: vLLM's, `transformers serve`, hosted APIs.

Retries are the SDK's (``max_retries``): connection errors, timeouts, 408, 409, 429 and 5xx are asked again
with exponential backoff and jitter, after a server's ``Retry-After`` when it sends one (a wait of more than two
minutes is not taken). A 200 answer without a usable completion (an unparsable body, no choices) is asked again
up to ``max_retries`` times as well. What still fails becomes a `Completion` whose ``error`` says why, e.g.
``HTTP 500 from http://…: <body> (gave up after 7 attempts)``; a rejected request (another 4xx: an unknown
model, a prompt over the context) and ``content: null`` end in ``(not retried)``. An error is never an answer:
the cache does not store it, so resuming asks again. A 401/403 raises `ServerRejectedKeyError` at once.

``base_url`` may list several servers, comma-separated: ``concurrency`` workers per server take the requests
from one queue, so a faster server takes more. A server that still cannot be reached after its retries leaves
the call, and the others take its requests; when the last one fails that way and no request got through, the
call raises `ServerUnreachableError`. Before its first request the engine asks each server for its models once
(`OpenAIEngine.check`), so a wrong address or key fails in seconds.

Each request sends a seed derived from ``GenParams.seed`` and its messages (`_common.sample_seed`). The API key
is read from the variable named by ``api_key_env``; it is never kept, returned by `info()`, logged or written.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import queue
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from perrec_eval import progress, secrets
from perrec_eval.cliconfig import option
from perrec_eval.engines._common import coerce_fields, require, sample_seed
from perrec_eval.engines.base import ResultsCallback
from perrec_eval.errors import ConfigError, PerrecbenchError
from perrec_eval.types import ChatRequest, Completion, GenParams

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}
_PLACEHOLDER_KEY = "EMPTY"  # local servers ignore the key, but the SDK insists on having one
# The request fields the engine sends itself; extra_body would silently override them (run.json would then
# name one model while another answered).
_OWN_FIELDS = frozenset(
    "model messages n temperature top_p max_tokens max_completion_tokens seed stream".split()
)
_EXTRA_BODY_FIX = """write the fields as a JSON object, e.g. extra_body='{"top_k": -1}'"""
_CHECK_TIMEOUT = 30.0  # seconds for the server to list its models once connected
_CHATTY_LOGGERS = ("openai", "httpx", "httpx2")  # one INFO line per HTTP request (openai 3 uses httpx2)


class ServerUnreachableError(PerrecbenchError, ConnectionError):
    """Nothing answers at the server's address; the message names the URL and what to check."""


class ServerRejectedKeyError(PerrecbenchError, PermissionError):
    """The server answered 401/403: the API key is missing or wrong; the message names its variable."""


class _Unusable(Exception):
    """A 200 answer without a usable completion; `retry`: whether asking again may help."""

    def __init__(self, message: str, retry: bool = True) -> None:
        super().__init__(message)
        self.retry = retry


class _Unreachable(Exception):
    """A connection that failed after the SDK's retries (the message says how)."""


def public_url(url: str) -> str:
    """`url` without credentials, query or fragment (safe to record).

    >>> public_url("https://user:secret@example.com:8443/v1?api-key=abc#x")
    'https://example.com:8443/v1'
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def server_urls(base_url: str) -> list[str]:
    """The server URLs in a comma-separated `base_url`, without trailing slashes.

    Raises:
        ConfigError: an empty entry, or the same server twice.

    >>> server_urls("http://a:8000/v1/, http://b:8000/v1")
    ['http://a:8000/v1', 'http://b:8000/v1']
    """
    urls = [url.strip().rstrip("/") for url in base_url.split(",")]
    if not all(urls):
        raise ConfigError(
            f"base_url {base_url!r} has an empty entry: give URL1,URL2,... or repeat --base-url"
        )
    repeated = sorted({url for url in urls if urls.count(url) > 1})
    if repeated:
        raise ConfigError(
            f"base_url lists {public_url(repeated[0])} twice: raise --engine-arg concurrency instead"
        )
    return urls


@dataclass(frozen=True, slots=True)
class OpenAIOptions:
    """Options of the OpenAI-compatible engine (``--engine-arg KEY=VALUE``)."""

    base_url: str | None = option(
        "the API root, e.g. http://127.0.0.1:8000/v1, or several comma-separated (requests spread over "
        "them); none: $OPENAI_BASE_URL, else OpenAI",
        default=None,
    )
    api_key_env: str | None = option(
        "environment variable holding the API key (never recorded); none, or unset with a local server: "
        "a placeholder key",
        default="OPENAI_API_KEY",
    )
    concurrency: int = option("requests in flight at once, per server", default=16)
    max_retries: int = option(
        "retries per request after the first attempt (the SDK's: backoff from 0.5 s, or the server's "
        "Retry-After up to 2 min)",
        default=6,
    )
    timeout: float = option("seconds per HTTP attempt", default=600.0)
    connect_timeout: float = option(
        "seconds to open a connection (an address where nothing answers fails this fast)", default=10.0
    )
    extra_body: str | None = option(
        'extra fields for every request, as a JSON object, e.g. {"top_k": -1} for vLLM', default=None
    )
    structured_outputs: Literal["vllm", "response_format"] = option(
        "how --structured-outputs reaches the server: vllm sends the answer's regex as "
        "structured_outputs (vLLM >= 0.12); response_format sends a JSON schema (OpenAI and most others: "
        "pairwise and --cot answers stay unconstrained, a ranking is not forced to be a permutation)",
        default="vllm",
    )

    def __post_init__(self) -> None:
        coerce_fields(self)
        if self.concurrency < 1 or self.max_retries < 0:
            raise ConfigError(
                f"need concurrency >= 1 and max_retries >= 0, got concurrency={self.concurrency}, "
                f"max_retries={self.max_retries}"
            )
        if min(self.timeout, self.connect_timeout) <= 0:
            raise ConfigError(
                f"timeouts must be positive seconds, got timeout={self.timeout}, "
                f"connect_timeout={self.connect_timeout}"
            )
        secrets.check_env_name(self.api_key_env)
        self.extra_fields()  # fails now, at configuration time, if extra_body is not a JSON object
        if self.base_url is not None:
            server_urls(self.base_url)

    def extra_fields(self) -> dict[str, Any]:
        """`extra_body` parsed: the JSON object's fields, or ``{}``.

        Raises:
            ConfigError: `extra_body` is not the text of a JSON object, or sets a field the run sets.

        >>> OpenAIOptions(extra_body='{"top_k": -1}').extra_fields()
        {'top_k': -1}
        """
        if self.extra_body is None:
            return {}
        try:
            fields = json.loads(self.extra_body)
        except json.JSONDecodeError as err:
            raise ConfigError(f"extra_body is not valid JSON ({err}): {_EXTRA_BODY_FIX}") from err
        if not isinstance(fields, dict):
            raise ConfigError(f"extra_body={self.extra_body!r} is not a JSON object: {_EXTRA_BODY_FIX}")
        owned = sorted(set(fields) & _OWN_FIELDS)
        if owned:
            raise ConfigError(
                f"extra_body may not set {', '.join(owned)}: the run sets those itself (--model, the "
                "prompts, --samples, --temperature, --top-p, --seed); remove them from extra_body"
            )
        return fields

    def answer_options(self) -> dict[str, Any]:
        """The options that change answers, when set: `extra_body` (see `engines.base.answer_options`).

        >>> OpenAIOptions().answer_options(), OpenAIOptions(extra_body='{"top_k": 5}').answer_options()
        ({}, {'extra_body': {'top_k': 5}})
        """
        fields = self.extra_fields()
        return {"extra_body": fields} if fields else {}


@dataclass(slots=True, eq=False)
class _Call:
    """What the workers of one `generate` call share: the queues, the servers still in it, a stop flag."""

    live: list[str]
    todo: queue.SimpleQueue[int | None] = field(default_factory=queue.SimpleQueue)
    finished: queue.SimpleQueue[tuple[int, Any]] = field(default_factory=queue.SimpleQueue)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    successes: int = 0


class OpenAIEngine:
    """Chat completions from one or several OpenAI-compatible endpoints.

    Args:
        model: the served model name (for `transformers serve` pinned to a folder: that folder's path).
        options: see `OpenAIOptions`; default: its defaults.
        adapter: a LoRA adapter *served by name* (vLLM ``--lora-modules name=path``): requests then ask for
            that name instead of `model`; recorded in cache keys.

    Attributes:
        base_url: the comma-separated server URLs (with any credentials: never record it; `info` does not).
    """

    name = "openai"

    def __init__(
        self, model: str, options: OpenAIOptions | None = None, *, adapter: str | None = None
    ) -> None:
        self.options = options = options or OpenAIOptions()
        self._openai = openai = require("openai", engine="openai")
        self.model, self.adapter, self.api_key_env = model, adapter, options.api_key_env
        urls = server_urls(options.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL)
        self.base_url = ",".join(urls)
        self.extra_body = options.extra_fields()
        self._checked = False
        timeout = openai.Timeout(options.timeout, connect=min(options.timeout, options.connect_timeout))
        key = self._api_key(urls)
        self._clients = {
            url: openai.OpenAI(base_url=url, api_key=key, max_retries=options.max_retries, timeout=timeout)
            for url in urls
        }
        _quiet_http_logs()

    def __repr__(self) -> str:
        return f"OpenAIEngine(model={self.model!r}, base_url={self._public_urls()!r})"

    def _public_urls(self) -> str:
        return ",".join(map(public_url, self._clients))

    def with_adapter(self, name: str, path: str) -> OpenAIEngine:
        """The same servers and clients, asking for the LoRA adapter the server serves as `name`.

        The server loads the adapter (vLLM: ``--enable-lora --lora-modules NAME=PATH``); `path` is only what
        the user pointed at, the request names `name`.
        """
        view = copy.copy(self)
        view.adapter = name
        view._checked = False  # the served model list must contain this name too
        return view

    def _api_key(self, urls: list[str]) -> str:
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            secrets.register(key)
            return key
        remote = [url for url in urls if (urlsplit(url).hostname or "") not in _LOCAL_HOSTS]
        if self.api_key_env and remote:
            logger.warning(
                "$%s is not set: sending no API key to %s (set it, or pass --api-key-env to name another variable)",
                self.api_key_env,
                public_url(remote[0]),
            )
        return _PLACEHOLDER_KEY

    def _scrub(self, text: str) -> str:
        """`text` without the API key (an answer may echo it; nothing else in it is touched)."""
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        return text.replace(key, secrets.REDACTED) if key and key != _PLACEHOLDER_KEY else text

    def check(self) -> None:
        """Ask each server for its models once, at the same time, without retries.

        A server that cannot list its models (HTTP 404, the 500 of `transformers serve` without
        ``$HF_HOME/hub``, a slow answer) is only warned about, and so is a list without the requested model.

        Raises:
            ServerUnreachableError: nothing answered at one of the servers within ``connect_timeout`` seconds.
            ServerRejectedKeyError: a server answered 401/403.
        """
        with ThreadPoolExecutor(max_workers=len(self._clients), thread_name_prefix="perrec-check") as pool:
            listed = list(pool.map(self._served_models, self._clients))
        self._checked = True
        wanted = self.adapter or self.model
        for url, served in zip(self._clients, listed, strict=True):
            if served and wanted not in served:
                shown = ", ".join(served[:5]) + (", ..." if len(served) > 5 else "")
                logger.warning(
                    "the server at %s does not list %r (it serves %s): its requests may be rejected",
                    public_url(url),
                    wanted,
                    shown,
                )

    def _served_models(self, url: str) -> list[str]:
        """The model ids the server at `url` serves, or ``[]`` (after a warning) when it cannot list them."""
        openai, options = self._openai, self.options
        connect = min(options.timeout, options.connect_timeout)
        wait = min(options.timeout, _CHECK_TIMEOUT)
        client = self._clients[url].with_options(timeout=openai.Timeout(wait, connect=connect), max_retries=0)
        try:
            return [model.id for model in client.models.list().data]
        except openai.APITimeoutError as err:
            if _is_connect_timeout(err):
                raise self._unreachable(f"connection attempt timed out after {connect:g}s", url) from err
            problem = f"no answer within {wait:g}s"
        except openai.APIConnectionError as err:
            raise self._unreachable(f"connection failed: {self._redact(_describe(err))}", url) from err
        except openai.APIStatusError as err:
            if err.status_code in (401, 403):
                raise self._rejected_key(err.status_code, url) from err
            problem = self._status_message(err, url)
        except (openai.APIResponseValidationError, ValueError, TypeError, AttributeError) as err:
            problem = self._redact(f"invalid response: {_describe(err)}")
        logger.warning(
            "could not list the models at %s (%s): going on without checking", public_url(url), problem
        )
        return []

    def _unreachable(self, detail: str, url: str | None) -> ServerUnreachableError:
        """Nothing answers at `url` (None: at any of the servers)."""
        if url is not None or len(self._clients) == 1:
            where = f"server at {public_url(url or self.base_url)}"
        else:
            where = f"servers at {self._public_urls()} (none answers)"
        return ServerUnreachableError(
            f"cannot reach the OpenAI-compatible {where} ({detail}): "
            "is it running, and is --base-url right (it usually ends in /v1)?"
        )

    def _rejected_key(self, status: int, url: str) -> ServerRejectedKeyError:
        return ServerRejectedKeyError(
            f"the server at {public_url(url)} rejected the API key (HTTP {status}): "
            f"set ${self.api_key_env or 'OPENAI_API_KEY'} (or name another variable with --api-key-env)"
        )

    def info(self) -> dict[str, Any]:
        """Model, adapter, the URLs without credentials, the key's variable name (never the key), settings."""
        options = self.options
        return {
            "name": self.name,
            "model": self.model,
            "adapter": self.adapter,
            "base_url": self._public_urls(),
            "api_key_env": self.api_key_env,
            "openai_version": self._openai.__version__,
            "concurrency": options.concurrency,
            "max_retries": options.max_retries,
            "timeout": options.timeout,
            "connect_timeout": options.connect_timeout,
            "extra_body": self.extra_body,
            "structured_outputs": options.structured_outputs,
        }

    def generate(
        self, requests: Sequence[ChatRequest], params: GenParams, *, on_results: ResultsCallback | None = None
    ) -> list[Completion]:
        """Complete every request, `concurrency` workers per server taking them from one queue.

        Args:
            requests: the conversations to complete.
            params: sampling parameters, sent explicitly with every request.
            on_results: called with the ``(index, completion)`` pairs finished since its last call.

        Returns:
            One completion per request, in order; one that failed has ``error`` set and no texts.

        Raises:
            ServerUnreachableError: `check` found a server unreachable, or no request got through and the last
                server in the call failed to connect after its retries.
            ServerRejectedKeyError: a server answered 401/403.
        """
        if not self._checked:
            self.check()
        call = _Call(live=list(self._clients))
        for index in range(len(requests)):
            call.todo.put(index)
        workers = [
            threading.Thread(target=self._work, args=(url, requests, params, call), daemon=True)
            for url in self._clients
            for _ in range(min(self.options.concurrency, len(requests)))
        ]
        for worker in workers:
            worker.start()
        results: list[Completion] = [Completion(texts=())] * len(requests)
        try:
            with progress.bar(total=len(requests), desc=f"openai {self.model}", unit="req") as bar:
                while bar.n < len(requests):
                    finished = [call.finished.get()]
                    while not call.finished.empty():
                        finished.append(call.finished.get())
                    done = [(index, result) for index, result in finished if isinstance(result, Completion)]
                    for index, completion in done:
                        results[index] = completion
                    if on_results is not None and done:
                        on_results(done)
                    for _, result in finished:
                        if isinstance(result, BaseException):
                            raise result
                    bar.update(len(finished))
        finally:
            call.stop.set()
            for _ in workers:
                call.todo.put(None)
        return results

    def _work(self, url: str, requests: Sequence[ChatRequest], params: GenParams, call: _Call) -> None:
        """One worker of the server at `url`: take requests until the call ends or the server leaves it."""
        while (index := call.todo.get()) is not None and not call.stop.is_set():
            try:
                if url not in call.live:
                    call.todo.put(index)
                    return
                result: Any = self._complete(url, requests[index], params)
                with call.lock:
                    call.successes += result.ok
            except _Unreachable as err:
                with call.lock:
                    if url not in call.live or len(call.live) > 1:
                        self._leave(url, str(err), call)
                        call.todo.put(index)
                        return
                    result = Completion(texts=(), error=str(err))
                    if not call.successes:
                        result = self._unreachable(str(err), None)
            except BaseException as err:  # noqa: BLE001 - handed to the caller's thread, which raises it
                result = err
            call.finished.put((index, result))

    def _leave(self, url: str, why: str, call: _Call) -> None:
        if url in call.live:
            call.live.remove(url)
            logger.warning(
                "the server at %s stopped answering (%s): its requests go to the %d other(s) for the rest of "
                "this call",
                public_url(url),
                why,
                len(call.live),
            )

    def _complete(self, url: str, request: ChatRequest, params: GenParams) -> Completion:
        """All `n` samples of one request; a server that returns fewer choices is asked again for the rest.

        The prompt is counted once (like the other engines); completion tokens add up over all samples.

        Raises:
            _Unreachable: the connection failed after the SDK's retries.
            ServerRejectedKeyError: the server answered 401/403.
        """
        openai, client = self._openai, self._clients[url]
        parts: list[Completion] = []
        unusable = 0
        while (drawn := sum(len(part.texts) for part in parts)) < params.n:
            try:
                parts.append(self._read(client.chat.completions.create(**self._body(request, params, drawn))))
                continue
            except openai.APIStatusError as err:
                if err.status_code in (401, 403):
                    raise self._rejected_key(err.status_code, url) from None
                retried = err.status_code in (408, 409, 429) or err.status_code >= 500  # as the SDK does
                suffix = (
                    self._gave_up(_attempts(err, self.options.max_retries)) if retried else "(not retried)"
                )
                return Completion(texts=(), error=f"{self._status_message(err, url)} {suffix}")
            except openai.APIConnectionError as err:
                tries = self._gave_up(_attempts(err, self.options.max_retries))
                if isinstance(err, openai.APITimeoutError) and not _is_connect_timeout(err):
                    return Completion(texts=(), error=f"no answer within {self.options.timeout:g}s {tries}")
                if isinstance(err, openai.APITimeoutError):
                    raise _Unreachable(f"connection attempt timed out {tries}") from None
                raise _Unreachable(f"connection failed: {self._redact(_describe(err))} {tries}") from None
            except (openai.APIResponseValidationError, ValueError, TypeError) as err:
                problem = _Unusable(self._redact(f"invalid response: {_describe(err)}"))
            except _Unusable as err:
                problem = err
            unusable += 1
            if not problem.retry:
                return Completion(texts=(), error=f"{problem} (not retried)")
            if unusable > self.options.max_retries:
                return Completion(texts=(), error=f"{problem} {self._gave_up(unusable)}")
        completion_tokens = [part.completion_tokens for part in parts]
        return Completion(
            texts=tuple(text for part in parts for text in part.texts)[: params.n],
            prompt_tokens=parts[0].prompt_tokens,
            completion_tokens=None if None in completion_tokens else sum(completion_tokens),
            extra={"finish_reasons": [r for part in parts for r in part.extra["finish_reasons"]][: params.n]},
        )

    @staticmethod
    def _gave_up(attempts: int) -> str:
        return f"(gave up after {attempts} attempt{'s' if attempts > 1 else ''})"

    def _body(self, request: ChatRequest, params: GenParams, drawn: int) -> dict[str, Any]:
        """The keyword arguments of one chat request for the samples after the first `drawn`."""
        body: dict[str, Any] = {
            "model": self.adapter or self.model,
            "messages": [dict(message) for message in request.messages],
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
            "n": params.n - drawn,
        }
        # A top-up request takes the seed of its first sample, so it does not repeat the samples drawn.
        seed = sample_seed(params.seed, request, drawn)
        if seed is not None:
            body["seed"] = seed
        extra_body = dict(self.extra_body)
        if params.answer_format is not None:
            from perrec_eval import structured

            if self.options.structured_outputs == "vllm":
                extra_body["structured_outputs"] = {"regex": structured.answer_regex(params.answer_format)}
            elif (schema := structured.json_schema(params.answer_format)) is not None:
                # pairwise and CoT answers have no schema: no schema says "[User A]" or "text, then JSON"
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "answer", "schema": schema},
                }
        return {**body, "extra_body": extra_body or None, "stream": False}

    def _status_message(self, err: Any, url: str) -> str:
        """``HTTP <status> from <url>: <the first 200 characters of the body>``, without the API key."""
        body = " ".join(str(getattr(err.response, "text", "") or err).split())
        return self._redact(f"HTTP {err.status_code} from {public_url(url)}: {body[:200]}")

    def _redact(self, text: str) -> str:
        """An error message without the API key or any credentials (some servers echo them back)."""
        return secrets.redact_text(self._scrub(text))

    def _read(self, response: Any) -> Completion:
        """The completion in a 200 response.

        Raises:
            _Unusable: no choices (asked again), or a choice without text (``content: null``, not asked again).
        """
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list):
            raise _Unusable(f"invalid response: no choices in {str(response)[:200]!r}")
        if not choices:
            raise _Unusable("empty choices")
        try:
            ordered = sorted(choices, key=lambda choice: choice.index or 0)
            texts = [choice.message.content for choice in ordered]
            reasons = [choice.finish_reason for choice in ordered]
        except AttributeError as err:
            raise _Unusable(f"invalid response: {_describe(err)}") from err
        for text, reason in zip(texts, reasons, strict=True):
            if text is None:
                raise _Unusable(f"content null (finish_reason={reason})", retry=False)
            if not isinstance(text, str):
                raise _Unusable(f"invalid response: content is {text!r:.100}")
        usage = getattr(response, "usage", None)
        return Completion(
            texts=tuple(self._scrub(text) for text in texts),  # a server may echo the key
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            extra={"finish_reasons": reasons},
        )


def _quiet_http_logs() -> None:
    """Keep the SDK's per-request INFO lines out of the log unless the root logger is at DEBUG.

    A logger someone configured (level set) is left alone.
    """
    if logging.getLogger().isEnabledFor(logging.DEBUG):
        return
    for name in _CHATTY_LOGGERS:
        chatty = logging.getLogger(name)
        if chatty.level == logging.NOTSET:
            chatty.setLevel(logging.WARNING)


def _attempts(err: Any, max_retries: int) -> int:
    """How many times the SDK sent the request that ended in `err` (it numbers its retries in a header)."""
    return int(err.request.headers.get("x-stainless-retry-count", max_retries)) + 1


def _is_connect_timeout(err: BaseException) -> bool:
    """Whether a timeout happened while connecting (nothing answered at all), by the HTTP library's class."""
    return type(err.__cause__).__name__ == "ConnectTimeout"


def _describe(err: BaseException) -> str:
    text = str(err) or type(err).__name__
    cause = err.__cause__
    if cause is not None and str(cause) and str(cause) not in text:
        text = f"{text} ({type(cause).__name__}: {cause})"
    return text[:500]
