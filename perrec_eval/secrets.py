"""Secrets never reach a file or a log: one place that knows what a secret looks like and hides it.

A secret reaches perrecbench in a URL (``http://user:KEY@host/v1``, ``?api-key=KEY``), in a ``KEY=VALUE``
option whose name says so (``hub_token=...``, ``api_key=...``), in a JSON field (``{"authorization": ...}``
of an ``extra_body``), or as the value of an environment variable the engine reads; and it comes back from a
server that echoes what it was sent, in any field, or as the HTTP Basic header made of a URL's password. The
engine registers every such value (:func:`register`, :func:`register_url`, :func:`register_fields`), so it is
hidden wherever it shows up, whatever its shape. Everything written to ``run.json``, ``sft_train.json``, a
cache, a sample or the log goes through :func:`redact` / :func:`redact_text`, the
CLI's log handlers format through :class:`RedactingFormatter` (and every log record's message is redacted
when it is made, whatever handler prints it), and the tracebacks and warnings Python prints
itself (``--debug``, an unexpected error, a thread's error) through :func:`redact_tracebacks`.
"""

from __future__ import annotations

import base64
import logging
import re
import sys
import threading
import traceback
from typing import Any

REDACTED = "<redacted>"

# A name that holds a secret: ends with token, api key, secret, password, authorization, ... (``max_tokens``
# does not).
_SECRET_NAME = (
    r"[A-Za-z0-9_.-]*?(?:token|api[_-]?key|apikey|secret|password|passwd|credentials?|signature"
    r"|authorization|private[_-]?key|access[_-]?key(?:[_-]?id)?|secret[_-]?key|cookie)"
)
_SECRET_NAME_RE = re.compile(rf"^{_SECRET_NAME}$", re.IGNORECASE)
# URL query parameters that carry keys (Azure's api-key, Azure Functions' code, Google's key, signed URLs'
# sig).
_QUERY_NAME = rf"(?:{_SECRET_NAME}|key|sig|auth|code|pwd|pass)"
_QUERY_NAME_RE = re.compile(rf"^{_QUERY_NAME}$", re.IGNORECASE)
# Values kept after a secret name: one redacted already, a header's redacted credential, and the
# placeholder of a hint ("export OPENAI_API_KEY=... and pass ...").
_KEPT = rf"(?!{REDACTED}|(?:Bearer|Basic|Token|Digest|Bot|ApiKey)\s+{REDACTED}|\.\.\.(?![^\s,&'\"}})]))"
_PATTERNS = [
    # userinfo of a URL, whole: scheme://user:pass@host, the password may hold @, quotes or single spaces
    (
        re.compile(r"(?P<head>\b[a-z][a-z0-9+.-]*://)[^/?#\s\"]+(?: [^/?#\s\"]+)*@(?=[\w\[])", re.I),
        rf"\g<head>{REDACTED}@",
    ),
    # Authorization: Bearer KEY, and Basic BASE64(user:password) (httpx sends a URL's userinfo so)
    (re.compile(r"(?P<head>\bBearer\s+)[A-Za-z0-9._~+/=-]+"), rf"\g<head>{REDACTED}"),
    (
        re.compile(r"(?P<head>\bauthorization[\"']?\s*[:=]\s*[\"']?[A-Za-z]+\s+)(?!<)[^\s\"',]+", re.I),
        rf"\g<head>{REDACTED}",
    ),
    (
        re.compile(r"(?P<head>\bBasic\s+)(?=[A-Za-z0-9+/]*[0-9+/=])[A-Za-z0-9+/]{4,}=*"),
        rf"\g<head>{REDACTED}",
    ),
    # ?api-key=KEY / &code=KEY
    (
        re.compile(rf"(?P<head>[?&]{_QUERY_NAME}=)(?!{REDACTED})[^&\s#'\",]+", re.IGNORECASE),
        rf"\g<head>{REDACTED}",
    ),
    # NAME=VALUE and NAME: VALUE with a secret name (flags, repr of options)
    (
        re.compile(
            rf"(?P<head>\b{_SECRET_NAME}\s*[=:]\s*)(?P<q>['\"]?){_KEPT}[^\s,&'\"}})]+",
            re.IGNORECASE,
        ),
        rf"\g<head>\g<q>{REDACTED}",
    ),
    # "name": "value" in JSON text
    (
        re.compile(rf"(?P<head>[\"']{_SECRET_NAME}[\"']\s*:\s*[\"'])[^\"']*", re.IGNORECASE),
        rf"\g<head>{REDACTED}",
    ),
    # keys with a well-known shape: OpenAI sk-..., Hugging Face hf_..., GitHub ghp_... / github_pat_...
    (
        re.compile(
            r"\b(?:sk-[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}"
            r"|github_pat_[A-Za-z0-9_]{20,})"
        ),
        REDACTED,
    ),
]
_known: set[str] = set()
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def register(value: str | None) -> None:
    """Hide `value` (a key read from the environment) wherever it shows up from now on.

    Values shorter than 6 characters are not registered (they would hide ordinary words).
    """
    if value and len(value) >= 6:
        _known.add(value)


