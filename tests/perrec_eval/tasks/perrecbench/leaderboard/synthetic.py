"""Run folders written directly from planted predictions, for tests that need many groups or exact values.

`write_run` goes through the real run-folder writer (`perrec_eval.rundir.write_run`) and scorer, so the
report reads exactly what `perrecbench evaluate` would have written.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perrec_eval import rundir
from perrec_eval.results import RunInfo
from perrec_eval.tasks.perrecbench.records import PredictionRecord
from perrec_eval.tasks.perrecbench.scoring import score_cells

TRUTH = [0.9, -0.8]  # relative ratings of a group of 2: user 1 preferred


def pointwise_records(
    group_ids: Sequence[str], correct: Sequence[bool], level: str = "easy"
) -> list[PredictionRecord]:
    """Easy pointwise records: a right order (tau 1) or the reverse (tau -1) per group."""
    return [
        PredictionRecord(
            level=level,
            method="pointwise",
            group_id=gid,
            format="scores",
            prediction=[1.0, 0.0] if right else [0.0, 1.0],
            predicted_ratings=[4.0, 3.0] if right else [3.0, 4.0],
            references=list(TRUTH),
            true_ratings=[5.0, 2.0],
        )
        for gid, right in zip(group_ids, correct, strict=True)
    ]


def coin_flips(n: int, p: float, seed: int) -> list[bool]:
    """`n` seeded draws, each True with probability `p`."""
    rng = random.Random(seed)
    return [rng.random() < p for _ in range(n)]


def write_run(
    out: Path,
    records: Sequence[PredictionRecord],
    *,
    model: str = "m",
    fingerprint: str = "f" * 64,
    split: str = "test",
    data: str = "bench",
    variant: str = "tau_b",
    invalid: str = "zero",
    **config: Any,
) -> Path:
    """A finished run folder of `records` (a fake-engine model run, no samples) at `out`."""
    scores = score_cells(records, variant=variant, invalid=invalid)
    groups: dict[str, list[str]] = {}
    for record in records:
        groups.setdefault(record.level, []).append(record.group_id)
    run_info = {
        "config": {
            "engine": "fake",
            "model": model,
            "data": data,
            "split": split,
            "k": 4,
            "shots": 0,
            "samples": 1,
            "seed": 0,
            "pairwise_strategy": "allpairs",
            "temperature": 0.1,
            **config,
        },
        "complete": True,
        "prompt_variant": "default",
        "metric": {"variant": variant, "invalid": invalid},
        "engine": {"name": "fake", "model": model},
        "dataset_fingerprint": fingerprint,
        "groups": groups,
    }
    info = RunInfo.from_json(run_info)
    rundir.write_run(
        Path(out), samples=None, records=records, scores=scores.to_family(), run_info=info, report=None
    )
    return Path(out)
