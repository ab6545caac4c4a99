"""Who may read what in LLMRec, checked when answers come back (`Task.leak_check`).

The catalogue cell (``sequential/sequential``) asks for items from the whole catalogue and never shows a row's
candidates: its rows do not carry them (the ``direct`` rows of the same ids do, for the candidates cell). A
system that ranks them anyway (one script reused for direct and sequential) answers with items that all lie
in the row's 100 candidates, one of which is the target: it scores as if it had read the target's short list.
So the check counts the answers whose items other than the target are all among the row's negatives (the
candidates but the target: an answer holding only the target tells nothing, a perfect system's included),
and sets that against what as many items drawn from the rest of the catalogue would give by chance.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from perrec_eval.task import Cell
from perrec_eval.tasks.llmrec import data as build

CATALOGUE_CELL = Cell("sequential", "sequential")
FLAG_SHARE = 0.5  # flagged when more than half the answers lie in their candidates ...
FLAG_RATIO = 10.0  # ... and at least ten times as many as chance would put there


def chance_inside(candidates: int, pool: int, length: int) -> float:
    """The chance that `length` distinct items drawn from a pool of `pool` all lie in `candidates` of them.

    >>> round(chance_inside(100, 1000, 1), 3), chance_inside(100, 1000, 10) < 1e-9
    (0.1, True)
    >>> chance_inside(5, 5, 3), chance_inside(2, 5, 3)
    (1.0, 0.0)
    """
    if length > candidates:
        return 0.0
    return math.prod((candidates - i) / (pool - i) for i in range(length))


def leak_check(cell: Cell, docs: Sequence[Any], predictions: Mapping[str, Any]) -> dict[str, Any] | None:
    """The catalogue cell's answers made only of their row's candidates, when they flag it (None: not
    flagged, or another cell).

    Returns ``{"flagged", "inside", "answered", "expected", "what", "fix"}``: the answers whose items but
    the target all lie in the row's candidates, the answers with an item other than the target, the number
    chance would put inside, what the flag means and how to answer instead.
    """
    if cell != CATALOGUE_CELL:
        return None
    inside = answered = 0
    expected = 0.0
    sizes: dict[tuple[str, str], int] = {}
    for doc in docs:
        negatives = set(doc.candidates) - {doc.truth}
        others = set(predictions.get(doc.id) or ()) - {doc.truth}
        if not others or not negatives:
            continue
        answered += 1
        inside += others <= negatives
        key = (doc.source, doc.domain)
        if key not in sizes:
            sizes[key] = len(build.catalogue(doc.source)[doc.domain])
        # the items an answer could name but the target: history items are never candidates
        pool = max(sizes[key] - len(doc.history) - 1, len(negatives))
        expected += chance_inside(len(negatives), pool, len(others))
    if not (answered and inside > FLAG_SHARE * answered and inside >= FLAG_RATIO * expected):
        return None
    return {
        "flagged": True,
        "inside": inside,
        "answered": answered,
        "expected": round(expected, 3),
        "what": "made only of their row's candidates, which this cell never shows (the direct rows of the "
        "same ids hold them)",
        "fix": 'a system that ranks the candidates answers the cell "protocol": "sequential-candidates"',
    }
