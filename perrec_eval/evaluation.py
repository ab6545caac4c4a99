"""A family's run through the general path: docs → requests → answers → predictions → metrics → run folder.

Any family that declares `load_docs`, its protocols and `score_doc` (`perrec_eval.task.Task`) runs
here with every engine, the answer cache, resumption, the run folder's files, intervals over docs and
baselines scored like models. The files:

- ``samples.jsonl``: one line per request (`DocSample`), as PerRecBench writes its own;
- ``predictions.jsonl``: one line per (cell, doc) (`DocPrediction`): the parsed prediction and the truth;
- ``scores.json``: `results.FamilyScores`, every metric of every cell with its interval;
- ``run.json``: `results.RunInfo`, the same record as every run's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from perrec_eval import fileio
from perrec_eval.cache import CachedEngine
from perrec_eval.cliconfig import check_score_input, check_seed, check_task, one_limit, option
from perrec_eval.config import BASELINE_ENGINE, EngineSpec, default_label
from perrec_eval.docrecords import DocPrediction, DocSample, read_predictions, read_samples
from perrec_eval.engines.base import Engine
from perrec_eval.errors import ConfigError, DataError
from perrec_eval.lock import folder_lock
from perrec_eval.registry import get
from perrec_eval.results import FamilyCell, FamilyMetric, FamilyScores, MetricValue, RunInfo
from perrec_eval.rundir import check_out, claim, local_inputs, report_folder, run_cost, versions, write_run
from perrec_eval.runner import answer_fields, drive
from perrec_eval.secrets import redact
from perrec_eval.stats import resampled_docs
from perrec_eval.task import Cell, Doc, Task
from perrec_eval.types import ChatRequest, Completion, GenParams

logger = logging.getLogger(__name__)

CONFIDENCE_LEVEL = 0.95
N_RESAMPLES = 10_000
CI_METHOD = "percentile bootstrap over docs (by cluster where docs share one)"


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskEvalConfig(EngineSpec):
    """Settings of `perrecbench evaluate --task NAME` for a family run through the general path."""

    task: str = option("task family (`perrecbench tasks` lists them)", default="perrecbench")
    data: str = option("benchmark folder written by `perrecbench build --task NAME`")
    out: str = option("run folder; running the same command again resumes from its cache")
    subsets: tuple[str, ...] | None = option(
        "the family's subsets to evaluate (the first axis of its cells) (comma-separated)",
        default=None,
        shown="all",
    )
    protocols: tuple[str, ...] | None = option(
        "the family's request protocols (the second axis of its cells) (comma-separated)",
        default=None,
        shown="all",
    )
    split: str = option("dataset split to evaluate", default="test")
    limit: int | None = option(
        "use N docs of each subset, the docs of each cell: a seeded sample; every family's --limit "
        "(--max-docs is its old name)",
        default=None,
        shown="all",
    )
    max_docs: int | None = option("the same as --limit", default=None, shown="all")
    seed: int = option("seed of the --max-docs sample, sampling and the bootstrap intervals", default=0)
    label: str | None = option("the name of this run's rows in reports (default: the model's)", default=None)
    samples: int = option("self-consistency: samples per request (the most frequent answer wins)", default=1)
    temperature: float = option("sampling temperature (0 = greedy)", default=0.1)
    top_p: float = option("nucleus sampling top-p", default=1.0)
    structured_outputs: bool = option("constrain every answer to its protocol's format", default=False)
    prompts: str | None = option(
        "a prompt variant of the family (e.g. the one `sft data` wrote a fine-tuned model's examples with)",
        default=None,
        shown="the family's own",
    )
    invalid_policy: str | None = option(
        "how answers out of the task's range are read, where the family offers several (they still fail and "
        "are counted)",
        default=None,
        shown="the family's own",
    )
    overwrite: bool = option(
        "replace a finished run of other settings in --out (the same command resumes without it)",
        default=False,
    )

    def __post_init__(self) -> None:
        EngineSpec.__post_init__(self)
        check_task(self.task)
        one_limit(self, "max_docs")
        task = self.family
        for name, chosen, known in (
            ("subsets", self.subsets, task.subsets),
            ("protocols", self.protocols, tuple(task.protocols)),
        ):
            if isinstance(chosen, str):
                chosen = tuple(part for part in chosen.split(",") if part)
                object.__setattr__(self, name, chosen)
            if chosen is not None and (not chosen or any(c not in known for c in chosen)):
                raise ConfigError(f"--{name} of task {task.name} must be a subset of {','.join(known)}")
        if not self.cells():
            raise ConfigError(
                f"no {task.protocol_axis} of task {task.name} asks about the chosen {task.subset_axis}s: "
                "choose --subsets and --protocols that meet (`perrecbench tasks` lists the cells)"
            )
        if self.max_docs is not None and self.max_docs < 1:
            raise ConfigError(f"--max-docs must be >= 1, got {self.max_docs}")
        if self.prompts is not None and self.prompts not in task.prompt_variants:
            known = ", ".join(task.prompt_variants) or "none"
            raise ConfigError(f"--prompts of task {task.name} must be one of its variants ({known})")
        if self.invalid_policy is not None and self.invalid_policy not in task.invalid_policies:
            known = ", ".join(task.invalid_policies) or "none"
            raise ConfigError(f"--invalid-policy of task {task.name} must be one of its policies ({known})")
        if self.samples < 1:
            raise ConfigError(f"--samples must be >= 1, got {self.samples}")
        if self.engine == BASELINE_ENGINE and self.model != "all" and self.model not in task.baselines:
            raise ConfigError(
                f"unknown baseline {self.model!r} of task {task.name}: choose one of "
                f"{', '.join(task.baselines)} or all"
            )

    @property
    def family(self) -> Task:
        return get(self.task)

    def cells(self) -> tuple[Cell, ...]:
        return self.family.cells(self.subsets, self.protocols)

    def token_budgets(self) -> dict[str, int]:
        """The answer budget of each protocol: its default, or ``--max-new-tokens`` (N, or NAME=N,...)."""
        protocols = getattr(self, "task", None) and self.family.protocols
        return token_budgets(protocols or {}, self.max_new_tokens)

    def params(self, protocol: str, doc: Doc | None = None) -> GenParams:
        answer_format = None
        if self.structured_outputs and doc is not None:
            answer_format = self.family.protocols[protocol].answer_format(doc)
        return GenParams(
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.token_budgets()[protocol],
            n=self.samples,
            seed=self.seed,
            answer_format=answer_format,
        )


def token_budgets(protocols: Mapping[str, Any], spec: Sequence[str]) -> dict[str, int]:
    """The answer budget of each protocol (name → protocol): its default, or ``--max-new-tokens`` (N for
    all, or NAME=N,...).

    Raises:
        ConfigError: an entry that is not a number >= 1 or names no protocol.

    >>> from types import SimpleNamespace as P
    >>> token_budgets({"rating": P(max_tokens=8), "direct": P(max_tokens=256)}, ["direct=64"])
    {'rating': 8, 'direct': 64}
    """
    budgets = {name: protocol.max_tokens for name, protocol in protocols.items()}
    for part in spec:
        for entry in (e.strip() for e in part.split(",") if e.strip()):
            name, sep, value = entry.rpartition("=")
            targets = [name] if sep else list(budgets)
            number = value.isascii() and value.isdigit()  # not "²", which int() refuses
            if not number or int(value) < 1 or any(t not in budgets for t in targets):
                raise ConfigError(
                    f"--max-new-tokens {entry!r}: one number, or NAME=N with NAME one of {', '.join(budgets)}"
                )
            budgets.update(dict.fromkeys(targets, int(value)))
    return budgets


def run_cell(
    task: Task,
    cell: Cell,
    docs: Sequence[Doc],
    engine: Engine,
    config: TaskEvalConfig,
) -> tuple[list[DocPrediction], list[DocSample]]:
    """Every doc of `cell` through its protocol's runners, one engine call per lockstep step."""
    protocol = task.protocols[cell.protocol]
    variant = {} if config.prompts is None else {"variant": config.prompts}
    policy = {} if config.invalid_policy is None else {"policy": config.invalid_policy}
    by_id = {doc.id: doc for doc in docs}
    runners = {doc.id: protocol.runner(doc) for doc in docs}
    params = {doc.id: config.params(cell.protocol, doc) for doc in docs}
    # One call per step needs one GenParams: docs whose formats differ go in separate drives.
    groups: dict[GenParams, dict[str, Any]] = {}
    for doc_id, runner in runners.items():
        groups.setdefault(params[doc_id], {})[doc_id] = runner
    samples: list[DocSample] = []
    for doc_params, chunk in groups.items():

        def ask(doc_id: str, slot: Any) -> ChatRequest:
            return ChatRequest(tuple(protocol.render(by_id[doc_id], slot, **variant)))

        def read(doc_id, slot, step, request, completion, doc_params=doc_params):
            sample = _sample(
                protocol, cell, doc_id, slot, step, engine, request, completion, doc_params, policy
            )
            return sample.value, sample

        samples += drive(chunk, ask, read, engine, doc_params, desc=str(cell))
    predictions = [
        DocPrediction(cell.subset, cell.protocol, d.id, runners[d.id].prediction(), d.truth, d.cluster)
        for d in docs
    ]
    return predictions, samples


