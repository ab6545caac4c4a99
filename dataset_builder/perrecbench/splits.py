"""The test / train split: a seeded test sample stratified by domain, then a rule that keeps test labels out
of train.

* **Test.** ``test_groups`` are spread over the domains as evenly as their groups allow
  (:func:`domain_quotas`: equal shares, a domain with too few groups gives its whole set and the rest is
  shared among the others; a remainder goes to domains in a seeded order), and each domain's test groups
  are a seeded sample of its groups (:func:`split_groups`), so a domain's draw depends only on the seed,
  the domain and its own groups.
* **Train** is every other group, minus those the rule drops (:func:`conflicts`):

  - ``leak-free`` (default): a train group is dropped when one of its users is a test user of the same
    domain and their train review is **not strictly before** all their test reviews. What is left shows
    about a test user only reviews strictly before their earliest test review — all of which their test
    histories show anyway: no test (user, item) review appears in train, as a query or in a history, and no
    train average covers a test rating. With ``avg_scope="all"`` (paper mode) a train user's average covers
    their whole review list, test reviews included, so every train group with a same-domain test user is
    dropped.
  - ``user-disjoint``: every train group with a test user (any domain) is dropped.
  - ``none``: nothing is dropped (the paper's split; the leaks are counted in ``stats.json``).

The rule never touches the test split: it is drawn first and its composition does not depend on the rule.

The ``large`` preset splits each level on its own (:func:`split_groups` once per level, over that level's
groups): its test sample, and the rule, look only at the users of that level's groups, so no test review of
a level appears in the same level's train split, and a train group is dropped only for a conflict with a
user it shows. ``train_fraction`` replaces the test size by "every group but a seeded share of each domain's".
"""

from __future__ import annotations

import logging
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from dataset_builder.perrecbench.config import AvgScope, BuildConfig, SplitRule
from dataset_builder.perrecbench.stats import funnel_message

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GroupMembers:
    """What the split needs of a group: its id, domain, and each user with the time of their query review."""

    group_id: str
    domain: str
    users: tuple[tuple[str, int], ...]  # (user_id, query timestamp in ms)


@dataclass(slots=True)
class Split:
    """The group ids of each split, and the train groups the rule dropped (each list sorted)."""

    test: list[str]
    train: list[str]
    dropped: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[str]]:
        """``{"test": [...], "train": [...]}`` (``train`` left out when empty: an empty split cannot load)."""
        return {"test": self.test, "train": self.train} if self.train else {"test": self.test}


