"""Reading an LLMRec build (`perrecbench build --task llmrec`): its rows as docs, its catalogue and its
train interactions (what the baselines are fitted on)."""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from perrec_eval import fileio
from perrec_eval.errors import DataError
from perrec_eval.task import Doc
from perrec_eval.tasks.llmrec.parsing import TitleIndex

logger = logging.getLogger(__name__)

# The configs whose rows are ranked with another config's candidates (same ids): sequential's rows are the
# catalogue cell's and carry none; its candidates cell ranks the direct rows' list.
CANDIDATES_FROM = {"sequential": "direct"}
# The text configs' ground-truth columns: a text doc's truth is ``{column: text}`` (a mapping keeps it apart
# from a ranking's `parent_asin` in predictions.jsonl).
TEXT_TRUTHS = {"explanation": "explanation", "summarization": "summary"}


@dataclass(frozen=True, slots=True, eq=False)
class RecDoc(Doc):
    """A row of a build as a doc: `truth` is the target's rating (rating), its `parent_asin` (ranking) or
    its ground-truth text (explanation, summarization: ``{column: text}``, `TEXT_TRUTHS`)."""

    kind: str = "rating"
    domain: str = ""
    user_id: str = ""
    parent_asin: str = ""  # the target item (its rating is a rating doc's truth)
    title: str = ""
    timestamp: int = 0
    history: tuple[Mapping[str, Any], ...] = ()
    candidates: tuple[str, ...] = ()
    source: str = ""  # the build folder (the catalogue gives the candidates' titles)
    rating: float | None = None  # the target's rating (explanation: the prompt's "N-star")
    review_text: str = ""  # the target's review (summarization: what is summarized)


def outputs(data: str) -> dict[str, dict[str, str]]:
    """``{config: {split: relative path}}`` from the build's manifest.

    Raises:
        DataError: not an LLMRec build.
    """
    path = Path(data) / "manifest.json"
    try:
        manifest = fileio.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise DataError(f"{data} is not a build: make one with `perrecbench build --task llmrec`") from None
    if manifest.get("task") != "llmrec":
        raise DataError(f"{data} is not an llmrec build: run `perrecbench build --task llmrec` for one")
    return manifest["outputs"]


def rows(data: str, config: str, split: str) -> list[dict[str, Any]]:
    """The rows of one config's split.

    Raises:
        DataError: the build has no such split (the message lists the ones it has).
    """
    files = outputs(data).get(config, {})
    if split not in files:
        raise DataError(f"{data} has no {config} rows in split {split!r}: choose one of {', '.join(files)}")
    return pq.read_table(Path(data) / files[split]).to_pylist()


@functools.cache
def _catalogue(folder: str, stamp: float) -> dict[str, list[tuple[str, str]]]:
    by_domain: dict[str, list[tuple[str, str]]] = {}
    for row in rows(folder, "items", "train"):
        by_domain.setdefault(row["domain"], []).append((row["parent_asin"], row["title"]))
    return by_domain


def _stamp(data: str) -> float:
    return (Path(data) / "manifest.json").stat().st_mtime


def catalogue(data: str) -> dict[str, list[tuple[str, str]]]:
    """Each domain's items ``(parent_asin, title)``, by `parent_asin` (read once per build)."""
    return _catalogue(str(Path(data).resolve()), _stamp(data))


@functools.cache
def _indexes(folder: str, stamp: float) -> dict[str, TitleIndex]:
    return {domain: TitleIndex(items) for domain, items in _catalogue(folder, stamp).items()}


def title_index(data: str, domain: str) -> TitleIndex:
    """The domain's catalogue by title (sequential answers are mapped with it)."""
    return _indexes(str(Path(data).resolve()), _stamp(data))[domain]


@functools.cache
def _interactions(folder: str, stamp: float) -> tuple[dict[str, Any], ...]:
    return tuple(rows(folder, "interactions", "train"))


