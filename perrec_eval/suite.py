"""A suite: one model on several task families with their baselines, in one folder, one report, one card.

`perrecbench evaluate --task all` (or ``--task perrecbench,llmrec``: lm-eval's ``--tasks`` shape) is a list
of tasks, not a new code path: for each family it builds the benchmark when asked to (``--source``), runs the
family's no-LLM baselines once per build and doc set, then runs the model through the family's own evaluate
(`Task.evaluate`), each into an ordinary run folder, and writes one report (`perrec_eval.leaderboard`)
that opens with a summary table. `evaluate` is the same in Python (lm-eval's ``simple_evaluate``).

The suite folder::

    SUITE/suite.json                                   what ran: families, builds, models, cost
    SUITE/data/<family>/                               a family built from --source (when it was)
    SUITE/runs/<family>/<model>/                       a model's run of the family
    SUITE/runs/<family>/baselines/<key>/<baseline>/    the baselines of one build and doc set
    SUITE/report/                                      the report of every run in the folder

A second model evaluated into the same folder adds its runs and is compared with the first in the report;
the baselines of a build and doc set already run are reused, never run again. A killed suite run again
skips its finished families and asks the engine only what its run folders' caches do not hold.

Settings: the suite's own flags (engine, model, label, ``--limit``, seed, ...) reach every family; each
family starts from its suite defaults (`Task.suite_defaults`, `Task.suite_build`) and takes any of its own
evaluate settings from its section of ``--config FILE.yaml`` (a mapping named after the family; its
``build`` key holds build settings). ``--dry-run`` counts each family's requests, prompt tokens and answer
budget by running it against a fake engine in a temporary folder, and writes nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from perrec_eval import fileio, registry
from perrec_eval.cliconfig import check_seed, check_text, coerce, option
from perrec_eval.config import BASELINE_ENGINE, EngineSpec, default_label
from perrec_eval.errors import ConfigError, DataError
from perrec_eval.suitedir import (
    SUITE_FILE,
    costs_of,
    is_suite_file,
    read_record,
    run_folders,
    write_record,
)
from perrec_eval.types import ChatRequest, Completion, GenParams

logger = logging.getLogger(__name__)

ALL = registry.ALL
# Settings of the suite that every family's evaluate config takes under the same name when given.
SHARED = (
    "engine", "model", "base_url", "api_key_env", "engine_args", "max_new_tokens", "label", "seed",
    "structured_outputs", "temperature", "top_p", "samples",
)  # fmt: skip
# Fields a family's evaluate config may name its doc limit by (`--limit`'s spellings).
LIMIT_FIELDS = ("max_groups", "max_docs")


parse_tasks = registry.parse_tasks
is_suite_spec = registry.is_suite_spec


@dataclass(frozen=True, slots=True, kw_only=True)
class SuiteConfig(EngineSpec):
    """Settings of `perrecbench evaluate --task all|NAME,NAME`: one model on several families."""

    sections_field: ClassVar[str] = "sections"  # per-family sections of --config FILE.yaml

    task: str = option("the families: all, or NAME,NAME (`perrecbench tasks` lists them)", default=ALL)
    out: str = option("suite folder: a run per family, the baselines, suite.json and report/")
    data: str | None = option(
        "the builds: a folder holding one build per family (named after it, e.g. DIR/perrecbench), or "
        "FAMILY=PATH_OR_HUB_ID,... (default: SUITE/data/<family>, built from --source when missing)",
        default=None,
    )
    source: str | None = option(
        "raw Amazon Reviews 2023 files: each family not built yet is built into SUITE/data/<family> with "
        "its suite build settings",
        default=None,
    )
    label: str | None = option(
        "the name of the model's rows in reports", default=None, shown="the model file's or folder's stem"
    )
    limit: int | None = option(
        "docs per cell of every family (a seeded sample: PerRecBench groups per level, LLMRec and "
        "RecBench+ docs per subset)",
        default=None,
        shown="each family's suite default",
    )
    seed: int = option("seed of every family's samples, draws and intervals", default=0)
    structured_outputs: bool = option("constrain every answer to its protocol's format", default=False)
    temperature: float | None = option(
        "sampling temperature (0 = greedy)", default=None, shown="each family's"
    )
    top_p: float | None = option("nucleus sampling top-p", default=None, shown="each family's")
    samples: int | None = option("self-consistency: samples per request", default=None, shown="1")
    baselines: bool = option("also run each family's no-LLM baselines on the same docs", default=True)
    report: bool = option("write the suite's report into SUITE/report/", default=True)
    plots: bool = option("the report's PNG plots (needs the report extra: matplotlib)", default=True)
    dry_run: bool = option(
        "print each family's requests, prompt tokens and answer budget, and write nothing", default=False
    )
    overwrite: bool = option(
        "replace a family's finished run of other settings (the same command resumes without it)",
        default=False,
    )
    sections: Any = option(
        "per-family settings (only in --config: a mapping named after each family; the sections of families "
        "--task does not run are left unused)",
        default=None,
        shown="none",
    )

    def __post_init__(self) -> None:
        EngineSpec.__post_init__(self)
        families = parse_tasks(self.task)
        check_seed(self.seed)
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"--limit must be >= 1, got {self.limit}")
        if self.engine == BASELINE_ENGINE:
            raise ConfigError(
                "a suite evaluates a model beside the baselines (which it runs itself): choose --engine "
                "fake, hf, openai or vllm"
            )
        if self.adapter:
            raise ConfigError(
                "a suite evaluates one model: merge the adapter first (`perrecbench sft merge`), or run "
                "each family's evaluate with --adapter"
            )
        if self.label is not None:
            check_text("--label", self.label)
        sections = self.sections or {}
        if not isinstance(sections, Mapping):
            raise ConfigError("the families' sections of --config must be mappings of settings")
        for name, section in sections.items():
            if not isinstance(section, Mapping):
                raise ConfigError(f"--config: the {name} section must be a mapping of {name}'s settings")
        data_by_family(self, families)  # a malformed --data is refused before anything runs

    @property
    def families(self) -> tuple[str, ...]:
        return parse_tasks(self.task)

    @classmethod
    def section_names(cls) -> tuple[str, ...]:
        """The families whose names are sections of --config (written with dashes or underscores)."""
        return registry.names()


def data_by_family(config: SuiteConfig, families: Sequence[str]) -> dict[str, str]:
    """Where each family's build is: ``--data FAMILY=...`` entries, a folder's ``<family>`` subfolder, or
    ``SUITE/data/<family>`` (built from ``--source`` when missing).

    Raises:
        ConfigError: an entry of a family the suite does not run, or a build that is not there and no
            --source to build it.
    """
    given: dict[str, str] = {}
    folder: str | None = None
    if config.data:
        if "=" in config.data:
            for entry in (part.strip() for part in config.data.split(",") if part.strip()):
                name, sep, where = entry.partition("=")
                if not sep or not where:
                    raise ConfigError(
                        f"--data {entry!r}: write FAMILY=PATH_OR_HUB_ID, e.g. llmrec=builds/llmrec"
                    )
                if name not in families:
                    raise ConfigError(f"--data names {name}, which --task {config.task} does not run")
                given[name] = where
        else:
            folder = config.data
    out = {}
    for name in families:
        if name in given:
            out[name] = given[name]
        elif folder is not None and (Path(folder) / name).is_dir():
            out[name] = str(Path(folder) / name)
        elif folder is not None and len(families) == 1 and (Path(folder) / "manifest.json").is_file():
            out[name] = folder
        else:
            out[name] = str(Path(config.out) / "data" / name)
            if not _is_build(out[name]) and config.source is None:
                where = f" (no {Path(folder) / name})" if folder is not None else ""
                raise ConfigError(
                    f"no build of {name}{where}: pass --source RAW to build it into {out[name]}, or --data "
                    f"{name}=PATH_OR_HUB_ID"
                )
    return out


def _is_build(path: str) -> bool:
    return (Path(path) / "manifest.json").is_file()


def _family_evaluate(task: Any) -> tuple[type, Callable[..., Any]]:
    """The family's evaluate config class and its Python evaluate function (`Task.evaluate`)."""
    cls, _ = registry.evaluate_command(task)
    return cls, registry.load(task.evaluate)


