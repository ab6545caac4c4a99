"""PerRecBench's view of a run folder: its prediction records by cell, its metric and its settings.

The shared reports load every family's run folder (`perrec_eval.leaderboard.family.load`); `view` reads one
as a `Run` for what only PerRecBench computes (its PTC paired tests, floors, the paper's analyses): the
dataset fingerprint, split and group set (run.json's ``groups``, or the group ids of predictions.jsonl for
runs that do not list them, such as the baselines), the records by cell, and the settings that can tell
two runs of one model apart (`SETTINGS`). A setting that does not apply to a run (the pairwise strategy of a
run without pairwise cells, the prompt of a no-LLM baseline) is None.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from perrec_eval import rundir
from perrec_eval.errors import DataError
from perrec_eval.results import RunInfo
from perrec_eval.tasks.perrecbench import rundir as run_files
from perrec_eval.tasks.perrecbench.records import PredictionRecord
from perrec_eval.tasks.perrecbench.results import CellScore, Scores

BASELINE = "baseline"
# Settings that can tell two runs of one model apart, in the order a row label shows them.
SETTINGS: tuple[str, ...] = (
    "engine",
    "pairwise",
    "presentation",
    "prompt",
    "profiles",
    "k",
    "shots",
    "samples",
    "aggregate",
    "temperature",
    "top_p",
    "structured",
    "max_tokens",
    "metric",
    "failed",
    "seed",
)
# The prompting settings of the paper's Table 2 (the rest are the run's other settings).
PROMPTING: tuple[str, ...] = ("prompt", "shots", "samples", "aggregate")

Cell = tuple[str, str]  # (level, method)


@dataclass(frozen=True, slots=True)
class Run:
    """One finished run folder, loaded for comparison."""

    path: Path
    model: str
    info: RunInfo
    scores: Scores
    records: tuple[PredictionRecord, ...]
    settings: Mapping[str, Any]
    groups: Mapping[str, frozenset[str]]
    by_cell: Mapping[Cell, Mapping[str, PredictionRecord]]
    # the loaded run folder this view reads (`perrec_eval.leaderboard.family.FamilyRun`); None in memory
    source: Any = None

    @property
    def fingerprint(self) -> str | None:
        return self.info.dataset_fingerprint

    @property
    def split(self) -> str:
        return self.info.config.get("split", "test")

    @property
    def group_ids(self) -> frozenset[str]:
        """Every group the run scored, over all its levels (levels share their query items)."""
        return frozenset().union(*self.groups.values())

    @property
    def complete(self) -> bool:
        """False when some requests failed (engine errors): the scores are provisional."""
        return self.scores.complete

    @property
    def variant(self) -> str:
        return self.info.metric.variant

    @property
    def invalid(self) -> str:
        return self.info.metric.invalid

    @property
    def data(self) -> str | None:
        """The benchmark folder (or Hub id) the run read."""
        return self.info.config.get("data")

    @property
    def is_baseline(self) -> bool:
        return self.info.is_baseline

    @property
    def is_fake(self) -> bool:
        return self.info.is_fake


    def cell_scores(self) -> dict[Cell, CellScore]:
        """scores.json's cells by (level, method)."""
        return {(cell.level, cell.method): cell for cell in self.scores.cells}

    def samples(self) -> list[dict[str, Any]]:
        """samples.jsonl's lines (`run_files.sample_lines`); none for runs without engine requests."""
        return run_files.sample_lines(self.path)


def load_runs(paths: Sequence[str | os.PathLike]) -> list[Run]:
    """The runs at `paths` (each a run folder or a folder of run folders), each folder once, in order."""
    folders: list[Path] = []
    for path in paths:
        for folder in rundir.run_folders(path):
            if folder.resolve() not in {f.resolve() for f in folders}:
                folders.append(folder)
    if not folders:
        raise DataError("no run folders given: pass RUN_DIR... (run folders or folders of run folders)")
    return [load_run(folder) for folder in folders]


def load_run(folder: str | os.PathLike) -> Run:
    """One finished run folder, loaded and checked as every family's is (`family.load`)."""
    from perrec_eval.leaderboard import family

    return view(family.load(folder))


def view(run: Any) -> Run:
    """A loaded run folder (`perrec_eval.leaderboard.family.FamilyRun`) as PerRecBench's `Run`."""
    records = [prediction.prediction.record for prediction in run.predictions]
    loaded = run_of(run.path, run.info, Scores.from_family(run.scores), records, label=run.label)
    return replace(loaded, source=run)


