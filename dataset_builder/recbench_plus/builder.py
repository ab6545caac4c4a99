"""RecBench+'s part of ``perrecbench build``: per domain, the reviewed catalogue and every user's history
(the stage, in DuckDB), then the knowledge graph and the queries (in Python), then the folder.

The folder: ``explicit/{test,train}-<sha12>.parquet`` and likewise ``implicit``, ``misinformed`` and
``interest`` (rows of :func:`dataset_builder.recbench_plus.queries.rows_of_user`),
``catalogue/items-<sha12>.parquet`` (every item with a title: ``parent_asin, title, domain, popularity,
relations``, the relations kept by the graph), the card and ``manifest.json``. File names carry their content
hash, so a rebuilt folder never serves stale rows (PITFALLS 1); an empty split has no file and no card entry
(PITFALLS 2).
"""

from __future__ import annotations

import hashlib
import io
import random
from functools import partial
from pathlib import Path
from typing import Any

from dataset_builder import raw
from dataset_builder.config import BuildError
from dataset_builder.manifest import manifest
from dataset_builder.recbench_plus import card, kg, phrasing, queries
from dataset_builder.recbench_plus.config import BuildConfig
from dataset_builder.sources import Source
from dataset_builder.stages import DomainInputs, StageOutput, StageSpec, Tick
from dataset_builder.tasks import Builder
from perrec_eval.fileio import write_json, write_text
from perrec_eval.tasks.recbench_plus import metrics

CONFIGS = queries.TYPES
SPLITS = ("test", "train")
DEMOGRAPHICS_NOTE = (
    "not built: Amazon Reviews 2023 gives no user attributes, and this rebuild does not read a MovieLens-1M "
    "users.dat"
)


def _select(
    cfg: BuildConfig, source: Source, item: DomainInputs, work: Path, files: dict[str, Path], tick: Tick
) -> StageOutput:
    con = raw.connect(cfg, work, source)
    try:
        funnel, bad = raw.read_reviews(con, source, item.reviews, cfg.on_bad_line, tick=tick)
        tick("read metadata")
        counts, meta_bad = raw.read_meta(
            con, source, item.meta, cfg.on_bad_line, items="SELECT parent_asin FROM rev", details=True
        )
        # the catalogue: reviewed items with a title; popularity = their reviews in this source
        con.sql(f"""
            COPY (SELECT m.parent_asin, trim(m.title) AS title, m.author, m.store, m.categories, m.details,
                         count(*) AS popularity
                  FROM meta m JOIN rev r USING (parent_asin)
                  WHERE trim(coalesce(m.title, '')) <> ''
                  GROUP BY ALL ORDER BY m.parent_asin) TO '{files["items_path"]}' (FORMAT parquet)""")
        con.sql(f"""
            COPY (SELECT user_id, parent_asin, ts FROM rev
                  WHERE parent_asin IN (SELECT parent_asin FROM meta WHERE trim(coalesce(title, '')) <> '')
                  ORDER BY user_id, ts, parent_asin) TO '{files["history_path"]}' (FORMAT parquet)""")
        titled = con.sql("SELECT count(*) FROM meta WHERE trim(coalesce(title, '')) <> ''").fetchall()[0][0]
    finally:
        con.close()
    return StageOutput({**funnel, **counts, "titled_items": titled}, bad + meta_bad, {"titled": titled})


def _stage(cfg: BuildConfig) -> StageSpec:
    return StageSpec(
        version=1,
        params={"details": True},  # the stage reads the raw files only: the query settings act after it
        flags={},
        steps=("read reviews", "deduplicate", "read metadata"),
        files={"items_path": "items.parquet", "history_path": "history.parquet"},
        select=partial(_select, cfg),
    )


def _domain_queries(cfg: BuildConfig, domain: str, stage: dict[str, Any]) -> dict[str, Any]:
    """One domain's graph, catalogue rows and query rows per config and split, with its counts."""
    import pyarrow.parquet as pq

    rows = pq.read_table(stage["items_path"]).to_pylist()
    keys = kg.detail_keys(domain, cfg.details_keys)
    facts = {
        r["parent_asin"]: kg.item_facts(r["author"], r["store"], r["categories"], r["details"], keys)
        for r in rows
    }
    if not rows:
        raise BuildError(
            f"{domain}: no reviewed item has a title in its metadata; pass --source files whose metadata "
            "carries titles (RecBench+ answers are matched to the catalogue by title)"
        )
    graph = kg.build_graph(facts, min_items=cfg.min_items, max_share=cfg.max_share)
    if not graph.holders:
        raise BuildError(
            f"{domain}: no relation value of the metadata is held by {cfg.min_items} to {cfg.max_share:g} of "
            "the items: name other --details-keys, or lower --min-items, or raise --max-share"
        )
    items = {r["parent_asin"]: queries.Item(r["parent_asin"], r["title"], r["popularity"]) for r in rows}
    histories: dict[str, list[str]] = {}
    for r in pq.read_table(stage["history_path"]).to_pylist():
        histories.setdefault(r["user_id"], []).append(r["parent_asin"])
    rng = random.Random(f"{cfg.seed}-{domain}")
    eligible = [u for u in sorted(histories) if len(histories[u]) >= cfg.min_history]
    if not eligible:
        raise BuildError(
            f"{domain}: no user has {cfg.min_history} reviewed items with a titled metadata line; lower "
            "--min-history or pass a larger --source"
        )
    rng.shuffle(eligible)
    catalogue = queries.Catalogue(graph, items)
    counts: dict[str, int] = {
        "eligible_users": len(eligible),
        **{f"values_{k}": v for k, v in graph.dropped.items()},
    }
    counts["values_kept"] = len(graph.holders)
    counts.update({f"{config}_skipped": 0 for config in CONFIGS[1:]})
    out: dict[str, dict[str, list[dict[str, Any]]]] = {c: {s: [] for s in SPLITS} for c in CONFIGS}
    wanted = {"test": cfg.users, "train": cfg.train_users}
    users = {"test": 0, "train": 0}
    for user in eligible:
        split = "test" if users["test"] < wanted["test"] else "train"
        if users[split] >= wanted[split]:
            break
        found = queries.candidates(
            histories[user], graph, min_subset=cfg.min_subset, max_subset=cfg.max_subset
        )
        chosen = queries.choose(found, cfg.queries_per_user, rng)
        if not chosen:
            continue
        users[split] += 1
        made = queries.rows_of_user(user, histories[user], chosen, catalogue, domain, counts)
        for config in CONFIGS:
            out[config][split] += made[config]
    counts.update({f"{split}_users": n for split, n in users.items()})
    for config in CONFIGS[:3]:  # queries by condition count, both splits
        for group in metrics.CONDITION_GROUPS:
            rows_n = [
                r for split in SPLITS for r in out[config][split]
                if metrics.condition_group(len(r["conditions"])) == group
            ]  # fmt: skip
            counts[f"{config}_{group}_condition"] = len(rows_n)
    catalogue = [
        {"parent_asin": a, "title": i.title, "domain": domain, "popularity": i.popularity,
         "relations": [f.to_json() for f in graph.facts[a]]}
        for a, i in items.items()
    ]  # fmt: skip
    return {"rows": out, "catalogue": catalogue, "counts": counts}


