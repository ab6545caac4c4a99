"""`perrecbench build --task llmrec`: the stage (titled items, k-core), the plan and the files.

Configs: ``rating``, ``sequential``, ``direct`` (splits train / validation / test, `splits`; sequential and
direct have the same rows, ids and targets, and only direct's carry the candidates, which the
sequential-candidates cell ranks),
``explanation`` and ``summarization`` (the same rows with a ground-truth text, `text`; left out for a source
without review texts), plus
``items`` (the catalogue: every item after the k-core, with its title) and ``interactions`` (every train
interaction, what the baselines are fitted on). Data files are named by content hash (PITFALLS 1).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa

from dataset_builder import raw
from dataset_builder.config import BuildError
from dataset_builder.llmrec import stream
from dataset_builder.llmrec.config import BuildConfig
from dataset_builder.llmrec.selection import kcore, titled_interactions, write_sorted
from dataset_builder.llmrec.text import TEXT_CONFIGS
from dataset_builder.manifest import manifest
from dataset_builder.sources import Source
from dataset_builder.stages import DomainInputs, StageOutput, StageSpec, Tick
from dataset_builder.tasks import Builder
from perrec_eval.fileio import write_json, write_text

logger = logging.getLogger(__name__)

TASK_CONFIGS = ("rating", "sequential", "direct")
TIE_WARNING = 0.05  # the share of tied test targets above which the build warns
_HISTORY = pa.list_(
    pa.struct(
        [
            ("parent_asin", pa.string()),
            ("title", pa.string()),
            ("rating", pa.float64()),
            ("timestamp", pa.int64()),
        ]
    )
)
_COMMON = [
    ("id", pa.string()),
    ("domain", pa.string()),
    ("user_id", pa.string()),
    ("parent_asin", pa.string()),
    ("title", pa.string()),
    ("timestamp", pa.int64()),
    ("history", _HISTORY),
]
_CANDIDATES = [("candidates", pa.list_(pa.string())), ("target_position", pa.int64())]
SCHEMAS = {
    "rating": pa.schema([*_COMMON, ("rating", pa.float64())]),
    # The catalogue cell's rows carry no candidates: a system answering them must not be offered the
    # candidates cell's list (the `direct` rows, same ids, hold it for sequential-candidates).
    "sequential": pa.schema(_COMMON),
    "direct": pa.schema([*_COMMON, *_CANDIDATES]),
    "explanation": pa.schema(
        [*_COMMON, ("rating", pa.float64()), ("explanation", pa.string()), ("feature", pa.string())]
    ),
    "summarization": pa.schema([*_COMMON, ("review_text", pa.string()), ("summary", pa.string())]),
    "items": pa.schema([("domain", pa.string()), ("parent_asin", pa.string()), ("title", pa.string())]),
    "interactions": pa.schema(
        [
            ("domain", pa.string()),
            ("user_id", pa.string()),
            ("parent_asin", pa.string()),
            ("rating", pa.float64()),
            ("timestamp", pa.int64()),
        ]
    ),
}


def _select(
    cfg: BuildConfig, source: Source, item: DomainInputs, work: Path, files: dict[str, Path], tick: Tick
) -> StageOutput:
    con = raw.connect(cfg, work, source)
    try:
        funnel, bad = raw.read_reviews(con, source, item.reviews, cfg.on_bad_line, tick=tick)
        tick("read metadata")
        counts, meta_bad = raw.read_meta(
            con, source, item.meta, cfg.on_bad_line, items="SELECT DISTINCT parent_asin FROM rev"
        )
        tick("k-core")
        titled = titled_interactions(con)
        rounds = kcore(con, cfg.kcore)
        tick("review texts")  # read again, for the k-core's reviews only
        raw.review_texts(con, item.reviews, "inter")
        tick("write sorted")
        kept = write_sorted(con, files["interactions_path"], files["items_path"])
    finally:
        con.close()
    selection = {**funnel, **counts, "titled": titled, "kcore": kept["interactions"]}
    return StageOutput(selection, bad + meta_bad, {**kept, "kcore_rounds": rounds})


def _stage(cfg: BuildConfig) -> StageSpec:
    return StageSpec(
        version=3,
        params={"kcore": cfg.kcore},
        flags={},
        steps=("read reviews", "deduplicate", "read metadata", "k-core", "review texts", "write sorted"),
        files={"interactions_path": "interactions.parquet", "items_path": "items.parquet"},
        select=partial(_select, cfg),
    )


def _plan(cfg: BuildConfig, results: dict[str, dict[str, Any]]) -> list[str]:
    domains = [d for d in cfg.domains if results[d]["users"]]
    if not domains and not any(results[d]["funnel"].get("titled") for d in cfg.domains):
        raise BuildError(
            f"no review of {', '.join(cfg.domains)} is of an item with a title in its metadata "
            '(meta_<Category>.jsonl\'s "title"): LLMRec names items by title; pass metadata files with titles'
        )
    if not domains:
        raise BuildError(f"the {cfg.kcore}-core leaves no user in {', '.join(cfg.domains)}; lower --kcore")
    for domain in domains:
        spare = results[domain]["items"] - results[domain]["longest_user"]
        if spare < cfg.negatives:
            raise BuildError(
                f"{domain}: a user reviewed {results[domain]['longest_user']} of its "
                f"{results[domain]['items']} items, leaving {spare} negatives; lower --negatives to {spare}"
            )
    return domains


def _write(
    folder: Path, cfg: BuildConfig, results: dict[str, dict[str, Any]], plan: list[str], provenance: dict
) -> None:
    """Every domain's rows through the sinks (`stream.write_domain`), then the manifest and the card."""
    from dataset_builder.llmrec.card import build_card

    text: dict[str, Any] = {"funnel": {}, "skipped": []}
    ties: dict[str, dict[str, int]] = {}
    sinks = stream.Sinks(folder, SCHEMAS)
    for domain in plan:
        texts = bool(results[domain]["review_texts"])
        made = stream.write_domain(
            cfg, domain, Path(results[domain]["interactions_path"]), Path(results[domain]["items_path"]),
            texts, sinks,
        )  # fmt: skip
        ties[domain] = tie_counts(made.ties)
        if texts:
            text["funnel"][domain] = {name: dict(sorted(c.items())) for name, c in made.text.items()}
        else:
            text["skipped"].append(domain)
    files, counts = sinks.finish((*TASK_CONFIGS, "items", "interactions", *TEXT_CONFIGS))
    if text["skipped"]:
        text["skipped_because"] = text_skipped(text["skipped"])
        logger.warning(text["skipped_because"])
    tied = {"rule": cfg.ties, "domains": ties, **tie_totals(ties)}
    warning = tie_warning(tied)
    if warning:
        logger.warning(warning)
    outputs = {"outputs": files, "counts": counts, "text": text, "ties": tied}
    recorded = manifest(cfg.as_manifest(), results, provenance, outputs, task=cfg.task)
    write_json(folder / "manifest.json", recorded)
    card = build_card(cfg, files, counts, results, plan, provenance, text=text, ties=tied)
    write_text(folder / "README.md", card)


