"""PerRecBench's config dataclasses, one per runner command; the command-line flags are derived from them.

Settings shared by several commands are said once: `DataSpec` (benchmark, levels, groups), `PromptSpec`
(retrieved history, profiles) and, shared with every family, `perrec_eval.config.EngineSpec` (backend,
model, its options). Every field carries its help
text, and its default lives here and nowhere else (defaults that belong to an engine live in that engine's
options class and are set with ``--engine-arg KEY=VALUE``). Each config is recorded verbatim in
``run.json``; ``--config FILE.yaml`` reads the same fields from a file.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from perrec_eval.cliconfig import (
    check_choices,
    check_hub_id,
    check_once,
    check_score_input,
    check_seed,
    check_task,
    check_text,
    one_limit,
    option,
)
from perrec_eval.config import BASELINE_ENGINE, EngineSpec, default_label
from perrec_eval.errors import ConfigError
from perrec_eval.tasks.perrecbench.presentation import Presentation
from perrec_eval.tasks.perrecbench.profiles import DEFAULT_MAX_CHARS, DEFAULT_MAX_ITEMS, PROFILE_PARAMS
from perrec_eval.tasks.perrecbench.protocols import PROTOCOLS
from perrec_eval.tasks.perrecbench.rankers import PairwiseStrategy
from perrec_eval.tasks.perrecbench.retrieval import DEFAULT_K
from perrec_eval.tasks.perrecbench.vocabulary import LEVEL_SIZES, LEVELS, METHODS, Method
from perrec_eval.types import GenParams

# Answer budgets of the released code, per method, and of a profile (`--max-new-tokens` changes them).
MAX_TOKENS: dict[str, int] = {name: protocol.max_tokens for name, protocol in PROTOCOLS.items()}
PROFILE_MAX_TOKENS = PROFILE_PARAMS.max_tokens
Aggregate = Literal["mean", "median", "mode"]
MAX_SAMPLES = 1000  # self-consistency samples per request (the paper's runs drew a handful)


class _Budgets:
    """PerRecBench's answer budgets: one per method and one for profiles (`token_budgets`)."""

    __slots__ = ()  # a mixin of `EngineSpec` configs: `max_new_tokens` is theirs

    def token_budgets(self) -> dict[str, int]:
        """The answer budget of each method and of ``profile`` (see `token_budgets`)."""
        return token_budgets(self.max_new_tokens, methods=not isinstance(self, ProfilesConfig))

    def profile_params(self) -> GenParams:
        """The sampling parameters of a profile request: the released code's, with this run's budget."""
        return dataclasses.replace(PROFILE_PARAMS, max_tokens=self.token_budgets()["profile"])


def token_budgets(spec: tuple[str, ...] | str, *, methods: bool = True) -> dict[str, int]:
    """Answer budgets from ``--max-new-tokens``: one number for all, or ``NAME=N`` per method and ``profile``.

    Args:
        spec: ``("64",)`` or ``("pointwise=16", "listwise=64", "profile=256")`` (or the same as one string);
            empty: the defaults.
        methods: whether method budgets may be named (False for `perrecbench profiles`: profile only).

    Returns:
        The budget of every method and of ``profile``: the defaults (`MAX_TOKENS`, `PROFILE_MAX_TOKENS`)
        overridden by `spec`.

    Raises:
        ConfigError: a malformed entry, an unknown name or a budget below 1.

    >>> token_budgets(("pointwise=16", "profile=256"))
    {'pointwise': 16, 'pairwise': 512, 'listwise': 800, 'profile': 256}
    >>> token_budgets("64")["listwise"]
    64
    """
    budgets = {**MAX_TOKENS, "profile": PROFILE_MAX_TOKENS}
    names = tuple(budgets) if methods else ("profile",)
    parts = [part.strip() for part in (spec.split(",") if isinstance(spec, str) else spec) if part.strip()]
    for part in parts:
        name, sep, value = part.rpartition("=")
        targets = [name.strip()] if sep else list(names)
        number = value.isascii() and value.strip().isdigit()  # not "²", which int() refuses
        if not number or int(value) < 1 or any(t not in names for t in targets):
            raise ConfigError(
                f"--max-new-tokens {part!r}: write one number (e.g. 64) or NAME=N with NAME one of "
                f"{', '.join(names)}, comma-separated (e.g. pointwise=16,listwise=64)"
            )
        budgets.update(dict.fromkeys(targets, int(value)))
    return budgets


def prompt_variant(*, cot: bool, profile: bool) -> str:
    """The prompt variant (`prompts.VARIANTS`) of prompts with or without chain of thought and profiles.

    >>> prompt_variant(cot=False, profile=True), prompt_variant(cot=True, profile=False)
    ('default', 'cot_no_profile')
    """
    base = "cot" if cot else "default"
    if profile:
        return base
    return "no_profile" if base == "default" else "cot_no_profile"


