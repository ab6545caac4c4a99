"""`perrecbench sweep`: one engine over a grid of retrieved-history sizes k and shot counts (paper Fig. 6).

Each grid point is an ordinary `perrec_eval.tasks.perrecbench.run.evaluate` run into ``OUT/k<K>-shots<S>/``
(so each resumes from its own cache), with the engine loaded once; the grid's report goes to ``OUT/report/``
(`commands.sweep`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from perrec_eval.cliconfig import check_once
from perrec_eval.config import BASELINE_ENGINE
from perrec_eval.engines.base import Engine
from perrec_eval.errors import ConfigError
from perrec_eval.tasks.perrecbench.config import EvalConfig


def point_name(k: int, shots: int) -> str:
    """The folder of one grid point.

    >>> point_name(4, 2)
    'k4-shots2'
    """
    return f"k{k}-shots{shots}"


def check(config: Any) -> None:
    """Refuse grids that cannot run as asked (the message names the fix)."""
    if config.engine == BASELINE_ENGINE:
        raise ConfigError(
            "sweep varies prompts (k, shots) of an LLM: choose --engine fake, hf, openai or vllm"
        )
    if len(config.adapter) > 1:
        raise ConfigError("sweep evaluates one model: pass at most one --adapter")
    if not config.ks or any(k < 1 for k in config.ks):
        raise ConfigError(f"--ks must be a non-empty list of k >= 1, got {config.ks}")
    if not config.shots_grid or any(s < 0 for s in config.shots_grid):
        raise ConfigError(f"--shots-grid must be a non-empty list of counts >= 0, got {config.shots_grid}")
    check_once("--ks", tuple(str(k) for k in config.ks))  # a point named twice would be run twice
    check_once("--shots-grid", tuple(str(s) for s in config.shots_grid))
    if not config.profiles and not config.no_profile:
        # Profiles do not depend on k or shots; written per grid point they would cost one profile run each.
        raise ConfigError(
            "sweep shares one profiles file across the grid: write it once with `perrecbench profiles "
            "--splits test,train ...` and pass --profiles FILE, or pass --no-profile"
        )


def base_config(config: Any) -> EvalConfig:
    """The evaluate settings of a sweep config (its own grid fields dropped)."""
    names = {field.name for field in dataclasses.fields(EvalConfig)}
    return EvalConfig(**{name: getattr(config, name) for name in names})


def run_grid(config: Any, engine: Engine | None = None) -> list[tuple[str, dict[str, Any]]]:
    """Evaluate every (k, shots) point of `config` (a `SweepConfig`); returns (point, scores) pairs.

    `engine` overrides the one the config names (tests pass a FakeEngine).
    """
    from perrec_eval.lock import folder_lock
    from perrec_eval.rundir import claim
    from perrec_eval.tasks.perrecbench.run import evaluate, run_record

    check(config)
    base = base_config(config)
    out = Path(config.out)
    points = {
        point_name(k, shots): dataclasses.replace(base, k=k, shots=shots, out=str(out / point_name(k, shots)))
        for k in dict.fromkeys(config.ks)
        for shots in dict.fromkeys(config.shots_grid)
    }
    with folder_lock(out):
        for point in points.values():  # before the model is loaded
            claim(Path(point.out), run_record(point), overwrite=point.overwrite)
        if engine is None:
            engine = base.load_engine()
            if base.adapter:
                ((_, engine),) = base.adapter_engines(engine)
        return [(name, evaluate(point, engine=engine)) for name, point in points.items()]
