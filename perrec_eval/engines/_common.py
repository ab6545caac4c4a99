"""Small pieces every backend shares: local-path checks, typed options, per-request seeds, and batching."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import typing
from pathlib import Path
from typing import Any

from perrec_eval.cliconfig import coerce
from perrec_eval.errors import ConfigError
from perrec_eval.types import ChatRequest

CONVERTED = "convert_gguf.json"
"""The record `convert-gguf` writes into its model folder: the GGUF file's name and every file written."""


def converted_from(model: str) -> str | None:
    """The GGUF file a local model folder was converted from (`perrecbench convert-gguf`'s record), if any:
    engines record it, so a run of converted weights is never published as the original model's.

    >>> converted_from("HuggingFaceTB/SmolLM2-135M-Instruct") is None
    True
    """
    try:
        record = json.loads((Path(os.path.expanduser(model)) / CONVERTED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    name = record.get("gguf") if isinstance(record, dict) else None
    return name if isinstance(name, str) else None


def check_local_path(path: str, what: str) -> None:
    """Fail, naming the path, when `path` looks like a local folder (not a Hub id) and is not there.

    A Hub id is ``NAME`` or ``ORG/NAME``; an absolute, ``./`` or ``~`` path, one with more than one ``/``,
    or one whose parent folder exists here is a path, and a mistyped one would otherwise surface as the
    Hub client's "Repo id must be in the form ...".

    Args:
        path: the model or adapter as given.
        what: the flag it came from, named in the error (e.g. ``--model``).

    Raises:
        ConfigError: the path does not exist.

    >>> check_local_path("HuggingFaceTB/SmolLM2-135M-Instruct", "--model")
    >>> check_local_path("/no/such/model", "--model")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    perrec_eval.errors.ConfigError: --model /no/such/model: no such folder (a Hub id is ORG/NAME); ...
    """
    local = Path(os.path.expanduser(path))
    if local.exists():
        return
    looks_local = (
        path.startswith((".", "/", "~"))
        or path.count("/") > 1
        or (path.count("/") == 1 and local.parent.is_dir())
    )
    if looks_local:
        raise ConfigError(f"{what} {path}: no such folder (a Hub id is ORG/NAME); check the path")


def sample_seed(seed: int | None, request: ChatRequest, sample: int = 0) -> int | None:
    """The seed of one sample of one request: a hash of (run seed, sample index, messages).

    A request then draws the same sample whatever else is in its batch, in whatever order, and after a
    resume; two requests of one run do not share a random stream.

    Args:
        seed: the run's seed (`GenParams.seed`); None means unseeded.
        request: the conversation.
        sample: which of the request's `n` samples (engines that draw them one by one).

    Returns:
        An integer in [0, 2**31) (a range every backend accepts), or None when `seed` is None.

    >>> request = ChatRequest(messages=({"role": "user", "content": "hi"},))
    >>> sample_seed(0, request) == sample_seed(0, request)
    True
    >>> len({sample_seed(0, request), sample_seed(1, request), sample_seed(0, request, 1)})
    3
    >>> sample_seed(None, request) is None
    True
    """
    if seed is None:
        return None
    description = [seed, sample, [dict(message) for message in request.messages]]
    canonical = json.dumps(description, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(canonical.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % 2**31


@functools.cache
def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def coerce_fields(options: Any) -> None:
    """Give every field of a frozen options dataclass its declared type, in place (for `__post_init__`).

    Text (``"4"`` from ``KEY=VALUE``) and YAML scalars become typed values, so an options object built from
    a flag, a file or Python holds the same values.

    Args:
        options: a dataclass instance whose fields are annotated with types `cliconfig.coerce` knows.

    Raises:
        ConfigError: a value does not fit its field's type; the message names the field and the type.
    """
    types = _field_types(type(options))
    for field in dataclasses.fields(options):
        value = getattr(options, field.name)
        typed = coerce(field.name, types[field.name], value)
        if typed is not value:
            object.__setattr__(options, field.name, typed)


def split_evenly(items: list[int], size: int) -> list[list[int]]:
    """Cut a list into consecutive chunks of at most `size` items.

    Args:
        items: the list to cut.
        size: the largest chunk.

    Returns:
        The chunks, in order.

    >>> split_evenly([1, 2, 3, 4, 5], 2)
    [[1, 2], [3, 4], [5]]
    """
    if size < 1:
        raise ValueError(f"chunk size must be >= 1, got {size}")
    return [items[start : start + size] for start in range(0, len(items), size)]
