"""Secrets never reach a file, a log or the Hub: the one place that knows what a secret looks like.

A secret reaches perrecbench in a URL (``http://user:KEY@host/v1``, ``http://KEY@host``, ``?api-key=KEY``,
``#key=KEY``, ``;key=KEY``), in a ``KEY=VALUE`` option whose name says so (``hub_token=...``,
``api_key=...``), in a JSON field (``{"authorization": ...}``, ``{"key": ...}`` of an ``extra_body``), or as
the value of an environment variable the engine reads; and it comes back from a server that echoes what it
was sent, in any field, or as the HTTP Basic header made of a URL's password. The engine registers every
such value (:func:`register`, :func:`register_url`, :func:`register_fields`), so it is hidden wherever it
shows up, whatever its shape. Keys of a well-known shape (OpenAI, Hugging Face, GitHub, GitLab, npm, Stripe,
Google, AWS, Slack, JWTs, PEM private keys) and values after a secret name are known by the rules here
(`_RULES`), which serve both sides: :func:`redact_text` hides what they find, and :func:`find` tells the
publish scan (`perrec_eval.publish.scan`) what a file holds, so nothing redaction knows passes the scan.

Everything written to ``run.json``, ``sft_train.json``, a cache, a sample or the log goes through
:func:`redact` / :func:`redact_text`, the CLI's log handlers format through :class:`RedactingFormatter` (and
every log record's message is redacted when it is made, whatever handler prints it), and the tracebacks and
warnings Python prints itself (``--debug``, an unexpected error, a thread's error) through
:func:`redact_tracebacks`. Every rule reads a text in linear time (each answer a server returns is redacted).
"""

from __future__ import annotations

import base64
import logging
import re
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

REDACTED = "<redacted>"

# A name that holds a secret ends with one of these (``hub_token``, ``x-api-key``; ``max_tokens`` does
# not), an ``_`` standing for ``_``, ``-`` or nothing; or it is one of the short words that name credentials
# in URLs and request fields (``?key=``, ``{"auth": ...}``) as a whole (``sort_key`` is no secret).
_ENDINGS = (
    "token", "api_key", "secret", "password", "passwd", "credential", "credentials", "signature",
    "authorization", "private_key", "access_key", "access_key_id", "secret_key", "account_key", "cookie",
)  # fmt: skip
_WORDS = ("key", "auth", "sig", "code", "pwd", "pass")


def _spellings(word: str) -> list[str]:
    """`word` with each ``_`` written as ``_``, ``-`` or nothing.

    >>> _spellings("api_key")
    ['api_key', 'api-key', 'apikey']
    """
    head, _, rest = word.partition("_")
    if not rest:
        return [word]
    return [f"{head}{joint}{tail}" for joint in ("_", "-", "") for tail in _spellings(rest)]


# A name as a regex: a run of name characters (possessive and bounded: it costs O(1) wherever it starts)
# whose end is a secret's (each ending a fixed-width look-behind), or a short word alone.
_LONG_NAME = (
    r"[A-Za-z0-9_.-]{1,64}+(?:"
    + "|".join(f"(?<={spelling})" for word in _ENDINGS for spelling in _spellings(word))
    + ")"
)
_SHORT_NAME = "(?:" + "|".join(_WORDS) + ")"
# The end of a secret name alone: where NAME=VALUE is looked for (a name's start does not matter)
_ENDING = "(?:" + "|".join(spelling for word in _ENDINGS for spelling in _spellings(word)) + ")"
_SECRET_NAME_RE = re.compile(f"{_LONG_NAME}|{_SHORT_NAME}", re.IGNORECASE | re.ASCII)
# The characters of a key; a value counts as a credential (for the publish scan, which must not refuse a
# placeholder, a word or a number) when its leading run of them is long and mixes letters and digits.
_KEY_CHARS = re.compile(r"[A-Za-z0-9_\-./+=~]+")
# Values kept after a secret name: one redacted already, a header's redacted credential, and the
# placeholder of a hint ("export OPENAI_API_KEY=... and pass ...").
_KEPT = rf"(?!{REDACTED}|(?:Bearer|Basic|Token|Digest|Bot|ApiKey)\s+{REDACTED}|\.\.\.(?![^\s,&'\"}})]))"