def register_url(url: str) -> None:
    """Hide the secrets of `url` wherever they show up: its userinfo's password, the HTTP Basic header value
    made of it (a server may echo that back), and the values of key parameters of its query.

    >>> register_url("http://alice:PW-SECRET-1@host/v1?code=FN-KEY-22")
    >>> redact_text("Basic YWxpY2U6UFctU0VDUkVULTE= PW-SECRET-1 FN-KEY-22")
    'Basic <redacted> <redacted> <redacted>'
    """
    from urllib.parse import parse_qsl, unquote

    authority = url.partition("://")[2].split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    userinfo = authority.rpartition("@")[0]
    if userinfo:
        user, _, password = userinfo.partition(":")
        for name, secret in {(user, password), (unquote(user), unquote(password))}:
            register(secret or name)  # http://KEY@host: the key is the user name
            register(f"{name}:{secret}")
            register(base64.b64encode(f"{name}:{secret}".encode()).decode())
    query = url.partition("?")[2].partition("#")[0]
    for name, value in parse_qsl(query, keep_blank_values=True):
        if _QUERY_NAME_RE.match(name):
            register(value)
    for part in query.split("&"):
        name, _, value = part.partition("=")
        if _QUERY_NAME_RE.match(name):
            register(value)


def register_fields(value: Any) -> None:
    """Hide every string under a secret name anywhere in the JSON-like `value` (e.g. an ``extra_body``)
    wherever it shows up, and the credential after an ``Authorization`` header's scheme.

    >>> register_fields({"user": {"private_key": "PK-SECRET-9"}, "top_k": 5})
    >>> redact_text("the key PK-SECRET-9")
    'the key <redacted>'
    """
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and is_secret_name(key):
                for text in _strings(item):
                    register(text)
                    register(text.partition(" ")[2].strip())  # "Basic XYZ": XYZ alone too
            else:
                register_fields(item)
    elif isinstance(value, list | tuple):
        for item in value:
            register_fields(item)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list | tuple):
        return [text for item in value for text in _strings(item)]
    return []


def check_env_name(value: str | None) -> None:
    """Refuse a `value` that is not an environment variable's name, without echoing it (often, it is the key).

    Raises:
        ConfigError: `value` is not a name of letters, digits and ``_`` that starts with a letter or ``_``.
    """
    from perrec_eval.errors import ConfigError

    if value is not None and not _ENV_NAME.fullmatch(value):
        raise ConfigError(
            "--api-key-env takes the NAME of an environment variable (letters, digits, _), not the key "
            "itself: export OPENAI_API_KEY=... and pass --api-key-env OPENAI_API_KEY"
        )


def is_secret_name(name: str) -> bool:
    """Whether an option or field called `name` holds a secret.

    >>> [is_secret_name(n) for n in ("hub_token", "api-key", "OPENAI_API_KEY", "max_tokens", "api_key_env")]
    [True, True, True, False, False]
    """
    return bool(_SECRET_NAME_RE.match(name))


def redact_text(text: str) -> str:
    """`text` with every secret replaced by ``<redacted>``.

    >>> redact_text("http://me:sk-live@host:8000/v1?api-key=abc&x=1 hub_token=hf_x max_tokens=5")
    'http://<redacted>@host:8000/v1?api-key=<redacted>&x=1 hub_token=<redacted> max_tokens=5'
    """
    for value in sorted(_known, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact(value: Any) -> Any:
    """A JSON-like value with secrets hidden: fields with a secret name, and secrets inside strings.

    >>> redact({"base_url": ["http://u:p@h/v1"], "extra": {"api_key": "x"}, "n": 1})
    {'base_url': ['http://<redacted>@h/v1'], 'extra': {'api_key': '<redacted>'}, 'n': 1}
    """
    if isinstance(value, dict):
        return {
            key: REDACTED if isinstance(key, str) and is_secret_name(key) and item else redact(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def has_secret(value: Any) -> bool:
    """Whether :func:`redact` would change `value`."""
    return redact(value) != (list(value) if isinstance(value, tuple) else value)


class RedactingFormatter(logging.Formatter):
    """A log formatter whose lines (tracebacks included) pass through :func:`redact_text`."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))


def redact_logs() -> None:
    """Make every handler of the root logger format through :class:`RedactingFormatter`, and every log
    record's message redacted wherever it goes (a handler a library adds to its own logger later, in any
    format, as httpx's request lines with the URL's userinfo)."""
    for handler in logging.getLogger().handlers:
        formatter = handler.formatter or logging.Formatter()
        redacting = RedactingFormatter(formatter._fmt, formatter.datefmt)
        handler.setFormatter(redacting)
    factory = logging.getLogRecordFactory()
    if getattr(factory, "redacting", False):
        return

    def redacting_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        message = record.getMessage()  # made only for records a logger handles (after its level check)
        redacted = redact_text(message)
        if redacted != message:
            record.msg, record.args = redacted, ()
        return record

    redacting_factory.redacting = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(redacting_factory)


def redact_tracebacks() -> None:
    """Print uncaught exceptions (the main thread's and other threads') and warnings with secrets hidden.

    Python prints those itself, around the log handlers; an error that quotes a ``--base-url`` with
    credentials would show them there (``--debug`` re-raises every error to show its traceback).
    """

    def excepthook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        sys.stderr.write(redact_text("".join(traceback.format_exception(kind, value, tb))))
        sys.stderr.flush()

    def thread_excepthook(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit:
            return
        name = args.thread.name if args.thread is not None else "a thread"
        text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
        sys.stderr.write(redact_text(f"Exception in thread {name}:\n{text}"))
        sys.stderr.flush()

    sys.excepthook = excepthook
    threading.excepthook = thread_excepthook
    logging.captureWarnings(True)  # warnings then reach the (redacting) log handlers
