"""A request cache that wraps any engine: append-only JSONL that survives a kill, so runs resume.

One line per finished request: ``{"key": <sha256>, "texts": [...], "prompt_tokens": .., "completion_tokens":
.., "extra": {..}}``. The key is the SHA-256 of the canonical JSON of (engine name, model, adapter, sampling
parameters, messages, and the engine options that change answers when they are not at their defaults) —
never of the prompt alone, so two models, two temperatures or two `extra_body`s never share answers. A local
adapter is named by the sha256 of its weights, not by its path, so an adapter retrained in place is asked
again. Keys of runs without an adapter and with default options are the ones older versions wrote.
Engine errors are not stored, so a resumed run asks for them again; every completion the inner engine returns
first goes through `engines.base.checked`, so one that claims success without `n` texts is an error too
(never a stored, empty "answer").

Each batch of new lines is written, flushed and fsynced before `generate` moves on; a kill can only cut the
line being written, and opening the cache again drops (and logs) such a partial trailing line.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from perrec_eval import fileio
from perrec_eval.engines.base import Engine, ResultsCallback, answer_options, checked, is_count
from perrec_eval.errors import DataError
from perrec_eval.types import ChatRequest, Completion, GenParams

logger = logging.getLogger(__name__)

try:  # POSIX advisory locks keep two processes' appends from interleaving inside a line.
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


# What the keys cover, recorded on every line (``"keys"``): 2 = also a local adapter's weights and every
# answer-changing engine option (openai's structured_outputs). A line of keys that covered less may hold an
# answer of other settings under today's key: resuming the same settings reads it, `forget_unproven` drops it
# before another run's settings replace the folder's (`evaluate --overwrite`).
KEYS = 2


def adapter_identity(adapter: str | None) -> str | None:
    """How a cache key names `adapter`: ``sha256:<hex>`` of its weights when it is a local adapter folder,
    else `adapter` as given (a name a server serves it under).

    >>> adapter_identity(None), adapter_identity("served-name")
    (None, 'served-name')
    """
    if adapter is None:
        return None
    digest = adapter_fingerprint(adapter)
    return f"sha256:{digest}" if digest else adapter


def adapter_fingerprint(folder: str | os.PathLike) -> str | None:
    """sha256 of an adapter folder's weights (``adapter_model.safetensors``), None when it has none.

    Each file is hashed once per process while it stays the same file (path, size, mtime, inode): every
    cache key of an adapter's requests names its weights this way (`cache.adapter_identity`).
    """
    weights = Path(folder) / "adapter_model.safetensors"
    try:
        found = weights.stat()
    except OSError:
        return None
    if not stat.S_ISREG(found.st_mode):
        return None
    return _file_sha256(str(weights.resolve()), found.st_size, found.st_mtime_ns, found.st_ino)


@functools.lru_cache(maxsize=64)
def _file_sha256(path: str, size: int, mtime_ns: int, inode: int) -> str:
    """sha256 of `path`; the other arguments make a rewritten file a new entry of the cache."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


def request_key(engine: Engine, request: ChatRequest, params: GenParams) -> str:
    """The cache key of one request to `engine`: its name, model, adapter (its weights' hash when local, see
    `adapter_identity`) and the options that change answers.

    Args:
        engine: any engine, or a `CachedEngine` (which reports its inner engine's identity).
        request: the chat conversation.
        params: sampling parameters.

    Returns:
        64 hex characters; see `key_of`.
    """
    # An engine that asks a server for an adapter by name may know the adapter's local folder too.
    adapter = engine.adapter and (getattr(engine, "adapter_path", None) or engine.adapter)
    return key_of(
        engine.name,
        engine.model,
        adapter_identity(adapter),
        params,
        request,
        options=answer_options(engine),
    )