def domain_quotas(available: Mapping[str, int], total: int, seed: int) -> dict[str, int]:
    """How many test groups each domain gives: as even as the groups allow, ``total`` in all (or every group).

    Args:
        available: groups per domain.
        total: the wanted number of test groups.
        seed: orders the domains that receive a remainder.

    Returns:
        The quota of each domain (same keys as ``available``).

    >>> domain_quotas({"A": 100, "B": 100, "C": 100, "D": 100}, 200, 0)
    {'A': 50, 'B': 50, 'C': 50, 'D': 50}
    >>> domain_quotas({"A": 10, "B": 100, "C": 100}, 100, 0)
    {'A': 10, 'B': 45, 'C': 45}
    >>> sorted(domain_quotas({"A": 9, "B": 9}, 5, 0).values()), domain_quotas({"A": 2, "B": 1}, 9, 0)
    ([2, 3], {'A': 2, 'B': 1})
    """
    quota = dict.fromkeys(available, 0)
    left = min(total, sum(available.values()))
    order = sorted(available)
    random.Random(f"{seed}:test-quotas").shuffle(order)
    while left:
        open_ = [d for d in order if quota[d] < available[d]]
        share = max(1, left // len(open_))
        for domain in open_:
            give = min(share, available[domain] - quota[domain], left)
            quota[domain] += give
            left -= give
            if not left:
                break
    return quota


def conflicts(
    group: GroupMembers, first_test: Mapping[tuple[str, str], int], rule: SplitRule, avg_scope: AvgScope
) -> bool:
    """Whether ``rule`` drops this train group, given each test user's earliest test review.

    Args:
        group: a non-test group.
        first_test: ``(domain, user_id)`` of every test user → the timestamp of their earliest test review.
        rule: ``leak-free``, ``user-disjoint`` or ``none`` (see the module docstring).
        avg_scope: ``history`` or ``all`` (whole-list averages cover every test review of the user).

    >>> test = {("Books", "u"): 100}
    >>> g = lambda t: GroupMembers("Books:i", "Books", (("u", t), ("v", 5)))
    >>> conflicts(g(99), test, "leak-free", "history"), conflicts(g(100), test, "leak-free", "history")
    (False, True)
    >>> conflicts(g(99), test, "leak-free", "all"), conflicts(g(99), test, "user-disjoint", "history")
    (True, True)
    >>> conflicts(g(500), test, "none", "history")
    False
    """
    if rule == "none":
        return False
    if rule == "user-disjoint":
        test_users = {user for _, user in first_test}
        return any(user in test_users for user, _ in group.users)
    for user, timestamp in group.users:
        first = first_test.get((group.domain, user))
        if first is not None and (avg_scope == "all" or timestamp >= first):
            return True
    return False


def split_groups(
    groups: Sequence[GroupMembers],
    test_groups: int,
    seed: int,
    rule: SplitRule,
    avg_scope: AvgScope,
    *,
    train_fraction: float | None = None,
    salt: str = "",
) -> Split:
    """The seeded, domain-stratified test sample, and train = the other groups that ``rule`` keeps.

    Args:
        groups: every group of the build (of one level, for the large preset).
        test_groups: the wanted test size (all groups when there are fewer).
        seed: the random seed.
        rule: the train rule (see the module docstring).
        avg_scope: the build's average scope.
        train_fraction: instead of ``test_groups``, each domain keeps ``round(train_fraction * n)`` of its
            ``n`` groups out of test (for train) and puts the others in test.
        salt: tells the random streams of several splits of one build apart (the large preset's levels).

    Returns:
        The split (ids sorted).

    >>> gs = [GroupMembers(f"{d}:{i}", d, ((f"{d}{i}", 0),)) for d in "AB" for i in range(3)]
    >>> split = split_groups(gs, 2, 0, "leak-free", "history")
    >>> sorted(g[0] for g in split.test), len(split.train), split.dropped
    (['A', 'B'], 4, [])
    >>> len(split_groups(gs, 2, 0, "leak-free", "history", train_fraction=0.34).test)
    4
    """
    by_domain: dict[str, list[str]] = defaultdict(list)
    for group in groups:
        by_domain[group.domain].append(group.group_id)
    sizes = {d: len(ids) for d, ids in by_domain.items()}
    if train_fraction is None:
        quotas = domain_quotas(sizes, test_groups, seed)
    else:
        quotas = {d: n - round(train_fraction * n) for d, n in sizes.items()}
    test: set[str] = set()
    for domain, ids in by_domain.items():
        stream = f"{seed}:test:{domain}" + (f":{salt}" if salt else "")
        test.update(random.Random(stream).sample(sorted(ids), quotas[domain]))
    first_test: dict[tuple[str, str], int] = {}
    for group in groups:
        if group.group_id in test:
            for user, timestamp in group.users:
                key = (group.domain, user)
                first_test[key] = min(timestamp, first_test.get(key, timestamp))
    train, dropped = [], []
    for group in groups:
        if group.group_id not in test:
            (dropped if conflicts(group, first_test, rule, avg_scope) else train).append(group.group_id)
    return Split(sorted(test), sorted(train), sorted(dropped))


def split_levels(index: pa.Table, cfg: BuildConfig, funnel: dict[str, dict[str, int]]) -> dict[str, Split]:
    """The split of each group set of the index (:data:`dataset_builder.perrecbench.selection.INDEX_SCHEMA`):
    ``{"full": split}`` for the paper preset (levels share its groups), or one split per level for the
    large preset."""
    if cfg.preset == "paper":
        sets = {"full": index}
    else:
        sets = {level: index.filter(pc.equal(index["level"], level)) for level in cfg.level_sizes()}
    out = {}
    for name, rows in sets.items():
        if cfg.train_fraction is None and rows.num_rows < cfg.test_groups:
            logger.warning(
                "only %d %sgroups (< --test-groups %d): all go to test, no train split. Funnel:\n%s",
                rows.num_rows,
                "" if name == "full" else f"{name} ",
                cfg.test_groups,
                funnel_message(funnel),
            )
        columns = rows.select(["group_id", "domain", "user_ids", "timestamps"]).to_pydict()
        members = [
            GroupMembers(gid, domain, tuple(zip(users, times, strict=True)))
            for gid, domain, users, times in zip(*columns.values(), strict=True)
        ]
        out[name] = split_groups(
            members,
            cfg.test_groups,
            cfg.seed,
            cfg.split_rule,
            cfg.avg_scope,
            train_fraction=cfg.train_fraction,
            salt="" if name == "full" else name,
        )
    return out


def merge_splits(splits: dict[str, Split]) -> Split:
    """The union of the levels' splits (group ids are unique across levels)."""
    if len(splits) == 1:
        return next(iter(splits.values()))
    parts = list(splits.values())
    return Split(
        sorted(g for s in parts for g in s.test),
        sorted(g for s in parts for g in s.train),
        sorted(g for s in parts for g in s.dropped),
    )