def _typed(cls: type, values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """`values` coerced to the field types of `cls` (as --config's values are); unknown keys refused."""
    hints = typing.get_type_hints(cls)
    names = {field.name for field in dataclasses.fields(cls)}
    out = {}
    for key, value in values.items():
        name = str(key).replace("-", "_")
        if name not in names:
            raise ConfigError(f"{where}: unknown setting {key!r}; valid ones: {', '.join(sorted(names))}")
        out[name] = coerce(f"{name} in {where}", hints[name], value)
    return out


def family_configs(config: SuiteConfig, name: str, data: str) -> tuple[Any, Any | None]:
    """The family's evaluate config of the model, and of its baselines (None: ``--no-baselines``).

    Its suite defaults, then the suite's settings, then its own --config section (the most specific wins);
    the baselines take the settings that choose the docs and cells (`Task.selection`).
    """
    task = registry.get(name)
    cls, _ = _family_evaluate(task)
    section = dict((config.sections or {}).get(name) or {})
    section.pop("build", None)
    where = f"the {name} section of --config"
    values: dict[str, Any] = _typed(cls, task.suite_defaults or {}, f"{name}'s suite defaults")
    values |= {key: getattr(config, key) for key in SHARED if getattr(config, key) not in (None, (), False)}
    if config.limit is not None:
        values = {key: value for key, value in values.items() if key not in LIMIT_FIELDS}
        values["limit"] = config.limit
    own = _typed(cls, section, where)
    if any(key in own for key in ("limit", *LIMIT_FIELDS)):  # the section's own limit, in any spelling
        values = {key: value for key, value in values.items() if key not in ("limit", *LIMIT_FIELDS)}
    values |= own
    run_dir = Path(config.out) / "runs" / name
    label = values.get("label") or default_label(config.model, config.engine)
    values |= {"task": name, "data": data, "out": str(run_dir / slug(label)), "overwrite": config.overwrite}
    values.setdefault("label", label)
    model = cls(**values)
    if not config.baselines or not task.baselines:
        return model, None
    chosen = {key: getattr(model, key) for key in task.selection if hasattr(model, key)}
    chosen |= {"task": name, "data": data, "engine": BASELINE_ENGINE, "model": "all", "seed": model.seed}
    key = baselines_key(task, model, data)
    baselines = cls(**chosen, out=str(run_dir / "baselines" / key), overwrite=config.overwrite)
    return model, baselines


def slug(label: str) -> str:
    """A run folder's name for a row label.

    >>> slug("Qwen/Qwen2.5-7B-Instruct"), slug("smollm2 135m")
    ('Qwen--Qwen2.5-7B-Instruct', 'smollm2-135m')
    """
    text = label.replace("/", "--")
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text).strip(".-") or "model"


