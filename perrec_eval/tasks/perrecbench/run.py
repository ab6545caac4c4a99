"""One PerRecBench run: groups → a system's answers → rankings → PTC → run folder.

This module only orchestrates; each stage lives in its own module: `context` (load groups, retrieve, user
views), `systems` (what answers a cell: a model through its engine and the lockstep rankers, or a no-LLM
baseline), `demonstrations` (few-shot examples), `profiles`, `scoring` (PTC per cell), `rundir` (write the
run folder), `report` (its report.md). `evaluate` runs a model, `evaluate_baselines` the baselines, both
through `_run`: one loop over the cells, one scoring, one run.json layout, one writer.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from perrec_eval.cache import CachedEngine
from perrec_eval.config import BASELINE_ENGINE
from perrec_eval.engines.base import Engine
from perrec_eval.errors import ConfigError, DataError
from perrec_eval.lock import folder_lock
from perrec_eval.results import RunInfo
from perrec_eval.rundir import check_out, claim, local_inputs
from perrec_eval.secrets import redact
from perrec_eval.tasks.perrecbench import context, demonstrations, report
from perrec_eval.tasks.perrecbench.config import EvalConfig
from perrec_eval.tasks.perrecbench.records import Group, PredictionRecord, SampleRecord, UserKey
from perrec_eval.tasks.perrecbench.results import Metric, Scores
from perrec_eval.tasks.perrecbench.scoring import prediction_records, score_cells
from perrec_eval.tasks.perrecbench.systems import Baseline, Baselines, Model, System

logger = logging.getLogger(__name__)


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
        check_profiles(users, known, config.profiles, _profiles_fix(config, writer, splits))
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
        DataError: as `evaluate_run`.
    """
    return Scores.from_family(evaluate_run(config, engine).scores)


def evaluate_run(config: EvalConfig, engine: Engine | None = None) -> Any:
    """`evaluate`, returning the run written as the shared reports load one (`family.FamilyRun`).

    Raises:
        DataError: another process works in `config.out`, it holds another config's finished run and
            `config.overwrite` is off, or it is not a folder a run may be written to (`rundir.check_out`).
    """
    out = Path(config.out)
    check_out(config.out, local_inputs(config))
    with folder_lock(out):
        claim(out, run_record(config), overwrite=config.overwrite)
        return _evaluate(config, engine)


def _evaluate(config: EvalConfig, engine: Engine | None = None) -> Any:
    """Run the benchmark for one model and write the run folder; returns the run written.

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
    if config.no_profile:  # only retrieval reads the test histories: each user keeps its retrieved items
        test, retrieved = _retrieved_only(config)
    else:
        test, retrieved = _test_groups(config), {}
    # Few-shot demonstrations come from the held-out split; only the groups shown need retrieval and profiles.
    train, left_out = demonstrations.pool(config)
    picked = {
        (lv, m): demonstrations.pick_groups(config, lv, m, train[lv], left_out[lv])
        for lv in train
        for m in config.methods
    }
    test_groups = [g for groups in test.values() for g in groups]
    demo_groups = list({(g.group_id, g.level): g for groups in picked.values() for g in groups}.values())
    todo = demo_groups if config.no_profile else [*test_groups, *demo_groups]
    retrieved = {**retrieved, **retrieval.retrieve_groups(todo, config.k)}
    users = {(g.group_id, u.user_id) for g in test_groups for u in g.users}
    for (_, method), groups in picked.items():
        users |= demonstrations.users(method, groups)
    profiles = _profiles(config, cached, [*test_groups, *demo_groups], users, out)
    model = Model(
        config,
        engine,
        cached,
        retrieved=retrieved,
        profiles=profiles,
        picked=picked,
        left_out=left_out,
        started=started,
    )
    return _run(config, model, test)


def _retrieved_only(config: EvalConfig) -> tuple[dict[str, list[Group]], dict[UserKey, list[Any]]]:
    """The evaluated groups of each level with each user's history cut to its retrieved items (best first)
    and their retrieval (indices into the cut history): the levels are read a batch at a time, so no
    whole history is held."""
    from perrec_eval.tasks.perrecbench.retrieval import Retrieved

    light = _test_groups(config, history=False)
    test: dict[str, list[Group]] = {level: [] for level in light}
    retrieved: dict[UserKey, list[Any]] = {}
    sampled = config.max_groups is not None
    streamed = context.retrieve_streamed(config.data, config.split, light, config.k, sampled=sampled)
    for level, batch, hits in streamed:
        for group in batch:
            users = []
            for user in group.users:
                found = hits[(group.group_id, user.user_id)]
                users.append(replace(user, history=tuple(user.history[hit.index] for hit in found)))
                kept = [Retrieved(i, hit.score) for i, hit in enumerate(found)]
                retrieved[(group.group_id, user.user_id)] = kept
            test[level].append(replace(group, users=tuple(users)))
    return test, retrieved


def _test_groups(config: EvalConfig, *, history: bool = True) -> dict[str, list[Group]]:
    """The evaluated groups of each level (a seeded sample of --max-groups of each); without `history`,
    their users' histories are not read (`context.load_groups`)."""
    return {
        lv: context.load_groups(
            config.data, lv, config.split, config.max_groups, seed=config.seed, history=history
        )
        for lv in config.levels
    }


