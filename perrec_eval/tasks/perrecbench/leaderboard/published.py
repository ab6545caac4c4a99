"""The paper's published numbers (Tables 1-3 of arXiv 2501.13391), read from package data.

They were scored with the paper-mode metric on the paper's own build of the benchmark, so a report shows
them as reference rows: next to runs scored with the paper variant, or in a section of their own.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from perrec_eval.tasks.perrecbench.vocabulary import LEVELS, METHODS

CELLS: tuple[tuple[str, str], ...] = tuple((level, method) for level in LEVELS for method in METHODS)


@dataclass(frozen=True, slots=True)
class PublishedRow:
    """One row of a published table: PTC per (level, method) cell (None where the paper ran nothing)."""

    table: int
    model: str
    setting: str | None
    cells: Mapping[tuple[str, str], float | None]
    average: float | None
    note: str | None = None

    @property
    def label(self) -> str:
        return self.model if self.setting is None else f"{self.model} ({self.setting})"

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "model": self.model,
            "setting": self.setting,
            "label": self.label,
            "cells": [
                {"level": level, "method": method, "ptc": self.cells[(level, method)]}
                for level, method in CELLS
            ],
            "average": self.average,
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class Published:
    """The published tables: titles, rows, and where they come from."""

    source: Mapping[str, str]
    titles: Mapping[int, str]
    rows: tuple[PublishedRow, ...]

    def table(self, number: int) -> list[PublishedRow]:
        """The rows of table `number`, in the paper's order.

        >>> [row.label for row in load().table(2)][:2]
        ['GPT-4o-mini (zero-shot)', 'GPT-4o-mini (zero-shot w/o profile)']
        """
        return [row for row in self.rows if row.table == number]

    def caption(self, number: int) -> str:
        """Where table `number` comes from, in one line.

        >>> load().caption(3)
        'published, paper-mode metric: arXiv 2501.13391, Table 3 (Supervised fine-tuning strategies (LoRA))'
        """
        where = f"arXiv {self.source['arxiv']}, Table {number}"
        return f"published, paper-mode metric: {where} ({self.titles[number]})"


@functools.cache
def load() -> Published:
    """The published tables from ``published.yaml`` (package data)."""
    import yaml

    text = resources.files(__package__).joinpath("published.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    columns = [tuple(column.split("/")) for column in data["columns"]]
    if columns != list(CELLS):
        raise ValueError(f"published.yaml: columns must be {CELLS}, got {columns}")
    rows = []
    for table in data["tables"]:
        for row in table["rows"]:
            if len(row["cells"]) != len(CELLS):
                raise ValueError(f"published.yaml: table {table['table']} {row['model']} needs 9 cells")
            rows.append(
                PublishedRow(
                    table=int(table["table"]),
                    model=row["model"],
                    setting=row.get("setting"),
                    cells=dict(zip(CELLS, row["cells"], strict=True)),
                    average=row.get("average"),
                    note=row.get("note"),
                )
            )
    titles = {int(table["table"]): table["title"] for table in data["tables"]}
    return Published(source=data["source"], titles=titles, rows=tuple(rows))
