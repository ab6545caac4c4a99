"""Scripted answers to exported rows: a seeded mix of the true answer, the fake engine's constant answer and
prose that reads as nothing, so that every metric of every cell takes a value other than 0 and 1."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from perrec_eval.harness.families import adapter
from perrec_eval.harness.requests import Selection
from perrec_eval.registry import get
from perrec_eval.task import Cell
from perrec_eval.types import ChatRequest


def answer(row: dict[str, Any]) -> str:
    """The answer to a row: its true answer (about half the rows), a constant answer or none."""
    pick = int(hashlib.sha256(row["request"].encode()).hexdigest(), 16) % 6
    if pick == 5:
        return "I am not sure I can tell from these histories."
    task_name, subset, protocol = row["cell"].split("/")
    if pick >= 3:
        request = ChatRequest(tuple(json.loads(row["messages"])))
        constant = get(task_name).constant_answer(request)
        if constant is not None:
            return constant
    return true_answer(task_name, Cell(subset, protocol), Selection.from_key(row["selection"]), row)


def true_answer(task_name: str, cell: Cell, selection: Selection, row: dict[str, Any]) -> str:
    """The row's true answer written as its protocol asks for it."""
    slot = json.loads(row["slot"])
    if task_name == "perrecbench":
        from perrec_eval.tasks.perrecbench import protocols
        from perrec_eval.tasks.perrecbench.harness import _groups
        from perrec_eval.tasks.perrecbench.rankers import ListSlot, PairSlot, UserSlot

        group = next(g for g in _groups(selection.key(), cell.subset) if g.group_id == row["doc_id"])
        n = len(group.users)
        shown = {"user": lambda: UserSlot(slot[1]), "pair": lambda: PairSlot(slot[1], slot[2])}.get(
            slot[0], lambda: ListSlot(n, ListSlot.shown_order(slot, n))
        )()
        protocol = protocols.get(cell.protocol)
        value = protocol.true_answer(group.relative_ratings, group.ratings, shown)
        return protocol.format_answer(value, len(shown.users))
    task = get(task_name)
    doc = adapter(task_name).docs(selection, cell.subset)[row["doc_id"]]
    protocol = task.protocols[cell.protocol]
    (real,) = protocol.runner(doc).pending()
    return protocol.format_answer(protocol.true_answer(doc, real), real)