def run_of(
    folder: str | os.PathLike,
    info: RunInfo,
    scores: Scores,
    records: Sequence[PredictionRecord],
    *,
    label: str | None = None,
) -> Run:
    """A run from its parts, read from its folder or still in memory (`perrecbench score` shows scores it
    has not written); `label`: its row name (default: `system_name`)."""
    folder, records = Path(folder), tuple(records)
    return Run(
        path=folder,
        model=label or system_name(info, folder),
        info=info,
        scores=scores,
        records=records,
        settings=settings_of(info, records),
        groups=group_sets(info, records),
        by_cell=records_by_cell(records),
    )


def records_by_cell(records: Sequence[PredictionRecord]) -> dict[Cell, dict[str, PredictionRecord]]:
    """Prediction records by (level, method), then by group id."""
    out: dict[Cell, dict[str, PredictionRecord]] = {}
    for record in records:
        out.setdefault((record.level, record.method), {})[record.group_id] = record
    return out


def system_name(info: RunInfo, folder: Path) -> str:
    """The run's label (``--label``; the model's short name) or its model, with its LoRA adapter's name;
    the fake engine's named scripts read ``fake:NAME`` (`perrec_eval.leaderboard.family.run_label`).

    >>> from dataclasses import replace
    >>> from perrec_eval.tasks.perrecbench.results import Metric
    >>> info = RunInfo(config={"adapter": ["pw=/a/b"]}, engine={"model": "m"}, metric=Metric("tau_b", "zero"))
    >>> system_name(info, Path("x"))
    'm + pw'
    >>> system_name(replace(info, config={"adapter": ["/a/merged"]}), Path("x"))
    'm + merged'
    >>> system_name(replace(info, config={}, label="smol"), Path("x"))
    'smol'
    >>> system_name(replace(info, config={}, engine={"name": "fake", "model": "constant"}), Path("x"))
    'fake:constant'
    """
    from perrec_eval.leaderboard.family import run_label

    return run_label(info, folder)


def group_sets(info: RunInfo, records: Sequence[PredictionRecord]) -> dict[str, frozenset[str]]:
    """The group ids per level: run.json's ``groups`` where it has them, else those of the predictions."""
    if info.groups:
        return {level: frozenset(ids) for level, ids in info.groups.items()}
    found: dict[str, set[str]] = {}
    for record in records:
        found.setdefault(record.level, set()).add(record.group_id)
    return {level: frozenset(ids) for level, ids in found.items()}


def settings_of(info: RunInfo, records: Sequence[PredictionRecord]) -> dict[str, Any]:
    """The run's value of each of `SETTINGS` (None where the setting does not apply to the run).

    >>> from perrec_eval.tasks.perrecbench.results import Metric
    >>> config = {"k": 4, "seed": 0, "pairwise_strategy": "allpairs"}
    >>> info = RunInfo(config=config, engine={"name": "baseline"}, metric=Metric("tau_b", "zero"))
    >>> {k: v for k, v in settings_of(info, []).items() if v is not None}
    {'k': 4, 'metric': 'tau_b', 'failed': 'zero', 'seed': 0}
    """
    config = info.config
    engine = info.engine.get("name") or config.get("engine")
    llm = engine != BASELINE
    methods = {record.method for record in records}
    samples = config.get("samples", 1)
    profiles = info.profiles
    return {
        "engine": engine if llm else None,
        "pairwise": config.get("pairwise_strategy") if "pairwise" in methods else None,
        # Runs written before presentations existed showed listwise users in the dataset's order.
        "presentation": config.get("presentation", "dataset") if llm and "listwise" in methods else None,
        "prompt": (info.prompt_variant or "default") if llm else None,
        "profiles": _profiles_name(profiles) if llm and profiles else None,
        "k": config.get("k"),
        "shots": config.get("shots", 0) if llm else None,
        "samples": samples if llm else None,
        "aggregate": config.get("sc_aggregate") if llm and samples > 1 and "pointwise" in methods else None,
        "temperature": config.get("temperature") if llm else None,
        "top_p": config.get("top_p") if llm else None,
        "structured": ("on" if config.get("structured_outputs") else "off") if llm else None,
        "max_tokens": _budgets(info) if llm else None,
        "metric": info.metric.variant,
        "failed": info.metric.invalid,
        "seed": config.get("seed"),
    }


def _budgets(info: RunInfo) -> str:
    """The answer budgets as ``pointwise=16,listwise=64`` (runs before `--max-new-tokens`: the defaults)."""
    from perrec_eval.tasks.perrecbench.config import token_budgets

    budgets = token_budgets(tuple(info.config.get("max_new_tokens") or ()))
    return ",".join(f"{name}={value}" for name, value in budgets.items())


def _profiles_name(profiles: Mapping[str, Any]) -> str:
    return profiles.get("file", "file") if profiles.get("source") == "file" else "generated"


def differing_settings(runs: Sequence[Run]) -> list[str]:
    """The settings (of `SETTINGS`) with more than one value among the runs it applies to."""
    return [name for name in SETTINGS if len({run.settings.get(name) for run in runs} - {None}) > 1]
