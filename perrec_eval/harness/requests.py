"""What a one-round harness asks of a family, and how its answers are read and scored (`Adapter`).

A harness sends each request once, with no answer of another request in hand, and scores one row at a
time before it aggregates a task's rows. A cell can be exported when its docs are asked that way: every
request of a doc known before any answer (PerRecBench's pointwise, all-pairs pairwise and listwise;
every cell of the general path's families, one request per doc). Adaptive rankers (PerRecBench's
heapsort pairwise) and requests that need a model's earlier answer (profiles written by the evaluated
model) are not expressible, and the export says so.

The rows are rendered by the family's protocols, the answers read by its readers (`read`, the
`perrecbench score --predictions` reading of answer text) and the cells valued by its scorers
(`aggregate`: `MetricSpec.value` on the general path, PerRecBench's `scoring.score_cells`).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from perrec_eval.registry import get
from perrec_eval.task import Cell, Doc, Task

SCHEMA = 1  # the layout of the rows and of export.json; raised when either changes meaning


@dataclass(frozen=True, slots=True, kw_only=True)
class Selection:
    """What an exported cell evaluates: a build, its split, a seeded sample of its docs and the family's
    prompt options; recorded on every row, so a harness's logged samples say what they answer.

    `data` is the local build the rows were rendered from (a Hub id's downloaded snapshot), `source` the
    build as given, `revision` a Hub build's commit, `fingerprint` the build's (`evaluation.fingerprint`).
    """

    task: str
    data: str
    source: str
    revision: str | None = None
    fingerprint: str
    split: str = "test"
    max_docs: int | None = None
    seed: int = 0
    options: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "options": dict(self.options)}

    def key(self) -> str:
        """The selection as one string (rows carry it; caches key on it)."""
        return json.dumps(self.to_json(), sort_keys=True, ensure_ascii=False)

    @classmethod
    def from_key(cls, key: str) -> Selection:
        return _selection(key)


@functools.cache
def _selection(key: str) -> Selection:
    return Selection(**json.loads(key))


@dataclass(frozen=True, slots=True)
class Request:
    """One request of a cell: its doc, the doc's place in the cell, its slot (JSON) and chat messages."""

    doc_id: str
    doc_index: int
    slot: Any
    messages: tuple[Mapping[str, str], ...]


class NotOneRound(ValueError):
    """A cell (or a doc of it) a one-round harness cannot ask: the message says why."""


class Adapter(Protocol):
    """A family as a one-round harness asks it."""

    task: Task
    option_names: tuple[str, ...]
    option_defaults: Mapping[str, Any]  # an option's value where the export leaves it unset (None)

    def unexpressible(self, cell: Cell, options: Mapping[str, Any]) -> str | None:
        """Why a one-round harness cannot ask `cell` with `options` (None: it can)."""
        ...

    def requests(self, selection: Selection, cell: Cell) -> list[Request]:
        """Every request of the cell's docs, in the family's order (raises `NotOneRound`)."""
        ...

    def metrics(self, selection: Selection, cell: Cell) -> tuple[Any, ...]:
        """The cell's metrics (`stats.MetricSpec`), the family's headline first."""
        ...

    def read(self, selection: Selection, cell: Cell, doc_id: str, slot: Any, text: str | None) -> dict:
        """One answer read by the family's reader: the row's item of each metric of the cell."""
        ...

    def aggregate(self, metric: str, items: Sequence[Any]) -> float:
        """A cell's value of `metric` from its rows' items, by the family's scorer (NaN: undefined)."""
        ...


class GeneralAdapter:
    """Any family on the general path (`Task.load_docs`, protocols, `score_doc`): one request per doc,
    its answer read as `perrecbench score --predictions` reads answer text (`answer_prediction`), each
    metric's items the doc's `score_doc` and the cell's value `MetricSpec.value` of them."""

    option_names = ("prompts",)
    option_defaults: Mapping[str, Any] = {}

    def __init__(self, task: Task) -> None:
        self.task = task

    def unexpressible(self, cell: Cell, options: Mapping[str, Any]) -> str | None:
        return None

    def docs(self, selection: Selection, subset: str) -> dict[str, Doc]:
        """The cell's docs by id (the seeded sample `evaluate --max-docs` takes)."""
        return _general_docs(selection.key(), subset)

    def requests(self, selection: Selection, cell: Cell) -> list[Request]:
        protocol = self.task.protocols[cell.protocol]
        variant = selection.options.get("prompts")
        render = {} if variant is None else {"variant": variant}
        out = []
        for index, doc in enumerate(self.docs(selection, cell.subset).values()):
            runner = protocol.runner(doc)
            slots = runner.pending()
            if len(slots) != 1:
                raise NotOneRound(f"{self.task.name} {cell}: a doc asks {len(slots)} requests, not one")
            runner.feed({slots[0]: None})
            if not runner.done:
                raise NotOneRound(f"{self.task.name} {cell}: a doc asks again after its first answer")
            slot = slots[0]
            messages = tuple(protocol.render(doc, slot, **render))
            out.append(Request(doc.id, index, _slot_json(slot), messages))
        return out

    def metrics(self, selection: Selection, cell: Cell) -> tuple[Any, ...]:
        docs = self.docs(selection, cell.subset)
        if not docs:
            return ()
        truth = next(iter(docs.values())).truth
        # A metric of the cell gives a failed doc a value (`Task.score_doc`: None for another task's metric)
        return tuple(m for m in self.task.metrics if self.task.score_doc(m.name, None, truth) is not None)

    def read(self, selection: Selection, cell: Cell, doc_id: str, slot: Any, text: str | None) -> dict:
        from perrec_eval.evaluation import answer_prediction

        doc = self.docs(selection, cell.subset)[doc_id]
        protocol = self.task.protocols[cell.protocol]
        prediction = None if text is None else answer_prediction(protocol, doc, text)
        return {
            metric.name: self.task.score_doc(metric.name, prediction, doc.truth)
            for metric in self.metrics(selection, cell)
        }

    def aggregate(self, metric: str, items: Sequence[Any]) -> float:
        from perrec_eval.evaluation import cell_value

        spec = next(m for m in self.task.metrics if m.name == metric)
        return finite_or_nan(cell_value(spec, list(items)))


@functools.cache
def _general_docs(selection_key: str, subset: str) -> dict[str, Doc]:
    selection = Selection.from_key(selection_key)
    task = get(selection.task)
    docs = task.load_docs(
        selection.data, subset, selection.split, max_docs=selection.max_docs, seed=selection.seed
    )
    return {doc.id: doc for doc in docs}


def _slot_json(slot: Any) -> Any:
    return slot.to_json() if hasattr(slot, "to_json") else slot


def finite_or_nan(value: float | None) -> float:
    """A cell's value as a harness reports it: NaN where this project's scores say None (undefined)."""
    return math.nan if value is None or not math.isfinite(value) else float(value)
