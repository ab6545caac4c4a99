"""The settings every task family's runner commands share: which engine answers, for which model, with
which options (`EngineSpec`), and the config classes of the family-free commands (`tasks`, `convert-gguf`).

A family's own settings live in its folder (PerRecBench: `tasks/perrecbench/config.py`, with `EvalConfig`,
`ProfilesConfig`, `ScoreConfig` and the data and prompt settings they share). Every field carries its help
text, and its default lives in its config and nowhere else (defaults that belong to an engine live in that
engine's options class and are set with ``--engine-arg KEY=VALUE``). Each run's config is recorded verbatim
in ``run.json``; ``--config FILE.yaml`` reads the same fields from a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from perrec_eval.cliconfig import option
from perrec_eval.errors import ConfigError
from perrec_eval.secrets import check_env_name

DegeneratePolicy = Literal["keep", "fail"]
BASELINE_ENGINE = "baseline"
ADAPTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def engine_choices() -> tuple[str, ...]:
    """`baseline` (no LLM) and every registered inference engine."""
    from perrec_eval.engines import ENGINE_NAMES

    return (BASELINE_ENGINE, *ENGINE_NAMES)


def default_label(model: str, engine: str | None = None) -> str:
    """A short row name for a model: a local file's or folder's stem, a Hub id as it is; the fake engine's
    named scripts (`perrec_eval.engines.fake.SCRIPTS`) read ``fake:NAME``, never a baseline's name.

    >>> default_label("/models/SmolLM2-135M-Instruct.Q4_1.gguf"), default_label("Qwen/Qwen2.5-7B-Instruct")
    ('SmolLM2-135M-Instruct.Q4_1', 'Qwen/Qwen2.5-7B-Instruct')
    >>> default_label("constant", "fake"), default_label("constant", "baseline")
    ('fake:constant', 'constant')
    """
    if engine == "fake":
        from perrec_eval.engines.fake import SCRIPTS

        if model in SCRIPTS:
            return f"fake:{model}"
    path = Path(model)
    if model.endswith(".gguf") or path.is_absolute() or model.startswith(".") or path.exists():
        return path.stem if path.suffix == ".gguf" else (path.name or model)
    return model


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineSpec:
    """Which backend answers the requests, for which model, with which options."""

    engine: str = option(
        "inference backend: baseline (no LLM: --model names the baseline), fake (scripted answers), hf "
        "(transformers), openai (any OpenAI-compatible server), vllm (offline)"
    )
    model: str = option(
        "model id or path; for --engine baseline a baseline of the task or all (`perrecbench tasks` lists "
        "them); for --engine fake a script name (constant: fixed well-formed answers)"
    )
    adapter: tuple[str, ...] = option(
        "LoRA adapter on top of --model: PATH, or NAME=PATH (openai: the name the server serves it under); "
        "repeat it to evaluate several adapters on one loaded base model, one run folder each under --out",
        default=(),
        repeat=True,
        metavar="[NAME=]PATH",
    )
    base_url: tuple[str, ...] = option(
        "OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (openai); repeat it to spread the requests "
        "over several servers (same as --engine-arg base_url=URL1,URL2)",
        default=(),
        repeat=True,
        metavar="URL",
    )
    api_key_env: str | None = option(
        "name of the environment variable that holds the API key (openai); the key itself is never recorded",
        default=None,
    )
    max_new_tokens: tuple[str, ...] = option(
        "answer budget in tokens: one number, or NAME=N per request protocol of the task (and the other "
        "requests it names), comma-separated; a different budget is a different run",
        default=(),
        shown="each request protocol's own budget",
        metavar="N|NAME=N,...",
    )
    degenerate_profiles: DegeneratePolicy = option(
        "profiles cut at their token budget or degenerate (mostly copied history, long repeats) are "
        "counted either way; fail: also treat them as failed profiles",
        default="keep",
    )
    engine_args: tuple[str, ...] = option(
        "engine option KEY=VALUE, repeatable (e.g. batch_size=4 for hf, concurrency=32 for openai, "
        "tensor_parallel_size=2 for vllm); an unknown key lists the valid ones",
        default=(),
        flag="--engine-arg",
        repeat=True,
        metavar="KEY=VALUE",
    )

    def __post_init__(self) -> None:
        choices = engine_choices()
        if self.engine not in choices:
            raise ConfigError(f"unknown engine {self.engine!r}: choose one of {', '.join(choices)}")
        for name in ("adapter", "base_url"):  # a single value given from Python
            if isinstance(getattr(self, name), str):
                object.__setattr__(self, name, (getattr(self, name),))
            elif getattr(self, name) is None:
                object.__setattr__(self, name, ())
        self.adapters()  # validates the names
        check_env_name(self.api_key_env)
        self.token_budgets()  # validates --max-new-tokens

    def token_budgets(self) -> dict[str, int]:
        """The answer budget of each request protocol: a task's config knows its protocols (and overrides
        this); a bare engine spec knows none, so it takes no ``--max-new-tokens``.

        Raises:
            ConfigError: ``--max-new-tokens`` given without a task.
        """
        if self.max_new_tokens:
            raise ConfigError("--max-new-tokens needs a task's request protocols: set it on a task's command")
        return {}

    def adapters(self) -> dict[str, str]:
        """Adapter name → path, from ``--adapter [NAME=]PATH`` (the name defaults to the folder name).

        >>> EngineSpec(engine="fake", model="m", adapter=("a=/x/one", "/y/two")).adapters()
        {'a': '/x/one', 'two': '/y/two'}
        """
        named: dict[str, str] = {}
        for spec in self.adapter:
            name, sep, path = spec.partition("=")
            if not sep:
                name, path = Path(spec).name or spec, spec
            if not name or not path:
                raise ConfigError(f"--adapter {spec!r} must be PATH or NAME=PATH")
            if not ADAPTER_NAME.fullmatch(name):
                # The name becomes a folder under --out: never a path, never . or ..
                raise ConfigError(
                    f"--adapter {spec!r}: the name {name!r} is not an identifier (letters, digits, _ . -, "
                    "starting with a letter or digit): pass --adapter NAME=PATH with such a NAME"
                )
            if name in named:
                raise ConfigError(f"two adapters are called {name!r}: name them with --adapter NAME=PATH")
            named[name] = path
        return named

    def engine_options(self):
        """The engine's options dataclass, from --engine-arg and the --base-url/--api-key-env shortcuts."""
        from perrec_eval.engines import parse_options

        # --base-url '' (an unset shell variable) is refused, never taken as "the default server"
        base_url = ",".join(self.base_url) if self.base_url else None
        shortcuts = {"base_url": base_url, "api_key_env": self.api_key_env}
        return parse_options(self.engine, self.engine_args, **shortcuts)

    def load_engine(self):
        """Build the engine (heavy imports happen here, not at config time).

        A single ``--adapter PATH`` is loaded with the model; with ``NAME=PATH`` or several adapters the base
        model is loaded alone and `adapter_engines` applies each adapter on top of it.
        """
        from perrec_eval.engines import load_engine

        single = self._adapter_loaded_with_model()
        return load_engine(self.engine, self.model, adapter=single, options=self.engine_options())

    def adapter_engines(self, base):
        """(name, engine) per adapter, each sharing the loaded `base` (from `load_engine`)."""
        if self._adapter_loaded_with_model() is not None:
            return [(next(iter(self.adapters())), base)]
        return [(name, base.with_adapter(name, path)) for name, path in self.adapters().items()]

    def _adapter_loaded_with_model(self) -> str | None:
        # One plain `--adapter PATH` is loaded together with the model (the engines' long-standing path,
        # e.g. hf's merge_adapter); named or several adapters go through `with_adapter`.
        if len(self.adapter) == 1 and "=" not in self.adapter[0]:
            return self.adapter[0]
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class TasksConfig:
    """Settings of `perrecbench tasks`: list the task families."""

    json: bool = option("print the families as JSON", default=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConvertGGUFConfig:
    """Settings of `perrecbench convert-gguf`: a GGUF file as a transformers model folder."""

    gguf: str = option("the .gguf file", positional=True)
    out: str = option("the model folder to write (float32 safetensors, tokenizer, chat template)")

    def __post_init__(self) -> None:
        if not self.gguf.endswith(".gguf") or not Path(self.gguf).is_file():
            raise ConfigError(f"no .gguf file at {self.gguf}: give the path of a GGUF model file")