def baselines_key(task: Any, model: Any, data: str) -> str:
    """The key of a family's baseline runs: the build's fingerprint and the settings that choose the docs and
    cells (`Task.selection`), so one build and doc set runs its baselines once for every model."""
    record = {"fingerprint": fingerprint(task, data)}
    record |= {key: _jsonable(getattr(model, key)) for key in task.selection if hasattr(model, key)}
    digest = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:12]
    return digest


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def fingerprint(task: Any, data: str) -> str:
    """The fingerprint the family's runs record of the build at `data` (a Hub id: the id itself)."""
    if not Path(data).exists():
        return data
    from perrec_eval.evaluation import build_fingerprint

    return build_fingerprint(task, data)


# ------------------------------------------------------------------------------------------------- cost


class TokenCounter:
    """Counts a request's prompt tokens with the model's own tokenizer (its chat template applied, as the hf
    engine counts them) when it loads, else estimates them (one token per four characters), and says which.
    The fake engine's scripts count words, as the fake engine reports them."""

    def __init__(self, engine: str, model: str) -> None:
        self.tokenizer = None
        self.how = "estimate (4 characters per token)"
        if engine == "fake":
            self.how = "words (the fake engine's count)"
            return
        try:
            import transformers

            from perrec_eval.engines.hf import gguf_location

            location, gguf = gguf_location(model)
            tokenizer = transformers.AutoTokenizer.from_pretrained(location, **gguf)
            if getattr(tokenizer, "chat_template", None):
                self.tokenizer = tokenizer
                self.how = f"the model's tokenizer ({model})"
        except Exception as err:  # noqa: BLE001 - any failure to load it means: estimate, and say so
            logger.info("no tokenizer of %s (%s): prompt tokens are estimated", model, type(err).__name__)

    def __call__(self, request: ChatRequest) -> int:
        messages = [dict(message) for message in request.messages]
        if self.tokenizer is not None:
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        if self.how.startswith("words"):
            return sum(len(message["content"].split()) for message in messages)
        return -(-sum(len(message["content"]) for message in messages) // 4)


@dataclass(slots=True)
class Cost:
    """What a family's model run sent its engine (past the answer cache): requests, prompt tokens by the
    suite's counter, the answer budget (each request's max_tokens × samples) and the tokens answered."""

    requests: int = 0
    prompt_tokens: int = 0
    answer_budget: int = 0
    answer_tokens: int = 0

    def to_json(self) -> dict[str, int]:
        return dataclasses.asdict(self)


class Meter:
    """An engine that counts what passes through it (`Cost`) and hands it on unchanged: under the run's
    answer cache, so it sees what the engine is asked, and keys stay the inner engine's."""

    def __init__(self, engine: Any, counter: Callable[[ChatRequest], int]) -> None:
        self.engine = engine
        self.counter = counter
        self.cost = Cost()

    name = property(lambda self: self.engine.name)
    model = property(lambda self: self.engine.model)
    adapter = property(lambda self: self.engine.adapter)
    options = property(lambda self: getattr(self.engine, "options", None))
    adapter_path = property(lambda self: getattr(self.engine, "adapter_path", None))

    def info(self) -> dict[str, Any]:
        return self.engine.info()

    def with_adapter(self, name: str, path: str) -> Meter:
        return Meter(self.engine.with_adapter(name, path), self.counter)

    def generate(
        self, requests: Sequence[ChatRequest], params: GenParams, *, on_results=None
    ) -> list[Completion]:
        self.cost.requests += len(requests)
        self.cost.prompt_tokens += sum(self.counter(request) for request in requests)
        self.cost.answer_budget += params.max_tokens * params.n * len(requests)
        completions = self.engine.generate(requests, params, on_results=on_results)
        self.cost.answer_tokens += sum(c.completion_tokens or 0 for c in completions)
        return completions


# ------------------------------------------------------------------------------------------------ the run


@dataclass(frozen=True, slots=True)
class FamilyResult:
    """One family of a suite: its run folder, its baselines' folder, its scores and what it cost."""

    family: str
    run: Path
    baselines: Path | None
    scores: Any
    cost: Mapping[str, Any]


def evaluate(config: SuiteConfig | None = None, **settings: Any) -> dict[str, Any]:
    """Run a suite and return its results: what `perrecbench evaluate --task all` runs (lm-eval's
    ``simple_evaluate``).

    Args:
        config: a `SuiteConfig`; or give its settings as keywords (``task="all", engine="hf",
            model="...", source="raw", out="suite"``, and per family ``sections={"llmrec": {...}}``).
        **settings: `engine` may be an engine object instead of a backend's name (as lm-eval takes an LM
            object): it answers every family (tests pass a `FakeEngine`); with `config`, it is the only
            keyword.

    Returns:
        ``{"results": {family: its scores.json}, "summary": {...}, "cost": {family: ...}, "out": path}``.

    >>> evaluate(task="perrecbench,nothing", engine="fake", model="constant", out="x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    perrec_eval.errors.ConfigError: unknown task 'nothing': choose one of perrecbench, ...
    """
    engine = settings.get("engine")
    instance = None if engine is None or isinstance(engine, str) else engine
    if config is None:
        if instance is not None:
            settings = {**settings, "engine": instance.name, "model": settings.get("model", instance.model)}
        config = SuiteConfig(**settings)
    elif set(settings) - {"engine"} or (engine is not None and instance is None):
        raise TypeError("pass a SuiteConfig (and an engine object), or its settings as keywords, not both")
    engine = instance
    if config.dry_run:
        return {"dry_run": dry_run(config)}
    results = run_suite(config, engine)
    out: dict[str, Any] = {
        "results": {r.family: r.scores.to_json() for r in results},
        "cost": {r.family: dict(r.cost) for r in results},
        "out": config.out,
    }
    if config.report:
        out["summary"] = write_report(config)
    return out


def check_out(config: SuiteConfig) -> Path:
    """Refuse a suite folder that holds anything a suite does not write, or overlaps an input."""
    from perrec_eval import outputs

    folder = outputs.target(config.out)
    inputs = {"--source": config.source, "--model": config.model}
    own = (folder / "data").resolve()
    for name, data in data_by_family(config, config.families).items():  # each build (not the folder of them)
        if Path(data).exists() and not Path(data).resolve().is_relative_to(own):
            inputs[f"--data ({name})"] = data  # (the suite's own builds, SUITE/data, are its to read)
    outputs.refuse_overlap(folder, inputs)
    outputs.refuse_foreign(folder, is_suite_file, command="evaluate")
    return folder


def run_suite(config: SuiteConfig, engine: Any = None) -> list[FamilyResult]:
    """Every family of the suite: build (when asked), baselines (once per build and doc set), the model."""
    from perrec_eval.engines import check_installed
    from perrec_eval.lock import folder_lock

    out = check_out(config)
    if engine is None:  # before any build or baseline: a missing extra would stop the suite only after them
        check_installed(config.engine)
    with folder_lock(out):
        out.mkdir(parents=True, exist_ok=True)
        record = read_record(out)
        data = data_by_family(config, config.families)
        loaded: list[Any] = [engine]
        counter: list[TokenCounter] = []
        results = []
        for name in config.families:
            results.append(_run_family(config, name, data[name], record, loaded, counter))
    return results


def _engine(config: SuiteConfig, loaded: list[Any]) -> Any:
    """The suite's engine, loaded on first use (a suite whose families all finished loads none)."""
    if loaded[0] is None:
        loaded[0] = config.load_engine()
    return loaded[0]


def _run_family(
    config: SuiteConfig, name: str, data: str, record: dict[str, Any], loaded: list[Any], counter: list
) -> FamilyResult:
    task = registry.get(name)
    if not Path(data).exists() and config.source is not None and data.startswith(str(Path(config.out))):
        build(config, name, data)
    model, baselines = family_configs(config, name, data)
    _, run = _family_evaluate(task)
    started = time.perf_counter()
    families = record.setdefault("families", {})
    entry = families.setdefault(name, {})
    entry["data"] = _shown(data, config.out)
    entry["fingerprint"] = fingerprint(task, data)
    done = entry.setdefault("baselines", [])
    if baselines is not None:
        shown = _shown(baselines.out, config.out)
        if shown in done and Path(baselines.out).is_dir():
            logger.info("%s: the baselines of this build and doc set ran before (%s)", name, baselines.out)
        else:
            print(f"{name}: the baselines", file=sys.stderr)
            run(baselines)
            done.append(shown)
            write_record(Path(config.out), record)
    meter = None
    if finished(model):
        logger.info("%s: the model's run is finished (%s)", name, model.out)
    else:
        print(f"{name}: {model.label} ({model.engine} {model.model})", file=sys.stderr)
        if not counter:
            counter.append(TokenCounter(config.engine, config.model))
        meter = Meter(_engine(config, loaded), counter[0])
        run(model, meter)
    from perrec_eval.results import read_family_scores, read_run_info

    info = read_run_info(model.out)
    models = entry.setdefault("models", {})
    previous = models.get(model.label, {})
    cost = dict(previous.get("cost") or {})
    if meter is not None:
        cost = {
            **meter.cost.to_json(),
            "wall_seconds": round(time.perf_counter() - started, 3),
            "cache_hits": (info.cache or {}).get("hits", 0),
            "prompt_tokens_counted_by": counter[0].how,
        }
    models[model.label] = {
        "run": _shown(model.out, config.out),
        "baselines": None if baselines is None else _shown(baselines.out, config.out),
        "cost": cost,
    }
    write_record(Path(config.out), record)
    scores = read_family_scores(Path(model.out) / "scores.json", name)
    return FamilyResult(
        name, Path(model.out), None if baselines is None else Path(baselines.out), scores, cost
    )


def _shown(path: str, out: str) -> str:
    """A path as suite.json records it: relative to the suite folder when inside it (no absolute path)."""
    try:
        return Path(os.path.relpath(Path(path).absolute(), Path(out).absolute())).as_posix()
    except ValueError:
        return str(path)


def finished(config: Any) -> bool:
    """Whether `config.out` holds a finished run of exactly this config (the same command would only read
    its cache again)."""
    from perrec_eval.evaluation import run_record

    path = Path(config.out) / "run.json"
    if not path.is_file():
        return False
    try:
        recorded = fileio.read_json(path)["config"]
    except (DataError, KeyError, TypeError, ValueError):
        return False
    expected = run_record(config)
    return all(
        recorded.get(key) == value for key, value in expected.items() if key not in ("out", "overwrite")
    )


def build(config: SuiteConfig, name: str, out: str) -> None:
    """Build family `name` from --source into `out` with its suite build settings and its section's
    ``build`` settings."""
    from dataset_builder.build import build as run_build
    from dataset_builder.tasks import task_config

    task = registry.get(name)
    cls = task_config(name)
    section = dict(((config.sections or {}).get(name) or {}).get("build") or {})
    values = _typed(cls, {**(task.suite_build or {}), **section}, f"the build settings of {name}")
    print(f"{name}: building from {config.source} into {out}", file=sys.stderr)
    run_build(cls(**{**values, "source": config.source, "out": out}))


# ----------------------------------------------------------------------------------------------- dry run


def dry_run(config: SuiteConfig) -> dict[str, Any]:
    """Each family's requests, prompt tokens and answer budget, counted by running the model's evaluate
    against the fake engine's fixed answers in a temporary folder (removed after): nothing is written.

    What depends on the model's own answers is counted on those fixed answers, an estimate said as such:
    the requests of protocols that ask according to earlier answers (PerRecBench's heapsort pairwise), and
    the prompt tokens of prompts that hold an answer (the profiles PerRecBench's model writes, counted at the
    fake profile's length). A family not built yet cannot be counted before it is built.
    """
    from perrec_eval.engines.fake import FakeEngine, constant

    data = data_by_family(config, config.families)
    counter = TokenCounter(config.engine, config.model)
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="perrecbench-dry-run-") as tmp:
        for name in config.families:
            if not Path(data[name]).exists() and config.source is not None:
                figures[name] = {"not_built": data[name]}
                continue
            sub = dataclasses.replace(config, out=str(Path(tmp) / "suite"), dry_run=False)
            model, _ = family_configs(sub, name, data[name])
            _, run = _family_evaluate(registry.get(name))
            meter = Meter(FakeEngine(constant, model=config.model), counter)
            run(model, meter)
            estimated = config.engine != "fake"  # the fake engine's run answers as the dry run did
            figures[name] = meter.cost.to_json() | {
                "adaptive": estimated and _adaptive(model),
                "written_profiles": estimated and _writes_profiles(model),
            }
            shutil.rmtree(Path(tmp) / "suite", ignore_errors=True)
    total = Cost()
    for entry in figures.values():
        for key in ("requests", "prompt_tokens", "answer_budget"):
            setattr(total, key, getattr(total, key) + entry.get(key, 0))
    return {"families": figures, "total": total.to_json(), "prompt_tokens_counted_by": counter.how}


