"""User profiles: one LLM-written text per (group, user) from the user's pre-query history.

The paper wrote one profile per user from an unspecified slice of history. Here a profile belongs to a
(group, user) pair and sees only reviews strictly before the query review (no leak). Long histories are cut
to the most recent items whose rendered text fits a character budget (default 40 items and 8,000
characters, roughly 2,000 tokens), kept in chronological order: recent taste is what the query is about,
and a fixed budget keeps every model's profile prompt comparable.

Profiles are saved as JSONL (one object per line: group_id, user_id, profile, and provenance), which loads
with `datasets.load_dataset("json", data_files=PATH)` and can be pushed to the Hub next to the benchmark.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from perrec_eval import fileio
from perrec_eval.engines import base as engine_base
from perrec_eval.engines.base import Engine
from perrec_eval.errors import DataError
from perrec_eval.secrets import redact
from perrec_eval.tasks.perrecbench import prompts
from perrec_eval.tasks.perrecbench.records import Group, HistoryItem, UserKey
from perrec_eval.types import ChatRequest, GenParams

# Why a request was not sent: a profile it shows failed (that request's error follows).
FAILED = "profile request failed: "
DEMONSTRATION_FAILED = "profile request failed for a demonstration: "
SHORTER_PROMPTS = "show fewer history items per user with --k (profiles: --max-items, --max-chars)"


def permanent_fix(error: str) -> str | None:
    """`engines.base.permanent_fix` in PerRecBench's words: a request not sent because a profile failed has
    that profile's fix, and a prompt over the context names the options that shorten it.

    >>> permanent_fix(FAILED + "prompt of 9 tokens + max_tokens 8 exceeds the model's 16 positions")
    "the prompt does not fit the model's context: show fewer history items per user with --k (profiles: \
--max-items, --max-chars), or use a model with a longer context"
    """
    for prefix in (FAILED, DEMONSTRATION_FAILED):
        if error.startswith(prefix):
            return permanent_fix(error.removeprefix(prefix))
    fix = engine_base.permanent_fix(error)
    return fix.replace(engine_base.SHORTER_PROMPTS, SHORTER_PROMPTS) if fix else None


logger = logging.getLogger(__name__)

PROFILE_PARAMS = GenParams(temperature=0.1, top_p=1.0, max_tokens=512, n=1, seed=0)
DEFAULT_MAX_ITEMS = 40
DEFAULT_MAX_CHARS = 8000
# What makes a profile suspect (`quality_flags`): shares and lengths, in words.
QUALITY_FLAGS: dict[str, str] = {
    "cut": "stopped at its token budget (finish reason 'length'): the profile is unfinished",
    "copied": "at least half of its 8-word runs are copied from the history it was shown",
    "repetitive": "fewer than half of its 4-word runs are distinct (a line or phrase repeated)",
}
_COPY_RUN, _REPEAT_RUN, _MIN_RUNS = 8, 4, 20


def _runs(words: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


def quality_flags(profile: str, request: ChatRequest, finish_reason: str | None = None) -> list[str]:
    """Why a profile is suspect (keys of `QUALITY_FLAGS`, in that order), or [] for a plausible one.

    Args:
        profile: the profile text.
        request: the profile request it answers (the history it was shown is in its messages).
        finish_reason: the engine's finish reason (``length``: cut at the budget), None when unknown
            (a profile loaded from a file).

    >>> request = ChatRequest(messages=({"role": "user", "content": "a b c d e f g h i j"},))
    >>> quality_flags("Likes thrillers and cozy mysteries.", request)
    []
    >>> quality_flags("a b c d e f g h i j", request, "length")
    ['cut', 'copied']
    >>> quality_flags("I like it. " * 30, request)
    ['repetitive']
    """
    flags = ["cut"] if finish_reason == "length" else []
    words = profile.split()
    shown = " ".join(message["content"] for message in request.messages).split()
    copy_runs = _runs(words, _COPY_RUN)
    if copy_runs:
        seen = set(_runs(shown, _COPY_RUN))
        if sum(run in seen for run in copy_runs) * 2 >= len(copy_runs):
            flags.append("copied")
    repeat_runs = _runs(words, _REPEAT_RUN)
    if len(repeat_runs) >= _MIN_RUNS and len(set(repeat_runs)) * 2 < len(repeat_runs):
        flags.append("repetitive")
    return flags


@dataclass(frozen=True, slots=True)
class HistoryBudget:
    """How much of a long history a profile request shows: the most recent items that fit."""

    max_items: int = DEFAULT_MAX_ITEMS
    max_chars: int = DEFAULT_MAX_CHARS

    def select(self, history: Sequence[HistoryItem]) -> list[HistoryItem]:
        """The most recent items (chronological order kept) within both limits; always at least one.

        >>> items = [HistoryItem(None, title, None, 4.0, t) for t, title in enumerate("abc")]
        >>> [item.title for item in HistoryBudget(max_items=2).select(items)]
        ['b', 'c']
        """
        chosen: list[HistoryItem] = []
        used = 0
        for item in reversed(history[-self.max_items :]):
            size = len(item.title) + len(item.author or "") + 48
            if chosen and used + size > self.max_chars:
                break
            chosen.append(item)
            used += size
        return chosen[::-1]


def profile_requests(
    groups: Iterable[Group],
    budget: HistoryBudget = HistoryBudget(),
    *,
    users: Collection[UserKey] | None = None,
) -> dict[UserKey, ChatRequest]:
    """One profile request per distinct (group_id, user_id) of the given groups (only `users` if given)."""
    requests: dict[UserKey, ChatRequest] = {}
    for group in groups:
        for user in group.users:
            key = (group.group_id, user.user_id)
            if key not in requests and (users is None or key in users):
                requests[key] = ChatRequest(tuple(prompts.render_profile(budget.select(user.history))))
    return requests


def generate_profiles(
    engine: Engine,
    groups: Iterable[Group],
    *,
    budget: HistoryBudget = HistoryBudget(),
    params: GenParams = PROFILE_PARAMS,
    known: Mapping[UserKey, str] | None = None,
    users: Collection[UserKey] | None = None,
    degenerate: Literal["keep", "fail"] = "keep",
    flagged: dict[UserKey, list[str]] | None = None,
) -> tuple[dict[UserKey, str], dict[UserKey, str]]:
    """Write the missing profiles with `engine` in one call.

    Args:
        engine: the engine that writes them (wrap it in a `CachedEngine` to resume).
        groups: the groups whose users need a profile.
        budget: how much of each history a profile request shows.
        params: sampling parameters.
        known: profiles already written (not asked again).
        users: only these (group_id, user_id) keys (default: every user of `groups`).
        degenerate: ``fail``: a profile with `quality_flags` is a failure (asked again on the next run,
            answered from the cache: so it stays failed); ``keep``: it is used.
        flagged: filled with the `quality_flags` of every profile written now or given in `known`; flags it
            already holds for a `known` profile (saved with it, e.g. ``cut``) are kept.

    Returns:
        (profiles, failures): profile text per key, and the failure reason for keys without one.
    """
    known = dict(known or {})
    flagged = {} if flagged is None else flagged
    every = profile_requests(groups, budget, users=users)
    failures: dict[UserKey, str] = {}
    for key in [key for key in known if key in every]:
        flags = [*flagged.get(key, []), *quality_flags(known[key], every[key])]
        flags = [flag for flag in QUALITY_FLAGS if flag in flags]
        _judge(key, known, failures, flags, degenerate, flagged)
    requests = {key: req for key, req in every.items() if key not in known and key not in failures}
    if not requests:
        return known, failures
    logger.info("writing %d profiles with %s:%s", len(requests), engine.name, engine.model)
    completions = engine.generate(list(requests.values()), params)
    for key, completion in zip(requests, completions, strict=True):
        text = completion.texts[0].strip() if completion.ok and completion.texts else ""
        if text:
            known[key] = text
            reasons = completion.extra.get("finish_reasons") or [None]
            _judge(key, known, failures, quality_flags(text, requests[key], reasons[0]), degenerate, flagged)
        else:
            failures[key] = completion.error or "empty profile"
    return known, failures


def _judge(
    key: UserKey,
    known: dict[UserKey, str],
    failures: dict[UserKey, str],
    flags: list[str],
    degenerate: str,
    flagged: dict[UserKey, list[str]],
) -> None:
    """Record a profile's flags; under ``degenerate="fail"`` move a flagged profile to the failures."""
    if not flags:
        return
    flagged[key] = flags
    if degenerate == "fail":
        del known[key]
        failures[key] = f"degenerate profile ({', '.join(flags)}); --degenerate-profiles keep uses it"