@dataclass(frozen=True, kw_only=True)  # no slots: a config may combine it with EngineSpec's
class DataSpec:
    """The benchmark data: which folder, which levels and which groups of them."""

    level_choices: ClassVar[tuple[str, ...]] = LEVELS

    task: str = option(
        "task family (`perrecbench tasks` lists them)", default="perrecbench"
    )
    data: str = option("benchmark folder written by `perrecbench build` (or a Hub dataset id)")
    levels: tuple[str, ...] = option(
        "levels whose groups are used (sft data also takes full: the 5-user groups)", default=LEVELS
    )
    limit: int | None = option(
        "use N groups of each level (and split), the docs of each cell: a seeded sample, as even across "
        "domains as the groups allow, the same in every command (run.json lists them); every family's "
        "--limit (--max-groups is its old name)",
        default=None,
        shown="all",
    )
    max_groups: int | None = option("the same as --limit", default=None, shown="all")
    seed: int = option(
        "seed of the --max-groups sample and of the command's other draws (sampling, few-shot picks, "
        "bootstrap intervals, the listwise presentation, the sft mix)",
        default=0,
    )

    def __post_init__(self) -> None:
        check_choices(self)  # every Literal field of the config, its engine settings' included
        check_task(self.task)
        one_limit(self, "max_groups")
        if not self.levels or any(level not in self.level_choices for level in self.levels):
            raise ConfigError(
                f"--levels must be a non-empty subset of {','.join(self.level_choices)}, got {self.levels}"
            )
        check_once("--levels", tuple(self.levels))
        if self.max_groups is not None and self.max_groups < 1:
            raise ConfigError(f"--max-groups must be >= 1, got {self.max_groups}")
        check_seed(self.seed)  # numpy refuses a negative seed: here, not after the requests are paid for


