"""Any OpenAI-compatible chat server: vLLM's, `transformers serve`, hosted APIs.

``base_url`` may list several servers, comma-separated (``--base-url`` repeated): one vLLM server per GPU
or node. Requests then spread over them, at most ``concurrency`` in flight *per server*, each to the least
busy server. A server that fails with a connection error is taken out of rotation for the rest of the call
(the next call tries it again) and its requests go at once to the others; only when every server is out do
requests fail (and the call raises `ServerUnreachableError` if none got through).

Before its first request the engine asks each server for its models once (`OpenAIEngine.check`): an address
where nothing answers raises `ServerUnreachableError` within ``connect_timeout`` seconds, a rejected API key
(401/403) raises `ServerRejectedKeyError`; a server that cannot list models (404, or the 500 of
`transformers serve`) is only warned about.

Requests run on a bounded thread pool. The SDK's own retries are off; this module retries 429, 5xx, timeouts,
connection errors, unparsable responses and empty ``choices`` with exponential backoff and jitter (honouring
``Retry-After``), then gives up on that request with a `Completion` whose ``error`` says why (e.g. ``HTTP 500
from http://…: <body> (gave up after 7 attempts)``). Other 4xx answers (a rejected parameter, an unknown
model) and ``content: null`` are not retried: they would not fix themselves. An error is never an answer:
the runner counts it apart from unparsable answers and the cache does not store it, so resuming asks again.
If no request of a call gets through and one has exhausted its retries on connection errors, the call
raises `ServerUnreachableError`; a 401/403 raises `ServerRejectedKeyError` at once.

Each request sends a seed derived from ``GenParams.seed`` and its messages (`_common.sample_seed`), so a
seeded server gives a request the same sample whatever else is in flight. The SDK's and its HTTP library's
one-INFO-line-per-request logging is kept to warnings unless the root logger is at DEBUG.

The API key is read from the environment variable named by ``api_key_env`` when the client is built and is
never kept in an attribute of this object, returned by `info()`, logged, or written anywhere.
"""

from __future__ import annotations

import copy
import email.utils
import json
import logging
import os
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from tqdm.auto import tqdm

from perrec_eval import secrets
from perrec_eval.cliconfig import option
from perrec_eval.engines._common import coerce_fields, sample_seed
from perrec_eval.engines.base import ResultsCallback
from perrec_eval.errors import ConfigError, PerrecbenchError
from perrec_eval.extras import require
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
# Loggers that write one INFO line per HTTP request (openai 1-2 use httpx, openai 3 httpx2).
_CHATTY_LOGGERS = ("openai", "httpx", "httpx2")


class ServerUnreachableError(PerrecbenchError, ConnectionError):
    """Nothing answers at the server's address; the message names the URL and what to check."""


class ServerRejectedKeyError(PerrecbenchError, PermissionError):
    """The server answered 401/403: the API key is missing or wrong; the message names its variable."""


@dataclass(slots=True)
class _Attempt:
    """Outcome of one HTTP attempt: a completion, or a classified failure."""

    completion: Completion | None = None
    # connection | timeout | rate_limit | server | bad_response | empty | content_null | client | auth
    kind: str = ""
    message: str = ""
    retry_after: float | None = None

    @property
    def retryable(self) -> bool:
        return self.kind in ("connection", "timeout", "rate_limit", "server", "bad_response", "empty")


@dataclass(slots=True, eq=False)
class _Server:
    """One OpenAI-compatible endpoint and its client."""

    url: str
    client: Any

    @property
    def public(self) -> str:
        return public_url(self.url)


@dataclass(slots=True)
class _CallState:
    """Shared by the workers of one `generate` call: cancellation, and which servers take requests."""

    servers: int
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Condition = field(default_factory=threading.Condition)
    successes: int = 0
    unreachable: str | None = None
    in_flight: list[int] = field(default_factory=list)  # per server
    turn: int = 0  # the server after the last one picked
    down: dict[int, str] = field(default_factory=dict)  # server index -> why it left the rotation

    def __post_init__(self) -> None:
        self.in_flight = [0] * self.servers


