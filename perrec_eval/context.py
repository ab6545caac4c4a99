"""Groups as the prompts see them: load a level, retrieve each user's history, attach profiles.

This is the runner's boundary with the dataset: rows become `records.Group` here (and only here), with the
untitled-item rule applied once (see `perrec_eval.records`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perrec_eval.errors import DataError
from perrec_eval.records import Group, UserKey, UserView
from perrec_eval.retrieval import Retrieved


def load_groups(
    data: str | os.PathLike,
    level: str,
    split: str = "test",
    max_groups: int | None = None,
    *,
    seed: int = 0,
) -> list[Group]:
    """The groups of one level of a built benchmark folder (or Hub id), in dataset order.

    Args:
        data: a folder written by `perrecbench build`, or a Hub dataset id.
        level: easy, medium, hard (or full).
        split: test or train.
        max_groups: keep a seeded sample of N groups, as even across domains as they allow
            (`sample_groups`); the same query items at every level.
        seed: the sample's seed.

    Raises:
        DataError: the folder does not exist, or the level or split cannot be loaded; the message names
            the build command.
    """
    import datasets

    check_data(data)
    try:
        ds = datasets.load_dataset(str(data), level, split=split)
    except (ValueError, FileNotFoundError) as err:
        raise DataError(
            f"cannot load level {level!r} split {split!r} from {data}: {err}. Build the benchmark with "
            "`perrecbench build --source RAW --out DIR` and pass that DIR as --data"
        ) from err
    groups = [Group.from_row(row) for row in ds.to_list()]  # one Arrow → Python conversion, not one per row
    return groups if max_groups is None else sample_groups(groups, max_groups, seed)


def check_data(data: str | os.PathLike) -> None:
    """Fail at once, naming the fix, when `data` looks like a local path but is not there.

    A Hub id is ``ORG/NAME``; anything else that does not exist (an absolute or ``./`` path, a path whose
    parent folder exists here, more than one ``/``), or any missing path while the Hub is offline, is a
    mistyped folder: without this check `datasets` would spend half a minute on Hub retries first.
    """
    path = Path(data)
    if path.exists():
        return
    text = str(data)
    hub_like = text.count("/") == 1 and not text.startswith((".", "/", "~")) and not path.parent.is_dir()
    if hub_like and os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("", "0", "false", "no"):
        return
    raise DataError(
        f"--data {text}: no such folder; build the benchmark with "
        f"`perrecbench build --source RAW --out {text}` (or pass an existing folder or Hub id ORG/NAME)"
    )


def sample_groups(groups: Sequence[Group], n: int, seed: int) -> list[Group]:
    """A seeded sample of `n` groups, spread over the domains as evenly as they allow, in input order.

    Each domain's groups are ranked by a hash of (seed, group_id), so the same query items are picked at
    every level (levels share group ids); the domains take turns until `n` are chosen.

    >>> from dataclasses import replace
    >>> base = Group("x", "A", "easy", None, 0, ())
    >>> groups = [replace(base, group_id=f"{d}:{i}", domain=d) for d in "AB" for i in range(5)] + [
    ...     replace(base, group_id="C:0", domain="C")]
    >>> sorted(g.domain for g in sample_groups(groups, 5, seed=0))
    ['A', 'A', 'B', 'B', 'C']
    """
    by_domain: dict[str, list[Group]] = {}
    for group in groups:
        by_domain.setdefault(group.domain, []).append(group)
    queues = {
        domain: sorted(members, key=lambda g: hashlib.sha256(f"{seed}:{g.group_id}".encode()).digest())
        for domain, members in sorted(by_domain.items())
    }
    chosen: set[str] = set()
    while len(chosen) < min(n, len(groups)):
        for queue in queues.values():
            if queue and len(chosen) < n:
                chosen.add(queue.pop(0).group_id)
    return [group for group in groups if group.group_id in chosen]


def dataset_fingerprint(data: str | os.PathLike) -> str:
    """sha256 of the build manifest (or of the data file names, which are content hashes).

    The interactions of ``build --with-interactions`` (for the CF baselines) leave the groups unchanged, so
    they are taken out first: the same build with and without them has one fingerprint, and the CF
    baselines' runs compare with LLM runs made on a build without them.
    """
    folder = Path(data)
    manifest = folder / "manifest.json"
    if manifest.is_file():
        text = manifest.read_bytes()
        content = json.loads(text)
        if "interactions" in content:
            content.pop("interactions")
            content["parameters"].pop("with_interactions", None)
            text = (json.dumps(content, indent=2, ensure_ascii=False) + "\n").encode()
        return hashlib.sha256(text).hexdigest()
    names = (
        sorted(str(p.relative_to(folder)) for p in folder.rglob("*.parquet"))
        if folder.is_dir()
        else [str(data)]
    )
    return hashlib.sha256("\n".join(names).encode()).hexdigest()


def retrieve(groups: Sequence[Group], k: int, *, progress: bool = True) -> dict[UserKey, list[Retrieved]]:
    """Top-k history of every user of every group (a user shared by several levels is retrieved once)."""
    from perrec_eval import retrieval

    return retrieval.retrieve_rows([group.to_json() for group in groups], k=k, progress=progress)


@dataclass(frozen=True, slots=True)
class GroupContext:
    """A group as the prompts see it: the query, each user's retrieved history and profile, and the order
    a listwise prompt shows the users in (`perrec_eval.presentation`; None: the dataset's order)."""

    group: Group
    level: str
    views: tuple[UserView, ...]
    listwise_order: tuple[int, ...] | None = None

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
    profile_failures: Mapping[UserKey, str] | None = None,
) -> tuple[UserView, ...]:
    """Per user, what a prompt shows: retrieved history best first, ratings summary, profile.

    With `profiles` None the prompts show none; a user without one gets `profile_error` (the reason from
    `profile_failures`), so the requests that need it fail as engine errors instead of being rendered.
    """
    views = []
    for user in group.users:
        key = (group.group_id, user.user_id)
        profile = None if profiles is None else profiles.get(key)
        error = None
        if profiles is not None and not profile:
            error = (profile_failures or {}).get(key, "no profile was written for this user")
        views.append(
            UserView(
                history=tuple(user.history[hit.index] for hit in retrieved[key]),
                most_common_rating=user.most_common_rating,
                avg_rating=user.avg_rating,
                profile=profile,
                profile_error=error,
            )
        )
    return tuple(views)