def train_interactions(data: str) -> tuple[dict[str, Any], ...]:
    """Every train interaction of the build (no validation or test target among them)."""
    return _interactions(str(Path(data).resolve()), _stamp(data))


@functools.cache
def _earlier(folder: str, stamp: float) -> dict[tuple[str, str], list[tuple[int, str]]]:
    by_user: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for row in _interactions(folder, stamp):
        by_user.setdefault((row["domain"], row["user_id"]), []).append((row["timestamp"], row["parent_asin"]))
    return by_user


def seen_before(data: str, doc: RecDoc) -> set[str]:
    """The items the user reviewed before the doc's target in the build's order (time, then
    `parent_asin`): its history and its earlier train interactions, never the target or later items."""
    target = (doc.timestamp, doc.truth if isinstance(doc.truth, str) else "")
    earlier = _earlier(str(Path(data).resolve()), _stamp(data)).get((doc.domain, doc.user_id), [])
    before = {asin for ts, asin in earlier if (ts, asin) < target}
    return before | {item["parent_asin"] for item in doc.history}


def load_docs(
    data: str, subset: str, split: str, *, max_docs: int | None = None, seed: int = 0
) -> list[RecDoc]:
    """The docs of config `subset` in `split` (a seeded sample of `max_docs`, in the build's order)."""
    from perrec_eval.tasks.llmrec import textmetrics

    if subset in TEXT_TRUTHS:
        if subset not in outputs(data):  # a rating-only source (the build said why) or an older build
            logger.warning("%s has no %s config (no review texts): its cells are skipped", data, subset)
            return []
        if split != "train":  # an evaluation: before any answer is asked for (`sft data` needs no metric)
            textmetrics.check_installed()
    chosen = rows(data, subset, split)
    if max_docs is not None and max_docs < len(chosen):
        keep = sorted(random.Random(seed).sample(range(len(chosen)), max_docs))
        chosen = [chosen[i] for i in keep]
    candidates = _candidates(data, subset, split, chosen)
    return [
        RecDoc(
            row["id"],
            _truth(subset, row),
            kind=subset,
            domain=row["domain"],
            user_id=row["user_id"],
            parent_asin=row["parent_asin"],
            title=row["title"],
            timestamp=row["timestamp"],
            history=tuple(row["history"]),
            candidates=candidates.get(row["id"], ()),
            source=data,
            rating=row.get("rating"),
            review_text=row.get("review_text") or "",
        )
        for row in chosen
    ]


def _candidates(
    data: str, subset: str, split: str, chosen: list[dict[str, Any]]
) -> dict[str, tuple[str, ...]]:
    """Each chosen row's candidates by id: the row's own (direct), or for a sequential row those of the
    direct row with its id (`CANDIDATES_FROM`: the sequential-candidates cell ranks them; the catalogue
    cell's rows do not carry them). A build made before that split carried them in both."""
    if chosen and "candidates" in chosen[0]:
        return {row["id"]: tuple(row["candidates"] or ()) for row in chosen}
    source = CANDIDATES_FROM.get(subset)
    files = outputs(data).get(source or "", {})
    if not chosen or split not in files:
        return {}
    table = pq.read_table(Path(data) / files[split], columns=["id", "candidates"])
    table = table.filter(pc.is_in(table["id"], value_set=pa.array([row["id"] for row in chosen])))
    return dict(zip(table["id"].to_pylist(), map(tuple, table["candidates"].to_pylist()), strict=True))


def _truth(subset: str, row: dict[str, Any]) -> Any:
    """A row's truth: its rating, its target's `parent_asin`, or ``{column: text}`` (`TEXT_TRUTHS`).

    >>> _truth("summarization", {"summary": "Lovely scent"})
    {'summary': 'Lovely scent'}
    """
    if subset in TEXT_TRUTHS:
        return {TEXT_TRUTHS[subset]: row[TEXT_TRUTHS[subset]]}
    return row["rating"] if subset == "rating" else row["parent_asin"]