def key_of(
    name: str,
    model: str,
    adapter: str | None,
    params: GenParams,
    request: ChatRequest,
    *,
    options: dict[str, Any] | None = None,
) -> str:
    """SHA-256 hex of the canonical JSON of (engine name, model, adapter, sampling params, messages, options).

    `options` are the engine options that change answers (`engines.base.answer_options`); empty ones are
    left out of the description, so a run with default options keeps the keys of older caches.

    >>> request = ChatRequest(messages=({"role": "user", "content": "hi"},))
    >>> key = key_of("hf", "m", None, GenParams(), request)
    >>> key == key_of("hf", "m", None, GenParams(), request)
    True
    >>> key == key_of("hf", "m", None, GenParams(temperature=0.0), request)
    False
    >>> key == key_of("hf", "m", None, GenParams(), request, options={}), key == key_of(
    ...     "hf", "m", None, GenParams(), request, options={"dtype": "float16"})
    (True, False)
    """
    description = {
        "engine": name,
        "model": model,
        "adapter": adapter,
        "params": params.as_dict(),
        "messages": [dict(message) for message in request.messages],
    }
    if options:
        description["options"] = options
    canonical = json.dumps(description, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def completion_to_record(key: str, completion: Completion) -> dict[str, Any]:
    """The JSON record stored for one successful completion.

    >>> completion_to_record("k", Completion(texts=("a",), prompt_tokens=3))["texts"]
    ['a']
    """
    return {
        "key": key,
        "texts": list(completion.texts),
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "extra": completion.extra,
        "keys": KEYS,
    }


def record_to_completion(record: dict[str, Any]) -> Completion:
    """Inverse of `completion_to_record`.

    >>> record_to_completion(completion_to_record("k", Completion(texts=("a",)))).texts
    ('a',)
    """
    return Completion(
        texts=tuple(record["texts"]),
        prompt_tokens=record.get("prompt_tokens"),
        completion_tokens=record.get("completion_tokens"),
        extra=dict(record.get("extra") or {}),
    )


class CachedEngine:
    """An `Engine` that serves repeated requests from a JSONL file and sends only the misses on.

    Misses of one `generate` call go to the inner engine in ONE call (duplicates within the call are sent
    once), with a callback that persists each batch of results as the engine reports it (an engine that
    cannot stream reports them all at once). A `CachedEngine` is itself an `Engine`. Not thread-safe: one
    `generate` at a time.

    Args:
        engine: the engine to wrap.
        path: the JSONL file; created (with its folder) if missing.

    Attributes:
        calls: `generate` calls made to this object (what the ranking methods asked for).
        inner_calls: `generate` calls forwarded to the inner engine (steps with at least one miss).
        hits: requests answered from the cache, over all calls.
        misses: requests sent to the inner engine, over all calls (after de-duplication).
    """

    def __init__(self, engine: Engine, path: str | os.PathLike[str]) -> None:
        self.engine = engine
        self.path = Path(path)
        if self.path.is_dir():
            raise DataError(
                f"{self.path} is a folder, not the request cache file: move it away (the cache is written "
                "there)"
            )
        self.calls = 0
        self.inner_calls = 0
        self.hits = 0
        self.misses = 0
        self._entries: dict[str, Completion] = {}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._load()

    @property
    def name(self) -> str:
        return self.engine.name

    @property
    def model(self) -> str:
        return self.engine.model

    @property
    def adapter(self) -> str | None:
        return self.engine.adapter

    @property
    def adapter_path(self) -> str | None:
        """The inner engine's local adapter folder, when it names its adapter otherwise (openai)."""
        return getattr(self.engine, "adapter_path", None)

    @property
    def options(self) -> Any:
        """The inner engine's options (their answer-changing part is in every key)."""
        return getattr(self.engine, "options", None)

    def __len__(self) -> int:
        return len(self._entries)

    def key(self, request: ChatRequest, params: GenParams) -> str:
        """The cache key of `request` under `params` for the wrapped engine."""
        return request_key(self.engine, request, params)

    def info(self) -> dict[str, Any]:
        """The inner engine's `info()`, plus the cache file."""
        return {**self.engine.info(), "cache": str(self.path)}

    def with_adapter(self, name: str, path: str) -> CachedEngine:
        """The inner engine with an adapter, cached in the same file (the adapter is part of every key)."""
        return CachedEngine(self.engine.with_adapter(name, path), self.path)

    def generate(
        self,
        requests: Sequence[ChatRequest],
        params: GenParams,
        *,
        on_results: ResultsCallback | None = None,
    ) -> list[Completion]:
        """Answer `requests` in order, asking the inner engine only for those not cached yet.

        Args:
            requests: the conversations to complete.
            params: sampling parameters (part of every cache key).
            on_results: called once with the cached answers, then with each batch the inner engine reports
                (a request repeated within the call is reported at each of its positions).

        Returns:
            One completion per request, in order; an engine error (see `engines.base.checked`) has ``error``
            set and no texts.
        """
        self.calls += 1
        keys = [self.key(request, params) for request in requests]
        results: list[Completion | None] = [self._entries.get(key) for key in keys]
        positions_of_miss: dict[str, list[int]] = {}
        for position, (key, cached) in enumerate(zip(keys, results, strict=True)):
            if cached is None:
                positions_of_miss.setdefault(key, []).append(position)
        hits = [(position, cached) for position, cached in enumerate(results) if cached is not None]
        self.hits += len(hits)
        if on_results is not None and hits:
            on_results(hits)
        if not positions_of_miss:
            return [result for result in results if result is not None]

        miss_keys = list(positions_of_miss)
        miss_requests = [requests[positions_of_miss[key][0]] for key in miss_keys]
        self.misses += len(miss_keys)
        self.inner_calls += 1

        def persist(finished: list[tuple[int, Completion]]) -> None:
            finished = [(index, checked(completion, params.n)) for index, completion in finished]
            self._append([(miss_keys[index], completion) for index, completion in finished])
            if on_results is not None:
                on_results(
                    [
                        (position, completion)
                        for index, completion in finished
                        for position in positions_of_miss[miss_keys[index]]
                    ]
                )

        new = self.engine.generate(miss_requests, params, on_results=persist)
        if len(new) != len(miss_requests):
            raise RuntimeError(
                f"engine {self.engine.name!r} returned {len(new)} completions "
                f"for {len(miss_requests)} requests"
            )
        new = [checked(completion, params.n) for completion in new]
        unreported = [
            (key, c) for key, c in zip(miss_keys, new, strict=True) if c.ok and key not in self._entries
        ]
        if unreported:  # an engine that breaks the on_results contract still gets its answers cached
            logger.warning(
                "engine %r did not report %d of its results through on_results: storing them now",
                self.engine.name,
                len(unreported),
            )
            self._append(unreported)
        for key, completion in zip(miss_keys, new, strict=True):
            for position in positions_of_miss[key]:
                results[position] = completion
        return [result for result in results if result is not None]

    def _append(self, finished: list[tuple[str, Completion]]) -> None:
        lines = []
        for key, completion in finished:
            if not completion.ok or key in self._entries:
                continue
            record = completion_to_record(key, completion)
            try:
                lines.append(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
            except TypeError as err:
                raise TypeError(
                    f"completion extra must be JSON-serializable to be cached: {completion.extra!r}"
                ) from err
            self._entries[key] = completion
        if not lines:
            return
        data = "".join(lines).encode("utf-8")
        with _locked(self.path, "ab") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())

    def _load(self) -> None:
        if not self.path.exists():
            return
        with _locked(self.path, "r+b") as handle:
            data = handle.read()
            keep = self._parse(data)
            if keep < len(data):
                logger.warning(
                    "cache %s: dropped a partial or corrupt last line (%d bytes), "
                    "probably from a run killed mid-write; that request will be asked again",
                    self.path,
                    len(data) - keep,
                )
                handle.truncate(keep)
                handle.flush()
                os.fsync(handle.fileno())
        logger.info("cache %s: %d stored completions", self.path, len(self._entries))

    def _parse(self, data: bytes) -> int:
        """Load every good line of `data`; return how many leading bytes to keep."""
        start = 0
        keep = 0
        line_number = 0
        while start < len(data):
            end = data.find(b"\n", start)
            line_number += 1
            if end == -1:
                return keep  # no newline: the write of this last line was cut
            record = _decode(data[start:end])
            if record is not None:
                self._entries[record["key"]] = record_to_completion(record)
                keep = end + 1
            elif end + 1 < len(data):
                logger.warning("cache %s: skipping corrupt line %d", self.path, line_number)
                keep = end + 1
            start = end + 1
        return keep


def forget_unproven(path: str | os.PathLike[str]) -> int:
    """Drop the lines of the cache file `path` whose keys did not cover every setting that changes answers.

    Lines written before `KEYS` (or with other keys) may hold answers of other settings under the keys of
    today (an openai run with ``structured_outputs=response_format`` was keyed as one without): the same
    settings may resume from them, other settings must not be served them. The file is rewritten atomically,
    keeping the lines that prove themselves.

    Returns:
        How many lines were dropped.
    """
    from perrec_eval import fileio

    path = Path(path)
    if not path.is_file():
        return 0
    lines = path.read_bytes().splitlines(keepends=True)
    proven = [line for line in lines if line.endswith(b"\n") and (_decode(line) or {}).get("keys") == KEYS]
    if len(proven) < len(lines):
        with fileio.atomic_open(path, "wb") as handle:
            handle.write(b"".join(proven))
        logger.warning(
            "cache %s: dropped %d answers stored under older keys (they may be of other settings)",
            path,
            len(lines) - len(proven),
        )
    return len(lines) - len(proven)


def _decode(line: bytes) -> dict[str, Any] | None:
    try:
        record = fileio.loads(line)
    except ValueError:  # UnicodeDecodeError too
        return None
    if not isinstance(record, dict) or not isinstance(record.get("key"), str):
        return None
    texts = record.get("texts")
    if not isinstance(texts, list) or not texts or not all(isinstance(text, str) for text in texts):
        return None  # only answers are stored; a line without one is not a completion
    counts = (record.get("prompt_tokens"), record.get("completion_tokens"))
    if not all(count is None or is_count(count) for count in counts):
        return None  # an older version stored a server's bad usage counts: ask again
    if not isinstance(record.get("extra") or {}, dict):
        return None
    return record


def _locked(path: Path, mode: str) -> BinaryIO:
    """`path` opened in binary `mode` under an exclusive lock, which closing the file releases."""
    handle = open(path, mode)  # the caller's `with` closes it
    if fcntl is not None:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
    return handle
