"""Any OpenAI-compatible chat server: vLLM's, `transformers serve`, hosted APIs.

The SDK retries (``max_retries``) connection errors, timeouts, 408/409/429 and 5xx, with backoff or after the
server's ``Retry-After`` (up to 2 minutes: a longer one is not retried, and the error says so); an attempt
ends ``timeout`` seconds after it began, however slowly the answer trickles in; a 200 answer with nothing
usable in it is asked again as often. What still fails is
a `Completion` whose ``error`` says why and whether it was retried (the cache never stores it). Several
servers (``base_url`` comma-separated) each get ``concurrency`` workers taking requests from one queue; one
that cannot be reached leaves the call, and its requests go to the others. `OpenAIEngine.check` asks each
server for its models before the first request, so a wrong address or key fails in seconds. The API key is
read from the variable ``api_key_env`` names, and never kept, returned by `info()`, logged or written; every
field a server returns passes through `perrec_eval.secrets` (it may echo the key, a URL's password, an
``extra_body`` credential) before anything keeps it.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import importlib
import inspect
import json
import logging
import os
import queue
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from perrec_eval import progress, secrets
from perrec_eval.cliconfig import option
from perrec_eval.engines._common import coerce_fields, sample_seed
from perrec_eval.engines.base import ResultsCallback
from perrec_eval.errors import ConfigError, PerrecbenchError
from perrec_eval.extras import require
from perrec_eval.types import ChatRequest, Completion, GenParams

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Set by the run itself: extra_body overriding them would make run.json name another model than answered.
_OWN_FIELDS = set("model messages n temperature top_p max_tokens max_completion_tokens seed stream".split())
_EXTRA_BODY_FIX = """write the fields as a JSON object, e.g. extra_body='{"top_k": -1}'"""
_CHECK_TIMEOUT = 30.0  # seconds for a server to list its models once connected
_MAX_RETRY_AFTER = 120  # the longest Retry-After (seconds) the SDK waits; a longer one it does not retry


class ServerUnreachableError(PerrecbenchError, ConnectionError):
    """Nothing answers at the server's address; the message names the URL and what to check."""


class ServerRejectedKeyError(PerrecbenchError, PermissionError):
    """The server answered 401/403: the API key is missing or wrong; the message names its variable."""


class _Unusable(Exception):
    """A 200 answer without a usable completion (asking again may help)."""


class _Unreachable(Exception):
    """The connection failed after the SDK's retries."""


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
    """The URLs in a comma-separated `base_url`; an empty or repeated entry is a ConfigError.

    >>> server_urls("http://a:8000/v1/, http://b:8000/v1")
    ['http://a:8000/v1', 'http://b:8000/v1']
    """
    if not base_url.strip():
        raise ConfigError(
            "--base-url is empty (an unset shell variable?): give the server's URL, e.g. "
            "http://127.0.0.1:8000/v1 (leave the flag out for $OPENAI_BASE_URL, else OpenAI)"
        )
    urls = [url.strip().rstrip("/") for url in base_url.split(",")]
    if not all(urls):
        raise ConfigError(
            f"base_url {base_url!r} has an empty entry: give URL1,URL2,... or repeat --base-url"
        )
    for url in urls:
        _check_url(url)
        if urls.count(url) > 1:
            raise ConfigError(
                f"base_url lists {public_url(url)} twice: raise --engine-arg concurrency instead"
            )
    return urls


def _check_url(url: str) -> None:
    """ConfigError (with the URL's secrets hidden) unless `url` is an http(s) URL with a host and a port
    that can be."""
    problem = None
    try:
        parts = urlsplit(url)
    except ValueError as err:  # "Invalid IPv6 URL": no part of the URL in it
        problem = str(err)
    else:
        try:
            parts.port  # noqa: B018 - reading the port checks it
        except ValueError:  # its message quotes the "port", which may be part of a password
            problem = "the port is not a number from 0 to 65535"
        else:
            if parts.scheme not in ("http", "https") or not parts.hostname:
                problem = "not http(s)://HOST..."
    if problem:
        shown = secrets.redact_text(url)
        if "@" in url:  # a malformed URL's userinfo may hold a "/" that ends it for the redaction
            shown = f"{url.partition('://')[0]}://{secrets.REDACTED}@{url.rpartition('@')[2]}"
        raise ConfigError(
            f"base_url {shown!r} is not a valid URL ({problem}): give one like http://127.0.0.1:8000/v1"
        )