@dataclass(frozen=True, kw_only=True)
class PromptSpec(DataSpec):
    """What the prompts show of each user: retrieved history and a profile."""

    k: int = option("retrieved history items per user (BM25)", default=DEFAULT_K)
    profiles: str | None = option(
        "saved profiles JSONL (from `perrecbench profiles`; --splits train for sft data)",
        default=None,
        shown="evaluate writes them with its engine, sft data needs them unless --no-profile",
    )
    no_profile: bool = option("prompts without user profiles (paper Table 2)", default=False)

    def __post_init__(self) -> None:
        DataSpec.__post_init__(self)
        if self.k < 1:
            raise ConfigError(f"--k must be >= 1, got {self.k}")
        if self.profiles and self.no_profile:
            raise ConfigError("--profiles and --no-profile exclude each other: choose one")


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalConfig(_Budgets, EngineSpec, PromptSpec):
    """Everything that defines an evaluation run; recorded verbatim in run.json."""

    out: str = option("run folder; running the same command again resumes from its cache")
    methods: tuple[Method, ...] | None = option(
        "ranking methods (baselines predict ratings: pointwise only)",
        default=None,
        shown="pointwise,pairwise,listwise; baselines: pointwise",
    )
    split: str = option("dataset split to evaluate", default="test")
    shots: int = option("few-shot demonstrations from the held-out (train) split", default=0)
    cot: bool = option("chain-of-thought prompts (paper Appendix E)", default=False)
    structured_outputs: bool = option(
        "constrain every answer to its method's format (rating JSON, [User A]/[User B], a permutation); "
        "with --cot only the final answer; not the paper's setting (see docs/engines.md)",
        default=False,
    )
    label: str | None = option(
        "the name of this run's rows in reports", default=None, shown="the model file's or folder's stem"
    )
    samples: int = option("self-consistency: samples per request", default=1)
    sc_aggregate: Aggregate = option(
        "how pointwise samples combine under --samples (pairwise/listwise take the majority)", default="mean"
    )
    pairwise_strategy: PairwiseStrategy | None = option(
        "allpairs: every pair in both orders; heapsort: the paper's sort",
        default=None,
        shown="allpairs; heapsort with --paper-mode",
    )
    presentation: Presentation | None = option(
        "order of the users in listwise prompts: balanced (paired across the level's groups so that any "
        "fixed answer scores exactly 0) or dataset (the dataset's order, the paper's)",
        default=None,
        shown="balanced; dataset with --paper-mode",
    )
    paper_mode: bool = option(
        "reproduce the published protocol: heapsort pairwise, listwise users in dataset order, paper tau on "
        "index lists, failed groups skipped",
        default=False,
    )
    temperature: float = option("sampling temperature (0 = greedy)", default=0.1)
    top_p: float = option("nucleus sampling top-p", default=1.0)
    overwrite: bool = option(
        "replace a finished run of other settings in --out (the same command resumes without it)",
        default=False,
    )

    def __post_init__(self) -> None:
        EngineSpec.__post_init__(self)
        PromptSpec.__post_init__(self)
        self._resolve_methods()
        self._resolve_paper_choices()
        if not self.methods or any(m not in METHODS for m in self.methods):
            raise ConfigError(
                f"methods must be a non-empty subset of {','.join(METHODS)}, got {self.methods}"
            )
        check_once("--methods", tuple(self.methods))
        self._check_baseline_settings()
        if self.samples < 1 or self.shots < 0:
            raise ConfigError("--samples must be >= 1 and --shots >= 0")
        if self.samples > MAX_SAMPLES:  # every sample of every request is held in memory
            raise ConfigError(f"--samples must be at most {MAX_SAMPLES}, got {self.samples}")
        if not self.temperature >= 0:  # checked here, not after an engine has loaded its model
            raise ConfigError(f"--temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"--top-p must be in (0, 1], got {self.top_p}")
        if self.structured_outputs and self.engine == BASELINE_ENGINE:
            raise ConfigError("baselines write no answers: drop --structured-outputs")
        if self.label is not None and not self.label.strip():
            raise ConfigError("--label must name the run's rows, e.g. --label smollm2-135m")
        if self.label is not None:
            check_text("--label", self.label)  # a line break would split its row in leaderboard.md

    def _resolve_methods(self) -> None:
        # Baselines predict a rating per user, so they run pointwise only; the config records what ran.
        if self.methods is None:
            methods = ("pointwise",) if self.engine == BASELINE_ENGINE else METHODS
            object.__setattr__(self, "methods", methods)
        elif self.engine == BASELINE_ENGINE and tuple(self.methods) != ("pointwise",):
            raise ConfigError(
                f"baselines predict ratings and run pointwise only; drop --methods {','.join(self.methods)} "
                "or pass --methods pointwise"
            )

    def _check_baseline_settings(self) -> None:
        # A baseline sends no prompt: an LLM setting would be recorded in run.json and label report rows
        # with something that never happened.
        if self.engine != BASELINE_ENGINE:
            return
        defaults = {f.name: f.default for f in dataclasses.fields(EvalConfig)}
        # (--no-profile is true of every baseline, so it is accepted)
        llm_only = "cot shots samples profiles temperature top_p sc_aggregate".split()
        given = [name for name in llm_only if getattr(self, name) != defaults[name]]
        given += [n for n in ("adapter", "base_url", "engine_args", "api_key_env") if getattr(self, n)]
        if given:
            flags = ", ".join(
                "--engine-arg" if name == "engine_args" else "--" + name.replace("_", "-") for name in given
            )
            what = "is an LLM setting" if len(given) == 1 else "are LLM settings"
            raise ConfigError(
                f"{flags} {what}, but the no-LLM baselines send no prompt: drop {flags}, or choose "
                "--engine fake, hf, openai or vllm"
            )

    def _resolve_paper_choices(self) -> None:
        # --paper-mode switches every paper behaviour of PROTOCOL at once; an explicit contrary choice is an
        # error rather than silently overridden.
        if self.paper_mode and self.pairwise_strategy == "allpairs":
            raise ConfigError(
                "--paper-mode uses the paper's heapsort: drop --pairwise-strategy allpairs or --paper-mode"
            )
        if self.pairwise_strategy is None:
            object.__setattr__(self, "pairwise_strategy", "heapsort" if self.paper_mode else "allpairs")
        if self.paper_mode and self.presentation == "balanced":
            raise ConfigError(
                "--paper-mode shows listwise users in the dataset's order: drop --presentation balanced "
                "or --paper-mode"
            )
        if self.presentation is None:
            object.__setattr__(self, "presentation", "dataset" if self.paper_mode else "balanced")

    @property
    def variant(self) -> str:
        return prompt_variant(cot=self.cot, profile=not self.no_profile)

    @property
    def metric_variant(self) -> str:
        return "paper" if self.paper_mode else "tau_b"

    @property
    def invalid_policy(self) -> str:
        return "skip" if self.paper_mode else "zero"

    @property
    def system_label(self) -> str:
        """The name of the run's rows: `label`, or the model's short name (`default_label`)."""
        return self.label or default_label(self.model, self.engine)

    def params(self, method: Method, level: str = "easy") -> GenParams:
        """The sampling parameters of `method`'s requests on `level` (its structured format when on)."""
        from perrec_eval.tasks.perrecbench.structured import answer_format

        n_users = LEVEL_SIZES[level] if method == "listwise" else 2
        return GenParams(
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.token_budgets()[method],
            n=self.samples,
            seed=self.seed,
            answer_format=answer_format(method, n_users, cot=self.cot) if self.structured_outputs else None,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepConfig(EvalConfig):
    """Settings of `perrecbench sweep`: one engine over every (k, shots) pair, one run folder each."""

    replaced: ClassVar[dict[str, str]] = {"k": "--ks", "shots": "--shots-grid"}  # set per grid point
    ks: tuple[int, ...] = option(
        "retrieved history sizes k of the grid (replaces --k; the paper's Fig. 6 used 1,2,4,8,12,16)",
        default=(2, 4, 8),
    )
    shots_grid: tuple[int, ...] = option(
        "few-shot counts of the grid (replaces --shots; the paper's Fig. 6 used 0,1,2,3,4,5)",
        default=(0, 1, 2, 3),
    )
    plots: bool = option("draw the PNG plots of the grid's report (needs the report extra)", default=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfilesConfig(_Budgets, EngineSpec, DataSpec):
    """Settings of `perrecbench profiles`: one LLM-written profile per (group, user)."""

    out: str = option("profiles JSONL path; its requests are cached next to it, so a re-run resumes")
    splits: tuple[str, ...] = option("splits (add train for few-shot)", default=("test",))
    max_items: int = option("most recent history items a profile sees", default=DEFAULT_MAX_ITEMS)
    max_chars: int = option("character budget for those items", default=DEFAULT_MAX_CHARS)
    push_to_hub: str | None = option(
        "also upload the file to this dataset repo (e.g. next to the benchmark) as profiles/<file name>",
        default=None,
        metavar="ORG/NAME",
    )

    def __post_init__(self) -> None:
        EngineSpec.__post_init__(self)
        DataSpec.__post_init__(self)
        if self.engine == BASELINE_ENGINE:
            raise ConfigError("profiles are written by an LLM: choose --engine fake, hf, openai or vllm")
        check_once("--splits", tuple(self.splits))
        if self.max_items < 1 or self.max_chars < 1:
            raise ConfigError("--max-items and --max-chars must be >= 1")
        if self.push_to_hub is not None:
            check_hub_id(self.push_to_hub, "--push-to-hub")
        if Path(self.out).is_dir():  # checked before any profile is written
            raise ConfigError(
                f"--out {self.out} is a folder: name the profiles file, "
                f"e.g. --out {Path(self.out) / 'profiles.jsonl'}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class ScoreConfig:
    """Settings of `perrecbench score`: re-score a finished run from its saved predictions, or score another
    system's predictions file or a harness's answers to exported tasks (``--data DIR --predictions FILE``)
    like a run."""

    run_dir: str | None = option(
        "run folder written by `perrecbench evaluate` (or give --data and --predictions)",
        positional=True,
        default=None,
    )
    task: str = option(
        "task family (`perrecbench tasks` lists them)", default="perrecbench"
    )
    data: str | None = option("benchmark folder the --predictions answer (its --split groups)", default=None)
    predictions: str | None = option(
        'JSONL of another system, one line per group: {"config": LEVEL, "id": GROUP_ID, "prediction": '
        'SCORES} with one score per user in the group\'s order (higher: preferred), or {"ranking": [1-based '
        "users, best first]}; scored in the pointwise column, beside the no-LLM baselines. Or a harness's "
        "answers to `perrecbench export` tasks: lm-eval's samples (--log_samples) or lighteval's details "
        "(--save-details), a file or a run's output folder",
        default=None,
    )
    split: str = option("dataset split the --predictions answer", default="test")
    limit: int | None = option(
        "with --predictions: score N groups of each level, the seeded sample `evaluate --limit N --seed S` "
        "takes (lines of other groups are left out), so the run is reported beside such runs",
        default=None,
        shown="all",
    )
    seed: int = option("with --predictions: seed of the --limit sample and the intervals", default=0)
    label: str | None = option(
        "with --predictions: the system's name in reports (default: the file's name)", default=None
    )
    out: str | None = option(
        "with --predictions: also write a run folder that `perrecbench report` compares with model runs",
        default=None,
    )
    overwrite: bool = option("with --out: replace a finished run of other settings there", default=False)
    variant: Literal["tau_b", "paper"] | None = option(
        "metric variant (default: the run's own)", default=None
    )
    invalid: Literal["zero", "skip"] | None = option(
        "failed groups score 0 (zero) or are dropped (skip)", default=None, shown="the run's own"
    )
    write: bool = option("rewrite scores.json and report.md with the new scores", default=False)
    json: bool = option("print the scores as JSON instead of the table", default=False)

    def __post_init__(self) -> None:
        check_task(self.task)
        check_seed(self.seed)
        external = check_score_input(self, "FILE.jsonl")
        if not external and any(v is not None for v in (self.out, self.label, self.limit)):
            raise ConfigError("--out, --label and --limit go with --predictions (a run folder keeps its own)")
        if external and self.write:
            raise ConfigError("--write rewrites a run folder: with --predictions, write one with --out")
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"--limit must be >= 1, got {self.limit}")
        if self.label is not None:
            check_text("--label", self.label)
