"""One evaluation run: groups → prompts → engine → parsed answers → rankings → PTC → run folder.

Output folder (`RUN_DIR`):
- `run.json`: the full config, versions, template ids + hashes, retrieval settings, dataset fingerprint.
- `samples.jsonl`: one line per request (group, level, method, slot, cache key, raw texts, parsed values,
  ok / failure reason, token counts).
- `predictions.jsonl`: one line per (level, method, group): the ranking input of the metric and the truth,
  so `perrecbench score` re-scores without generating again.
- `scores.json`: `{"cells": [...], "average": ...}`; `report.md`: the paper's Table 1 layout.
- `cache.jsonl`: the append-only request cache; running the same command again resumes from it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from perrec_eval import ptc
from perrec_eval.engines.base import Engine
from perrec_eval.rankers import PairwiseStrategy, Prediction, make_ranker
from perrec_eval.types import LEVELS, METHODS, ChatRequest, GenParams

logger = logging.getLogger(__name__)

MAX_TOKENS = {"pointwise": 800, "pairwise": 512, "listwise": 800}
CONFIDENCE_LEVEL = 0.95


@dataclass(frozen=True, slots=True)
class EvalConfig:
    """Everything that defines a run; recorded verbatim in run.json."""

    data: str
    engine: str
    model: str
    out: str
    levels: tuple[str, ...] = LEVELS
    methods: tuple[str, ...] = METHODS
    split: str = "test"
    adapter: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    k: int = 4
    profiles: str | None = None
    no_profile: bool = False
    shots: int = 0
    cot: bool = False
    samples: int = 1
    sc_aggregate: str = "mean"
    pairwise_strategy: PairwiseStrategy = "allpairs"
    paper_mode: bool = False
    temperature: float = 0.1
    top_p: float = 1.0
    max_groups: int | None = None
    seed: int = 0
    concurrency: int = 16
    engine_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        bad_levels = [lv for lv in self.levels if lv not in LEVELS]
        bad_methods = [m for m in self.methods if m not in METHODS]
        if bad_levels or not self.levels:
            raise ValueError(f"levels must be a non-empty subset of {','.join(LEVELS)}, got {self.levels}")
        if bad_methods or not self.methods:
            raise ValueError(f"methods must be a non-empty subset of {','.join(METHODS)}, got {self.methods}")
        if self.pairwise_strategy not in ("allpairs", "heapsort"):
            raise ValueError(
                f"--pairwise-strategy must be allpairs or heapsort, got {self.pairwise_strategy!r}"
            )
        if self.sc_aggregate not in ("mean", "median", "mode"):
            raise ValueError(f"--sc-aggregate must be mean, median or mode, got {self.sc_aggregate!r}")
        if self.profiles and self.no_profile:
            raise ValueError("--profiles and --no-profile exclude each other: choose one")
        if self.k < 1 or self.samples < 1 or self.shots < 0 or self.concurrency < 1:
            raise ValueError("--k, --samples and --concurrency must be >= 1 and --shots >= 0")
        if self.max_groups is not None and self.max_groups < 1:
            raise ValueError(f"--max-groups must be >= 1, got {self.max_groups}")
        if self.paper_mode:
            # --paper-mode switches every paper behaviour of PROTOCOL at once.
            object.__setattr__(self, "pairwise_strategy", "heapsort")

    @property
    def variant(self) -> str:
        base = "cot" if self.cot else "default"
        if self.no_profile:
            return "no_profile" if base == "default" else "cot_no_profile"
        return base

    @property
    def metric_variant(self) -> str:
        return "paper" if self.paper_mode else "tau_b"

    @property
    def invalid_policy(self) -> str:
        return "skip" if self.paper_mode else "zero"

    def params(self, method: str) -> GenParams:
        return GenParams(
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=MAX_TOKENS[method],
            n=self.samples,
            seed=self.seed,
        )


@dataclass(slots=True)
class GroupContext:
    """A group as the prompts see it: the query and each user's retrieved history and profile."""

    row: Mapping[str, Any]
    level: str
    views: list[dict[str, Any]]

    @property
    def group_id(self) -> str:
        return self.row["group_id"]

    @property
    def query(self) -> dict[str, Any]:
        return {"title": self.row["query"]["title"], "author": self.row["query"].get("author")}