def contexts(
    groups: Sequence[Group],
    level: str,
    retrieved: Mapping[UserKey, Sequence[Retrieved]],
    profiles: Mapping[UserKey, str] | None,
    profile_failures: Mapping[UserKey, str] | None = None,
    *,
    listwise_orders: Mapping[str, tuple[int, ...]] | None = None,
) -> list[GroupContext]:
    """`GroupContext` of every group of one level; `listwise_orders` by group id (None: dataset order)."""
    return [
        GroupContext(
            group,
            level,
            user_views(group, retrieved, profiles, profile_failures),
            None if listwise_orders is None else listwise_orders[group.group_id],
        )
        for group in groups
    ]


def check_profiles(users: Iterable[UserKey], profiles: Mapping[UserKey, str], source: str, data: str) -> None:
    """Every (group_id, user_id) of `users` has a profile in `profiles` (from `source`), or a DataError."""
    missing = sorted(key for key in users if key not in profiles)
    if missing:
        raise DataError(
            f"{source} has no profile for {len(missing)} (group, user) pairs, e.g. {missing[0]}: "
            f"write them with `perrecbench profiles --data {data} --out {source}`"
        )


@dataclass(frozen=True, slots=True)
class TestLabels:
    """The test split's labels: every (user_id, query parent_asin) whose rating a test group asks for.

    Held-out groups shown to a model (few-shot demonstrations, `sft data` examples) must show none of them,
    whatever split rule the benchmark was built with (``--split-rule none`` keeps test ratings in train
    histories): a group that shows one, as one of its users' query review or in a history, is left out.

    >>> from perrec_eval.records import HistoryItem, Query, User
    >>> item = HistoryItem("q1", "Dune", None, 5.0, 1)
    >>> user = User("u", 4.0, 2, 3.0, 3.0, 1.0, (item,))
    >>> group = Group("g", "Books", "easy", Query("q2", "Emma"), 0, (user,))
    >>> TestLabels(frozenset({("u", "q1")})).shows(group), TestLabels(frozenset({("v", "q1")})).shows(group)
    (True, False)
    """

    __test__ = False  # not a pytest test class, despite its name

    pairs: frozenset[tuple[str, str]]
    group_ids: frozenset[str] = frozenset()

    @classmethod
    def of(cls, test_groups: Iterable[Group]) -> TestLabels:
        """The labels of `test_groups` (load the ``full`` level: every test user)."""
        test_groups = list(test_groups)
        return cls(
            frozenset((user.user_id, g.query.parent_asin) for g in test_groups for user in g.users),
            frozenset(g.group_id for g in test_groups),
        )

    def shows(self, group: Group) -> bool:
        """Whether `group` shows a test label: one of its users' query review or a history item."""
        for user in group.users:
            if (user.user_id, group.query.parent_asin) in self.pairs:
                return True
            if any((user.user_id, item.parent_asin) in self.pairs for item in user.history):
                return True
        return False

    def without_leaks(self, groups: Sequence[Group]) -> list[Group]:
        """`groups` minus the test groups themselves and the groups that show a test label, in order."""
        return [g for g in groups if g.group_id not in self.group_ids and not self.shows(g)]