@dataclass(frozen=True, slots=True)
class _Rule:
    """One way a secret shows up in text: `pattern`'s group ``secret`` (the whole match without one) is it.

    Every pattern starts with a literal (the regex engine searches for it fast; a look-behind after it keeps
    a match from starting inside a run of its own characters) and never backtracks over a run (possessive
    quantifiers, or delimiters its runs cannot hold), so a text of any length is read in linear time:
    redaction reads every answer a server returns, and the publish scan every byte of an upload.
    """

    what: str  # how the publish scan names it
    pattern: re.Pattern[str]
    # whether the publish scan refuses the match (None: its shape alone says it is a secret); redaction hides
    # every match, placeholders included
    credential: Callable[[re.Match[str]], bool] | None = None
    # a case-insensitive rule's words, in lower case: a text whose lower case holds none is not read with it
    # (case-insensitive matching is slow, and the scan reads every byte of a model's weights)
    hint: re.Pattern[str] | None = None

    def finditer(self, text: str, lowered: str) -> Iterator[re.Match[str]]:
        """The matches in `text` (`lowered`: its lower case)."""
        if self.hint is None or self.hint.search(lowered):
            yield from self.pattern.finditer(text)


def _secret(match: re.Match[str]) -> str:
    return match.group("secret") if "secret" in match.re.groupindex else match.group()


def _keyed(match: re.Match[str]) -> bool:
    """A value after a secret name: a credential, unless the name is ``key``, ``code`` or ``sig`` outside a
    URL (the files perrecbench writes name hashes and ids so; such keys are known by their shape)."""
    named = match.group("name").lower() in ("key", "code", "sig") and match.group()[0] not in "?&;#"
    return not named and _looks_like_key(_secret(match), 8)


def _userinfo(match: re.Match[str]) -> bool:
    user, colon, password = _secret(match).partition(":")
    return bool(colon and password and password != REDACTED) or _looks_like_key(user, 8)


def _looks_like_key(value: str, shortest: int) -> bool:
    """Whether `value` is a credential rather than a placeholder, a word or a number: its leading run of key
    characters mixes letters and digits (`shortest` characters or more), or is a run of 20 with a letter.

    >>> [_looks_like_key(v, 8) for v in ("abcdef123", "<redacted>", "null", "12345678", "Tr0ub4dor&3")]
    [True, False, False, False, True]
    """
    run = _KEY_CHARS.match(value)
    text = run.group() if run else ""
    if text.lower() in ("null", "none", "true", "false") or not re.search(r"[A-Za-z]", text):
        return False
    return (bool(re.search(r"[0-9]", text)) and len(text) >= shortest) or len(text) >= 20


def _rule(what: str, pattern: str, *, flags: int = 0, hint: str | None = None, **how: Any) -> _Rule:
    return _Rule(
        what, re.compile(pattern, flags | re.ASCII), hint=re.compile(hint) if hint else None, **how
    )