# --------------------------------------------------------------------------------------------- data


def load_rows(
    data: str | os.PathLike, level: str, split: str = "test", max_groups: int | None = None
) -> list[dict]:
    """The rows of one level of a built benchmark folder (or Hub id), as plain dicts.

    History items whose item has no metadata (null title) are dropped here, once, for every consumer.
    """
    import datasets

    try:
        ds = datasets.load_dataset(str(data), level, split=split)
    except (ValueError, FileNotFoundError) as err:
        raise ValueError(
            f"cannot load level {level!r} split {split!r} from {data}: {err}. Build the benchmark with "
            "`perrecbench build --source RAW --out DIR` and pass that DIR as --data"
        ) from err
    if max_groups is not None:
        ds = ds.select(range(min(max_groups, len(ds))))
    rows = ds.to_list()
    for row in rows:
        for user in row["users"]:
            # An item without metadata has no title: nothing to retrieve by or show, so no prompt sees it.
            user["history"] = [item for item in user["history"] if item.get("title")]
    return rows


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


def user_views(
    row: Mapping[str, Any],
    retrieved: Mapping[tuple[str, str], Sequence[Any]],
    profiles: Mapping[tuple[str, str], str] | None,
) -> list[dict[str, Any]]:
    """Per user, what a prompt shows: retrieved history best first, ratings summary, profile."""
    views = []
    for user in row["users"]:
        key = (row["group_id"], user["user_id"])
        history = [user["history"][hit.index] for hit in retrieved[key]]
        view = {
            "history": history,
            "most_common_rating": user["most_common_rating"],
            "avg_rating": user["avg_rating"],
        }
        if profiles is not None:
            view["profile"] = profiles.get(key, "")
        views.append(view)
    return views


# -------------------------------------------------------------------------------------------- driver


def render_slot(
    method: str, ctx: GroupContext, slot: tuple, variant: str, demonstrations: Sequence[Any]
) -> list:
    from perrec_eval import prompts

    if method == "pointwise":
        users = [ctx.views[slot[1]]]
    elif method == "pairwise":
        users = [ctx.views[slot[1]], ctx.views[slot[2]]]
    else:
        users = ctx.views
    return prompts.render(method, ctx.query, users, variant=variant, demonstrations=demonstrations)


def run_method(
    method: str,
    groups: Sequence[GroupContext],
    engine: Engine,
    params: GenParams,
    *,
    variant: str = "default",
    demonstrations: Sequence[Any] = (),
    pairwise_strategy: PairwiseStrategy = "allpairs",
    aggregate: str = "mean",
) -> tuple[dict[str, Prediction], list[dict[str, Any]]]:
    """Rank every group with one method; all pending requests of a step go to the engine in one call.

    Returns:
        (predictions by group_id, one sample record per request)
    """
    from perrec_eval import parsing
    from perrec_eval.cache import request_key

    rankers = {
        g.group_id: make_ranker(
            method, [v["avg_rating"] for v in g.views], pairwise_strategy=pairwise_strategy
        )
        for g in groups
    }
    by_id = {g.group_id: g for g in groups}
    samples: list[dict[str, Any]] = []
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
            answers: dict[str, dict[tuple, Any]] = {}
            for (gid, slot), request, completion in zip(batch, requests, completions, strict=True):
                n_users = len(by_id[gid].views) if method == "listwise" else None
                parsed = [parsing.parse(method, text, n_users=n_users) for text in completion.texts]
                good = [p.value for p in parsed if p.ok]
                value = parsing.majority(method, good, how=aggregate) if good else None
                reasons = [p.reason for p in parsed if not p.ok]
                reason = completion.error or (reasons[0] if value is None and reasons else None)
                answers.setdefault(gid, {})[slot] = value
                samples.append(
                    {
                        "group_id": gid,
                        "level": by_id[gid].level,
                        "method": method,
                        "step": step,
                        "slot": list(slot),
                        "key": request_key(engine, request, params),
                        "texts": list(completion.texts),
                        "parsed": [p.value if p.ok else None for p in parsed],
                        "value": value,
                        "ok": value is not None,
                        "reason": reason if value is None else None,
                        "num_failed_samples": len(parsed) - len(good) if completion.ok else params.n,
                        "prompt_tokens": completion.prompt_tokens,
                        "completion_tokens": completion.completion_tokens,
                    }
                )
            for gid, ranker in rankers.items():
                if not ranker.done and gid in answers:
                    ranker.feed(answers[gid])
            bar.update(len(requests))
            step += 1
    return {gid: ranker.prediction() for gid, ranker in rankers.items()}, samples


