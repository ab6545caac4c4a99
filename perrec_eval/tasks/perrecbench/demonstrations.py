"""Few-shot demonstrations: held-out (train) groups shown with their true answers before a group's request.

Which groups a (level, method) shows (`pick_groups`: a seeded draw, never a group that would show a test
label), whose profiles they need (`users`) and the demonstrations themselves (`make`), each request's
share of them chosen by `Demonstrations.for_group` (a group never sees itself).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass

from perrec_eval.errors import ConfigError
from perrec_eval.tasks.perrecbench import context, profiles, prompts, protocols
from perrec_eval.tasks.perrecbench.config import EvalConfig
from perrec_eval.tasks.perrecbench.context import GroupContext
from perrec_eval.tasks.perrecbench.records import Group, UserKey
from perrec_eval.tasks.perrecbench.vocabulary import Level, Method

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Demonstrations:
    """The few-shot examples of one (level, method): held-out groups with their true answers.

    `pool` holds (source group id, demonstration) candidates in their seeded order; a group never sees a
    demonstration made from itself (possible only when the train split is evaluated), so the pool holds one
    candidate more than `shots` then. `error` is set when a demonstration cannot be shown (its users'
    profiles failed): every request that would show it fails as an engine error instead.
    """

    shots: int = 0
    pool: tuple[tuple[str, prompts.Demonstration], ...] = ()
    error: str | None = None

    def for_group(self, group_id: str) -> list[prompts.Demonstration]:
        return [demo for source, demo in self.pool if source != group_id][: self.shots]


NO_DEMONSTRATIONS = Demonstrations()


def pick_groups(
    config: EvalConfig, level: Level, method: Method, train: Sequence[Group], left_out: int = 0
) -> list[Group]:
    """The held-out groups whose demonstrations a (level, method) shows, in their seeded order.

    One extra candidate when the train split itself is evaluated, so no group is shown itself. `left_out`
    counts the groups already removed because they show a test label (for the error message).
    """
    if config.shots == 0:
        return []
    needed = config.shots + (config.split == "train")
    if len(train) < needed:
        why = f" ({left_out} more left out: they would show a test label)" if left_out else ""
        raise ConfigError(
            f"--shots {config.shots} needs {needed} held-out groups; {level}/train has {len(train)}{why}"
        )
    return random.Random(f"{config.seed}:{level}:{method}").sample(list(train), needed)


def pool(config: EvalConfig) -> tuple[dict[str, list[Group]], dict[str, int]]:
    """The held-out groups of each level that may be shown as demonstrations, and how many were left out.

    A group that would show a test label (`context.TestLabels`: a test user's rating of a test query, as a
    query or in a history; possible on builds with ``--split-rule none``) is never a demonstration, as in
    `sft data`.
    """
    if not config.shots:
        return {}, {}
    # The labels are the test users' query reviews: their histories are not read.
    labels = context.TestLabels.of(context.load_groups(config.data, "full", "test", history=False))
    train, left_out = {}, {}
    for level in config.levels:
        groups = context.load_groups(config.data, level, "train")
        train[level] = labels.without_leaks(groups)
        left_out[level] = len(groups) - len(train[level])
    if any(left_out.values()):
        logger.warning("few-shot: left out held-out groups that show a test label: %s", left_out)
    return train, left_out


def make(config: EvalConfig, method: Method, picked: Sequence[GroupContext]) -> Demonstrations:
    """The few-shot examples made from the `picked` held-out groups, each with its true answer."""
    shown = []
    for ctx in picked:
        slot, answer = protocols.get(method).demonstration(ctx.group.relative_ratings, ctx.group.ratings)
        failed = [ctx.views[i].profile_error for i in slot.users if ctx.views[i].profile_error]
        if failed:
            return Demonstrations(
                config.shots, (), f"{profiles.DEMONSTRATION_FAILED}{failed[0]}"
            )
        users = [ctx.views[i] for i in slot.users]
        shown.append((ctx.group_id, prompts.Demonstration(ctx.group.query, users, answer)))
    return Demonstrations(config.shots, tuple(shown))


def users(method: Method, groups: Sequence[Group]) -> set[UserKey]:
    """The (group, user) keys whose profiles the demonstrations of `method` show."""
    keys = set()
    for group in groups:
        slot, _ = protocols.get(method).demonstration(group.relative_ratings, group.ratings)
        keys.update((group.group_id, group.users[i].user_id) for i in slot.users)
    return keys
