"""One evaluation run: groups → prompts → engine → parsed answers → rankings → PTC → run folder.

This module only orchestrates; each stage lives in its own module:
`context` (load groups, retrieve, user views), `prompts` (render), `rankers` (which requests, and the
ranking from the answers), `parsing` (read answers), `scoring` (PTC per cell), `rundir` (write and re-score
the run folder). `evaluate` runs a model, `evaluate_baselines` the no-LLM baselines.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from perrec_eval import context, parsing, prompts
from perrec_eval.cache import CachedEngine, request_key
from perrec_eval.config import EvalConfig
from perrec_eval.context import GroupContext
from perrec_eval.engines.base import Engine
from perrec_eval.errors import ConfigError
from perrec_eval.rankers import PairwiseStrategy, Prediction, Slot, demonstration, make_ranker
from perrec_eval.records import Group, PredictionRecord, SampleRecord, UserKey
from perrec_eval.rundir import versions, write_run
from perrec_eval.scoring import prediction_records, score_cells
from perrec_eval.types import ChatRequest, GenParams, Level, Method


def render_slot(
    method: Method,
    ctx: GroupContext,
    slot: Slot,
    variant: str,
    demonstrations: Sequence[prompts.Demonstration] = (),
) -> list[dict[str, str]]:
    """The chat messages of one ranker slot: the users it names, in its order."""
    users = [ctx.views[i].prompt_input() for i in slot.users]
    return prompts.render(method, ctx.query_input(), users, variant=variant, demonstrations=demonstrations)


def run_method(
    method: Method,
    groups: Sequence[GroupContext],
    engine: Engine,
    params: GenParams,
    *,
    variant: str = "default",
    demonstrations: Sequence[prompts.Demonstration] = (),
    pairwise_strategy: PairwiseStrategy = "allpairs",
    aggregate: str = "mean",
) -> tuple[dict[str, Prediction], list[SampleRecord]]:
    """Rank every group with one method; all pending requests of a step go to the engine in one call.

    Returns:
        (predictions by group_id, one sample record per request)
    """
    rankers = {
        g.group_id: make_ranker(method, g.group.avg_ratings, pairwise_strategy=pairwise_strategy)
        for g in groups
    }
    by_id = {g.group_id: g for g in groups}
    samples: list[SampleRecord] = []
    level = groups[0].level if groups else ""
    step = 0
    with tqdm(desc=f"{level} {method}", unit="req", disable=not groups) as bar:
        while True:
            batch = [
                (gid, slot) for gid, ranker in rankers.items() if not ranker.done for slot in ranker.pending()
            ]
            if not batch:
                break
            requests = [
                ChatRequest(tuple(render_slot(method, by_id[gid], slot, variant, demonstrations)))
                for gid, slot in batch
            ]
            bar.total = (bar.total or 0) + len(requests)
            bar.set_postfix(step=step + 1)
            completions = engine.generate(requests, params)
            answers: dict[str, dict[Slot, Any]] = {}
            for (gid, slot), request, completion in zip(batch, requests, completions, strict=True):
                parsed = [parsing.parse(method, text, n_users=len(slot.users)) for text in completion.texts]
                good = [p.value for p in parsed if p.ok]
                value = parsing.majority(method, good, how=aggregate) if good else None
                reasons = [p.reason for p in parsed if not p.ok]
                reason = completion.error or (reasons[0] if value is None and reasons else None)
                answers.setdefault(gid, {})[slot] = value
                samples.append(
                    SampleRecord(
                        group_id=gid,
                        level=by_id[gid].level,
                        method=method,
                        step=step,
                        slot=slot.to_json(),
                        key=request_key(engine, request, params),
                        texts=list(completion.texts),
                        parsed=[p.value if p.ok else None for p in parsed],
                        value=value,
                        ok=value is not None,
                        reason=reason if value is None else None,
                        num_failed_samples=len(parsed) - len(good) if completion.ok else params.n,
                        prompt_tokens=completion.prompt_tokens,
                        completion_tokens=completion.completion_tokens,
                    )
                )
            for gid, ranker in rankers.items():
                if not ranker.done and gid in answers:
                    ranker.feed(answers[gid])
            bar.update(len(requests))
            step += 1
    return {gid: ranker.prediction() for gid, ranker in rankers.items()}, samples


def demonstrations(
    config: EvalConfig, level: Level, method: Method, train: Sequence[GroupContext]
) -> list[prompts.Demonstration]:
    """Few-shot examples: `shots` held-out groups of the same level (seeded), each with its true answer."""
    if config.shots == 0:
        return []
    if len(train) < config.shots:
        raise ConfigError(
            f"--shots {config.shots} needs that many held-out groups; {level}/train has {len(train)}"
        )
    demos = []
    for ctx in random.Random(f"{config.seed}:{level}:{method}").sample(list(train), config.shots):
        slot, answer = demonstration(method, ctx.group.relative_ratings, ctx.group.ratings)
        users = [ctx.views[i].prompt_input() for i in slot.users]
        demos.append(prompts.Demonstration(ctx.query_input(), users, answer))
    return demos


def _profiles(
    config: EvalConfig, engine: CachedEngine, groups: Sequence[Group], out: Path
) -> tuple[dict[UserKey, str] | None, int]:
    """The run's profiles (loaded, or written with the run's engine) and how many failed."""
    from perrec_eval.profiles import generate_profiles, load_profiles, save_profiles

    if config.no_profile:
        return None, 0
    if config.profiles:
        profiles = load_profiles(config.profiles)
        context.check_profiles(groups, profiles, config.profiles, config.data)
        return profiles, 0
    profiles, failures = generate_profiles(engine, groups)
    save_profiles(out / "profiles.jsonl", profiles, {"engine": engine.name, "model": engine.model})
    return profiles, len(failures)


def evaluate(config: EvalConfig, engine: Engine | None = None) -> dict[str, Any]:
    """Run the benchmark for one model and write the run folder; returns scores.json content.

    `engine` overrides the one named in the config (tests pass a FakeEngine). Requests go through the
    run's cache, so calling this again with the same config resumes without repeating any request.
    """
    from perrec_eval import retrieval

    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    engine = engine if engine is not None else config.load_engine()
    cached = CachedEngine(engine, out / "cache.jsonl")

    # Levels share query items and users: load every level once and retrieve once for all of them.
    test = {lv: context.load_groups(config.data, lv, config.split, config.max_groups) for lv in config.levels}
    # Few-shot demonstrations come from the held-out split: loaded and retrieved once, like the test groups.
    train = (
        {lv: context.load_groups(config.data, lv, "train") for lv in config.levels} if config.shots else {}
    )
    every_group = [g for by_level in (test, train) for groups in by_level.values() for g in groups]
    retrieved = context.retrieve(every_group, config.k)
    profiles, profile_failures = _profiles(
        config,
        cached,
        [g for groups in test.values() for g in groups] if config.profiles else every_group,
        out,
    )

    records: list[PredictionRecord] = []
    samples: list[SampleRecord] = []
    engine_calls: dict[str, int] = {}
    for level in config.levels:
        groups = context.contexts(test[level], level, retrieved, profiles)
        train_groups = context.contexts(train.get(level, []), level, retrieved, profiles)
        for method in config.methods:
            predictions, method_samples = run_method(
                method,
                groups,
                cached,
                config.params(method),
                variant=config.variant,
                demonstrations=demonstrations(config, level, method, train_groups),
                pairwise_strategy=config.pairwise_strategy,
                aggregate=config.sc_aggregate,
            )
            engine_calls[f"{level}/{method}"] = len({sample.step for sample in method_samples})
            records += prediction_records(level, method, groups, predictions)
            samples += method_samples

    scores = score_cells(
        records, samples, variant=config.metric_variant, invalid=config.invalid_policy, seed=config.seed
    )
    run_info = {
        "config": asdict(config),
        "prompt_variant": config.variant,
        "metric": {"variant": config.metric_variant, "invalid": config.invalid_policy},
        "engine": engine.info(),
        "versions": versions("perrecbench", "datasets", "bm25s", "transformers", "torch", "openai", "vllm"),
        "templates": prompts.template_info(),
        "retrieval": retrieval.RETRIEVAL_INFO,
        "dataset_fingerprint": context.dataset_fingerprint(config.data),
        "engine_calls": engine_calls,
        "cache": {"hits": cached.hits, "misses": cached.misses},
        "profile_failures": profile_failures,
    }
    write_run(out, config.model, samples=samples, records=records, scores=scores, run_info=run_info)
    return scores


def evaluate_baselines(config: EvalConfig, names: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    """Score no-LLM baselines (pointwise: a predicted rating per user), each into its own run folder.

    With several names, each goes to `out/<name>/`; groups and retrieval are computed once per level.
    """
    from perrec_eval import baselines, retrieval
    from perrec_eval.report import write_report

    unknown = [name for name in names if name not in baselines.BASELINES]
    if unknown:
        raise ConfigError(
            f"unknown baseline {unknown[0]!r}: choose one of {', '.join(baselines.BASELINES)} or all"
        )
    records: dict[str, list[PredictionRecord]] = {name: [] for name in names}
    for level in config.levels:
        groups = context.load_groups(config.data, level, config.split, config.max_groups)
        needs_retrieval = any(name in baselines.USES_RETRIEVAL for name in names)
        retrieved = context.retrieve(groups, config.k) if needs_retrieval else {}
        contexts = [GroupContext(group, level, ()) for group in groups]
        for name in names:
            predictions = {
                group.group_id: _baseline_prediction(name, group, retrieved, config.seed) for group in groups
            }
            records[name] += prediction_records(level, "pointwise", contexts, predictions)

    systems = []
    for name in names:
        out = Path(config.out) / name if len(names) > 1 else Path(config.out)
        out.mkdir(parents=True, exist_ok=True)
        scores = score_cells(
            records[name], variant=config.metric_variant, invalid=config.invalid_policy, seed=config.seed
        )
        run_info = {
            "config": asdict(replace(config, model=name, out=str(out))),
            "engine": {"name": "baseline", "model": name},
            "metric": {"variant": config.metric_variant, "invalid": config.invalid_policy},
            "versions": versions("perrecbench", "datasets", "bm25s"),
            "retrieval": retrieval.RETRIEVAL_INFO,
            "dataset_fingerprint": context.dataset_fingerprint(config.data),
        }
        write_run(out, name, samples=[], records=records[name], scores=scores, run_info=run_info)
        systems.append((name, scores))
    if len(names) > 1:
        write_report(Path(config.out), systems)
    return systems


def _baseline_prediction(name: str, group: Group, retrieved: Mapping[UserKey, Any], seed: int) -> Prediction:
    from perrec_eval import baselines

    row = group.to_json()
    per_user = {user.user_id: retrieved.get((group.group_id, user.user_id), []) for user in group.users}
    ratings = baselines.predict(name, row, per_user, seed=seed)
    return Prediction("scores", baselines.ranking_scores(row, ratings), list(ratings))