# ------------------------------------------------------------------------------------------ scoring


def prediction_records(
    level: str, method: str, groups: Sequence[GroupContext], predictions: Mapping[str, Prediction]
) -> list[dict[str, Any]]:
    """The metric's inputs and the truth, one record per group (predictions.jsonl)."""
    records = []
    for g in groups:
        pred = predictions[g.group_id]
        records.append(
            {
                "level": level,
                "method": method,
                "group_id": g.group_id,
                "format": pred.format,
                "prediction": pred.value,
                "predicted_ratings": pred.predicted_ratings,
                "references": [u["relative_rating"] for u in g.row["users"]],
                "true_ratings": [u["rating"] for u in g.row["users"]],
            }
        )
    return records


def score_cells(
    records: Iterable[Mapping[str, Any]],
    samples: Iterable[Mapping[str, Any]] = (),
    *,
    variant: str = "tau_b",
    invalid: str = "zero",
    seed: int = 0,
) -> dict[str, Any]:
    """Score every (level, method) cell found in the prediction records; returns scores.json content."""
    cells: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for record in records:
        cells.setdefault((record["level"], record["method"]), []).append(record)
    failures: dict[tuple[str, str], list[int]] = {}
    for sample in samples:
        counts = failures.setdefault((sample["level"], sample["method"]), [0, 0])
        counts[0] += sample["num_failed_samples"]
        counts[1] += max(len(sample["texts"]), sample["num_failed_samples"])
    out = []
    for (level, method), group_records in sorted(cells.items(), key=_cell_order):
        formats = {r["format"] for r in group_records}
        if len(formats) != 1:
            raise ValueError(f"cell {level}/{method} mixes prediction formats {sorted(formats)}")
        result = ptc.compute_ptc(
            [r["references"] for r in group_records],
            [r["prediction"] or [] for r in group_records],
            prediction_format=formats.pop(),
            variant=variant,
            invalid=invalid,
            confidence_level=CONFIDENCE_LEVEL,
            seed=seed,
        )
        failed, total = failures.get((level, method), [0, 0])
        cell = {
            "level": level,
            "method": method,
            "ptc": result["ptc"],
            "ptc_ci_low": result.get("ptc_ci_low"),
            "ptc_ci_high": result.get("ptc_ci_high"),
            "num_groups": result["num_groups"],
            "num_invalid": result["num_invalid"],
            "parse_failure_rate": failed / total if total else 0.0,
        }
        cell.update(_rating_errors(group_records))
        out.append(cell)
    values = [c["ptc"] for c in out if c["ptc"] is not None]
    return {
        "variant": variant,
        "invalid": invalid,
        "confidence_level": CONFIDENCE_LEVEL,
        "cells": out,
        "average": sum(values) / len(values) if values else None,
    }


