"""A run folder's report.md and the table `perrecbench evaluate` / `score` print: the shared report section
(`perrec_eval.leaderboard.family`) of the run(s) at hand, as every family's is, with PerRecBench's own
rows, notes and tables (`leaderboard/hooks.py`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from perrec_eval import fileio
from perrec_eval.results import RunInfo, read_run_info
from perrec_eval.tasks.perrecbench import rundir
from perrec_eval.tasks.perrecbench.records import PredictionRecord
from perrec_eval.tasks.perrecbench.results import Metric, Scores


def family_run(
    folder: str | os.PathLike, info: RunInfo, scores: Scores, records: Sequence[PredictionRecord]
) -> Any:
    """A run still in memory as the shared reports load one (`family.FamilyRun`)."""
    from perrec_eval.leaderboard.family import FamilyRun, run_label

    folder = Path(folder)
    docs = rundir.as_doc_predictions(records, info.metric)
    return FamilyRun(folder, run_label(info, folder), info, scores.to_family(), tuple(docs))


def section(runs: Sequence[Any], *, seed: int = 0) -> dict[str, Any]:
    """The shared section of `runs` (loaded run folders, or runs in memory: `family_run`)."""
    from perrec_eval.leaderboard import family
    from perrec_eval.registry import get

    return family.section(get("perrecbench"), runs, seed=seed)


def table(runs: Sequence[Any]) -> str:
    """The table `perrecbench evaluate` and `score` print: the section's heading, main table and notes."""
    from perrec_eval.leaderboard import family

    return family.markdown(section(runs))


def rescored(run_dir: str | os.PathLike, scores: Scores) -> Any:
    """The finished run at `run_dir` with re-computed `scores` (and their metric), as a run in memory."""
    info = replace(read_run_info(run_dir), metric=Metric(scores.variant, scores.invalid))
    return family_run(run_dir, info, scores, rundir.read_predictions(run_dir))


def render_report(runs: Sequence[Any]) -> str:
    """The text of report.md for the runs of one run folder (or of a folder of run folders): the report
    `perrecbench report` writes of them, without pictures."""
    from perrec_eval.leaderboard import family
    from perrec_eval.leaderboard.document import Para, markdown

    data = section(runs)
    blocks = family.document([data])
    blocks.insert(1, Para("Pictures and the comparison with other runs: `perrecbench report`."))
    return markdown(blocks)


def write_scored(
    out: Path,
    info: RunInfo,
    scores: Scores,
    records: Sequence[PredictionRecord],
    samples: Sequence[Any] | None = None,
) -> None:
    """A scored run's files into `out` (held locked by the caller): scores in the shared layout, its
    predictions (and samples) and run.json, and report.md rendered from what is in memory."""
    from perrec_eval.rundir import write_run

    write_run(
        out,
        samples=samples,
        records=records,
        scores=scores.to_family(),
        run_info=info,
        report=lambda: render_run(out, info, scores, records),
    )


def render_run(
    folder: str | os.PathLike, info: RunInfo, scores: Scores, records: Sequence[PredictionRecord]
) -> str:
    """report.md of one run from what is in memory."""
    return render_report([family_run(folder, info, scores, records)])


def write_report(out: str | os.PathLike, runs: Sequence[Any]) -> Path:
    """Write `out/report.md` (atomically) for the given runs."""
    path = Path(out) / "report.md"
    fileio.write_text(path, render_report(runs))
    return path
