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

import json
import logging
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perrec_eval import fileio, prompts
from perrec_eval.engines.base import Engine
from perrec_eval.errors import DataError
from perrec_eval.records import Group, HistoryItem, UserKey
from perrec_eval.types import ChatRequest, GenParams

logger = logging.getLogger(__name__)

PROFILE_PARAMS = GenParams(temperature=0.1, top_p=1.0, max_tokens=512, n=1, seed=0)
DEFAULT_MAX_ITEMS = 40
DEFAULT_MAX_CHARS = 8000


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
                items = [item.to_json() for item in budget.select(user.history)]
                requests[key] = ChatRequest(tuple(prompts.render_profile(items)))
    return requests


def generate_profiles(
    engine: Engine,
    groups: Iterable[Group],
    *,
    budget: HistoryBudget = HistoryBudget(),
    params: GenParams = PROFILE_PARAMS,
    known: Mapping[UserKey, str] | None = None,
    users: Collection[UserKey] | None = None,
) -> tuple[dict[UserKey, str], dict[UserKey, str]]:
    """Write the missing profiles with `engine` in one call.

    Args:
        engine: the engine that writes them (wrap it in a `CachedEngine` to resume).
        groups: the groups whose users need a profile.
        budget: how much of each history a profile request shows.
        params: sampling parameters.
        known: profiles already written (not asked again).
        users: only these (group_id, user_id) keys (default: every user of `groups`).

    Returns:
        (profiles, failures): profile text per key, and the failure reason for keys without one.
    """
    known = dict(known or {})
    requests = {
        key: req for key, req in profile_requests(groups, budget, users=users).items() if key not in known
    }
    if not requests:
        return known, {}
    logger.info("writing %d profiles with %s:%s", len(requests), engine.name, engine.model)
    completions = engine.generate(list(requests.values()), params)
    failures: dict[UserKey, str] = {}
    for key, completion in zip(requests, completions, strict=True):
        text = completion.texts[0].strip() if completion.ok and completion.texts else ""
        if text:
            known[key] = text
        else:
            failures[key] = completion.error or "empty profile"
    return known, failures


def save_profiles(
    path: str | os.PathLike, profiles: Mapping[UserKey, str], provenance: Mapping[str, Any]
) -> None:
    """Write profiles as JSONL atomically (temp file + rename), sorted by key for stable output."""
    fileio.write_jsonl(
        path,
        (
            {"group_id": group_id, "user_id": user_id, "profile": text, **provenance}
            for (group_id, user_id), text in sorted(profiles.items())
        ),
    )


def load_profiles(path: str | os.PathLike) -> dict[UserKey, str]:
    """Read a profiles JSONL file written by `perrecbench profiles`."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"no profiles file at {path}: write one with `perrecbench profiles --out {path}`")
    profiles: dict[UserKey, str] = {}
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            try:
                record = json.loads(line)
                profiles[(record["group_id"], record["user_id"])] = record["profile"]
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise DataError(
                    f"{path}:{lineno}: not a profile record ({err}); "
                    "each line needs group_id, user_id, profile"
                ) from err
    return profiles


PROVENANCE_KEYS = ("engine", "model", "max_items", "max_chars")


def check_provenance(path: str | os.PathLike, provenance: Mapping[str, Any]) -> None:
    """Refuse to add profiles to `path` when its records were written with other settings.

    A profiles file holds one writer's profiles: mixing models or budgets in one file would relabel the old
    records with the new settings.

    Raises:
        DataError: a record of `path` differs from `provenance` in engine, model or budget.
    """
    path = Path(path)
    wanted = {key: provenance.get(key) for key in PROVENANCE_KEYS}
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            try:
                record = json.loads(line) if line.strip() else {}
                found = {key: record.get(key) for key in PROVENANCE_KEYS}
            except (json.JSONDecodeError, AttributeError) as err:
                raise DataError(
                    f"{path}:{lineno}: not a profile record ({err}); write these profiles to another --out, "
                    "or delete the file to replace it"
                ) from err
            if record and found != wanted:
                differs = ", ".join(
                    f"{k}={found[k]!r} (now {wanted[k]!r})" for k in found if found[k] != wanted[k]
                )
                raise DataError(
                    f"{path}:{lineno} was written with other settings: {differs}; "
                    "write these profiles to another --out, or delete the file to replace it"
                )


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of a profiles file, recorded in run.json."""
    import hashlib

    with Path(path).open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
