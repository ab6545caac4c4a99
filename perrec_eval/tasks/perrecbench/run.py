"""One evaluation run: groups → prompts → engine → parsed answers → rankings → PTC → run folder.

This module only orchestrates; each stage lives in its own module:
`context` (load groups, retrieve, user views), `prompts` (render), `rankers` (which requests, and the
ranking from the answers), `parsing` (read answers), `scoring` (PTC per cell), `rundir` (write and re-score
the run folder). `evaluate` runs a model, `evaluate_baselines` the no-LLM baselines.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from perrec_eval.cache import CachedEngine, request_key
from perrec_eval.config import EvalConfig, default_label
from perrec_eval.engines.base import Engine
from perrec_eval.errors import ConfigError, DataError
from perrec_eval.leaderboard.runs import load_runs
from perrec_eval.lock import folder_lock
from perrec_eval.results import Metric, RunInfo, Scores
from perrec_eval.rundir import adapter_fingerprint, claim, run_cost, versions, write_run
from perrec_eval.runner import drive
from perrec_eval.secrets import redact
from perrec_eval.tasks.perrecbench import context, presentation, prompts, protocols, report
from perrec_eval.tasks.perrecbench.context import GroupContext
from perrec_eval.tasks.perrecbench.rankers import (
    PairwiseStrategy,
    Prediction,
    Slot,
)
from perrec_eval.tasks.perrecbench.records import Group, PredictionRecord, SampleRecord, UserKey
from perrec_eval.tasks.perrecbench.scoring import prediction_records, score_cells
from perrec_eval.tasks.perrecbench.vocabulary import Level, Method
from perrec_eval.types import ChatRequest, Completion, GenParams

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
            return f"profile request failed: {ctx.views[i].profile_error}"
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
    good = [p.value for p in parsed if p.ok]
    value = protocols.majority(method, good, how=aggregate) if good else None
    reasons = [p.reason for p in parsed if not p.ok]
    reason = completion.error or (reasons[0] if value is None and reasons else None)
    return SampleRecord(
        group_id=ctx.group_id,
        level=ctx.level,
        method=method,
        step=step,
        slot=slot.to_json(),
        key=request_key(engine, request, params) if isinstance(request, ChatRequest) else None,
        texts=list(completion.texts),
        parsed=[p.value if p.ok else None for p in parsed],
        value=value,
        ok=value is not None,
        reason=reason if value is None else None,
        num_failed_samples=len(parsed) - len(good) if completion.ok else params.n,
        prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens,
        error=completion.error,
        finish_reasons=completion.extra.get("finish_reasons"),
    )


def pick_demonstration_groups(
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


def _demonstration_pool(config: EvalConfig) -> tuple[dict[str, list[Group]], dict[str, int]]:
    """The held-out groups of each level that may be shown as demonstrations, and how many were left out.

    A group that would show a test label (`context.TestLabels`: a test user's rating of a test query, as a
    query or in a history; possible on builds with ``--split-rule none``) is never a demonstration, as in
    `sft data`.
    """
    if not config.shots:
        return {}, {}
    labels = context.TestLabels.of(context.load_groups(config.data, "full", "test"))
    train, left_out = {}, {}
    for level in config.levels:
        groups = context.load_groups(config.data, level, "train")
        train[level] = labels.without_leaks(groups)
        left_out[level] = len(groups) - len(train[level])
    if any(left_out.values()):
        logger.warning("few-shot: left out held-out groups that show a test label: %s", left_out)
    return train, left_out


def demonstrations(config: EvalConfig, method: Method, picked: Sequence[GroupContext]) -> Demonstrations:
    """The few-shot examples made from the `picked` held-out groups, each with its true answer."""
    pool = []
    for ctx in picked:
        slot, answer = protocols.get(method).demonstration(ctx.group.relative_ratings, ctx.group.ratings)
        failed = [ctx.views[i].profile_error for i in slot.users if ctx.views[i].profile_error]
        if failed:
            return Demonstrations(
                config.shots, (), f"profile request failed for a demonstration: {failed[0]}"
            )
        users = [ctx.views[i] for i in slot.users]
        pool.append((ctx.group_id, prompts.Demonstration(ctx.group.query, users, answer)))
    return Demonstrations(config.shots, tuple(pool))


def _demonstration_users(method: Method, groups: Sequence[Group]) -> set[UserKey]:
    """The (group, user) keys whose profiles the demonstrations of `method` show."""
    keys = set()
    for group in groups:
        slot, _ = protocols.get(method).demonstration(group.relative_ratings, group.ratings)
        keys.update((group.group_id, group.users[i].user_id) for i in slot.users)
    return keys


def _profiles(
    config: EvalConfig, engine: CachedEngine, groups: Sequence[Group], users: set[UserKey], out: Path
) -> tuple[dict[UserKey, str] | None, dict[UserKey, str], dict[str, Any] | None]:
    """The run's profiles for `users` (loaded, or written with the run's engine), failures and provenance.

    A ``--profiles`` file must hold one writer's profiles (recorded in run.json); the run folder's own
    profiles.jsonl must be the run engine's (model, adapter weights, options, budget): another writer's is
    refused, or replaced with ``--overwrite``.
    """
    from perrec_eval.engines.base import answer_options
    from perrec_eval.tasks.perrecbench.profiles import (
        check_profiles,
        file_sha256,
        file_writer,
        flag_counts,
        generate_profiles,
        load_own_profiles,
        load_profile_flags,
        load_profiles,
        save_profiles,
        writer_provenance,
    )

    if config.no_profile:
        return None, {}, None
    params = config.profile_params()
    if config.profiles:
        known = load_profiles(config.profiles)
        writer = file_writer(config.profiles)
        # --shots shows train groups: their users need profiles too
        splits = tuple(dict.fromkeys(["train", config.split] if config.shots else [config.split]))
        fix = f"perrecbench profiles --data {config.data} --splits {','.join(splits)} --out {config.profiles}"
        check_profiles(users, known, config.profiles, f"write them with `{fix}`")
        path, source = Path(config.profiles), "file"
        flagged = load_profile_flags(path)
    else:
        path, source = out / "profiles.jsonl", "generated"
        writer = writer_provenance(
            engine.name,
            engine.model,
            adapters=config.adapters(),
            options=answer_options(engine),
            max_tokens=params.max_tokens,
        )
        known, flagged = load_own_profiles(path, writer, replace=config.overwrite)
    profiles, failures = generate_profiles(
        engine,
        groups,
        params=params,
        known=known,
        users=users,
        degenerate=config.degenerate_profiles,
        flagged=flagged,
    )
    if source == "generated":
        save_profiles(path, profiles, writer, flagged)
    info = {
        "source": source,
        "writer": writer,
        "file": path.name,
        "sha256": file_sha256(path),
        "failures": len(failures),
        "max_tokens": params.max_tokens,
        "quality": flag_counts({key: flags for key, flags in flagged.items() if key in users}),
        "degenerate_policy": config.degenerate_profiles,
    }
    return profiles, failures, info


def run_record(config: EvalConfig) -> dict[str, Any]:
    """The config as run.json records it (secrets redacted)."""
    return redact(asdict(config))


def evaluate(config: EvalConfig, engine: Engine | None = None) -> Scores:
    """Run the benchmark for one model into `config.out`, holding the folder's lock; see `_evaluate`.

    Raises:
        DataError: another process works in `config.out`, or it holds another config's finished run and
            `config.overwrite` is off.
    """
    out = Path(config.out)
    with folder_lock(out):
        claim(out, run_record(config), overwrite=config.overwrite)
        return _evaluate(config, engine)


def _evaluate(config: EvalConfig, engine: Engine | None = None) -> Scores:
    """Run the benchmark for one model and write the run folder; returns its scores.

    `engine` overrides the one named in the config (tests pass a FakeEngine). Requests go through the
    run's cache, so calling this again with the same config resumes without repeating any request; requests
    that failed (engine errors) are not cached and are asked again. A run with engine errors is written
    with ``"complete": false`` and its scores are provisional.
    """
    from perrec_eval.tasks.perrecbench import retrieval

    started = time.perf_counter()
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    if engine is None:
        engine = config.load_engine()
        if config.adapter:
            ((_, engine),) = config.adapter_engines(engine)
    cached = CachedEngine(engine, out / "cache.jsonl")

    # Levels share query items and users: load every level once and retrieve once for all of them.
    test = {
        lv: context.load_groups(config.data, lv, config.split, config.max_groups, seed=config.seed)
        for lv in config.levels
    }
    # Few-shot demonstrations come from the held-out split; only the groups shown need retrieval and profiles.
    train, left_out = _demonstration_pool(config)
    picked = {
        (lv, m): pick_demonstration_groups(config, lv, m, train[lv], left_out[lv])
        for lv in train
        for m in config.methods
    }
    test_groups = [g for groups in test.values() for g in groups]
    demo_groups = list({(g.group_id, g.level): g for groups in picked.values() for g in groups}.values())
    retrieved = retrieval.retrieve_groups([*test_groups, *demo_groups], config.k)
    users = {(g.group_id, u.user_id) for g in test_groups for u in g.users}
    for (_, method), groups in picked.items():
        users |= _demonstration_users(method, groups)
    profiles, failures, profiles_info = _profiles(config, cached, [*test_groups, *demo_groups], users, out)

    records: list[PredictionRecord] = []
    samples: list[SampleRecord] = []
    engine_calls: dict[str, int] = {}
    for level in config.levels:
        orders = presentation.listwise_orders(test[level], config.presentation, seed=config.seed, level=level)
        groups = context.contexts(test[level], level, retrieved, profiles, failures, listwise_orders=orders)
        for method in config.methods:
            demo_contexts = context.contexts(
                picked.get((level, method), []), level, retrieved, profiles, failures
            )
            predictions, method_samples = run_method(
                method,
                groups,
                cached,
                config.params(method, level),
                variant=config.variant,
                demonstrations=demonstrations(config, method, demo_contexts),
                pairwise_strategy=config.pairwise_strategy,
                aggregate=config.sc_aggregate,
            )
            engine_calls[f"{level}/{method}"] = len({sample.step for sample in method_samples})
            records += prediction_records(level, method, test[level], predictions)
            samples += method_samples

    scores = score_cells(
        records, samples, variant=config.metric_variant, invalid=config.invalid_policy, seed=config.seed
    )
    label = config.label or default_label(engine.model)  # the engine's model: a test may pass its own engine
    run_info = RunInfo(
        config=run_record(config),
        complete=scores.complete,
        engine_errors={"requests": scores.num_engine_errors, "first": scores.first_engine_error},
        prompt_variant=config.variant,
        presentation=config.presentation,
        metric=Metric(config.metric_variant, config.invalid_policy),
        engine=redact(engine.info()),
        versions=versions("perrecbench", "datasets", "bm25s", "transformers", "torch", "openai", "vllm"),
        templates=prompts.template_info(),
        retrieval=retrieval.RETRIEVAL_INFO,
        dataset_fingerprint=context.dataset_fingerprint(config.data),
        groups={level: [g.group_id for g in groups] for level, groups in test.items()},
        demonstration_groups={f"{lv}/{m}": [g.group_id for g in gs] for (lv, m), gs in picked.items()},
        demonstration_groups_left_out=left_out,
        engine_calls=engine_calls,
        cache={"hits": cached.hits, "misses": cached.misses},
        cost=run_cost(samples, time.perf_counter() - started, cached.hits),
        adapter_sha256={name: adapter_fingerprint(path) for name, path in config.adapters().items()},
        profiles=profiles_info,
        profile_failures=len(failures),
        label=label,
        generation={
            "max_new_tokens": {method: config.token_budgets()[method] for method in config.methods},
            "profile_max_new_tokens": None if config.no_profile else config.token_budgets()["profile"],
            "structured_outputs": config.structured_outputs,
            "answer_formats": {
                f"{level}/{method}": config.params(method, level).answer_format
                for level in config.levels
                for method in config.methods
            }
            if config.structured_outputs
            else None,
        },
    )
    write_run(
        out,
        samples=samples,
        records=records,
        scores=scores,
        run_info=run_info,
        report=partial(report.render_run, out, run_info, scores, records),
    )
    return scores


def evaluate_adapters(config: EvalConfig, engine: Engine | None = None) -> list[tuple[str, Scores]]:
    """Evaluate several LoRA adapters on one loaded base model, one run folder each under ``out/<name>/``."""
    subs = {
        name: replace(config, adapter=(f"{name}={path}",), out=str(Path(config.out) / name))
        for name, path in config.adapters().items()
    }
    with folder_lock(config.out):
        for sub in subs.values():  # before the model is loaded
            claim(Path(sub.out), run_record(sub), overwrite=config.overwrite)
        base = engine if engine is not None else config.load_engine()
        systems = [
            (name, evaluate(subs[name], engine=adapted)) for name, adapted in config.adapter_engines(base)
        ]
        report.write_report(config.out, load_runs([Path(sub.out) for sub in subs.values()]))
    return systems


def evaluate_baselines(config: EvalConfig, names: Sequence[str]) -> list[tuple[str, Scores]]:
    """Score no-LLM baselines (pointwise: a predicted rating per user), each into its own run folder.

    With several names, each goes to `out/<name>/`; groups and retrieval are computed once per level. The
    collaborative-filtering baselines (`cf`: mf, item-knn) fit on the build's interactions
    under the past-only rule, tuned on the train split; their `run.json` records how (`cf`).
    """
    from perrec_eval.tasks.perrecbench import baselines, cf

    known = (*baselines.BASELINES, *cf.CF_BASELINES)
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ConfigError(f"unknown baseline {unknown[0]!r}: choose one of {', '.join(known)} or all")
    if any(name in cf.CF_BASELINES for name in names) and not cf.has_interactions(config.data):
        raise DataError(cf.missing_interactions(config.data))
    with contextlib.ExitStack() as locks:
        locks.enter_context(folder_lock(config.out))
        outs = {name: Path(config.out) / name if len(names) > 1 else Path(config.out) for name in names}
        for name in names:
            locks.enter_context(folder_lock(outs[name]))  # each run folder too: `score --write` takes it
            sub = replace(config, model=name, out=str(outs[name]))
            claim(outs[name], run_record(sub), overwrite=config.overwrite)
        return _evaluate_baselines(config, names)


def _evaluate_baselines(config: EvalConfig, names: Sequence[str]) -> list[tuple[str, Scores]]:
    from perrec_eval.tasks.perrecbench import baselines, cf, retrieval

    cf_names = [name for name in names if name in cf.CF_BASELINES]
    records: dict[str, list[PredictionRecord]] = {name: [] for name in names}
    groups_by_level: dict[str, list[Group]] = {}
    for level in config.levels:
        groups = context.load_groups(config.data, level, config.split, config.max_groups, seed=config.seed)
        groups_by_level[level] = groups
        uses = any(name in baselines.USES_RETRIEVAL for name in names)
        retrieved = retrieval.retrieve_groups(groups, config.k) if uses else {}
        for name in names:
            if name in cf.CF_BASELINES:
                continue
            predictions = {
                group.group_id: _baseline_prediction(name, group, retrieved, config.seed) for group in groups
            }
            records[name] += prediction_records(level, "pointwise", groups, predictions)
    cf_info = _cf_records(config, cf_names, groups_by_level, records) if cf_names else {}

    systems = []
    for name in names:
        out = Path(config.out) / name if len(names) > 1 else Path(config.out)
        out.mkdir(parents=True, exist_ok=True)
        scores = score_cells(
            records[name], variant=config.metric_variant, invalid=config.invalid_policy, seed=config.seed
        )
        run_info = RunInfo(
            config=run_record(replace(config, model=name, out=str(out))),
            engine={"name": "baseline", "model": name},
            metric=Metric(config.metric_variant, config.invalid_policy),
            versions=versions("perrecbench", "datasets", "bm25s", "numpy", "scipy"),
            retrieval=retrieval.RETRIEVAL_INFO,
            dataset_fingerprint=context.dataset_fingerprint(config.data),
            groups={level: [g.group_id for g in groups] for level, groups in groups_by_level.items()},
            cf=cf_info.get(name),
        )
        write_run(
            out,
            samples=None,
            records=records[name],
            scores=scores,
            run_info=run_info,
            report=partial(report.render_run, out, run_info, scores, records[name]),
        )
        systems.append((name, scores))
    if len(names) > 1:
        report.write_report(config.out, load_runs([Path(config.out) / name for name in names]))
    return systems


def _cf_records(
    config: EvalConfig,
    names: Sequence[str],
    groups_by_level: Mapping[str, list[Group]],
    records: dict[str, list[PredictionRecord]],
) -> dict[str, dict[str, Any]]:
    """Fit and predict the CF baselines `names` (tuned on the train split's `full` groups); add their
    prediction records and return their `run.json` records."""
    from perrec_eval.tasks.perrecbench import cf

    interactions = cf.load_interactions(config.data)
    try:
        train = context.load_groups(config.data, "full", "train")
    except DataError:  # a build too small for a train split: documented, recorded in run.json
        train = []
    info = {}
    for name in names:
        outcomes, info[name] = cf.run(name, interactions, groups_by_level, train)
        for level, groups in groups_by_level.items():
            predictions = {
                group.group_id: Prediction("scores", cf.relative(group, o.ratings), list(o.ratings))
                for group, o in zip(groups, outcomes[level], strict=True)
            }
            records[name] += prediction_records(level, "pointwise", groups, predictions)
    return info


def _baseline_prediction(name: str, group: Group, retrieved: Mapping[UserKey, Any], seed: int) -> Prediction:
    from perrec_eval.tasks.perrecbench import baselines

    per_user = {user.user_id: retrieved.get((group.group_id, user.user_id), []) for user in group.users}
    ratings = baselines.predict(name, group, per_user, seed=seed)
    return Prediction("scores", baselines.ranking_scores(group, ratings), list(ratings))
