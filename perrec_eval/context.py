"""Groups as the prompts see them: load a level, retrieve each user's history, attach profiles.

This is the runner's boundary with the dataset: rows become `records.Group` here (and only here), with the
untitled-item rule applied once (see `perrec_eval.records`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perrec_eval.errors import DataError
from perrec_eval.records import Group, UserKey, UserView
from perrec_eval.retrieval import Retrieved


def load_groups(
    data: str | os.PathLike, level: str, split: str = "test", max_groups: int | None = None
) -> list[Group]:
    """The groups of one level of a built benchmark folder (or Hub id), in dataset order.

    Args:
        data: a folder written by `perrecbench build`, or a Hub dataset id.
        level: easy, medium, hard (or full).
        split: test or train.
        max_groups: keep only the first N groups.

    Raises:
        DataError: the level or split cannot be loaded; the message names the build command.
    """
    import datasets

    try:
        ds = datasets.load_dataset(str(data), level, split=split)
    except (ValueError, FileNotFoundError) as err:
        raise DataError(
            f"cannot load level {level!r} split {split!r} from {data}: {err}. Build the benchmark with "
            "`perrecbench build --source RAW --out DIR` and pass that DIR as --data"
        ) from err
    if max_groups is not None:
        ds = ds.select(range(min(max_groups, len(ds))))
    return [Group.from_row(row) for row in ds.to_list()]  # one Arrow → Python conversion, not one per row


def dataset_fingerprint(data: str | os.PathLike) -> str:
    """sha256 of the build manifest (or of the data file names, which are content hashes)."""
    folder = Path(data)
    manifest = folder / "manifest.json"
    if manifest.is_file():
        return hashlib.sha256(manifest.read_bytes()).hexdigest()
    names = (
        sorted(str(p.relative_to(folder)) for p in folder.rglob("*.parquet"))
        if folder.is_dir()
        else [str(data)]
    )
    return hashlib.sha256("\n".join(names).encode()).hexdigest()


def retrieve(groups: Sequence[Group], k: int) -> dict[UserKey, list[Retrieved]]:
    """Top-k history of every user of every group (a user shared by several levels is retrieved once)."""
    from perrec_eval import retrieval

    return retrieval.retrieve_rows([group.to_json() for group in groups], k=k)


@dataclass(frozen=True, slots=True)
class GroupContext:
    """A group as the prompts see it: the query and each user's retrieved history and profile."""

    group: Group
    level: str
    views: tuple[UserView, ...]

    @property
    def group_id(self) -> str:
        return self.group.group_id

    def query_input(self) -> dict[str, Any]:
        """The query mapping `perrec_eval.prompts.render` reads."""
        return {"title": self.group.query.title, "author": self.group.query.author}


def user_views(
    group: Group,
    retrieved: Mapping[UserKey, Sequence[Retrieved]],
    profiles: Mapping[UserKey, str] | None,
) -> tuple[UserView, ...]:
    """Per user, what a prompt shows: retrieved history best first, ratings summary, profile."""
    views = []
    for user in group.users:
        key = (group.group_id, user.user_id)
        views.append(
            UserView(
                history=tuple(user.history[hit.index] for hit in retrieved[key]),
                most_common_rating=user.most_common_rating,
                avg_rating=user.avg_rating,
                profile=None if profiles is None else profiles.get(key, ""),
            )
        )
    return tuple(views)


def contexts(
    groups: Sequence[Group],
    level: str,
    retrieved: Mapping[UserKey, Sequence[Retrieved]],
    profiles: Mapping[UserKey, str] | None,
) -> list[GroupContext]:
    """`GroupContext` of every group of one level."""
    return [GroupContext(group, level, user_views(group, retrieved, profiles)) for group in groups]


def check_profiles(groups: Sequence[Group], profiles: Mapping[UserKey, str], source: str, data: str) -> None:
    """Every (group, user) of `groups` has a profile in `profiles` (read from `source`), or a DataError."""
    missing = [
        (group.group_id, user.user_id)
        for group in groups
        for user in group.users
        if (group.group_id, user.user_id) not in profiles
    ]
    if missing:
        raise DataError(
            f"{source} has no profile for {len(missing)} (group, user) pairs, e.g. {missing[0]}: "
            f"write them with `perrecbench profiles --data {data} --out {source}`"
        )
