"""`perrecbench build --task llmrec`: the stage (titled items, k-core), the plan and the files.

Configs: ``rating``, ``sequential``, ``direct`` (splits train / validation / test, `splits`),
``explanation`` and ``summarization`` (the same rows with a ground-truth text, `text`; left out for a source
without review texts), plus
``items`` (the catalogue: every item after the k-core, with its title) and ``interactions`` (every train
interaction, what the baselines are fitted on). Data files are named by content hash (PITFALLS 1).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dataset_builder import raw
from dataset_builder.config import BuildError
from dataset_builder.llmrec.config import BuildConfig
from dataset_builder.llmrec.selection import kcore, titled_interactions, write_sorted
from dataset_builder.llmrec.splits import (
    SPLITS,
    Cuts,
    Interaction,
    candidates,
    row_rng,
    train_items,
    user_rows,
)
from dataset_builder.llmrec.text import TEXT_CONFIGS, text_rows
from dataset_builder.manifest import manifest
from dataset_builder.sources import Source
from dataset_builder.stages import DomainInputs, StageOutput, StageSpec, Tick
from dataset_builder.tasks import Builder
from perrec_eval.fileio import write_json, write_text

logger = logging.getLogger(__name__)

TASK_CONFIGS = ("rating", "sequential", "direct")
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
    "sequential": pa.schema([*_COMMON, *_CANDIDATES]),
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
        funnel, bad = raw.read_reviews(con, source, item.reviews, cfg.on_bad_line, text=True, tick=tick)
        tick("read metadata")
        counts, meta_bad = raw.read_meta(
            con, source, item.meta, cfg.on_bad_line, items="SELECT DISTINCT parent_asin FROM rev"
        )
        tick("k-core")
        titled = titled_interactions(con)
        rounds = kcore(con, cfg.kcore)
        kept = write_sorted(con, files["interactions_path"])
        kept["review_texts"] = _write_texts(con, files["texts_path"])
    finally:
        con.close()
    selection = {**funnel, **counts, "titled": titled, "kcore": kept["interactions"]}
    return StageOutput(selection, bad + meta_bad, {**kept, "kcore_rounds": rounds})


def _write_texts(con, path: Path) -> int:
    """Each kept review's title and text to parquet; the number with a non-empty text."""
    con.sql(f"""
        COPY (SELECT user_id, parent_asin, rev.title AS review_title, rev.text AS review_text
              FROM inter JOIN rev USING (user_id, parent_asin) ORDER BY user_id, parent_asin)
        TO '{path}' (FORMAT parquet)""")
    return con.sql("""
        SELECT count(*) FROM inter JOIN rev USING (user_id, parent_asin)
        WHERE trim(coalesce(rev.text, '')) <> ''""").fetchall()[0][0]


def _stage(cfg: BuildConfig) -> StageSpec:
    return StageSpec(
        version=2,
        params={"kcore": cfg.kcore},
        flags={},
        steps=("read reviews", "deduplicate", "read metadata", "k-core"),
        files={"interactions_path": "interactions.parquet", "texts_path": "texts.parquet"},
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


def domain_rows(cfg: BuildConfig, domain: str, path: Path) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Every config's rows of one domain: ``{config: {split: rows}}``.

    Sequential and direct rows carry the same candidates (the target and ``cfg.negatives`` items the user
    never reviewed, drawn per row id) and the target's position among them.
    """
    table = pq.read_table(path).to_pylist()
    out: dict[str, dict[str, list[dict[str, Any]]]] = {
        name: {split: [] for split in SPLITS} for name in TASK_CONFIGS
    }
    catalogue = sorted({(r["parent_asin"], r["title"]) for r in table})
    out["items"] = {"train": [{"domain": domain, "parent_asin": a, "title": t} for a, t in catalogue]}
    out["interactions"] = {"train": []}
    items = np.array([asin for asin, _ in catalogue])
    # the same ids as Python objects: a row's drawn candidates are references to them, not new strings (a
    # row holds `negatives` + 1 ids, so fresh strings made the rows of a paper-size domain many GB)
    shared = np.array([asin for asin, _ in catalogue], dtype=object)
    cuts = Cuts(cfg.valid_from, cfg.test_from) if cfg.split == "timestamp" else None
    sequences: dict[str, list[Interaction]] = {}
    for r in table:  # already in each user's chronological order
        sequences.setdefault(r["user_id"], []).append(
            Interaction(r["parent_asin"], r["title"], float(r["rating"]), int(r["ts"]))
        )
    for user, sequence in sequences.items():
        for item in train_items(sequence, cuts):
            out["interactions"]["train"].append(
                {"domain": domain, "user_id": user, "parent_asin": item.parent_asin, "rating": item.rating,
                 "timestamp": item.timestamp}
            )  # fmt: skip
    weights = None
    if cfg.negative_sampling == "popularity":  # 1 + train interactions: every item can be drawn
        counts = Counter(row["parent_asin"] for row in out["interactions"]["train"])
        weights = np.array([1.0 + counts[asin] for asin in items])
    for user, sequence in sequences.items():
        keep = ~np.isin(items, [i.parent_asin for i in sequence])
        pool, pool_weights = shared[keep], None if weights is None else weights[keep]
        for split, row in user_rows(domain, user, sequence, cfg.history_length, cuts):
            rating = row.pop("rating")
            out["rating"][split].append({**row, "rating": rating})
            listed, at = candidates(
                row["parent_asin"], pool, cfg.negatives, row_rng(cfg.seed, row["id"]), pool_weights
            )
            out["sequential"][split].append({**row, "candidates": listed, "target_position": at})
            out["direct"][split].append({**row, "candidates": listed, "target_position": at})
    return out


def write_split(folder: Path, config: str, split: str, rows: list[dict[str, Any]]) -> str:
    """One config's split as ``<config>/<split>-<sha12>.parquet`` (named by content); its relative path."""
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMAS[config]), sink)
    data = sink.getvalue()
    name = f"{config}/{split}-{hashlib.sha256(data).hexdigest()[:12]}.parquet"
    (folder / config).mkdir(exist_ok=True)
    (folder / name).write_bytes(data)
    return name