def _sample(
    protocol, cell, doc_id, slot, step, engine, request, completion: Completion, params, policy=None
) -> DocSample:
    parsed = [protocol.parse(text, slot, **(policy or {})) for text in completion.texts]
    return DocSample(
        id=doc_id,
        subset=cell.subset,
        protocol=cell.protocol,
        step=step,
        slot=slot.to_json() if hasattr(slot, "to_json") else slot,
        **answer_fields(parsed, protocol.combine, engine, request, completion, params),
    )


def score(
    task: Task,
    predictions: Iterable[DocPrediction],
    samples: Iterable[DocSample] = (),
    *,
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
    docs: Mapping[str, Sequence[Doc]] | None = None,
) -> FamilyScores:
    """Every metric of every cell, with its interval over docs (by cluster where docs share one); with the
    cells' `docs` (by subset), the family's check of answers a cell's rows cannot give (`Task.leak_check`)."""
    by_cell: dict[Cell, list[DocPrediction]] = {}
    for record in predictions:
        by_cell.setdefault(record.cell, []).append(record)
    errors = [s for s in samples if s.error is not None]
    per_cell_errors: dict[Cell, int] = {}
    per_cell_requests: dict[Cell, int] = {}
    per_cell_counts: dict[Cell, dict[str, int]] = {}
    for sample in samples:
        cell = Cell(sample.subset, sample.protocol)
        per_cell_requests[cell] = per_cell_requests.get(cell, 0) + 1
        per_cell_errors[cell] = per_cell_errors.get(cell, 0) + (sample.error is not None)
        if task.answer_counts:
            counts = per_cell_counts.setdefault(cell, dict.fromkeys(task.answer_counts, 0))
            for key in task.answer_counts:
                counts[key] += sample.value.get(key, 0) if isinstance(sample.value, Mapping) else 0
    order = {cell: i for i, cell in enumerate(task.cells())}
    cells = []
    for cell in sorted(by_cell, key=lambda c: order.get(c, len(order))):
        records = by_cell[cell]
        clusters = [r.cluster for r in records]
        clustered = len(set(clusters)) < len(clusters) and None not in clusters
        metrics = {}
        for metric in task.metrics:
            items = [task.score_doc(metric.name, r.prediction, r.truth) for r in records]
            # None: not a metric of this cell (`Task.score_doc`), or undefined on its docs (RMSE when every
            # doc failed)
            value = None if all(item is None for item in items) else cell_value(metric, items)
            if value is None:
                metrics[metric.name] = MetricValue(value=None, ci_low=None, ci_high=None)
                continue
            keep = resampled_docs(metric, items)
            low, high = metric.interval(
                [items[i] for i in keep],
                [clusters[i] for i in keep] if clustered else None,
                confidence_level=CONFIDENCE_LEVEL,
                n_resamples=n_resamples,
                seed=seed,
            )
            metrics[metric.name] = MetricValue(
                value=_number(value), ci_low=_number(low), ci_high=_number(high)
            )
        cells.append(
            FamilyCell(
                subset=cell.subset,
                protocol=cell.protocol,
                num_docs=len(records),
                num_failed=sum(r.prediction is None for r in records),
                num_requests=per_cell_requests.get(cell, 0),
                num_engine_errors=per_cell_errors.get(cell, 0),
                num_clusters=len(set(clusters)) if clustered else None,
                answer_counts=per_cell_counts.get(cell),
                leak=_leak(task, cell, docs, records),
                metrics=metrics,
            )
        )
    headline = task.headline.name
    values = [c.metrics[headline].value for c in cells if c.metrics[headline].value is not None]
    return FamilyScores(
        task=task.name,
        headline=headline,
        confidence_level=CONFIDENCE_LEVEL,
        ci_method=CI_METHOD,
        n_resamples=n_resamples,
        complete=not errors,
        num_engine_errors=len(errors),
        first_engine_error=errors[0].error if errors else None,
        cells=tuple(cells),
        average=sum(values) / len(values) if values else None,
    )