def flag_counts(flagged: Mapping[UserKey, Sequence[str]]) -> dict[str, int]:
    """How many profiles carry each flag, and how many carry any (``flagged``).

    >>> flag_counts({("g", "u"): ["cut", "copied"], ("g", "v"): ["cut"]})
    {'cut': 2, 'copied': 1, 'repetitive': 0, 'flagged': 2}
    """
    counts = {flag: sum(flag in flags for flags in flagged.values()) for flag in QUALITY_FLAGS}
    return {**counts, "flagged": sum(bool(flags) for flags in flagged.values())}


def save_profiles(
    path: str | os.PathLike,
    profiles: Mapping[UserKey, str],
    provenance: Mapping[str, Any],
    flags: Mapping[UserKey, Sequence[str]] | None = None,
) -> None:
    """Write profiles as JSONL atomically (temp file + rename), sorted by key for stable output.

    A profile with `quality_flags` carries them under ``flags`` (read back by `load_profile_flags`).
    """
    flags = flags or {}
    fileio.write_jsonl(
        path,
        (
            {
                "group_id": group_id,
                "user_id": user_id,
                "profile": text,
                **redact(dict(provenance)),
                **({"flags": list(flags[key])} if flags.get(key) else {}),
            }
            for key, text in sorted(profiles.items())
            for group_id, user_id in [key]
        ),
    )


