"""The systems a PerRecBench run evaluates: a model, whose runners ask an engine, or a no-LLM baseline,
which answers a level's groups directly.

Both answer one (level, method) cell at a time (`answer`: a prediction per group, and the sample records
of the requests sent, None for a baseline) and say what run.json records of them (`run_fields`), so one
orchestration (`run.py`) runs, scores and writes both, into one run.json layout.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from typing import Any, Protocol

from perrec_eval.cache import CachedEngine
from perrec_eval.config import default_label
from perrec_eval.engines.base import Engine
from perrec_eval.errors import DataError
from perrec_eval.rundir import adapter_fingerprint, run_cost, versions
from perrec_eval.runner import answer_fields, drive
from perrec_eval.secrets import redact
from perrec_eval.tasks.perrecbench import context, demonstrations, presentation, profiles, prompts, protocols
from perrec_eval.tasks.perrecbench.config import EvalConfig
from perrec_eval.tasks.perrecbench.context import GroupContext
from perrec_eval.tasks.perrecbench.demonstrations import NO_DEMONSTRATIONS, Demonstrations
from perrec_eval.tasks.perrecbench.rankers import PairwiseStrategy, Prediction, Slot
from perrec_eval.tasks.perrecbench.records import Group, SampleRecord, UserKey
from perrec_eval.tasks.perrecbench.results import Scores
from perrec_eval.tasks.perrecbench.vocabulary import Level, Method
from perrec_eval.types import ChatRequest, Completion, GenParams


class System(Protocol):
    """What a run evaluates: a prediction per group of a cell, and its own part of run.json."""

    def answer(
        self, level: Level, method: Method, groups: Sequence[Group]
    ) -> tuple[dict[str, Prediction], list[SampleRecord] | None]: ...

    def run_fields(self, scores: Scores) -> dict[str, Any]: ...


def render_slot(
    method: Method,
    ctx: GroupContext,
    slot: Slot,
    variant: str,
    demonstrations: Sequence[prompts.Demonstration] = (),
) -> list[dict[str, str]]:
    """The chat messages of one ranker slot: the users it names, in its order."""
    users = [ctx.views[i] for i in slot.users]
    return prompts.render(method, ctx.group.query, users, variant=variant, demonstrations=demonstrations)


def _blocked(ctx: GroupContext, slot: Slot, demos: Demonstrations) -> str | None:
    """Why the request of `slot` cannot be rendered (a profile it needs failed), or None."""
    for i in slot.users:
        if ctx.views[i].profile_error is not None:
            return f"{profiles.FAILED}{ctx.views[i].profile_error}"
    return demos.error


def run_method(
    method: Method,
    groups: Sequence[GroupContext],
    engine: Engine,
    params: GenParams,
    *,
    variant: str = "default",
    demonstrations: Demonstrations = NO_DEMONSTRATIONS,
    pairwise_strategy: PairwiseStrategy = "allpairs",
    aggregate: str = "mean",
) -> tuple[dict[str, Prediction], list[SampleRecord]]:
    """Rank every group with one method; all pending requests of a step go to the engine in one call.

    A request whose prompt needs a failed profile is not sent: it is recorded as an engine error, like a
    request the engine failed, and its slot gets no answer. Listwise shows each group's users in its
    context's `listwise_order`.

    Returns:
        (predictions by group_id, one sample record per request)
    """
    protocol = protocols.get(method)
    rankers = {
        g.group_id: protocol.ranker(
            g.group.avg_ratings,
            pairwise_strategy=pairwise_strategy,
            listwise_order=g.listwise_order,
        )
        for g in groups
    }
    by_id = {g.group_id: g for g in groups}

    def ask(gid: str, slot: Slot) -> ChatRequest | str:
        reason = _blocked(by_id[gid], slot, demonstrations)
        demos = demonstrations.for_group(gid)
        return reason or ChatRequest(tuple(render_slot(method, by_id[gid], slot, variant, demos)))

    def read(gid, slot, step, request, completion) -> tuple[Any, SampleRecord]:
        sample = _sample(method, by_id[gid], slot, step, engine, request, completion, params, aggregate)
        return sample.value, sample

    level = groups[0].level if groups else ""
    samples = drive(rankers, ask, read, engine, params, desc=f"{level} {method}")
    return {gid: ranker.prediction() for gid, ranker in rankers.items()}, samples


def _sample(
    method: Method,
    ctx: GroupContext,
    slot: Slot,
    step: int,
    engine: Engine,
    request: ChatRequest | str,
    completion: Completion,
    params: GenParams,
    aggregate: str,
) -> SampleRecord:
    """Parse one completion into the request's sample record."""
    protocol = protocols.get(method)
    parsed = [protocol.parse(text, n_users=len(slot.users)) for text in completion.texts]
    combine = partial(protocols.majority, method, how=aggregate)
    return SampleRecord(
        group_id=ctx.group_id,
        level=ctx.level,
        method=method,
        step=step,
        slot=slot.to_json(),
        **answer_fields(parsed, combine, engine, request, completion, params),
    )