def public_url(url: str) -> str:
    """`url` without credentials, query or fragment (safe to record).

    >>> public_url("https://user:secret@example.com:8443/v1?api-key=abc#x")
    'https://example.com:8443/v1'
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def parse_retry_after(headers: Any, now: float | None = None) -> float | None:
    """Seconds to wait according to ``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date).

    >>> parse_retry_after({"retry-after": "7"})
    7.0
    >>> parse_retry_after({"retry-after-ms": "250"})
    0.25
    >>> parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0)
    10.0
    >>> parse_retry_after({}) is None
    True
    """
    if headers is None:
        return None
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - (time.time() if now is None else now))


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Exponential backoff with jitter: uniform in [d/2, d], d = min(cap, base * 2**attempt).

    >>> 0.5 <= backoff_delay(0, 1.0, 60.0, random.Random(0)) <= 1.0
    True
    >>> backoff_delay(30, 1.0, 60.0, random.Random(0)) <= 60.0
    True
    """
    delay = min(cap, base * 2**attempt)
    return delay / 2 + rng.uniform(0, delay / 2)


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
    max_retries: int = option("retries per request after the first attempt", default=6)
    timeout: float = option("seconds per HTTP attempt", default=600.0)
    connect_timeout: float = option(
        "seconds to open a connection (an address where nothing answers fails this fast)", default=10.0
    )
    retry_base_delay: float = option(
        "first backoff delay in seconds (doubles each retry, with jitter)", default=1.0
    )
    retry_max_delay: float = option(
        "cap on one wait in seconds, a server's Retry-After included", default=120.0
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
    progress: bool = option("show a progress bar per call", default=True)

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
        if self.retry_base_delay < 0 or self.retry_max_delay < 0:
            raise ConfigError(
                f"retry delays must be >= 0 seconds, got {self.retry_base_delay} and {self.retry_max_delay}"
            )
        secrets.check_env_name(self.api_key_env)
        self.extra_fields()  # fails now, at configuration time, if extra_body is not a JSON object
        if self.base_url is not None:
            server_urls(self.base_url)

    def extra_fields(self) -> dict[str, Any]:
        """`extra_body` parsed: the JSON object's fields, or ``{}``.

        Raises:
            ConfigError: `extra_body` is not the text of a JSON object.

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
        options = options or OpenAIOptions()
        self._openai = require("openai", "openai", by="the 'openai' engine")
        self.model = model
        self.adapter = adapter
        self.options = options
        urls = server_urls(options.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL)
        self.base_url = ",".join(urls)
        self.api_key_env = options.api_key_env
        self.extra_body = options.extra_fields()
        self._rng = random.Random()
        self._checked = False
        timeout = self._openai.Timeout(options.timeout, connect=min(options.timeout, options.connect_timeout))
        api_key = self._api_key(urls)
        self._servers = [
            _Server(url, self._openai.OpenAI(base_url=url, api_key=api_key, max_retries=0, timeout=timeout))
            for url in urls
        ]
        self._client = self._servers[0].client  # the only one, with a single server
        _quiet_http_logs()

    def __repr__(self) -> str:
        return f"OpenAIEngine(model={self.model!r}, base_url={self._public_urls()!r})"

    def _public_urls(self) -> str:
        return ",".join(server.public for server in self._servers)

    def with_adapter(self, name: str, path: str) -> OpenAIEngine:
        """The same server and client, asking for the LoRA adapter the server serves as `name`.

        The server loads the adapter (vLLM: ``--enable-lora --lora-modules NAME=PATH``); `path` is only
        what the user pointed at, the request names `name`.
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
                "$%s is not set: sending no API key to %s (set it, or pass --api-key-env to name another "
                "variable)",
                self.api_key_env,
                public_url(remote[0]),
            )
        return _PLACEHOLDER_KEY

    def _scrub(self, text: str) -> str:
        """Remove the API key and any credentials from an error message (some servers echo them back)."""
        return secrets.redact_text(self._scrub_key(text))

    def _scrub_key(self, text: str) -> str:
        """Remove the API key from `text` (an answer: nothing else in it is touched)."""
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key and key != _PLACEHOLDER_KEY:
            text = text.replace(key, secrets.REDACTED)
        return text

    def check(self) -> None:
        """Ask each server for its models once, so a wrong address or key fails in seconds, not per request.

        `generate` calls this before its first request; the servers are asked at the same time. A server
        that cannot list its models (HTTP 404, the 500 of `transformers serve` without ``$HF_HOME/hub``, a
        slow answer) is only warned about, and so is a list without the requested model: generation may
        still work.

        Raises:
            ServerUnreachableError: nothing answered at one of the servers within ``connect_timeout`` seconds.
            ServerRejectedKeyError: a server answered 401/403.
        """
        with ThreadPoolExecutor(max_workers=len(self._servers), thread_name_prefix="perrec-check") as pool:
            listed = list(pool.map(self._served_models, self._servers))
        self._checked = True
        wanted = self.adapter or self.model
        for server, served in zip(self._servers, listed, strict=True):
            if served and wanted not in served:
                shown = ", ".join(served[:5]) + (", ..." if len(served) > 5 else "")
                logger.warning(
                    "the server at %s does not list %r (it serves %s): its requests may be rejected",
                    server.public,
                    wanted,
                    shown,
                )

    def _served_models(self, server: _Server) -> list[str]:
        """The model ids `server` serves, or ``[]`` (after a warning) when it cannot list them."""
        openai = self._openai
        connect = min(self.options.timeout, self.options.connect_timeout)
        timeout = openai.Timeout(min(self.options.timeout, _CHECK_TIMEOUT), connect=connect)
        try:
            return [model.id for model in server.client.with_options(timeout=timeout).models.list().data]
        except openai.APITimeoutError as err:
            if _is_connect_timeout(err):
                raise self._unreachable(f"connection attempt timed out after {connect:g}s", server) from err
            problem = f"no answer within {min(self.options.timeout, _CHECK_TIMEOUT):g}s"
        except openai.APIConnectionError as err:
            raise self._unreachable(f"connection failed: {self._scrub(_describe(err))}", server) from err
        except openai.APIStatusError as err:
            if err.status_code in (401, 403):
                raise self._rejected_key(f"HTTP {err.status_code}", server) from err
            problem = self._status_message(err, server)
        except (openai.APIResponseValidationError, ValueError, TypeError, AttributeError) as err:
            problem = self._scrub(f"invalid response: {_describe(err)}")
        logger.warning(
            "could not list the models at %s (%s): going on without checking the server",
            server.public,
            problem,
        )
        return []

    def _unreachable(self, detail: str, server: _Server | None = None) -> ServerUnreachableError:
        """Nothing answers at `server` (None: at any of the servers)."""
        if server is not None or len(self._servers) == 1:
            where = f"server at {(server or self._servers[0]).public}"
        else:
            where = f"servers at {self._public_urls()} (none answers)"
        return ServerUnreachableError(
            f"cannot reach the OpenAI-compatible {where} ({detail}): "
            "is it running, and is --base-url right (it usually ends in /v1)?"
        )

    def _rejected_key(self, detail: str, server: _Server) -> ServerRejectedKeyError:
        return ServerRejectedKeyError(
            f"the server at {server.public} rejected the API key ({detail}): "
            f"set ${self.api_key_env or 'OPENAI_API_KEY'} (or name another variable with --api-key-env)"
        )

    def info(self) -> dict[str, Any]:
        """Model, adapter, the URL without credentials, the key's variable name (never the key), settings."""
        return {
            "name": self.name,
            "model": self.model,
            "adapter": self.adapter,
            "base_url": self._public_urls(),
            "api_key_env": self.api_key_env,
            "openai_version": self._openai.__version__,
            "concurrency": self.options.concurrency,
            "max_retries": self.options.max_retries,
            "timeout": self.options.timeout,
            "connect_timeout": self.options.connect_timeout,
            "extra_body": self.extra_body,
            "structured_outputs": self.options.structured_outputs,
        }

    def generate(
        self,
        requests: Sequence[ChatRequest],
        params: GenParams,
        *,
        on_results: ResultsCallback | None = None,
    ) -> list[Completion]:
        """Complete every request, at most `concurrency` at a time per server.

        Args:
            requests: the conversations to complete.
            params: sampling parameters, sent explicitly with every request.
            on_results: called with the requests of each round of finished HTTP calls.

        Returns:
            One completion per request, in order; a request that failed (after its retries, if retryable)
            has ``error`` set and no texts.

        Raises:
            ServerUnreachableError: the first call's `check` found a server unreachable, or no request got
                through and one ran out of retries on connection errors (with every server out of rotation).
            ServerRejectedKeyError: the server answered 401/403.
        """
        if not self._checked:
            self.check()
        state = _CallState(servers=len(self._servers))
        results: list[Completion | None] = [None] * len(requests)
        bar = tqdm(
            total=len(requests), desc=f"openai {self.model}", unit="req", disable=not self.options.progress
        )
        workers = self.options.concurrency * len(self._servers)
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="perrec-openai")
        futures: dict[Future[Completion], int] = {
            pool.submit(self._complete, request, params, state): index
            for index, request in enumerate(requests)
        }
        try:
            pending = set(futures)
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                finished = []
                for future in done:
                    completion = future.result()
                    results[futures[future]] = completion
                    finished.append((futures[future], completion))
                if on_results is not None and finished:
                    on_results(finished)
                bar.update(len(done))
                if state.unreachable is not None:
                    raise self._unreachable(state.unreachable)
        except BaseException:
            state.stop.set()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            bar.close()
        pool.shutdown(wait=True)
        return [completion for completion in results if completion is not None]

    def _complete(self, request: ChatRequest, params: GenParams, state: _CallState) -> Completion:
        """All `n` samples of one request; a server that returns fewer choices is asked again for the rest.

        The prompt is counted once (like the other engines); completion tokens add up over all samples.
        """
        parts: list[Completion] = []
        drawn = 0
        while drawn < params.n:
            # Top-up requests take the seed of their first sample, so they do not repeat the samples drawn.
            seed = sample_seed(params.seed, request, drawn)
            part = self._with_retries(request, params, params.n - drawn, seed, state)
            if not part.ok:
                return part
            parts.append(part)
            drawn += len(part.texts)
        with state.lock:
            state.successes += 1
        completion_tokens: int | None = 0
        for part in parts:
            completion_tokens = _add(completion_tokens, part.completion_tokens)
        return Completion(
            texts=tuple(text for part in parts for text in part.texts)[: params.n],
            prompt_tokens=parts[0].prompt_tokens,
            completion_tokens=completion_tokens,
            extra={"finish_reasons": [r for part in parts for r in part.extra["finish_reasons"]][: params.n]},
        )

    def _with_retries(
        self, request: ChatRequest, params: GenParams, n: int, seed: int | None, state: _CallState
    ) -> Completion:
        attempt = _Attempt(kind="connection", message="every server is out of rotation")
        retry = 0
        while True:
            if state.stop.is_set():
                return Completion(texts=(), error="cancelled: the call was aborted")
            server = self._acquire(state)
            if server is None:
                if state.stop.is_set():
                    return Completion(texts=(), error="cancelled: the call was aborted")
                break
            try:
                attempt = self._attempt(self._servers[server], request, params, n, seed)
            finally:
                self._release(state, server)
            if attempt.completion is not None:
                return attempt.completion
            if attempt.kind == "auth":
                state.stop.set()
                raise self._rejected_key(attempt.message, self._servers[server])
            if attempt.kind == "connection" and self._take_out(state, server, attempt.message):
                continue  # the other servers take it at once: not a retry
            if not attempt.retryable or retry == self.options.max_retries:
                break
            retry += 1
            delay = backoff_delay(
                retry - 1, self.options.retry_base_delay, self.options.retry_max_delay, self._rng
            )
            if attempt.retry_after is not None:  # the server knows best, within our cap
                delay = min(attempt.retry_after, self.options.retry_max_delay)
            logger.debug("retrying in %.2fs after %s: %s", delay, attempt.kind, attempt.message)
            self._wait(state, delay)
        if attempt.kind == "connection":
            with state.lock:
                if state.successes == 0:
                    state.unreachable = attempt.message
                    state.stop.set()
        tries = retry + 1
        if not attempt.retryable:
            return Completion(texts=(), error=f"{attempt.message} (not retried)")
        return Completion(
            texts=(), error=f"{attempt.message} (gave up after {tries} attempt{'s' if tries > 1 else ''})"
        )

    def _wait(self, state: _CallState, seconds: float) -> None:
        state.stop.wait(seconds)

    def _acquire(self, state: _CallState) -> int | None:
        """A slot on the least busy server in rotation (waiting for one); None when every server is out or
        the call was aborted."""
        with state.lock:
            while True:
                live = [i for i in range(len(self._servers)) if i not in state.down]
                if not live or state.stop.is_set():
                    return None
                # Ties go round the servers, so a retry usually lands on another server than the last try.
                count = len(self._servers)
                server = min(live, key=lambda i: (state.in_flight[i], (i - state.turn) % count))
                if state.in_flight[server] < self.options.concurrency:
                    state.in_flight[server] += 1
                    state.turn = server + 1
                    return server
                state.lock.wait(timeout=1.0)  # woken by `_release`; the timeout only bounds an abort

    def _release(self, state: _CallState, server: int) -> None:
        with state.lock:
            state.in_flight[server] -= 1
            state.lock.notify_all()

    def _take_out(self, state: _CallState, server: int, why: str) -> bool:
        """Take `server` out of rotation after a connection error, if another server can take its requests.

        Returns:
            True when the request should go to another server at once; False when `server` is the last one
            in rotation (its connection errors are then retried with backoff, like a single server's).
        """
        with state.lock:
            live = [i for i in range(len(self._servers)) if i not in state.down]
            if server in live:
                if len(live) == 1:
                    return False
                state.down[server] = why
                logger.warning(
                    "the server at %s stopped answering (%s): its requests go to the %d other(s) for the "
                    "rest of this call",
                    self._servers[server].public,
                    why,
                    len(live) - 1,
                )
                state.lock.notify_all()
            return len(live) > 1 or server not in live

    def _attempt(
        self, server: _Server, request: ChatRequest, params: GenParams, n: int, seed: int | None
    ) -> _Attempt:
        openai = self._openai
        body: dict[str, Any] = {
            "model": self.adapter or self.model,
            "messages": [dict(message) for message in request.messages],
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
            "n": n,
        }
        if seed is not None:
            body["seed"] = seed
        extra_body = dict(self.extra_body)
        if params.answer_format is not None:
            body, extra_body = self._constrained(body, extra_body, params.answer_format)
        try:
            response = server.client.chat.completions.create(
                **body, extra_body=extra_body or None, stream=False
            )
        except openai.APITimeoutError as err:
            if _is_connect_timeout(err):
                return _Attempt(kind="connection", message="connection attempt timed out")
            return _Attempt(kind="timeout", message=f"no answer within {self.options.timeout:g}s")
        except openai.APIConnectionError as err:
            return _Attempt(kind="connection", message=f"connection failed: {self._scrub(_describe(err))}")
        except openai.APIStatusError as err:
            return self._status_failure(err, server)
        except (openai.APIResponseValidationError, ValueError, TypeError, KeyError) as err:
            return _Attempt(kind="bad_response", message=self._scrub(f"invalid response: {_describe(err)}"))
        return self._read(response)

    def _constrained(
        self, body: dict[str, Any], extra_body: dict[str, Any], answer_format: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The request with its answer format: vLLM's regex, or a JSON-schema response format."""
        from perrec_eval import structured

        if self.options.structured_outputs == "vllm":
            return body, {
                **extra_body,
                "structured_outputs": {"regex": structured.answer_regex(answer_format)},
            }
        schema = structured.json_schema(answer_format)
        if schema is None:  # pairwise and CoT answers: no schema says "[User A]" or "text, then JSON"
            return body, extra_body
        response_format = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
        return {**body, "response_format": response_format}, extra_body

    def _status_message(self, err: Any, server: _Server) -> str:
        """``HTTP <status> from <url>: <the first 200 characters of the body>``, without the API key."""
        response = getattr(err, "response", None)
        body = " ".join(str(getattr(response, "text", "") or err).split())
        return self._scrub(f"HTTP {err.status_code} from {server.public}: {body[:200]}")

    def _status_failure(self, err: Any, server: _Server) -> _Attempt:
        status = err.status_code
        message = self._status_message(err, server)
        retry_after = parse_retry_after(getattr(err.response, "headers", None))
        if status in (401, 403):
            return _Attempt(kind="auth", message=f"HTTP {status}")
        if status == 429:
            return _Attempt(kind="rate_limit", message=message, retry_after=retry_after)
        if status >= 500 or status == 408:
            return _Attempt(kind="server", message=message, retry_after=retry_after)
        return _Attempt(kind="client", message=message)

    def _read(self, response: Any) -> _Attempt:
        """The completion in a 200 response, or why there is none (no choices, a choice without text)."""
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list):
            shown = str(response)[:200]
            return _Attempt(kind="bad_response", message=f"invalid response: no choices in {shown!r}")
        if not choices:
            return _Attempt(kind="empty", message="empty choices")
        try:
            ordered = sorted(choices, key=lambda choice: choice.index or 0)
            texts = tuple(choice.message.content for choice in ordered)
            reasons = [choice.finish_reason for choice in ordered]
        except AttributeError as err:
            return _Attempt(kind="bad_response", message=f"invalid response: {_describe(err)}")
        for text, reason in zip(texts, reasons, strict=True):
            if text is None:
                return _Attempt(kind="content_null", message=f"content null (finish_reason={reason})")
            if not isinstance(text, str):
                return _Attempt(kind="bad_response", message=f"invalid response: content is {text!r:.100}")
        usage = getattr(response, "usage", None)
        return _Attempt(
            completion=Completion(
                texts=tuple(self._scrub_key(text) for text in texts),  # a server may echo the key
                prompt_tokens=getattr(usage, "prompt_tokens", None),
                completion_tokens=getattr(usage, "completion_tokens", None),
                extra={"finish_reasons": reasons},
            )
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


def _is_connect_timeout(err: BaseException) -> bool:
    """Whether a timeout happened while connecting (nothing answered at all), by the HTTP library's class."""
    return type(err.__cause__).__name__ == "ConnectTimeout"


def _add(total: int | None, part: int | None) -> int | None:
    return None if total is None or part is None else total + part


def _describe(err: BaseException) -> str:
    text = str(err) or type(err).__name__
    cause = err.__cause__
    if cause is not None and str(cause) and str(cause) not in text:
        text = f"{text} ({type(cause).__name__}: {cause})"
    return text[:500]