def load_profile_flags(path: str | os.PathLike) -> dict[UserKey, list[str]]:
    """The quality flags saved with the profiles of `path` (only the flagged ones).

    Raises:
        DataError: a record's ``flags`` is not a list of `QUALITY_FLAGS` names.
    """
    flags: dict[UserKey, list[str]] = {}
    with Path(path).open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            record = fileio.loads(line) if line.strip() else {}
            found = record.get("flags")
            if not found:
                continue
            if not isinstance(found, list) or not all(flag in QUALITY_FLAGS for flag in found):
                raise DataError(
                    f"{path}:{lineno}: flags must be a list of {', '.join(QUALITY_FLAGS)}, got {found!r}; "
                    "write the profiles again with `perrecbench profiles`"
                )
            flags[(record["group_id"], record["user_id"])] = list(found)
    return flags


def load_profiles(path: str | os.PathLike) -> dict[UserKey, str]:
    """Read a profiles JSONL file written by `perrecbench profiles`."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"no profiles file at {path}: write one with `perrecbench profiles --out {path}`")
    profiles: dict[UserKey, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise DataError(f"{path} is not UTF-8 text ({err}): pass the profiles file you wrote") from err
    lines = text.split("\n")  # not splitlines: a profile may hold U+2028
    for lineno, line in enumerate(lines[:-1] if lines[-1] == "" else lines, 1):
        try:
            record = fileio.loads(line)
            key, profile = (record["group_id"], record["user_id"]), record["profile"]
        except (ValueError, KeyError, TypeError) as err:
            raise DataError(
                f"{path}:{lineno}: not a profile record ({err}); "
                "each line needs group_id, user_id, profile"
            ) from err
        if not all(isinstance(value, str) for value in key):
            raise DataError(f"{path}:{lineno}: group_id and user_id must be strings")
        if not isinstance(profile, str) or not profile.strip():
            # `perrecbench profiles` never writes an empty one (it is a failed profile, asked again)
            raise DataError(
                f"{path}:{lineno}: the profile is {profile!r}, not a text: write the profiles again "
                "with `perrecbench profiles`, or pass --no-profile"
            )
        profiles[key] = profile
    return profiles


def check_profiles(users: Iterable[UserKey], profiles: Mapping[UserKey, str], source: str, fix: str) -> None:
    """Fail unless every (group_id, user_id) of `users` has a profile in `profiles`, read from `source`.

    The DataError counts the pairs without one, shows one, and ends with `fix` (how the calling command's
    user writes them).

    >>> check_profiles([("g1", "u1")], {("g1", "u1"): "Likes tea."}, "p.jsonl", "...")
    >>> check_profiles([("g", "v"), ("g", "u")], {("g", "v"): "Likes tea."}, "p.jsonl", "write it")
    Traceback (most recent call last):
    ...
    perrec_eval.errors.DataError: p.jsonl has no profile for 1 (group, user) pairs, e.g. ('g', 'u'): write it
    """
    missing = sorted(key for key in users if key not in profiles)
    if missing:
        raise DataError(
            f"{source} has no profile for {len(missing)} (group, user) pairs, e.g. {missing[0]}: {fix}"
        )


# max_tokens, the adapter and the engine options are written only when set (files written before them keep
# matching); a run's own profiles.jsonl leaves out max_items and max_chars (a run uses the defaults).
PROVENANCE_KEYS = (
    "engine",
    "model",
    "adapter",
    "adapter_sha256",
    "options",
    "max_items",
    "max_chars",
    "max_tokens",
)
_OTHER_WRITER = "write these profiles to another --out, or delete the file to replace it"


def writer_provenance(
    engine: str,
    model: str,
    *,
    adapters: Mapping[str, str],
    options: Mapping[str, Any],
    max_tokens: int,
    budget: HistoryBudget | None = None,
) -> dict[str, Any]:
    """What each profile record says about its writer: engine, model, and what else changes its text.

    Args:
        engine, model: the engine's name and model.
        adapters: the adapter it answers with, ``{name: path}`` (empty: none); a local adapter also by the
            sha256 of its weights, so profiles of a retrained adapter are not taken for its own.
        options: the engine options that change answers (`engines.base.answer_options`).
        max_tokens: the profile requests' token budget (recorded when it is not the default).
        budget: the history budget, recorded when given (`perrecbench profiles` sets it; a run uses the
            default and leaves it out).

    >>> writer_provenance("fake", "m", adapters={}, options={}, max_tokens=512)
    {'engine': 'fake', 'model': 'm'}
    """
    from perrec_eval.cache import adapter_fingerprint

    provenance: dict[str, Any] = {"engine": engine, "model": model}
    for name, path in adapters.items():
        provenance["adapter"] = name
        if (digest := adapter_fingerprint(path)) is not None:
            provenance["adapter_sha256"] = digest
    if options:  # as every record of engine options is written: secrets (an extra_body's api_key) hidden
        provenance["options"] = redact(dict(options))
    if budget is not None:
        provenance.update(max_items=budget.max_items, max_chars=budget.max_chars)
    if max_tokens != PROFILE_PARAMS.max_tokens:
        provenance["max_tokens"] = max_tokens
    return provenance


def file_writer(path: str | os.PathLike) -> dict[str, Any]:
    """The provenance every record of the profiles file `path` shares (its first record's).

    Raises:
        DataError: records of `path` were written by different writers (engines, models or settings).
    """
    path = Path(path)
    with path.open(encoding="utf-8") as f:
        first = next((line for line in f if line.strip()), "{}")
    try:
        record = fileio.loads(first)
        writer = {key: record[key] for key in PROVENANCE_KEYS if key in record}
    except (ValueError, TypeError) as err:
        raise DataError(f"{path}:1: not a profile record ({err}); {_OTHER_WRITER}") from err
    check_provenance(path, writer, fix="write each writer's profiles to a file of its own")
    return writer


def load_own_profiles(
    path: Path, writer: Mapping[str, Any], *, replace: bool
) -> tuple[dict[UserKey, str], dict[UserKey, list[str]]]:
    """(profiles, flags) of the profiles file a run writes for itself, when its records are `writer`'s.

    Args:
        path: the run's profiles file (missing: none yet).
        writer: the run's `writer_provenance`.
        replace: profiles of another writer are dropped (to be written anew) instead of refused.

    Raises:
        DataError: `path` holds another writer's profiles and `replace` is off.
    """
    if not path.is_file():
        return {}, {}
    try:
        check_provenance(
            path, writer, fix="pass --overwrite to write this run's own, or choose another --out"
        )
    except DataError:
        if not replace:
            raise
        logger.warning("%s holds another writer's profiles: writing them anew (--overwrite)", path)
        return {}, {}
    return load_profiles(path), load_profile_flags(path)


def check_provenance(
    path: str | os.PathLike, provenance: Mapping[str, Any], *, fix: str = _OTHER_WRITER
) -> None:
    """Refuse profiles in `path` written with other settings than `provenance` says.

    A profiles file holds one writer's profiles: mixing models or budgets in one file would relabel the old
    records with the new settings.

    Raises:
        DataError: a record of `path` differs from `provenance` in engine, model, adapter, options or budget;
            the message ends with `fix`.
    """
    path = Path(path)
    wanted = {key: provenance.get(key) for key in PROVENANCE_KEYS}
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            try:
                record = fileio.loads(line) if line.strip() else {}
                found = {key: record.get(key) for key in PROVENANCE_KEYS}
            except (ValueError, AttributeError) as err:
                raise DataError(f"{path}:{lineno}: not a profile record ({err}); {fix}") from err
            if record and found != wanted:
                differs = ", ".join(
                    f"{k}={found[k]!r} (now {wanted[k]!r})" for k in found if found[k] != wanted[k]
                )
                raise DataError(f"{path}:{lineno} was written with other settings: {differs}; {fix}")


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of a profiles file, recorded in run.json."""
    import hashlib

    with Path(path).open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