class Model:
    """A model behind a cached engine: each cell's groups (with their retrieved history, profiles and
    demonstrations) ranked by the method's lockstep runners."""

    def __init__(
        self,
        config: EvalConfig,
        engine: Engine,
        cached: CachedEngine,
        *,
        retrieved: Mapping[UserKey, Any],
        profiles: tuple[dict[UserKey, str] | None, dict[UserKey, str], dict[str, Any] | None],
        picked: Mapping[tuple[str, str], list[Group]],
        left_out: Mapping[str, int],
        started: float,
    ) -> None:
        self.config, self.engine, self.cached = config, engine, cached
        self.retrieved, self.picked, self.left_out, self.started = retrieved, picked, left_out, started
        self.profiles, self.failures, self.profiles_info = profiles
        self.contexts: dict[str, list[GroupContext]] = {}
        self.samples: list[SampleRecord] = []
        self.engine_calls: dict[str, int] = {}

    def answer(
        self, level: Level, method: Method, groups: Sequence[Group]
    ) -> tuple[dict[str, Prediction], list[SampleRecord]]:
        config = self.config
        if level not in self.contexts:
            orders = presentation.listwise_orders(groups, config.presentation, seed=config.seed, level=level)
            self.contexts[level] = context.contexts(
                groups, level, self.retrieved, self.profiles, self.failures, listwise_orders=orders
            )
        demo_contexts = context.contexts(
            self.picked.get((level, method), []), level, self.retrieved, self.profiles, self.failures
        )
        predictions, samples = run_method(
            method,
            self.contexts[level],
            self.cached,
            config.params(method, level),
            variant=config.variant,
            demonstrations=demonstrations.make(config, method, demo_contexts),
            pairwise_strategy=config.pairwise_strategy,
            aggregate=config.sc_aggregate,
        )
        self.engine_calls[f"{level}/{method}"] = len({sample.step for sample in samples})
        self.samples += samples
        return predictions, samples

    def run_fields(self, scores: Scores) -> dict[str, Any]:
        from perrec_eval.tasks.perrecbench import retrieval

        config, engine, cached = self.config, self.engine, self.cached
        budgets = config.token_budgets()
        return {
            "complete": scores.complete,
            "engine_errors": {"requests": scores.num_engine_errors, "first": scores.first_engine_error},
            "prompt_variant": config.variant,
            "presentation": config.presentation,
            "engine": redact(engine.info()),
            "versions": versions(
                "perrecbench", "datasets", "bm25s", "transformers", "torch", "openai", "vllm"
            ),
            "templates": prompts.template_info(),
            "retrieval": retrieval.RETRIEVAL_INFO,
            "demonstration_groups": {
                f"{lv}/{m}": [g.group_id for g in gs] for (lv, m), gs in self.picked.items()
            },
            "demonstration_groups_left_out": self.left_out,
            "engine_calls": self.engine_calls,
            "cache": {"hits": cached.hits, "misses": cached.misses},
            "cost": run_cost(self.samples, time.perf_counter() - self.started, cached.hits),
            "adapter_sha256": {name: adapter_fingerprint(path) for name, path in config.adapters().items()},
            "profiles": self.profiles_info,
            "profile_failures": len(self.failures),
            # the engine's model: a test may pass its own engine
            "label": config.label or default_label(engine.model, engine.name),
            "generation": {
                "max_new_tokens": {method: budgets[method] for method in config.methods},
                "profile_max_new_tokens": None if config.no_profile else budgets["profile"],
                "structured_outputs": config.structured_outputs,
                "answer_formats": {
                    f"{level}/{method}": config.params(method, level).answer_format
                    for level in config.levels
                    for method in config.methods
                }
                if config.structured_outputs
                else None,
            },
        }