# Keys whose shape says what they are first, then secrets known by what stands before them.
_RULES = (
    _rule(
        "a private key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?:[A-Za-z-]++: [^\n]*+\n)*+[A-Za-z0-9+/=\s]*+",
    ),
    _rule("an OpenAI project key (sk-proj-...)", r"sk-(?<![\w-]sk-)(?:proj|svcacct|admin)-[\w-]{8,}+"),
    _rule("an API key (sk-...)", r"sk-(?<![\w-]sk-)[\w-]{16,}+"),
    _rule("a Hugging Face token", r"hf_(?<![\w-]hf_)[A-Za-z0-9]{20,}+"),
    _rule("a GitHub token", r"g(?<![\w-]g)(?:h[pousr]_[A-Za-z0-9]{20,}+|ithub_pat_\w{20,}+)"),
    _rule("a GitLab token", r"glpat-(?<![\w-]glpat-)[\w-]{20,}+"),
    _rule("an npm token", r"npm_(?<![\w-]npm_)[A-Za-z0-9]{36,}+"),
    _rule("a Stripe key", r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}+"),
    _rule("a Google API key", r"AIza(?<![\w-]AIza)[\w-]{35}+"),
    _rule("an AWS access key", r"A(?<![A-Za-z0-9]A)(?:KIA|SIA)[0-9A-Z]{16}(?![A-Za-z0-9])"),
    _rule("a Slack token", r"xox(?<![\w-]xox)[abposr]-[A-Za-z0-9-]{10,}+"),
    _rule("a Slack webhook", r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[\w/-]++)"),
    _rule("a JSON Web Token", r"eyJ(?<![\w-]eyJ)[\w-]{8,}+\.eyJ[\w-]{8,}+\.[\w-]{8,}+"),
    # userinfo of a URL, whole: scheme://user:pass@host (the password may hold @, quotes or single spaces),
    # and scheme://KEY@host (a key as the user name)
    _rule(
        "a password inside a URL",
        r"://(?P<secret>[^/?#\s\"]+(?: [^/?#\s\"]+)*)@(?=[\w\[])",
        flags=re.IGNORECASE,
        credential=_userinfo,
    ),
    # Authorization: Bearer KEY, and Basic BASE64(user:password) (httpx sends a URL's userinfo so)
    _rule(
        "a Bearer-token header",
        r"Bearer(?<![\w-]Bearer)\s++(?P<secret>[A-Za-z0-9._~+/=-]++)",
        credential=lambda match: len(_secret(match)) >= 16,
    ),
    _rule(
        "an HTTP Basic credential",
        r"Basic(?<![\w-]Basic)\s++(?P<secret>(?=[A-Za-z0-9+/]*+[0-9+/=])[A-Za-z0-9+/]{4,}+=*+)",
        credential=lambda match: len(_secret(match)) >= 8,
    ),
    _rule(
        "an Authorization header",
        r"authorization(?<![\w-]authorization)[\"']?\s*+[:=]\s*+[\"']?[A-Za-z]++\s++(?!<)(?P<secret>[^\s\"',]++)",
        flags=re.IGNORECASE,
        credential=lambda match: _looks_like_key(_secret(match), 8),
        hint="authorization",
    ),
    # ?api-key=KEY, &code=KEY, #key=KEY, ;key=KEY
    _rule(
        "a key in a URL",
        rf"[?&;#](?P<name>{_SHORT_NAME}(?==)|{_LONG_NAME})=(?P<secret>(?!{REDACTED})[^&;#\s'\",]++)",
        flags=re.IGNORECASE,
        credential=_keyed,
    ),
    # "NAME": "VALUE" (JSON, where ``"key"`` and ``"auth"`` count too), whole: before NAME=VALUE, which ends
    # a value at the first & or ,
    _rule(
        "a key or token assignment",
        rf"[\"'](?P<name>{_SHORT_NAME}(?=[\"'])|{_LONG_NAME})[\"']\s*+:\s*+[\"'](?P<secret>(?!{REDACTED})[^\"'\n]++)",
        flags=re.IGNORECASE,
        credential=_keyed,
    ),
    # NAME=VALUE and NAME: VALUE with a secret name (flags, repr of options, YAML; not ``key: ...``, which
    # prose writes), found by the name's end
    _rule(
        "a key or token assignment",
        rf"(?P<name>{_ENDING})(?![A-Za-z0-9_.-])[\"']?\s*+[=:]\s*+(?P<q>[\"']?){_KEPT}"
        r"(?P<secret>[^\s,&'\"})]++)",
        flags=re.IGNORECASE,
        credential=_keyed,
        hint=_ENDING,
    ),
)