def _cell_order(item: tuple[tuple[str, str], Any]) -> tuple[int, int]:
    level, method = item[0]
    return (
        LEVELS.index(level) if level in LEVELS else 99,
        METHODS.index(method) if method in METHODS else 99,
    )


def _rating_errors(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """MAE/RMSE of predicted vs true ratings where a run predicted ratings (pointwise, baselines)."""
    true, pred = [], []
    for record in records:
        for t, p in zip(record["true_ratings"], record.get("predicted_ratings") or [], strict=False):
            if p is not None:
                true.append(t)
                pred.append(p)
    if not pred:
        return {}
    errors = ptc.rating_errors(true, pred)
    return {"mae": errors["mae"], "rmse": errors["rmse"]}


# --------------------------------------------------------------------------------------------- files


def write_json(path: Path, obj: Any) -> None:
    """Atomic JSON write: a killed run never leaves a half-written file that passes for whole."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def write_jsonl(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def versions(*packages: str) -> dict[str, str | None]:
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in packages:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


# ----------------------------------------------------------------------------------------- the run


def prepare_groups(
    config: EvalConfig,
    level: str,
    profiles: Mapping[tuple[str, str], str] | None,
    split: str | None = None,
    *,
    rows: list[dict] | None = None,
    retrieved: Mapping[tuple[str, str], Sequence[Any]] | None = None,
) -> list[GroupContext]:
    """Groups of one level with retrieved history and profiles; reuses `rows`/`retrieved` when given."""
    from perrec_eval import retrieval

    if rows is None:
        rows = load_rows(config.data, level, split or config.split, config.max_groups)
    if retrieved is None:
        retrieved = retrieval.retrieve_rows(rows, k=config.k)
    return [GroupContext(row, level, user_views(row, retrieved, profiles)) for row in rows]


def demonstrations(config: EvalConfig, level: str, method: str, train: Sequence[GroupContext]) -> list[Any]:
    """Few-shot examples: `shots` held-out groups of the same level (seeded), each with its true answer."""
    if config.shots == 0:
        return []
    import random

    from perrec_eval.prompts import Demonstration

    if len(train) < config.shots:
        raise ValueError(
            f"--shots {config.shots} needs that many held-out groups; {level}/train has {len(train)}"
        )
    picked = random.Random(f"{config.seed}:{level}:{method}").sample(train, config.shots)
    demos = []
    for g in picked:
        rel = [u["relative_rating"] for u in g.row["users"]]
        if method == "pointwise":
            demos.append(Demonstration(g.query, [g.views[0]], g.row["users"][0]["rating"]))
        elif method == "pairwise":
            demos.append(Demonstration(g.query, g.views[:2], "A" if rel[0] > rel[1] else "B"))
        else:
            ranking = sorted(range(len(rel)), key=lambda i: -rel[i])
            demos.append(Demonstration(g.query, g.views, [i + 1 for i in ranking]))
    return demos


def evaluate(config: EvalConfig, engine: Engine | None = None) -> dict[str, Any]:
    """Run the benchmark for one model and write the run folder; returns scores.json content.

    `engine` overrides the one named in the config (tests pass a FakeEngine). Requests go through the
    run's cache, so calling this again with the same config resumes without repeating any request.
    """
    from perrec_eval import prompts, retrieval
    from perrec_eval.cache import CachedEngine
    from perrec_eval.engines import load_engine
    from perrec_eval.profiles import generate_profiles, load_profiles, save_profiles

    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    if engine is None:
        engine = load_engine(config.engine, config.model, **engine_options(config))
    cached = CachedEngine(engine, out / "cache.jsonl")

    # Levels share query items and users: load every level once and retrieve once for all of them.
    rows_by_level = {lv: load_rows(config.data, lv, config.split, config.max_groups) for lv in config.levels}
    retrieved = retrieval.retrieve_rows([r for rows in rows_by_level.values() for r in rows], k=config.k)
    # Few-shot demonstrations come from the held-out split: loaded and retrieved once, like the test rows.
    train_by_level = {lv: load_rows(config.data, lv, "train") for lv in config.levels} if config.shots else {}
    train_retrieved = (
        retrieval.retrieve_rows([r for rows in train_by_level.values() for r in rows], k=config.k)
        if config.shots
        else {}
    )
    profiles = None
    profile_failures: dict = {}
    if not config.no_profile:
        if config.profiles:
            profiles = load_profiles(config.profiles)
        else:
            rows = [
                r
                for by_level in (rows_by_level, train_by_level)
                for lv_rows in by_level.values()
                for r in lv_rows
            ]
            profiles, profile_failures = generate_profiles(cached, rows)
            save_profiles(out / "profiles.jsonl", profiles, {"engine": engine.name, "model": engine.model})

    records: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    engine_calls: dict[str, int] = {}
    for level in config.levels:
        groups = prepare_groups(config, level, profiles, rows=rows_by_level[level], retrieved=retrieved)
        _check_profiles(groups, profiles, config)
        train = (
            prepare_groups(config, level, profiles, rows=train_by_level[level], retrieved=train_retrieved)
            if config.shots
            else []
        )
        for method in config.methods:
            demos = demonstrations(config, level, method, train)
            preds, method_samples = run_method(
                method,
                groups,
                cached,
                config.params(method),
                variant=config.variant,
                demonstrations=demos,
                pairwise_strategy=config.pairwise_strategy,
                aggregate=config.sc_aggregate,
            )
            engine_calls[f"{level}/{method}"] = len({sample["step"] for sample in method_samples})
            records += prediction_records(level, method, groups, preds)
            samples += method_samples

    scores = score_cells(
        records, samples, variant=config.metric_variant, invalid=config.invalid_policy, seed=config.seed
    )
    run_info = {
        "config": _public_config(config),
        "prompt_variant": config.variant,
        "metric": {"variant": config.metric_variant, "invalid": config.invalid_policy},
        "engine": engine.info(),
        "versions": versions("perrecbench", "datasets", "bm25s", "transformers", "torch", "openai", "vllm"),
        "templates": prompts.template_info(),
        "retrieval": retrieval.RETRIEVAL_INFO,
        "dataset_fingerprint": dataset_fingerprint(config.data),
        "engine_calls": engine_calls,
        "cache": {"hits": cached.hits, "misses": cached.misses},
        "profile_failures": len(profile_failures),
    }
    write_run(out, config.model, samples=samples, records=records, scores=scores, run_info=run_info)
    return scores


def write_run(
    out: Path,
    name: str,
    *,
    samples: Iterable[Mapping[str, Any]],
    records: Iterable[Mapping[str, Any]],
    scores: Mapping[str, Any],
    run_info: Mapping[str, Any],
) -> None:
    """Write a run folder's files, each atomically; run.json last, so it marks a finished run."""
    from perrec_eval.report import write_report

    write_jsonl(out / "samples.jsonl", samples)
    write_jsonl(out / "predictions.jsonl", records)
    write_json(out / "scores.json", scores)
    write_report(out, [(name, scores)])
    write_json(out / "run.json", run_info)


def backend_options(
    engine: str,
    *,
    adapter: str | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    concurrency: int = 16,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Keyword options for `load_engine` from the command-line flags that apply to that backend.

    >>> backend_options("openai", base_url="http://127.0.0.1:8000/v1", api_key_env="KEY")
    {'base_url': 'http://127.0.0.1:8000/v1', 'concurrency': 16, 'api_key_env': 'KEY'}
    """
    options = dict(extra or {})
    if adapter:
        options["adapter"] = adapter
    if engine == "openai":
        options.update(base_url=base_url, concurrency=concurrency)
        if api_key_env:
            options["api_key_env"] = api_key_env
    return options


def engine_options(config: EvalConfig) -> dict[str, Any]:
    return backend_options(
        config.engine,
        adapter=config.adapter,
        base_url=config.base_url,
        api_key_env=config.api_key_env,
        concurrency=config.concurrency,
        extra=config.engine_options,
    )


def _public_config(config: EvalConfig) -> dict[str, Any]:
    # Only the *name* of the API key variable is recorded, never its value.
    return asdict(config)


def _check_profiles(groups: Sequence[GroupContext], profiles: Mapping | None, config: EvalConfig) -> None:
    if profiles is None or not config.profiles:
        return
    missing = [
        (g.group_id, u["user_id"])
        for g in groups
        for u in g.row["users"]
        if (g.group_id, u["user_id"]) not in profiles
    ]
    if missing:
        raise ValueError(
            f"{config.profiles} has no profile for {len(missing)} (group, user) pairs, e.g. {missing[0]}: "
            f"write them with `perrecbench profiles --data {config.data} --out {config.profiles}`"
        )


# ---------------------------------------------------------------------------------------- baselines


def evaluate_baselines(config: EvalConfig, names: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    """Score no-LLM baselines (pointwise: a predicted rating per user), each into its own run folder.

    With several names, each goes to `out/<name>/`; rows and retrieval are computed once per level.
    """
    from perrec_eval import baselines, retrieval

    records: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for level in config.levels:
        rows = load_rows(config.data, level, config.split, config.max_groups)
        needs_retrieval = any(name in baselines.USES_RETRIEVAL for name in names)
        retrieved = retrieval.retrieve_rows(rows, k=config.k) if needs_retrieval else {}
        groups = [GroupContext(row, level, []) for row in rows]
        for name in names:
            preds = {}
            for row in rows:
                per_user = {
                    u["user_id"]: retrieved.get((row["group_id"], u["user_id"]), []) for u in row["users"]
                }
                ratings = baselines.predict(name, row, per_user, seed=config.seed)
                preds[row["group_id"]] = Prediction(
                    "scores", baselines.ranking_scores(row, ratings), list(ratings)
                )
            records[name] += prediction_records(level, "pointwise", groups, preds)
    from perrec_eval.report import write_report

    systems = []
    for name in names:
        out = Path(config.out) / name if len(names) > 1 else Path(config.out)
        out.mkdir(parents=True, exist_ok=True)
        scores = score_cells(
            records[name], variant=config.metric_variant, invalid=config.invalid_policy, seed=config.seed
        )
        run_info = {
            "config": _public_config(replace(config, model=name, out=str(out))),
            "engine": {"name": "baseline", "model": name},
            "metric": {"variant": config.metric_variant, "invalid": config.invalid_policy},
            "versions": versions("perrecbench", "datasets", "bm25s"),
            "retrieval": retrieval.RETRIEVAL_INFO,
            "dataset_fingerprint": dataset_fingerprint(config.data),
        }
        write_run(out, name, samples=[], records=records[name], scores=scores, run_info=run_info)
        systems.append((name, scores))
    if len(names) > 1:
        write_report(Path(config.out), systems)
    return systems


def rescore(
    run_dir: str | os.PathLike, *, variant: str | None = None, invalid: str | None = None
) -> dict[str, Any]:
    """Re-score a finished run from its saved predictions and samples, without generating again."""
    run_dir = Path(run_dir)
    if not (run_dir / "predictions.jsonl").is_file():
        raise FileNotFoundError(
            f"{run_dir} has no predictions.jsonl: finish the run with `perrecbench evaluate` first"
        )
    info = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    samples_path = run_dir / "samples.jsonl"
    samples = read_jsonl(samples_path) if samples_path.is_file() else []
    return score_cells(
        read_jsonl(run_dir / "predictions.jsonl"),
        samples,
        variant=variant or info["metric"]["variant"],
        invalid=invalid or info["metric"]["invalid"],
        seed=info["config"].get("seed", 0),
    )