def _split_query(url: str) -> tuple[str, dict[str, str]]:
    """(`url` without its query, the query's parameters): the SDK appends the request's path to its base URL,
    so a query left in it would end up inside the path (``/v1?api-key=K/chat/completions``).

    >>> _split_query("https://h/v1?api-version=2024-06-01&api-key=k")
    ('https://h/v1', {'api-version': '2024-06-01', 'api-key': 'k'})
    """
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query="", fragment="")), dict(parse_qsl(parts.query))


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
        "retries per request after the first attempt (the SDK's: waits from 0.5 s up to 8 s, or the "
        "server's Retry-After up to 2 minutes)",
        default=6,
    )
    timeout: float = option(
        "seconds per HTTP attempt, the whole answer included (however slowly a server sends it)",
        default=600.0,
    )
    connect_timeout: float = option(
        "seconds to open a connection (an address where nothing answers fails this fast)", default=10.0
    )
    extra_body: str | None = option(
        'extra fields for every request, as a JSON object, e.g. {"top_k": -1} for vLLM', default=None
    )
    structured_outputs: Literal["vllm", "response_format"] = option(
        "how --structured-outputs reaches the server: vllm sends the answer's regex as "
        "structured_outputs (vLLM >= 0.12); response_format sends a JSON schema (OpenAI and most others: "
        "answers no schema can describe, such as a label in brackets or --cot reasoning, stay "
        "unconstrained, and a ranking is not forced to be a permutation)",
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
        # fails now, at configuration time, if extra_body is not a JSON object; its credentials (a header,
        # a key) are hidden wherever they show up, as the API key is
        secrets.register_fields(self.extra_fields())
        if self.base_url is not None:
            for url in server_urls(self.base_url):
                secrets.register_url(url)  # a password, its HTTP Basic header value, a key parameter

    def extra_fields(self) -> dict[str, Any]:
        """`extra_body` parsed, or ``{}``; ConfigError if it is no JSON object or sets a field the run sets.

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
        if owned := sorted(_OWN_FIELDS.intersection(fields)):
            raise ConfigError(
                f"extra_body may not set {', '.join(owned)}: the run sets those itself (--model, the "
                "prompts, --samples, --temperature, --top-p, --seed); remove them from extra_body"
            )
        return fields

    def answer_options(self) -> dict[str, Any]:
        """The options that change answers, when set: `extra_body`, and `structured_outputs` when it is not
        the default (the two modes constrain answers differently; see `engines.base.answer_options`).

        >>> OpenAIOptions().answer_options(), OpenAIOptions(extra_body='{"top_k": 5}').answer_options()
        ({}, {'extra_body': {'top_k': 5}})
        >>> OpenAIOptions(structured_outputs="response_format").answer_options()
        {'structured_outputs': 'response_format'}
        """
        fields = self.extra_fields()
        found: dict[str, Any] = {"extra_body": fields} if fields else {}
        if self.structured_outputs != "vllm":
            found["structured_outputs"] = self.structured_outputs
        return found


@dataclass(slots=True, eq=False)
class _Call:
    """What the workers of one `generate` call share."""

    requests: Sequence[ChatRequest]
    params: GenParams
    live: list[str]  # the servers still in the call
    todo: queue.SimpleQueue[int | None] = field(default_factory=queue.SimpleQueue)  # None: a worker stops
    finished: queue.SimpleQueue[tuple[int, Any]] = field(default_factory=queue.SimpleQueue)  # or an error
    lock: threading.Lock = field(default_factory=threading.Lock)
    successes: int = 0


class OpenAIEngine:
    """Chat completions from one or several OpenAI-compatible servers.

    Args:
        model: the served model name (for `transformers serve` pinned to a folder: that folder's path).
        options: see `OpenAIOptions`; default: its defaults.
        adapter: a LoRA adapter *served by name* (vLLM ``--lora-modules name=path``), asked for instead.
    """

    name = "openai"

    def __init__(
        self, model: str, options: OpenAIOptions | None = None, *, adapter: str | None = None
    ) -> None:
        self.options = options = options or OpenAIOptions()
        self._openai = openai = require("openai", "openai", by="the 'openai' engine")
        self.model, self.adapter, self.api_key_env = model, adapter, options.api_key_env
        self.extra_body, self._checked = options.extra_fields(), False
        given = options.base_url if options.base_url is not None else os.environ.get("OPENAI_BASE_URL")
        urls = server_urls(given or DEFAULT_BASE_URL)
        for url in urls:
            secrets.register_url(url)
        self.base_url = ",".join(urls)  # with any credentials in it: never recorded (`info` is)
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        secrets.register(key)  # none: a placeholder (local servers need none; others answer 401 at `check`)
        timeout = openai.Timeout(options.timeout, connect=min(options.timeout, options.connect_timeout))
        self._clients = {url: self._client(url, key, timeout) for url in urls}
        if not logging.getLogger().isEnabledFor(logging.DEBUG):  # the SDK logs each HTTP request at INFO
            for chatty in map(logging.getLogger, ("openai", "httpx", "httpx2")):
                if chatty.level == logging.NOTSET:
                    chatty.setLevel(logging.WARNING)

    def _client(self, url: str, key: str | None, timeout: Any) -> Any:
        """The SDK's client of the server at `url`: its query as the SDK's default query, every attempt
        bounded as a whole by the read timeout (`_whole_attempts`)."""
        openai = self._openai
        base, query = _split_query(url)
        return openai.OpenAI(
            base_url=base,
            default_query=query or None,
            api_key=key or "EMPTY",
            max_retries=self.options.max_retries,
            timeout=timeout,
            http_client=_whole_attempts(openai, timeout),
        )

    def __repr__(self) -> str:
        return f"OpenAIEngine(model={self.model!r}, base_url={self._public_urls()!r})"

    def _public_urls(self) -> str:
        return ",".join(map(public_url, self._clients))

    def with_adapter(self, name: str, path: str) -> OpenAIEngine:
        """The same servers, asking for the LoRA adapter they serve as `name` (`path` is only recorded, and
        names the adapter's weights in cache keys when it is a local folder)."""
        view = copy.copy(self)
        view.adapter, view._checked = name, False  # the servers' model lists must hold this name too
        view.adapter_path = path
        return view

    def info(self) -> dict[str, Any]:
        """Model, adapter, the URLs without credentials, the key's variable name (never the key), settings."""
        settings = ("concurrency", "max_retries", "timeout", "connect_timeout")
        return {
            "name": self.name,
            "model": self.model,
            "adapter": self.adapter,
            "base_url": self._public_urls(),
            "api_key_env": self.api_key_env,
            "openai_version": self._openai.__version__,
            **{name: getattr(self.options, name) for name in settings},
            "extra_body": self.extra_body,
            "structured_outputs": self.options.structured_outputs,
        }

    def check(self) -> None:
        """Ask every server for its models once, without retries: `ServerUnreachableError` if nothing answers
        within ``connect_timeout`` seconds, `ServerRejectedKeyError` on 401/403; a server that cannot list
        them (404, `transformers serve` without ``$HF_HOME/hub``) or lacks the model is only warned about."""
        wanted = self.adapter or self.model
        for url in self._clients:
            if (served := self._served_models(url)) and wanted not in served:
                shown = ", ".join(served[:5]) + (", ..." if len(served) > 5 else "")
                logger.warning(
                    "the server at %s does not list %r (it serves %s)", public_url(url), wanted, shown
                )
        self._checked = True

    def _served_models(self, url: str) -> list[str]:
        openai, wait = self._openai, min(self.options.timeout, _CHECK_TIMEOUT)
        timeout = openai.Timeout(wait, connect=min(wait, self.options.connect_timeout))
        client = self._clients[url].with_options(max_retries=0)
        try:
            return [model.id for model in client.models.list(timeout=timeout)]
        except openai.APIStatusError as err:
            if err.status_code in (401, 403):
                raise self._rejected_key(err.status_code, url) from err
            problem = self._status_message(err, url)
        except openai.APIConnectionError as err:
            if not self._read_timeout(err):
                raise self._unreachable(self._connection_problem(err), url) from err
            problem = f"no answer within {wait:g}s"
        except (openai.APIResponseValidationError, ValueError, AttributeError) as err:
            problem = secrets.redact_text(f"invalid response: {err}")
        logger.warning("could not list the models at %s (%s): going on unchecked", public_url(url), problem)
        return []

    def generate(
        self, requests: Sequence[ChatRequest], params: GenParams, *, on_results: ResultsCallback | None = None
    ) -> list[Completion]:
        """One completion per request, in order (failed ones with ``error`` set); `on_results` gets the pairs
        finished since its last call. Raises as `check` does, and if no request got through any server."""
        if not self._checked:
            self.check()
        call = _Call(requests, params, live=list(self._clients))
        for index in range(len(requests)):
            call.todo.put(index)
        workers = call.live * min(self.options.concurrency, len(requests))  # one server per worker
        for url in workers:
            threading.Thread(target=self._work, args=(url, call), daemon=True).start()
        results = [Completion(texts=())] * len(requests)
        try:
            with progress.requests(len(requests), f"openai {self.model}") as bar:
                finished = generated = 0  # not bar.n: a hidden bar counts nothing
                while finished < len(requests):
                    batch = [call.finished.get()]
                    while not call.finished.empty():
                        batch.append(call.finished.get())
                    done = [(index, result) for index, result in batch if isinstance(result, Completion)]
                    for index, completion in done:
                        results[index] = completion
                    if on_results is not None and done:
                        on_results(done)
                    for _, result in batch:
                        if isinstance(result, BaseException):
                            raise result
                    finished += len(batch)
                    bar.update(len(batch))
                    if generated_now := sum(c.completion_tokens or 0 for _, c in done):
                        generated += generated_now
                        progress.tokens(bar, generated)
        finally:
            call.live.clear()  # the workers finish what they are asking and stop
            for _ in workers:
                call.todo.put(None)
        return results

    def _work(self, url: str, call: _Call) -> None:
        """Complete requests on the server at `url` until the call ends or the server leaves it."""
        while (index := call.todo.get()) is not None and url in call.live:
            try:
                # everything the server sent, secrets hidden before it reaches a cache, a file or a log
                result: Any = _redacted(self._complete(url, call.requests[index], call.params))
                call.successes += result.ok  # under the GIL; only ever compared with 0
            except _Unreachable as err:
                with call.lock:
                    if url not in call.live or len(call.live) > 1:  # the others take this and the rest
                        if url in call.live:
                            logger.warning("the server at %s stopped answering (%s)", public_url(url), err)
                            call.live.remove(url)
                        break
                result = _redacted(_failed(str(err))) if call.successes else self._unreachable(str(err), None)
            except BaseException as err:  # noqa: BLE001 - raised in the caller's thread
                result = err
            call.finished.put((index, result))
        if index is not None:
            call.todo.put(index)

    def _complete(self, url: str, request: ChatRequest, params: GenParams) -> Completion:
        """All `n` samples of `request`; a server that returns fewer choices is asked again for the rest."""
        parts: list[Completion] = []
        unusable = 0
        while (drawn := sum(len(part.texts) for part in parts)) < params.n:
            try:
                part = self._ask(url, request, params, drawn)
            except _Unusable as err:
                unusable += 1
                if unusable > self.options.max_retries:
                    return _failed(str(err), unusable)
                continue
            if not part.ok:
                return part
            parts.append(part)
        tokens = [part.completion_tokens for part in parts]  # the prompt is counted once, like other engines
        return Completion(
            texts=tuple(text for part in parts for text in part.texts)[: params.n],
            prompt_tokens=parts[0].prompt_tokens,
            completion_tokens=None if None in tokens else sum(tokens),
            extra={"finish_reasons": [r for part in parts for r in part.extra["finish_reasons"]][: params.n]},
        )

    def _ask(self, url: str, request: ChatRequest, params: GenParams, drawn: int) -> Completion:
        """One request with the SDK's retries: the answer, or a failure (`_Unusable`, `_Unreachable` and a
        401/403 raise)."""
        openai, retries = self._openai, self.options.max_retries
        try:
            response = self._clients[url].chat.completions.create(**self._body(request, params, drawn))
            return self._read(response)
        except openai.APIStatusError as err:
            if err.status_code in (401, 403):
                raise self._rejected_key(err.status_code, url) from None
            retried = err.status_code in (408, 409, 429) or err.status_code >= 500  # as the SDK does
            wait = _retry_after(err.response)
            if retried and wait is not None and wait > _MAX_RETRY_AFTER:
                return Completion(
                    texts=(),
                    error=f"{self._status_message(err, url)} (not retried: the server asks to wait "
                    f"{wait:g}s, longer than the {_MAX_RETRY_AFTER}s a retry waits; run again later)",
                )
            return _failed(self._status_message(err, url), _attempts(err, retries) if retried else None)
        except openai.APIConnectionError as err:
            if self._read_timeout(err):
                return _failed(f"no answer within {self.options.timeout:g}s", _attempts(err, retries))
            failure = _failed(self._connection_problem(err), _attempts(err, retries))
            raise _Unreachable(failure.error) from None
        except (openai.APIResponseValidationError, ValueError, AttributeError) as err:
            raise _Unusable(secrets.redact_text(f"invalid response: {err}")) from None

    def _body(self, request: ChatRequest, params: GenParams, drawn: int) -> dict[str, Any]:
        """The arguments of the chat request for the samples after the first `drawn`."""
        from perrec_eval import registry

        body: dict[str, Any] = {"model": self.adapter or self.model, "n": params.n - drawn, "stream": False}
        body["messages"] = [dict(message) for message in request.messages]
        body.update(temperature=params.temperature, top_p=params.top_p, max_tokens=params.max_tokens)
        seed = sample_seed(params.seed, request, drawn)  # a top-up does not repeat the samples drawn
        if seed is not None:
            body["seed"] = seed
        extra, answer_format = dict(self.extra_body), params.answer_format
        if answer_format is not None and self.options.structured_outputs == "vllm":
            extra["structured_outputs"] = {"regex": registry.answer_regex(answer_format)}
        elif answer_format is not None and (schema := registry.json_schema(answer_format)) is not None:
            # no JSON schema describes a bare label or "text, then JSON": such answers go unconstrained
            schema = {"name": "answer", "schema": schema}
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
        return {**body, "extra_body": extra or None}

    def _read(self, response: Any) -> Completion:
        """The completion in a 200 answer, a failure for ``content: null``, or `_Unusable`."""
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise _Unusable(
                f"invalid response: {str(response)[:200]!r}" if choices != [] else "empty choices"
            )
        ordered = sorted(choices, key=lambda choice: choice.index or 0)
        for choice in ordered:
            if choice.message.content is None:
                return _failed(f"content null (finish_reason={choice.finish_reason})")
        usage = getattr(response, "usage", None)
        return Completion(
            texts=tuple(choice.message.content for choice in ordered),
            prompt_tokens=_count(getattr(usage, "prompt_tokens", None)),
            completion_tokens=_count(getattr(usage, "completion_tokens", None)),
            extra={"finish_reasons": [choice.finish_reason for choice in ordered]},
        )

    def _read_timeout(self, err: Any) -> bool:
        """A timeout once connected: the HTTP library's class of the cause tells it from a connect timeout."""
        connecting = type(err.__cause__).__name__ == "ConnectTimeout"
        return isinstance(err, self._openai.APITimeoutError) and not connecting

    def _connection_problem(self, err: Any) -> str:
        if isinstance(err, self._openai.APITimeoutError):
            return "connection attempt timed out"
        return secrets.redact_text(f"connection failed: {err.__cause__ or err}"[:500])

    def _status_message(self, err: Any, url: str) -> str:
        """``HTTP <status> from <url>: <the first 200 characters of the body>``, without credentials."""
        body = " ".join(str(getattr(err.response, "text", "") or err).split())
        return secrets.redact_text(f"HTTP {err.status_code} from {public_url(url)}: {body[:200]}")

    def _unreachable(self, detail: str, url: str | None) -> ServerUnreachableError:
        """Nothing answers at `url` (None: at any of the servers)."""
        where = f"server at {public_url(url or self.base_url)}"
        if url is None and len(self._clients) > 1:
            where = f"servers at {self._public_urls()} (none answers)"
        fix = "is it running, and is --base-url right (it usually ends in /v1)?"
        return ServerUnreachableError(f"cannot reach the OpenAI-compatible {where} ({detail}): {fix}")

    def _rejected_key(self, status: int, url: str) -> ServerRejectedKeyError:
        return ServerRejectedKeyError(
            f"the server at {public_url(url)} rejected the API key (HTTP {status}): "
            f"set ${self.api_key_env or 'OPENAI_API_KEY'} (or name another variable with --api-key-env)"
        )


def _failed(problem: str, attempts: int | None = None) -> Completion:
    """An engine error: `problem` and how often it was tried (None: not retried)."""
    tried = "not retried" if attempts is None else f"gave up after {attempts} attempt{'s' * (attempts > 1)}"
    return Completion(texts=(), error=f"{problem} ({tried})")


def _redacted(completion: Completion) -> Completion:
    """`completion` with secrets hidden in everything a server may echo them in: texts, error, extra.

    >>> _redacted(Completion(texts=("Bearer sk-123",), extra={"finish_reasons": ["Bearer k"]}))
    Completion(texts=('Bearer <redacted>',), prompt_tokens=None, completion_tokens=None, error=None, \
extra={'finish_reasons': ['Bearer <redacted>']})
    """
    return dataclasses.replace(
        completion,
        texts=tuple(secrets.redact_text(t) if isinstance(t, str) else t for t in completion.texts),
        error=None if completion.error is None else secrets.redact_text(completion.error),
        extra=secrets.redact(completion.extra),
    )


def _count(value: Any) -> int | None:
    """A token count from a server, or None when it sent none or something that is not a count.

    >>> _count(12), _count("lots"), _count(-1), _count(True), _count(None)
    (12, None, None, None, None)
    """
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _retry_after(response: Any) -> float | None:
    """The seconds a response's ``retry-after-ms`` or ``retry-after`` header asks to wait (as the SDK reads
    them; an HTTP date counts as unknown)."""
    headers = getattr(response, "headers", None) or {}
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            return float(headers.get(name)) / scale
        except (TypeError, ValueError):
            continue
    return None


def _attempts(err: Any, max_retries: int) -> int:
    """How often the SDK sent the request that ended in `err` (it numbers its retries in a header)."""
    return int(err.request.headers.get("x-stainless-retry-count", max_retries)) + 1


def _whole_attempts(openai: Any, timeout: Any) -> Any:
    """An HTTP client with the SDK's defaults whose every attempt ends when its read timeout has passed since
    it began: the HTTP library times each read, so a server that trickles a byte a second would hold an
    attempt (and the run) forever. Past the deadline, the connection is shut and the attempt fails as a
    read timeout, which the SDK retries like any other."""
    # httpx, or the fork a newer SDK sends with: the library of the SDK's own client class
    http = importlib.import_module(inspect.getmro(openai.DefaultHttpxClient)[1].__module__.partition(".")[0])

    class Deadline(http.SyncByteStream):
        """A response body that ends in `http.ReadTimeout` once `deadline` (time.monotonic) has passed."""

        def __init__(self, body: Any, request: Any, deadline: float, sock: Any) -> None:
            self._body, self._request, self._deadline, self._sock = body, request, deadline, sock
            self._lock, self._closed = threading.Lock(), False
            self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._cut)
            self._timer.daemon = True
            if sock is not None:  # a read blocked on a silent server wakes up when its socket is shut
                self._timer.start()

        def _cut(self) -> None:
            with self._lock:
                if not self._closed:  # else the connection may serve another request already
                    with contextlib.suppress(OSError):
                        socket.socket.shutdown(self._sock, socket.SHUT_RDWR)

        def _late(self) -> Any:
            return http.ReadTimeout("the answer did not arrive whole in time", request=self._request)

        def __iter__(self) -> Any:
            try:
                for chunk in self._body:
                    if time.monotonic() > self._deadline:
                        raise self._late()
                    yield chunk
            except http.TransportError as err:
                if time.monotonic() > self._deadline and not isinstance(err, http.TimeoutException):
                    raise self._late() from err
                raise

        def close(self) -> None:
            with self._lock:
                self._closed = True
            self._timer.cancel()
            self._body.close()

    class WholeAttempts(http.BaseTransport):
        def __init__(self) -> None:
            self._inner = http.HTTPTransport(limits=openai.DEFAULT_CONNECTION_LIMITS)

        def handle_request(self, request: Any) -> Any:
            start = time.monotonic()
            response = self._inner.handle_request(request)
            limit = (request.extensions.get("timeout") or {}).get("read")
            if limit is not None:
                stream = response.extensions.get("network_stream")
                sock = stream.get_extra_info("socket") if stream is not None else None
                response.stream = Deadline(response.stream, request, start + limit, sock)
            return response

        def close(self) -> None:
            self._inner.close()

    return openai.DefaultHttpxClient(timeout=timeout, transport=WholeAttempts())