def _hidden(match: re.Match[str]) -> str:
    """`match` with its secret replaced by ``<redacted>``."""
    if "secret" not in match.re.groupindex:
        return REDACTED
    start, end = match.span("secret")
    text = match.group()
    return text[: start - match.start()] + REDACTED + text[end - match.start() :]


def find(text: str) -> str | None:
    """What secret `text` holds (for the publish scan: a placeholder or a word after a secret name is
    none), or None.

    >>> find("see https://hooks.slack.com/services/T000/B000/XXXX"), find('{"api_key": "<redacted>"}')
    ('a Slack webhook', None)
    """
    lowered = text.lower()
    for rule in _RULES:
        for match in rule.finditer(text, lowered):
            if rule.credential is None or rule.credential(match):
                return rule.what
    return None


_known: set[str] = set()
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def register(value: str | None) -> None:
    """Hide `value` (a key read from the environment) wherever it shows up from now on.

    Values shorter than 6 characters are not registered (they would hide ordinary words).
    """
    if value and len(value) >= 6:
        _known.add(value)


def register_url(url: str) -> None:
    """Hide the secrets of `url` wherever they show up: its userinfo's password (or the user name, where
    the key is given so), the HTTP Basic header value made of it (a server may echo that back), and the
    values of key parameters of its query, its fragment and its path (``;key=``).

    >>> register_url("http://alice:PW-SECRET-1@host/v1?code=FN-KEY-22")
    >>> redact_text("Basic YWxpY2U6UFctU0VDUkVULTE= PW-SECRET-1 FN-KEY-22")
    'Basic <redacted> <redacted> <redacted>'
    """
    from urllib.parse import unquote

    authority = url.partition("://")[2].split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    userinfo = authority.rpartition("@")[0]
    if userinfo:
        user, _, password = userinfo.partition(":")
        for name, secret in {(user, password), (unquote(user), unquote(password))}:
            register(secret or name)  # http://KEY@host: the key is the user name
            register(f"{name}:{secret}")
            register(base64.b64encode(f"{name}:{secret}".encode()).decode())
    for name, value in _parameters(url):
        if is_secret_name(name):
            register(value)


def _parameters(url: str) -> list[tuple[str, str]]:
    """The ``name=value`` parameters of `url`: of its query, its fragment and its path's ``;`` parameters,
    each as written and unquoted.

    >>> _parameters("http://h/v1;key=A?x=1#code=B%21+")
    [('key', 'A'), ('x', '1'), ('code', 'B%21+'), ('code', 'B!+'), ('code', 'B! ')]
    """
    from urllib.parse import unquote, unquote_plus

    rest, _, fragment = url.partition("#")
    path, _, query = rest.partition("?")
    found = []
    for part in re.split(r"[;&]", "&".join((";".join(path.split(";")[1:]), query, fragment))):
        name, equals, value = part.partition("=")
        if equals:
            found += dict.fromkeys((f(name), f(value)) for f in (str, unquote, unquote_plus))
    return found


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
    >>> [is_secret_name(n) for n in ("key", "auth", "AccountKey", "sort_key")]
    [True, True, True, False]
    """
    return bool(_SECRET_NAME_RE.fullmatch(name))


def redact_text(text: str) -> str:
    """`text` with every secret replaced by ``<redacted>``.

    >>> redact_text("http://me:sk-live@host:8000/v1?api-key=abc&x=1 hub_token=hf_x max_tokens=5")
    'http://<redacted>@host:8000/v1?api-key=<redacted>&x=1 hub_token=<redacted> max_tokens=5'
    """
    for value in sorted(_known, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    lowered = text.lower()  # what each rule's hint reads (a redaction adds none of its words)
    for rule in _RULES:
        if rule.hint is None or rule.hint.search(lowered):
            text = rule.pattern.sub(_hidden, text)
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