def _adaptive(config: Any) -> bool:
    """Whether a family's requests depend on the answers (heapsort pairwise): the count is an estimate."""
    return getattr(config, "pairwise_strategy", None) == "heapsort" and "pairwise" in (
        getattr(config, "methods", None) or ()
    )


def _writes_profiles(config: Any) -> bool:
    """Whether a family's prompts hold profiles its model writes first (PerRecBench without --profiles or
    --no-profile): their prompt tokens depend on the answers."""
    return getattr(config, "no_profile", True) is False and getattr(config, "profiles", "") is None


def dry_run_text(figures: Mapping[str, Any]) -> str:
    """The dry run as a table: per family and in total."""
    lines = [
        "| family | requests | prompt tokens | answer budget (tokens) |",
        "|---|---:|---:|---:|",
    ]
    for name, entry in figures["families"].items():
        if "not_built" in entry:
            lines.append(f"| {name} | not built yet ({entry['not_built']}): counted once built | – | – |")
            continue
        note = " (estimate: adaptive requests)" if entry.get("adaptive") else ""
        profiles = " (estimate: the model's profiles counted at the fake profile's length)"
        lines.append(
            f"| {name} | {entry['requests']:,}{note} | {entry['prompt_tokens']:,}"
            f"{profiles if entry.get('written_profiles') else ''} | {entry['answer_budget']:,} |"
        )
    total = figures["total"]
    lines.append(
        f"| total | {total['requests']:,} | {total['prompt_tokens']:,} | {total['answer_budget']:,} |"
    )
    how = figures["prompt_tokens_counted_by"]
    lines += [
        "",
        f"Prompt tokens: counted with {how}. Answer budget: each request's max new tokens × samples (what "
        "the run may spend, not what it will). Baselines send no request. Nothing was written.",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ report


def summary(runs: Sequence[Any], *, seed: int = 0, costs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The suite's summary: one row per model (its label), one column per family headline
    (`Task.summary`), each value with its 95% interval and direction; and what each family cost."""
    from perrec_eval.leaderboard.family import mean_interval
    from perrec_eval.task import Cell

    families = list(dict.fromkeys(run.task for run in runs))
    columns = []
    for name in families:
        task = registry.get(name)
        for metric, where in task.summary or ((task.headline.name, "average"),):
            spec = next(m for m in task.metrics if m.name == metric)
            columns.append({"task": name, "title": task.title, "metric": metric, "cell": where,
                            "higher_is_better": spec.higher_is_better})  # fmt: skip
    models = [run for run in runs if not run.info.is_baseline]
    labels = list(dict.fromkeys(run.label for run in models))
    rows = []
    for label in labels:
        values = {}
        for column in columns:
            run = next((r for r in models if r.label == label and r.task == column["task"]), None)
            values[_column_key(column)] = (
                None if run is None else _headline(run, column, seed, mean_interval, Cell)
            )
        rows.append({"label": label, "values": values})
    return {"columns": columns, "rows": rows, "cost": dict(costs or {})}


def _column_key(column: Mapping[str, Any]) -> str:
    return f"{column['task']}:{column['metric']}:{column['cell']}"


def _headline(run: Any, column: Mapping[str, Any], seed: int, mean_interval: Any, Cell: Any) -> Any:
    task = registry.get(run.task)
    metric = column["metric"]
    if column["cell"] != "average":
        subset, _, protocol = column["cell"].partition("/")
        cell = run.scores.cell(subset, protocol)
        if cell is None or metric not in cell.metrics or cell.metrics[metric].value is None:
            return None
        value = cell.metrics[metric]
        return {
            "value": value.value,
            "ci_low": value.ci_low,
            "ci_high": value.ci_high,
            "num_docs": cell.num_docs,
        }
    cells = _average_cells(task, run, metric)
    if len(cells) < 1:
        return None
    values = [run.scores.cell(c.subset, c.protocol).metrics[metric].value for c in cells]
    if any(v is None for v in values):
        return None
    low, high = mean_interval(task, run, metric, cells, seed=seed)
    return {
        "value": sum(values) / len(values),
        "ci_low": low,
        "ci_high": high,
        "cells": [str(c) for c in cells],
    }


def _average_cells(task: Any, run: Any, metric: str) -> list[Any]:
    """The cells a run's average of `metric` covers, as its report's average does: every cell
    (`Task.average_over` "cells"), or one cell per subset."""
    from perrec_eval.task import Cell

    hooks = getattr(task, "report", None)
    names = [f"{c.subset}/{c.protocol}" for c in run.scores.cells if metric in c.metrics]
    main = list(hooks.main_cells(names)) if hooks is not None and hasattr(hooks, "main_cells") else names
    chosen: dict[Any, Any] = {}
    for name in main:
        cell = Cell(*name.split("/", 1))
        chosen.setdefault(cell if task.average_over == "cells" else cell.subset, cell)
    return list(chosen.values())


def summary_grid(data: Mapping[str, Any]) -> Any:
    from perrec_eval.leaderboard.document import DASH, Grid
    from perrec_eval.leaderboard.family import fmt

    header = ["model"]
    for column in data["columns"]:
        where = "average" if column["cell"] == "average" else column["cell"]
        direction = "higher" if column["higher_is_better"] else "lower"
        header.append(f"{column['title']}: {column['metric']} {where} ({direction} is better)")
    rows = []
    for row in data["rows"]:
        cells = [row["label"]]
        for column in data["columns"]:
            value = row["values"].get(_column_key(column))
            if value is None:
                cells.append(DASH)
                continue
            interval = (
                f" [{fmt(value['ci_low'])}, {fmt(value['ci_high'])}]"
                if value.get("ci_low") is not None
                else ""
            )
            cells.append(f"{fmt(value['value'])}{interval}")
        rows.append(cells)
    return Grid(header, rows, css="board")


def cost_grid(data: Mapping[str, Any]) -> Any:
    from perrec_eval.leaderboard.document import DASH, Grid

    rows = []
    for label, families in data.get("cost", {}).items():
        for name, cost in families.items():
            if not cost:
                continue
            rows.append([
                label, name, f"{cost.get('wall_seconds', 0):.0f}", f"{cost.get('requests', 0):,}",
                f"{cost.get('cache_hits', 0):,}", f"{cost.get('prompt_tokens', 0):,}",
                f"{cost.get('answer_tokens', 0):,}", cost.get("prompt_tokens_counted_by", DASH),
            ])  # fmt: skip
    header = ["model", "family", "wall s", "requests", "from cache", "prompt tokens", "answer tokens",
              "prompt tokens counted by"]  # fmt: skip
    return Grid(header, rows) if rows else None


SUMMARY_NOTE = (
    "One row per model, one column per family's headline: PerRecBench's PTC averaged over its cells, "
    "LLMRec's direct NDCG@10 and rating RMSE, RecBench+'s recall averaged over its query types (each "
    "family's own choice, `Task.summary`). Brackets: 95% bootstrap intervals over docs (an average's "
    "cells resampled by subset). Baselines and the tests against the best are in each family's section below."
)


def summary_blocks(data: Mapping[str, Any]) -> list[Any]:
    from perrec_eval.leaderboard.document import Heading, Para

    blocks: list[Any] = [Heading(2, "Summary"), summary_grid(data), Para(SUMMARY_NOTE)]
    costs = cost_grid(data)
    if costs is not None:
        blocks += [Heading(3, "Cost of each family's model run (its last invocation)"), costs]
    return blocks


def summary_markdown(data: Mapping[str, Any]) -> str:
    from perrec_eval.leaderboard.document import markdown

    return markdown(summary_blocks(data))


def write_report(config: SuiteConfig) -> dict[str, Any]:
    """The suite folder's report (every run in it) into SUITE/report/; returns the summary."""
    from perrec_eval.leaderboard import family

    out = Path(config.out)
    report_dir = out / "report"
    runs = family.load_runs(run_folders([out]))
    sections = family.sections_of(runs, seed=config.seed, base=report_dir, allow_mixed=True)
    data = summary(runs, seed=config.seed, costs=costs_of([out]))
    print(summary_markdown(data))
    for section in sections:
        print(family.markdown(section))
    family.write(
        sections,
        report_dir,
        plots=config.plots,
        lead=lambda tmp: summary_blocks(data),
        extra={"summary": data},
    )
    print(f"written to {config.out}/ ({SUITE_FILE}, runs/); report: {report_dir / 'index.html'}")
    return data


def evaluate_command(config: SuiteConfig) -> int:
    """`perrecbench evaluate --task all|NAME,NAME`: run the suite (or, with --dry-run, count it)."""
    if config.dry_run:
        print(dry_run_text(dry_run(config)))
        return 0
    results = run_suite(config)
    if config.report:
        write_report(config)
    incomplete = [r.family for r in results if not r.scores.complete]
    if incomplete:
        print(
            f"perrecbench evaluate: requests of {', '.join(incomplete)} failed; their scores are "
            "provisional: run the same command again to retry them",
            file=sys.stderr,
        )
        return 1
    return 0