def _leak(
    task: Task, cell: Cell, docs: Mapping[str, Sequence[Doc]] | None, records: Sequence[DocPrediction]
) -> Mapping[str, Any] | None:
    """The family's leak check of a cell's answers (None: no docs to check them against, or no check)."""
    if task.leak_check is None or docs is None or cell.subset not in docs:
        return None
    return task.leak_check(cell, docs[cell.subset], {record.id: record.prediction for record in records})


def cell_value(metric: Any, items: Sequence[Any]) -> float | None:
    """A cell's value of `metric` (a `stats.MetricSpec`) over its docs' items; None where it is undefined on
    them (no docs, or e.g. RMSE when every doc failed).

    >>> from perrec_eval.stats import MetricSpec, rmse
    >>> error = MetricSpec("rmse", aggregation="corpus", corpus=rmse)
    >>> cell_value(MetricSpec("hit"), [1.0, 0.0]), cell_value(error, [[]])
    (0.5, None)
    """
    if not items or (metric.aggregation == "corpus" and not math.isfinite(metric.corpus(items))):
        return None
    return _number(metric.value(items))


def _number(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def fingerprint(data: str) -> str:
    """The build's fingerprint, computed from its files (`dataset_builder.manifest.fingerprint`)."""
    from dataset_builder import manifest

    return manifest.fingerprint(data)


def build_fingerprint(task: Task, data: str) -> str:
    """The fingerprint a run of `task` records of the build at `data`: the family's own
    (`Task.fingerprint`), or `fingerprint`."""
    return task.fingerprint(data) if task.fingerprint is not None else fingerprint(data)


def load_docs(config: TaskEvalConfig) -> dict[str, list[Doc]]:
    """The docs of each chosen subset (a seeded sample of --max-docs of each)."""
    from dataset_builder.manifest import check_files

    task = config.family
    if task.load_docs is None:
        raise ConfigError(f"task {task.name} runs `evaluate` its own way, not through the general path")
    check_files(config.data)  # every file the build wrote, before any is read: none missing or replaced
    return {
        subset: list(
            task.load_docs(config.data, subset, config.split, max_docs=config.max_docs, seed=config.seed)
        )
        for subset in dict.fromkeys(cell.subset for cell in config.cells())
    }


def warn_cut(cell: Cell, samples: Sequence[DocSample], budget: int) -> int:
    """Say in one line how many of a cell's answers stopped at the token budget (the engine's finish reason
    ``length``); returns that number."""
    cut = sum("length" in (sample.finish_reasons or ()) for sample in samples)
    if cut:
        logger.warning(
            "%s: %d of %d answers stopped at the %d-token budget (cut before they ended); "
            "--max-new-tokens %s=N raises it",
            cell, cut, len(samples), budget, cell.protocol,
        )  # fmt: skip
    return cut


def run_record(config: Any) -> dict[str, Any]:
    """The config as run.json records it (secrets redacted; how a command prints is no setting of a run)."""
    record = redact(dataclasses.asdict(config))
    record.pop("json", None)
    return record


def evaluate(config: TaskEvalConfig, engine: Engine | None = None) -> FamilyScores:
    """Run a model (or, with ``--engine baseline``, each baseline) on the family's docs into `config.out`.

    Requests go through the run's cache, so the same command resumes; a killed run loses no answer. Models
    and baselines go through `_run`: one loop over the cells, one scoring, one run.json layout, one writer.

    Raises:
        DataError: another process works in `config.out`, or it holds another config's finished run.
    """
    if config.engine == BASELINE_ENGINE:
        return evaluate_baselines(config)
    out = Path(config.out)
    check_out(config.out, local_inputs(config))  # `perrec_eval.outputs`: before anything is written
    with folder_lock(out):
        claim(out, run_record(config), overwrite=config.overwrite)
        out.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        engine = engine if engine is not None else config.load_engine()
        cached = CachedEngine(engine, out / "cache.jsonl")
        task = config.family

        def answer(cell: Cell, docs: Sequence[Doc]) -> tuple[list[DocPrediction], list[DocSample]]:
            predictions, samples = run_cell(task, cell, docs, cached, config)
            warn_cut(cell, samples, config.token_budgets()[cell.protocol])
            return predictions, samples

        def model_fields(scores: FamilyScores, samples: Sequence[DocSample]) -> dict[str, Any]:
            return {
                "complete": scores.complete,
                "engine_errors": {"requests": scores.num_engine_errors, "first": scores.first_engine_error},
                "cache": {"hits": cached.hits, "misses": cached.misses},
                "cost": run_cost(samples, time.perf_counter() - started, cached.hits),
                "label": config.label or default_label(engine.model, engine.name),
                "generation": {
                    "max_new_tokens": config.token_budgets(),
                    "structured_outputs": config.structured_outputs,
                },
            }

        return _run(config, load_docs(config), answer, redact(engine.info()), model_fields)


def evaluate_baselines(config: TaskEvalConfig) -> FamilyScores:
    """Score the family's no-LLM baselines like models, one run folder each (``out/<name>`` for several)."""
    task = config.family
    if task.predict_baseline is None:
        raise ConfigError(f"task {task.name} has no baselines")
    names = task.baselines if config.model == "all" else (config.model,)
    last = None
    check_out(config.out, local_inputs(config), runs=len(names) > 1)
    for name in names if len(names) > 1 else ():
        check_out(Path(config.out) / name, local_inputs(config))
    with folder_lock(config.out):
        docs = load_docs(config)
        for name in names:
            out = Path(config.out) / name if len(names) > 1 else Path(config.out)
            sub = dataclasses.replace(config, model=name, out=str(out))

            def answer(
                cell: Cell, cell_docs: Sequence[Doc], name: str = name
            ) -> tuple[list[DocPrediction], None]:
                answers = task.predict_baseline(
                    name, cell_docs, data=config.data, seed=config.seed, protocol=cell.protocol
                )
                if answers is None:  # the baseline does not answer this cell (`Task.predict_baseline`)
                    return [], None
                return [
                    DocPrediction(cell.subset, cell.protocol, doc.id, answer, doc.truth, doc.cluster)
                    for doc, answer in zip(cell_docs, answers, strict=True)
                ], None

            with folder_lock(out):
                claim(out, run_record(sub), overwrite=config.overwrite)
                last = _run(sub, docs, answer, {"name": BASELINE_ENGINE, "model": name})
    assert last is not None
    return last


def _run(
    config: TaskEvalConfig,
    docs: Mapping[str, list[Doc]],
    answer: Callable[[Cell, Sequence[Doc]], tuple[list[DocPrediction], list[DocSample] | None]],
    engine: Mapping[str, Any],
    model_fields: Callable[[FamilyScores, Sequence[DocSample]], dict[str, Any]] | None = None,
) -> FamilyScores:
    """Every cell answered by a system (a model's runners, or a baseline's direct answers), scored and
    written to `config.out` in the one run.json layout."""
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    task = config.family
    predictions: list[DocPrediction] = []
    samples: list[DocSample] | None = None
    for cell in config.cells():
        cell_predictions, cell_samples = answer(cell, docs[cell.subset])
        predictions += cell_predictions
        if cell_samples is not None:
            samples = [*(samples or []), *cell_samples]
    scores = score(task, predictions, samples or (), seed=config.seed, docs=docs)
    info = _run_info(config, scores, docs, engine=engine)
    if model_fields is not None:
        info = dataclasses.replace(info, **model_fields(scores, samples or []))
    write_run(out, samples=samples, records=predictions, scores=scores, run_info=info, report=None)
    return scores


def _run_info(
    config: TaskEvalConfig, scores: FamilyScores, docs: Mapping[str, list[Doc]], *, engine: Mapping[str, Any]
) -> RunInfo:
    return RunInfo(
        config=run_record(config),
        metric=FamilyMetric(scores.task, scores.headline),
        engine=engine,
        versions=versions("perrecbench", "datasets", "transformers", "torch", "openai", "vllm"),
        dataset_fingerprint=fingerprint(config.data),
        groups={subset: [doc.id for doc in subset_docs] for subset, subset_docs in docs.items()},
    )


def rescore(run_dir: str | Path, task: Task, *, seed: int = 0) -> FamilyScores:
    """The scores of a finished general-path run, computed again from its predictions and samples.

    The family's leak check runs again where the run's build is still there (the same fingerprint); where it
    is not, each cell keeps the check its scores.json recorded (the predictions and the build are those it
    was made on)."""
    from perrec_eval.results import read_family_scores, read_run_info

    predictions = read_predictions(run_dir, task)
    docs = _run_docs(task, read_run_info(run_dir), {p.subset for p in predictions})
    scores = score(task, predictions, read_samples(run_dir), seed=seed, docs=docs)
    recorded = Path(run_dir) / "scores.json"
    if docs is not None or task.leak_check is None or not recorded.is_file():
        return scores
    kept = {(c.subset, c.protocol): c.leak for c in read_family_scores(recorded).cells}
    cells = tuple(dataclasses.replace(c, leak=kept.get((c.subset, c.protocol))) for c in scores.cells)
    return dataclasses.replace(scores, cells=cells)


def _run_docs(task: Task, info: RunInfo, subsets: Iterable[str]) -> dict[str, list[Doc]] | None:
    """A run's docs read again from its build, when the family checks leaks and the build is the run's."""
    config = info.config
    data = config.get("data")
    if task.leak_check is None or task.load_docs is None or not data:
        return None
    if not (Path(data) / "manifest.json").is_file() or fingerprint(data) != info.dataset_fingerprint:
        return None
    split, max_docs, seed = config.get("split", "test"), config.get("max_docs"), config.get("seed", 0)
    return {s: list(task.load_docs(data, s, split, max_docs=max_docs, seed=seed)) for s in subsets}


def evaluate_command(config: TaskEvalConfig, engine: Engine | None = None) -> int:
    """`perrecbench evaluate --task NAME` for a family on the general path: run (with `engine`, or the one
    the config names), print its table."""
    import sys

    from perrec_eval.leaderboard import family

    scores = evaluate(config, engine)
    folders = rundir_folders(config)
    for section in family.report(folders):
        print(family.markdown(section))
    print(f"written to {config.out}/ (scores.json, predictions.jsonl, run.json)")
    print(f"next: perrecbench report {config.out} --out {report_folder(config.out)}")
    if not scores.complete:
        print(
            f"perrecbench evaluate: {scores.num_engine_errors} requests failed (first: "
            f"{scores.first_engine_error}); the scores are provisional: run the same command again to "
            "retry them",
            file=sys.stderr,
        )
        return 1
    return 0


def rundir_folders(config: TaskEvalConfig) -> list[Path]:
    from perrec_eval.rundir import run_folders

    return run_folders(config.out)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskScoreConfig:
    """Settings of `perrecbench score --task NAME`: a family's run scored again from its predictions, or
    another system's predictions file (``--data DIR --predictions FILE.jsonl``) scored like a run."""

    run_dir: str | None = option(
        "run folder written by `perrecbench evaluate --task NAME` (or give --data and --predictions)",
        positional=True,
        default=None,
    )
    task: str = option("task family (`perrecbench tasks` lists them)", default="perrecbench")
    write: bool = option("rewrite scores.json with the new scores", default=False)
    data: str | None = option("benchmark folder the --predictions answer (its --split rows)", default=None)
    predictions: str | None = option(
        'JSONL of another system, one line per row and cell: {"config": C, "protocol": P, "id": ROW_ID, '
        '"prediction": VALUE} ("protocol" may be left out where one cell of --protocols asks about C); or a '
        "harness's answers to `perrecbench export` tasks (lm-eval's samples, lighteval's details, or the "
        "run's output folder)",
        default=None,
    )
    split: str = option("dataset split the --predictions answer", default="test")
    subsets: tuple[str, ...] | None = option(
        "with --predictions: score only these configs (comma-separated; lines of others are left out)",
        default=None,
        shown="the file's",
    )
    limit: int | None = option(
        "with --predictions: score N rows of each config, the seeded sample `evaluate --limit N --seed S` "
        "takes (lines of other rows are left out), so the run is reported beside such runs",
        default=None,
        shown="all",
    )
    max_docs: int | None = option("the same as --limit", default=None, shown="all")
    protocols: tuple[str, ...] | None = option(
        "with --predictions: the protocols a line that names none may mean (comma-separated; one per config: "
        "`perrecbench tasks` lists the cells)",
        default=None,
        shown="every protocol",
    )
    out: str | None = option(
        "with --predictions: also write a run folder that `perrecbench report` compares with model runs",
        default=None,
    )
    label: str | None = option(
        "with --predictions: the system's name in reports (default: the file's name)", default=None
    )
    seed: int = option(
        "with --predictions: seed of the --max-docs sample and the bootstrap intervals (as evaluate's)",
        default=0,
    )
    overwrite: bool = option("with --out: replace a finished run of other settings there", default=False)
    json: bool = option("print the scores as JSON instead of the table", default=False)

    def __post_init__(self) -> None:
        check_task(self.task)
        check_seed(self.seed)
        one_limit(self, "max_docs")
        external = check_score_input(self)
        selection = (self.out, self.label, self.protocols, self.subsets, self.max_docs)
        if not external and any(value is not None for value in selection):
            raise ConfigError(
                "--out, --label, --protocols, --subsets and --max-docs go with --predictions (a run folder "
                "keeps its own)"
            )
        if self.max_docs is not None and self.max_docs < 1:
            raise ConfigError(f"--max-docs must be >= 1, got {self.max_docs}")
        task = get(self.task)
        for name, known in (("protocols", tuple(task.protocols)), ("subsets", task.subsets)):
            chosen = getattr(self, name)
            if isinstance(chosen, str):
                chosen = tuple(part for part in chosen.split(",") if part)
                object.__setattr__(self, name, chosen)
            if chosen is not None and (not chosen or any(c not in known for c in chosen)):
                raise ConfigError(f"--{name} of task {self.task} must be a subset of {','.join(known)}")


def score_command(config: TaskScoreConfig) -> int:
    """Print a run's scores computed again from its predictions.jsonl (``--write``: save them), or the
    scores of a predictions file (``--out``: also write it as a run folder): the table `evaluate` prints,
    or with ``--json`` the scores as JSON."""
    import sys

    from perrec_eval.results import read_run_info
    from perrec_eval.rundir import one_run_folder

    if config.run_dir is None:
        scores, run = score_predictions_file(config)
        _print_scores(config, get(config.task), scores, run)
        if config.out is not None:
            print(f"written to {config.out}/ (scores.json, predictions.jsonl, run.json)", file=sys.stderr)
        return 0
    run_dir = one_run_folder(config.run_dir)
    info = read_run_info(run_dir)
    if info.task != config.task:
        raise ConfigError(f"{run_dir} is a run of task {info.task}: pass --task {info.task} (or no --task)")
    task = get(config.task)
    from perrec_eval.leaderboard import family

    with folder_lock(run_dir) if config.write else contextlib.nullcontext():  # no writer of it meanwhile
        scores = rescore(run_dir, task, seed=int(info.config.get("seed", 0)))
        loaded = family.load(run_dir, checked=False)  # its scores.json is what this rewrites
        _print_scores(config, task, scores, dataclasses.replace(loaded, scores=scores))
        if config.write:
            fileio.write_json(Path(run_dir) / "scores.json", scores.to_json())
    if config.write:
        print(f"written to {run_dir}/scores.json", file=sys.stderr)
    else:
        print(f"not saved: add --write to rewrite {run_dir}/scores.json", file=sys.stderr)
    return 0


def _print_scores(config: TaskScoreConfig, task: Task, scores: FamilyScores, run: Any) -> None:
    """The scores as the table `evaluate` prints (only each cell's own metrics), or JSON with --json."""
    import json
    import sys

    from perrec_eval.leaderboard import family

    if config.json:
        json.dump(scores.to_json(), sys.stdout, indent=2)
        print()
        return
    print(family.markdown(family.section(task, [run], seed=config.seed)))


PREDICTIONS_ENGINE = "predictions"  # run.json's engine name of a run scored from a predictions file


def score_predictions_file(config: TaskScoreConfig) -> tuple[FamilyScores, Any]:
    """The scores of `config.predictions` on the build `config.data` (written as a run into `config.out`),
    and the run as the leaderboard loads one (`family.FamilyRun`)."""
    from perrec_eval.leaderboard.family import FamilyRun

    assert config.data is not None and config.predictions is not None
    task = get(config.task)
    label = config.label or Path(config.predictions).stem
    selection = {"split": config.split, "protocols": config.protocols}
    selection |= {"subsets": config.subsets, "max_docs": config.max_docs, "seed": config.seed}

    def scored() -> tuple[FamilyScores, RunInfo, list[DocPrediction]]:
        docs, predictions = read_external(task, config.data, config.predictions, **selection)
        scores = score(task, predictions, seed=config.seed, docs=docs)
        info = RunInfo(
            config=run_record(config),
            metric=FamilyMetric(scores.task, scores.headline),
            engine={"name": PREDICTIONS_ENGINE, "model": label, "file": Path(config.predictions).name},
            versions=versions("perrecbench"),
            dataset_fingerprint=fingerprint(config.data),
            groups={subset: [doc.id for doc in subset_docs] for subset, subset_docs in docs.items()},
            label=label,
        )
        return scores, info, predictions

    if config.out is None:
        scores, info, predictions = scored()
        return scores, FamilyRun(Path(label), label, info, scores, tuple(predictions))
    out = Path(config.out)
    check_out(config.out, {"--data": config.data, "--predictions": config.predictions}, command="score")
    with folder_lock(out):
        claim(out, run_record(config), overwrite=config.overwrite)
        scores, info, predictions = scored()
        out.mkdir(parents=True, exist_ok=True)
        write_run(out, samples=None, records=predictions, scores=scores, run_info=info, report=None)
    return scores, FamilyRun(out, label, info, scores, tuple(predictions))


def read_external(
    task: Task,
    data: str,
    path: str,
    *,
    split: str = "test",
    protocols: Sequence[str] | None = None,
    subsets: Sequence[str] | None = None,
    max_docs: int | None = None,
    seed: int = 0,
) -> tuple[dict[str, list[Doc]], list[DocPrediction]]:
    """Every row of the cells a predictions file names, with its prediction (None: failed or left out).

    A line is ``{"config": C, "protocol": P, "id": ROW_ID, "prediction": VALUE}``: it names its cell
    (config C asked with protocol P). ``protocol`` may be left out where one cell of `protocols`
    (``--protocols``; default: every protocol) asks about C; where several do, such a line is refused:
    which cell an answer belongs to is the system's to say (cells of one config may show different
    columns). A string VALUE is read as a model's answer is (`answer_prediction`), any other through the
    family's `Task.prediction_from`; null is a failed row. `subsets` keeps only the lines of those
    configs; `max_docs` scores the seeded sample of each config that `evaluate --max-docs N --seed S`
    takes (lines of rows outside it are left out).

    A harness's answers to exported tasks (`perrec_eval.harness.samples`: lm-eval's samples, lighteval's
    details, or a folder of one run's) are read as they are: each cell's answers as answer text, on the
    docs the export chose (`_harness_predictions`).

    Raises:
        DataError: a line that is not such an object, an unknown config, protocol or id, a cell the line
            does not name where several could be meant, a repeated row, a value of the wrong type or a NaN;
            the message names the line and the fix.
    """
    if task.load_docs is None:
        raise ConfigError(f"task {task.name} scores its own runs only: it reads no predictions file")
    from dataset_builder.manifest import check_files
    from perrec_eval.harness.samples import read_harness

    check_files(data)  # the build the predictions are scored against, as `evaluate` checks it
    harness = read_harness(path, task.name)
    if harness is not None:
        given = {"--protocols": protocols, "--subsets": subsets, "--max-docs": max_docs}
        return _harness_predictions(task, data, path, harness, given)
    lines = prediction_lines(path, protocols=True)
    chosen = {"protocols": protocols, "subsets": subsets, "max_docs": max_docs, "seed": seed}
    return _predictions_of_lines(task, data, path, lines, split=split, **chosen)


def _harness_predictions(
    task: Task, data: str, path: str, harness: Any, given: Mapping[str, Any]
) -> tuple[dict[str, list[Doc]], list[DocPrediction]]:
    """Each cell a harness answered, its docs those the export chose and answered (a harness run with a
    limit answers some of them)."""
    flags = [flag for flag, value in given.items() if value is not None]
    if flags:
        raise ConfigError(
            f"{flags[0]}: a harness's answers carry their cells and docs (the export's): drop {flags[0]}"
        )
    docs: dict[str, list[Doc]] = {}
    predictions: list[DocPrediction] = []
    for answers in harness.by_cell().values():
        selection = answers[0].selection_json
        if fingerprint(data) != selection["fingerprint"]:
            raise DataError(
                f"{answers[0].where} answers the build {selection['source']}, not --data {data}: pass the "
                "build the tasks were exported from"
            )
        lines = [
            PredictionLine(number, a.subset, a.doc_id, a.text, a.protocol)
            for number, a in enumerate(answers, start=1)
        ]
        cell_docs, cell_predictions = _predictions_of_lines(
            task,
            data,
            path,
            lines,
            split=selection["split"],
            protocols=[answers[0].protocol],
            max_docs=selection["max_docs"],
            seed=selection["seed"],
        )
        answered = {a.doc_id for a in answers}
        for subset, subset_docs in cell_docs.items():
            known = {doc.id for doc in docs.get(subset, [])}
            kept = [doc for doc in subset_docs if doc.id in answered and doc.id not in known]
            docs.setdefault(subset, []).extend(kept)
        predictions += [p for p in cell_predictions if p.id in answered]
    return docs, predictions


def _predictions_of_lines(
    task: Task,
    data: str,
    path: str,
    lines: list[PredictionLine],
    *,
    split: str = "test",
    protocols: Sequence[str] | None = None,
    subsets: Sequence[str] | None = None,
    max_docs: int | None = None,
    seed: int = 0,
) -> tuple[dict[str, list[Doc]], list[DocPrediction]]:
    """`read_external` of the lines of a predictions file (`PredictionLine`)."""
    if subsets is not None:
        lines = [line for line in lines if line.subset in subsets]
        if not lines:
            raise DataError(
                f"{path} holds no line of --subsets {','.join(subsets)}: choose configs the file answers"
            )
    cells = [_line_cell(task, path, line.number, line.subset, line.protocol, protocols) for line in lines]
    configs = list(dict.fromkeys(cell.subset for cell in cells))
    docs = {
        config: list(task.load_docs(data, config, split, max_docs=max_docs, seed=seed)) for config in configs
    }
    by_id = {config: {doc.id: doc for doc in subset_docs} for config, subset_docs in docs.items()}
    keep = [True] * len(lines)
    if max_docs is not None:  # rows outside the seeded sample are left out, as `evaluate --max-docs` does
        every = {config: {doc.id for doc in task.load_docs(data, config, split)} for config in configs}
        keep = [line.id in by_id[line.subset] or line.id not in every[line.subset] for line in lines]
    values: dict[tuple[Cell, str], Any] = {}
    for cell in dict.fromkeys(cells):  # a row may be answered once per cell of its config
        protocol = task.protocols[cell.protocol]
        cell_values = line_values(
            path,
            [line for line, of, kept in zip(lines, cells, keep, strict=True) if kept and of == cell],
            by_id,
            lambda _, doc, value, protocol=protocol: _prediction_of(task, protocol, doc, value),
            where=(data, split, "config", "row", "id"),
        )
        values |= {(cell, doc_id): value for (_, doc_id), value in cell_values.items()}
    predictions = [
        DocPrediction(cell.subset, cell.protocol, doc.id, values.get((cell, doc.id)), doc.truth, doc.cluster)
        for cell in dict.fromkeys(cells)
        for doc in docs[cell.subset]
    ]
    return docs, predictions


def _line_cell(
    task: Task, path: str, number: int, config: str, protocol: str | None, chosen: Sequence[str] | None
) -> Cell:
    """The cell a predictions line names: its config and protocol, or the one cell of `chosen` asking
    about its config."""
    where = f"{path} line {number}"
    if config not in task.subsets or not task.cells([config]):
        known = ", ".join(task.subsets)
        raise DataError(f"{where}: task {task.name} has no config {config!r}: use one of {known}")
    known = [cell.protocol for cell in task.cells([config])]
    if protocol is not None:
        if protocol not in known:
            raise DataError(
                f"{where}: config {config} is not asked with protocol {protocol!r}: use one of "
                f"{', '.join(known)}"
            )
        if chosen is not None and protocol not in chosen:
            raise ConfigError(
                f"{where} names protocol {protocol}: add it to --protocols (or leave --protocols out)"
            )
        return Cell(config, protocol)
    allowed = task.cells([config], chosen)
    if not allowed:
        raise ConfigError(
            f"no protocol of --protocols asks about config {config} ({where}): add one of {', '.join(known)}"
        )
    if len(allowed) > 1:
        named = " or ".join(f'"protocol": "{cell.protocol}"' for cell in allowed)
        raise DataError(
            f"{where}: config {config} is asked in {len(allowed)} cells ({', '.join(map(str, allowed))}): "
            f"name the line's cell with {named}, or pass --protocols"
        )
    return allowed[0]


def line_values(
    path: str,
    lines: Sequence[PredictionLine],
    by_id: dict[str, dict[str, Any]],
    value_of: Callable[[str, Any, Any], Any],
    *,
    where: tuple[str, str, str, str, str],
) -> dict[tuple[str, str], Any]:
    """The value of each line of a predictions file by (subset, id): `value_of(subset, doc, value)`.

    `where` names the build and the file's words: (data, split, the subset's kind, the doc's kind, the
    doc's id field), e.g. ``(data, "test", "config", "row", "id")``.

    Raises:
        DataError: an id the subset's docs do not hold, a doc given twice, a value `value_of` refuses
            (ValueError); the message names the line and the fix.
    """
    data, split, kind, item, id_field = where
    values: dict[tuple[str, str], Any] = {}
    first_line: dict[tuple[str, str], int] = {}
    for number, subset, doc_id, value, _ in lines:
        at = f"{path} line {number}"
        doc = by_id[subset].get(doc_id)
        if doc is None:
            raise DataError(
                f"{at}: {kind} {subset} has no {split} {item} with id {doc_id!r}: use the {id_field} values "
                f"of `load_dataset({data!r}, {subset!r}, split={split!r})`"
            )
        if (subset, doc_id) in first_line:
            raise DataError(
                f"{at}: {item} {doc_id!r} of {kind} {subset} is also on line {first_line[subset, doc_id]}: "
                f"keep one line per {item}"
            )
        first_line[subset, doc_id] = number
        try:
            values[subset, doc_id] = value_of(subset, doc, value)
        except ValueError as err:
            raise DataError(f"{at}: {kind} {subset}, {item} {doc_id!r}: {err}") from None
    return values


class _NotFinite(ValueError):
    pass


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(text)
    return value


def _refuse_constant(name: str) -> float:
    raise _NotFinite(name)


class PredictionLine(NamedTuple):
    """One line of a predictions file: its number, config (a family's subset), row id, value, and the
    protocol it names (None: it names none)."""

    number: int
    subset: str
    id: str
    value: Any
    protocol: str | None = None


_LINE_KEYS = {"config", "id", "prediction"}


def prediction_lines(path: str, *, protocols: bool = False) -> list[PredictionLine]:
    """Each line of a predictions file, blank lines skipped; with `protocols`, a line may name its cell's
    protocol ("protocol")."""
    import json

    task_lines = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: no such file: pass the predictions JSONL with --predictions") from None
    except UnicodeDecodeError:
        raise DataError(f"{path} is not UTF-8 text: write the predictions as UTF-8 JSONL") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        try:
            record = json.loads(line, parse_constant=_refuse_constant, parse_float=_finite)
        except _NotFinite as err:
            raise DataError(
                f"{where}: {err} is not a finite number: write one, or null for no prediction"
            ) from None
        except ValueError as err:
            raise DataError(f"{where} is not JSON ({err}): write one JSON object per line") from None
        except RecursionError:
            raise DataError(f"{where} is nested too deeply to read: write one JSON object per line") from None
        keys = set(record) if isinstance(record, dict) else set()
        if not _LINE_KEYS <= keys <= ({"protocol"} if protocols else set()) | _LINE_KEYS:
            shape = '"protocol": P, ' if protocols else ""
            raise DataError(
                f'{where}: each line must be {{"config": C, {shape}"id": ROW_ID, "prediction": VALUE}}'
                + (' ("protocol" may be left out where the config is asked in one cell)' if protocols else "")
            )
        protocol = record.get("protocol")
        if not isinstance(record["config"], str) or not isinstance(record["id"], str | int):
            raise DataError(f"{where}: config must be a string and id a string (the row's id)")
        if protocol is not None and not isinstance(protocol, str):
            raise DataError(f"{where}: protocol must be a string (the cell's protocol)")
        line = PredictionLine(number, record["config"], str(record["id"]), record["prediction"], protocol)
        task_lines.append(line)
    if not task_lines:
        raise DataError(f"{path} holds no prediction: write one line per row of the configs you score")
    return task_lines


def _prediction_of(task: Task, protocol: Any, doc: Doc, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        return answer_prediction(protocol, doc, value)
    if task.prediction_from is None:
        raise ValueError(f"task {task.name} takes the answer text (a string), got {type(value).__name__}")
    return task.prediction_from(doc, protocol.name, value)


def answer_prediction(protocol: Any, doc: Doc, text: str) -> Any:
    """A doc's prediction from answer text, read by its protocol as a model's one answer is."""
    runner = protocol.runner(doc)
    slots = runner.pending()
    if len(slots) != 1:
        raise ValueError(f"protocol {protocol.name} asks more than once: answer text cannot stand for it")
    parsed = protocol.parse(text, slots[0])
    runner.feed({slots[0]: parsed.value if parsed.ok else None})
    return runner.prediction()