def _run(config: EvalConfig, system: System, test: Mapping[str, list[Group]]) -> Any:
    """Every cell of `config` answered by `system`, scored and written to `config.out`: the one path of
    models and baselines. Returns the run as the shared reports load it (`family.FamilyRun`), without
    reading its files again; its record is the redacted one run.json holds, so report.md and the printed
    table show no secret of a label or model name either."""
    out = Path(config.out)
    records: list[PredictionRecord] = []
    samples: list[SampleRecord] | None = None
    for level in config.levels:
        for method in config.methods:
            predictions, cell_samples = system.answer(level, method, test[level])
            records += prediction_records(level, method, test[level], predictions)
            if cell_samples is not None:
                samples = [*(samples or []), *cell_samples]
    scores = score_cells(
        records, samples or (), variant=config.metric_variant, invalid=config.invalid_policy, seed=config.seed
    )
    run_info = RunInfo(
        config=run_record(config),
        metric=Metric(config.metric_variant, config.invalid_policy),
        dataset_fingerprint=context.dataset_fingerprint(config.data),
        groups={level: [g.group_id for g in groups] for level, groups in test.items()},
        **system.run_fields(scores),
    )
    info = RunInfo.from_json(json.loads(json.dumps(redact(run_info.to_json()))), out / "run.json")
    report.write_scored(out, info, scores, records, samples)
    return report.family_run(out, info, scores, records)


def evaluate_any(config: EvalConfig, engine: Engine | None = None) -> Any:
    """A run in Python (`Task.evaluate`, what a suite runs): the model's (`evaluate_run`, with `engine` when
    given), or with ``--engine baseline`` the baselines' (`baseline_runs`)."""
    if config.engine == BASELINE_ENGINE:
        return baseline_runs(config, baseline_names(config))
    return evaluate_run(config, engine)


def baseline_names(config: EvalConfig) -> tuple[str, ...]:
    """`--model all`: every baseline; the CF ones only when the benchmark has interactions (else said why)."""
    from perrec_eval.tasks.perrecbench import cf
    from perrec_eval.tasks.perrecbench.baselines import BASELINES

    if config.model != "all":
        return (config.model,)
    if cf.has_interactions(config.data):
        return (*BASELINES, *cf.CF_BASELINES)
    reason = cf.missing_interactions(config.data)
    print(f"perrecbench evaluate: skipping {', '.join(cf.CF_BASELINES)}: {reason}", file=sys.stderr)
    return BASELINES


def evaluate_adapters(config: EvalConfig, engine: Engine | None = None) -> list[tuple[str, Any]]:
    """Evaluate several LoRA adapters on one loaded base model, one run folder each under ``out/<name>/``."""
    subs = {
        name: replace(config, adapter=(f"{name}={path}",), out=str(Path(config.out) / name))
        for name, path in config.adapters().items()
    }
    check_out(config.out, local_inputs(config), runs=True)
    with folder_lock(config.out):
        for sub in subs.values():  # before the model is loaded
            claim(Path(sub.out), run_record(sub), overwrite=config.overwrite)
        base = engine if engine is not None else config.load_engine()
        systems = [
            (name, evaluate_run(subs[name], engine=adapted)) for name, adapted in config.adapter_engines(base)
        ]
        report.write_report(config.out, [written for _, written in systems])
    return systems


def evaluate_baselines(config: EvalConfig, names: Sequence[str]) -> list[tuple[str, Scores]]:
    """Score no-LLM baselines (pointwise: a predicted rating per user), each into its own run folder; see
    `baseline_runs`."""
    return [(name, Scores.from_family(written.scores)) for name, written in baseline_runs(config, names)]


def baseline_runs(config: EvalConfig, names: Sequence[str]) -> list[tuple[str, Any]]:
    """Score no-LLM baselines (pointwise: a predicted rating per user), each into its own run folder;
    returns the runs written.

    With several names, each goes to `out/<name>/`; groups, retrieval and the CF fits are computed once. The
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
    subs = {
        name: replace(config, model=name, out=str(Path(config.out) / name if len(names) > 1 else config.out))
        for name in names
    }
    check_out(config.out, local_inputs(config), runs=len(names) > 1)
    for sub in subs.values() if len(names) > 1 else ():
        check_out(sub.out, local_inputs(config))
    with contextlib.ExitStack() as locks:
        locks.enter_context(folder_lock(config.out))
        for sub in subs.values():
            locks.enter_context(folder_lock(sub.out))  # each run folder too: `score --write` takes it
            claim(Path(sub.out), run_record(sub), overwrite=config.overwrite)
        # Baselines read histories batch by batch where they need them (`Baselines`): none is held.
        test = _test_groups(config, history=False)
        shared = Baselines(config, test)
        systems = []
        for name, sub in subs.items():
            Path(sub.out).mkdir(parents=True, exist_ok=True)
            systems.append((name, _run(sub, Baseline(name, shared), test)))
        if len(names) > 1:
            report.write_report(config.out, [written for _, written in systems])
    return systems


def _profiles_fix(config: Any, writer: Mapping[str, Any], splits: Sequence[str]) -> str:
    """How to add the missing profiles to `config.profiles`: its own writer's command (a file takes one
    writer's profiles only), or the engine and model to choose where the file names none."""
    engine, model = (
        shlex.quote(str(writer[key])) if key in writer else key.upper() for key in ("engine", "model")
    )
    command = (
        f"perrecbench profiles --data {shlex.quote(str(config.data))} --engine {engine} --model {model} "
        f"--splits {','.join(splits)} --out {shlex.quote(str(config.profiles))}"
    )
    others = sorted(writer.keys() - {"engine", "model"})
    extra = f" (and the {', '.join(others)} its records name)" if others else ""
    return f"write them with `{command}`{extra}"
