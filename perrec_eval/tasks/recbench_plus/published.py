"""The released RecBench+ models' corrected rows (published.yaml) as a separate table of a RecBench+ report.

They were scored on the released demographics queries, not on the run's build: a report shows them only where
its runs answer the demographics config, under their own heading, never ranked with or bolded against runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).with_name("published.yaml")
HEADING = (
    "published rows (the released queries and answers, corrected scoring: comparable with a run on those "
    "queries, `evaluate --released-queries`, not with a rebuilt benchmark)"
)


def load() -> dict[str, Any]:
    return yaml.safe_load(DATA.read_text(encoding="utf-8"))


def for_cells(cells: list[str]) -> dict[str, Any] | None:
    """The published rows where a report's cells include the config they were scored on, else None."""
    data = load()
    if not any(cell.split("/", 1)[0] == data["source"]["config"] for cell in cells):
        return None
    return data


def markdown(data: dict[str, Any]) -> list[str]:
    source = data["source"]
    lines = [
        f"### {HEADING}",
        "",
        "| model (released answers) | " + " | ".join(data["metrics"]) + " |",
        "|---|" + "---|" * len(data["metrics"]),
    ]
    for row in data["rows"]:
        cells = [f"{v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}]" for v in (row[m] for m in data["metrics"])]
        lines.append(f"| {row['model']} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Another dataset: {source['queries']} released {source['config']} queries of {source['repository']} "
        f"(commit {source['commit']}), re-scored by {source['script']} ({source['scoring']} scoring; "
        f"{source['interval']}). Not ranked with the runs above.",
    ]
    return lines