def _write(
    folder: Path, cfg: BuildConfig, results: dict[str, dict[str, Any]], plan: list[str], provenance: dict
) -> None:
    from dataset_builder.llmrec.card import build_card

    rows: dict[str, dict[str, list[dict[str, Any]]]] = {}
    text: dict[str, Any] = {"funnel": {}, "skipped": []}
    for domain in plan:
        made = domain_rows(cfg, domain, Path(results[domain]["interactions_path"]))
        if results[domain]["review_texts"]:
            texts, text["funnel"][domain] = domain_text_rows(Path(results[domain]["texts_path"]), made)
            made.update(texts)
        else:
            text["skipped"].append(domain)
        for name, splits in made.items():
            for split, split_rows in splits.items():
                rows.setdefault(name, {}).setdefault(split, []).extend(split_rows)
    files: dict[str, dict[str, str]] = {}
    counts: dict[str, dict[str, int]] = {}
    for name, splits in rows.items():
        for split, split_rows in splits.items():
            if split_rows:  # an empty split does not load (PITFALLS 2): left out
                files.setdefault(name, {})[split] = write_split(folder, name, split, split_rows)
                counts.setdefault(name, {})[split] = len(split_rows)
    if text["skipped"]:
        text["skipped_because"] = text_skipped(text["skipped"])
        logger.warning(text["skipped_because"])
    outputs = {"outputs": files, "counts": counts, "text": text}
    recorded = manifest(cfg.as_manifest(), results, provenance, outputs, task=cfg.task)
    write_json(folder / "manifest.json", recorded)
    write_text(folder / "README.md", build_card(cfg, files, counts, results, plan, provenance, text=text))


def text_skipped(domains: list[str]) -> str:
    """The one line saying why a build has no text tasks for `domains`."""
    return (
        f"{', '.join(domains)}: explanation and summarization skipped: the source has no review text "
        "(a rating-only source); rating, sequential and direct are built"
    )


def domain_text_rows(
    texts_path: Path, made: dict[str, dict[str, list[dict[str, Any]]]]
) -> tuple[dict[str, dict[str, list[dict[str, Any]]]], dict[str, dict[str, int]]]:
    """One domain's explanation and summarization rows (`text.text_rows`) beside its other configs' rows."""
    reviews = {
        (r["user_id"], r["parent_asin"]): (r["review_title"], r["review_text"])
        for r in pq.read_table(texts_path).to_pylist()
    }
    train = [(r["user_id"], r["parent_asin"], r["timestamp"]) for r in made["interactions"]["train"]]
    return text_rows(made["rating"], train, reviews)


def _summary(out: Path) -> str:
    counts = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["counts"]
    test = counts.get("sequential", {}).get("test", 0)
    built = [name for name in (*TASK_CONFIGS, *TEXT_CONFIGS) if name in counts]
    return f"llmrec built in {out}: {test:,} test rows; configs {', '.join(built)}"


BUILDER = Builder(stage=_stage, plan=_plan, write=_write, summary=_summary)