def _phrase(cfg: BuildConfig, planned: dict[str, dict[str, Any]]) -> None:
    """Rewrite every domain's rows with the LLM of ``--phrasing llm`` (cached: a killed build resumes)."""
    from perrec_eval.cache import CachedEngine

    engine = CachedEngine(cfg.engine_spec().load_engine(), cfg.stage_root / "phrasing.cache.jsonl")
    for domain, plan in planned.items():
        rows = {config: [r for split in SPLITS for r in plan["rows"][config][split]] for config in CONFIGS}
        try:
            written = phrasing.phrase(rows, engine, plan["counts"], retries=cfg.phrasing_retries)
        except RuntimeError as err:
            raise BuildError(
                f"{domain}: {err}; run the same command again (written rewrites are cached)"
            ) from None
        for config in CONFIGS:
            by_id = {row["id"]: row for row in written[config]}
            for split in SPLITS:
                old = plan["rows"][config][split]
                plan["rows"][config][split] = [by_id[r["id"]] for r in old if r["id"] in by_id]


def _plan(cfg: BuildConfig, results: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    planned = {domain: _domain_queries(cfg, domain, results[domain]) for domain in cfg.domains}
    if cfg.phrasing == "llm":
        _phrase(cfg, planned)
    if not any(p["rows"]["explicit"]["test"] for p in planned.values()):
        raise BuildError(
            f"no test query in {', '.join(cfg.domains)}: no user has {cfg.min_subset} of at least "
            f"{cfg.min_history} history items sharing a kept relation value; lower --min-subset or "
            "--min-history, raise --max-share, or name other --details-keys"
        )
    return planned


def _parquet(folder: Path, name: str, rows: list[dict[str, Any]]) -> str:
    """Write `rows` as ``<name>-<sha12>.parquet`` under `folder`; return the relative path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buffer)
    data = buffer.getvalue()
    path = f"{name}-{hashlib.sha256(data).hexdigest()[:12]}.parquet"
    (folder / path).parent.mkdir(parents=True, exist_ok=True)
    (folder / path).write_bytes(data)
    return path


def _write(
    folder: Path, cfg: BuildConfig, results: dict[str, dict[str, Any]], plan: dict[str, Any], provenance: dict
) -> None:
    files: dict[str, dict[str, str]] = {}
    sizes: dict[str, dict[str, int]] = {}
    for config in CONFIGS:
        for split in SPLITS:
            rows = [row for domain in cfg.domains for row in plan[domain]["rows"][config][split]]
            if rows:
                files.setdefault(config, {})[split] = _parquet(folder, f"{config}/{split}", rows)
                sizes.setdefault(config, {})[split] = len(rows)
    catalogue = [row for domain in cfg.domains for row in plan[domain]["catalogue"]]
    files["catalogue"] = {"items": _parquet(folder, "catalogue/items", catalogue)}
    counts = {domain: plan[domain]["counts"] for domain in cfg.domains}
    outputs = {"outputs": files, "queries": sizes, "graph": counts}
    recorded = manifest(cfg.as_manifest(), results, provenance, outputs, task=cfg.task)
    write_json(folder / "manifest.json", recorded)
    write_text(
        folder / "README.md",
        card.card(
            cfg,
            files,
            sizes,
            counts,
            provenance,
            phrasing=card.phrasing_note(cfg, counts),
            demographics=DEMOGRAPHICS_NOTE,
        ),  # fmt: skip
    )


def _summary(out: Path) -> str:
    return (
        f"RecBench+ queries built in {out} ({', '.join(CONFIGS)} configs, catalogue, card, manifest.json); "
        f"demographics: {DEMOGRAPHICS_NOTE}"
    )


BUILDER = Builder(stage=_stage, plan=_plan, write=_write, summary=_summary)