def tie_counts(counted: dict[str, int]) -> dict[str, int]:
    """One domain's tie counts in a fixed order."""
    names = ("test_targets", "test_tied", "validation_targets", "validation_tied", "dropped_users")
    return {name: int(counted.get(name, 0)) for name in names}


def tie_totals(domains: dict[str, dict[str, int]]) -> dict[str, int]:
    """The tie counts summed over domains.

    >>> tie_totals({"A": {"test_targets": 4, "test_tied": 1}, "B": {"test_targets": 6, "test_tied": 0}})
    {'test_targets': 10, 'test_tied': 1}
    """
    total: Counter = Counter()
    for counted in domains.values():
        total.update(counted)
    return {name: total[name] for name in next(iter(domains.values()), {})}


def tie_share(tied: dict[str, Any], split: str = "test") -> float:
    """The share of `split`'s targets with the time of a history item.

    >>> tie_share({"test_targets": 8, "test_tied": 2})
    0.25
    """
    return tied[f"{split}_tied"] / tied[f"{split}_targets"] if tied[f"{split}_targets"] else 0.0


def tie_warning(tied: dict[str, Any]) -> str | None:
    """The warning when more than `TIE_WARNING` of the test targets tie in time with a history item."""
    share = tie_share(tied)
    if share <= TIE_WARNING:
        return None
    return (
        f"{tied['test_tied']:,} of {tied['test_targets']:,} test targets ({share:.1%}) have the time of a "
        f"history item: --ties {tied['rule']} decides their order (asin: parent_asin order, as P5; drop: "
        "leave those users out; random: a seeded draw); see docs/llmrec.md"
    )


def text_skipped(domains: list[str]) -> str:
    """The one line saying why a build has no text tasks for `domains`."""
    return (
        f"{', '.join(domains)}: explanation and summarization skipped: the source has no review text "
        "(a rating-only source); rating, sequential and direct are built"
    )


def _summary(out: Path) -> str:
    recorded = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    counts = recorded["counts"]
    test = counts.get("sequential", {}).get("test", 0)
    built = [name for name in (*TASK_CONFIGS, *TEXT_CONFIGS) if name in counts]
    tied = recorded["ties"]
    ties = (
        f"test targets tied in time with a history item: {tied['test_tied']:,} of {tied['test_targets']:,} "
        f"({tie_share(tied):.1%}), validation {tied['validation_tied']:,} of {tied['validation_targets']:,} "
        f"(--ties {tied['rule']}"
        + (f": {tied['dropped_users']:,} users left out)" if tied["rule"] == "drop" else ")")
    )
    return f"llmrec built in {out}: {test:,} test rows; configs {', '.join(built)}; {ties}"


BUILDER = Builder(stage=_stage, plan=_plan, write=_write, summary=_summary)