class Baselines:
    """What the no-LLM baselines of one run share, each computed once, on first use: the predictions of those
    that read the users' histories (history-affinity, through retrieval) and the CF fits.

    The test groups are held without their histories (`context.load_groups(history=False)`). A baseline that
    needs them reads each level again, `context.BATCH_GROUPS` groups at a time (`context.stream_groups`),
    keeps what it predicts and drops the batch: memory follows a batch, not the build.
    """

    def __init__(self, config: EvalConfig, test: Mapping[str, list[Group]]) -> None:
        self.config, self.test = config, test
        self._streamed: dict[str, dict[tuple[str, str], list[float]]] = {}
        self._cf: dict[str, tuple[dict[str, list[Any]], dict[str, Any]]] = {}

    def _ids(self, level: str) -> list[str] | None:
        """The evaluated groups' ids of a level (None: all of its groups are evaluated)."""
        return None if self.config.max_groups is None else [g.group_id for g in self.test[level]]

    def streamed(self, name: str) -> dict[tuple[str, str], list[float]]:
        """(level, group_id) → the ratings baseline `name` predicts from each group's users' histories and
        their retrieved items."""
        from perrec_eval.tasks.perrecbench import baselines

        if name not in self._streamed:
            config = self.config
            predicted: dict[tuple[str, str], list[float]] = {}
            sampled = config.max_groups is not None
            for level, batch, hits in context.retrieve_streamed(
                config.data, config.split, self.test, config.k, sampled=sampled
            ):
                for group in batch:
                    per_user = {u.user_id: hits[(group.group_id, u.user_id)] for u in group.users}
                    ratings = baselines.predict(name, group, per_user, seed=config.seed)
                    predicted[(level, group.group_id)] = ratings
            self._streamed[name] = predicted
        return self._streamed[name]

    def cf(self, name: str) -> tuple[dict[str, list[Any]], dict[str, Any]]:
        """The CF baseline `name` fitted under the past-only rule and tuned on the train split's `full`
        groups: its outcomes per level and its run.json record."""
        from perrec_eval.tasks.perrecbench import cf

        if name not in self._cf:
            try:
                train = context.load_groups(self.config.data, "full", "train", history=False)
            except DataError:  # a build too small for a train split: documented, recorded in run.json
                train = []

            def histories(domain: str) -> Iterator[context.Histories]:  # cf.run's order: train, then levels
                data = self.config.data
                if train:
                    yield from context.stream_histories(data, "full", "train", domain=domain)
                for level in self.test:
                    yield from context.stream_histories(
                        data, level, self.config.split, ids=self._ids(level), domain=domain
                    )

            interactions = cf.load_interactions(self.config.data)
            self._cf[name] = cf.run(name, interactions, self.test, train, histories=histories)
        return self._cf[name]


class Baseline:
    """A no-LLM baseline: a predicted rating per user, scored pointwise like a model's answers."""

    def __init__(self, name: str, shared: Baselines) -> None:
        self.name, self.shared = name, shared

    def answer(
        self, level: Level, method: Method, groups: Sequence[Group]
    ) -> tuple[dict[str, Prediction], None]:
        from perrec_eval.tasks.perrecbench import baselines, cf

        if self.name in cf.CF_BASELINES:
            outcomes, _ = self.shared.cf(self.name)
            return {
                group.group_id: Prediction("scores", cf.relative(group, o.ratings), list(o.ratings))
                for group, o in zip(groups, outcomes[level], strict=True)
            }, None
        streamed = self.shared.streamed(self.name) if self.name in baselines.USES_RETRIEVAL else None
        seed = self.shared.config.seed
        predictions = {}
        for group in groups:
            if streamed is not None:
                ratings = streamed[(level, group.group_id)]
            else:  # needs no history: the group as held
                no_history = {user.user_id: [] for user in group.users}
                ratings = baselines.predict(self.name, group, no_history, seed=seed)
            predictions[group.group_id] = Prediction(
                "scores", baselines.ranking_scores(group, ratings), list(ratings)
            )
        return predictions, None

    def run_fields(self, scores: Scores) -> dict[str, Any]:
        from perrec_eval.tasks.perrecbench import cf, retrieval

        return {
            "engine": {"name": "baseline", "model": self.name},
            "versions": versions("perrecbench", "datasets", "bm25s", "numpy", "scipy"),
            "retrieval": retrieval.RETRIEVAL_INFO,
            "cf": self.shared.cf(self.name)[1] if self.name in cf.CF_BASELINES else None,
        }
