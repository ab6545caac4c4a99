"""RecBench+'s part of ``perrecbench build``: per domain, the reviewed catalogue, every user's history and
the users' attributes (the stage: Amazon Reviews 2023 in DuckDB; MovieLens-1M's three files in Python,
`movielens`), then the knowledge graph and the queries (in Python), then the folder.

The folder: ``explicit/{test,train}-<sha12>.parquet`` and likewise ``implicit``, ``misinformed`` and
``interest`` (rows of :func:`dataset_builder.recbench_plus.queries.rows_of_user`), ``demographics/test-
<sha12>.parquet`` where the source has user attributes (`demographics`), ``catalogue/items-<sha12>.parquet``
(every item with a title: ``parent_asin, title, domain, popularity, relations``, the relations kept by the
graph), the card and ``manifest.json``. File names carry their content hash, so a rebuilt folder never serves
stale rows (PITFALLS 1); an empty split has no file and no card entry (PITFALLS 2).
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import shutil
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataset_builder import raw
from dataset_builder.build import timed
from dataset_builder.config import AMAZON_LAYOUT, MOVIELENS_LAYOUT, BuildError, duckdb_settings
from dataset_builder.manifest import manifest
from dataset_builder.recbench_plus import card, demographics, kg, movielens, phrasing, queries
from dataset_builder.recbench_plus.config import BuildConfig
from dataset_builder.sources import Source
from dataset_builder.stages import DomainInputs, StageOutput, StageSpec, Tick
from dataset_builder.tasks import Builder
from perrec_eval import progress
from perrec_eval.fileio import write_json, write_text
from perrec_eval.tasks.recbench_plus import metrics

DEMOGRAPHICS = "demographics"
CONFIGS = (*queries.TYPES, DEMOGRAPHICS)
SPLITS = ("test", "train")
DEMOGRAPHICS_NOTE = (
    "not built from Amazon Reviews 2023 (it gives no user attributes); a MovieLens-1M source (users.dat) "
    "builds them"
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
        # popularity counted on the reviews alone (narrow), then joined to the one metadata row per item
        con.sql(f"""
            COPY (SELECT m.parent_asin, trim(m.title) AS title, m.author, m.store, m.categories, m.details,
                         p.popularity
                  FROM meta m
                  JOIN (SELECT parent_asin, count(*) AS popularity FROM rev GROUP BY parent_asin) p
                  USING (parent_asin)
                  WHERE trim(coalesce(m.title, '')) <> ''
                  ORDER BY m.parent_asin) TO '{files["items_path"]}' (FORMAT parquet)""")
        # each review's item by its place in the catalogue (the items file's row), so the plan needs no ids
        con.sql(f"""
            CREATE OR REPLACE TEMP TABLE catalogue AS
            SELECT parent_asin, CAST(row_number() OVER (ORDER BY parent_asin) - 1 AS INTEGER) AS item
            FROM read_parquet('{files["items_path"]}')""")
        con.sql(f"""
            COPY (SELECT r.user_id, r.parent_asin, r.ts, c.item
                  FROM rev r JOIN catalogue c USING (parent_asin) ORDER BY r.user_id, r.ts, r.parent_asin)
            TO '{files["history_path"]}' (FORMAT parquet)""")
        titled = con.sql("SELECT count(*) FROM meta WHERE trim(coalesce(title, '')) <> ''").fetchall()[0][0]
    finally:
        con.close()
    return StageOutput({**funnel, **counts, "titled_items": titled}, bad + meta_bad, {"titled": titled})


def _select_movielens(
    cfg: BuildConfig, source: Source, item: DomainInputs, work: Path, files: dict[str, Path], tick: Tick
) -> StageOutput:
    """MovieLens-1M's three files: the catalogue (rated movies), every rating as history, the users."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    work.mkdir(parents=True, exist_ok=True)
    tick("read reviews")
    ratings, bad_ratings = movielens.read_lines(source, item.reviews, cfg.on_bad_line)
    read = len(ratings)
    tick("read metadata")
    movies, bad_movies = movielens.read_lines(source, item.meta, cfg.on_bad_line)
    users, bad_users = movielens.read_lines(source, item.extra[0], cfg.on_bad_line)
    for file, lines in ((item.reviews, ratings), (item.meta, movies)):
        if not lines:  # else "no reviewed item has a title" blamed the titles
            raise BuildError(
                f"{file.uri} holds no line of {movielens.SHAPES[file.kind]}: pass MovieLens-1M's files"
            )
    titles = {m[0].strip(): (m[1].strip(), m[2].strip()) for m in movies}
    tick("deduplicate")
    kept = {(u, m): int(ts) for u, m, _, ts in ratings if m in titles}  # a repeated rating: the last
    del ratings
    history = sorted(kept.items(), key=lambda r: (r[0][0], r[1], r[0][1]))
    del kept
    popularity = Counter(movie for (_, movie), _ts in history)
    items = [
        {"parent_asin": m, "title": titles[m][0], "genres": titles[m][1], "popularity": popularity[m]}
        for m in sorted(popularity, key=int)
    ]
    pq.write_table(pa.Table.from_pylist(items), files["items_path"])
    index = {item["parent_asin"]: n for n, item in enumerate(items)}
    columns = {
        "user_id": pa.array([u for (u, _), _ts in history], pa.string()),
        "parent_asin": pa.array([m for (_, m), _ts in history], pa.string()),
        "ts": pa.array([ts for _, ts in history], pa.int64()),
        "item": pa.array([index[m] for (_, m), _ts in history], pa.int32()),
    }
    interactions = len(history)
    del history
    pq.write_table(pa.table(columns), files["history_path"])
    people = [
        {"user_id": u, "gender": movielens.GENDERS[g], "age": movielens.AGES[int(a)],
         "occupation": movielens.OCCUPATIONS[int(o)]}
        for u, g, a, o, _ in users
    ]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(people), files["users_path"])
    funnel = {"ratings_read": read, "interactions": interactions, "movies_read": len(movies)}
    funnel |= {"users_read": len(users), "titled_items": len(items)}
    bad = [b for b in (bad_ratings, bad_movies, bad_users) if b["count"]]
    return StageOutput(funnel, bad, {"titled": len(items)})


def _select_any(
    cfg: BuildConfig, source: Source, item: DomainInputs, work: Path, files: dict[str, Path], tick: Tick
) -> StageOutput:
    """The stage of either layout (a MovieLens-1M domain has its users' file among its inputs)."""
    if any(f.kind == "users" for f in item.extra):
        return _select_movielens(cfg, source, item, work, files, tick)
    import pyarrow as pa
    import pyarrow.parquet as pq

    output = _select(cfg, source, item, work, files, tick)
    pq.write_table(pa.table({"user_id": pa.array([], pa.string())}), files["users_path"])  # no attributes
    return output


def _stage(cfg: BuildConfig) -> StageSpec:
    return StageSpec(
        version=3,  # 3: each history row carries its item's place in the catalogue
        params={"details": True},  # the stage reads the raw files only: the query settings act after it
        flags={},
        steps=("read reviews", "deduplicate", "read metadata"),
        files={
            "items_path": "items.parquet",
            "history_path": "history.parquet",
            "users_path": "users.parquet",  # user attributes (MovieLens-1M's users.dat); none for Amazon
        },
        select=partial(_select_any, cfg),
    )


_BLOCK_USERS = 2048  # users whose histories are read at a time while queries are written


def _fact_rows(cfg: BuildConfig, domain: str, items: pa.Table, items_path: Path) -> kg.FactRows:
    """Every catalogue item's relation values before the thresholds, in precedence order: its metadata's
    (Amazon: author, store, each category, the details keys, as `kg.item_facts` orders them, read by DuckDB
    column by column; MovieLens-1M: its genres and year), then the rows of ``--item-attributes`` in file
    order (items outside the catalogue ignored; a value an item already has is not added again: the graph
    keeps an item's first row of a key, so a file of a million rows costs one pass)."""
    rows = kg.FactRows()
    n = items.num_rows
    if "genres" in items.column_names:
        genres, titles = items["genres"].to_pylist(), items["title"].to_pylist()
        rows.add_facts(range(n), [movielens.movie_facts(g, t) for g, t in zip(genres, titles, strict=True)])
    else:
        con = _connect(cfg)
        try:
            source = f"read_parquet('{_sql_text(str(items_path))}', file_row_number = true)"
            parts = [("author", "author"), ("store", "store")]
            for relation, column in parts:
                _add_values(
                    rows, con, relation, f"SELECT file_row_number AS item, {column} AS raw FROM {source}"
                )
            _add_values(rows, con, "categories", f"""
                SELECT item, raw FROM (SELECT file_row_number AS item, unnest(categories) AS raw,
                                              generate_subscripts(categories, 1) AS level FROM {source})
                ORDER BY item, level""")  # fmt: skip
            for key in kg.detail_keys(domain, cfg.details_keys):
                pointer = _sql_text("/" + key.replace("~", "~0").replace("/", "~1"))
                _add_values(rows, con, f"details.{key}", f"""
                    SELECT file_row_number AS item, json_extract_string(details, '{pointer}') AS raw
                    FROM {source}
                    WHERE json_type(json_extract(details, '{pointer}')) = 'VARCHAR'""")  # fmt: skip
        finally:
            con.close()
            shutil.rmtree(_spill(cfg), ignore_errors=True)
    if cfg.item_attributes is not None:
        ids, facts = [], []
        for item_id, fact in movielens.read_item_attributes(cfg.item_attributes):
            ids.append(item_id)
            facts.append(fact)
        where = pc.index_in(pa.array(ids, pa.string()), value_set=items["parent_asin"]).to_pylist()
        known = [(i, [f]) for i, f in zip(where, facts, strict=True) if i is not None]
        rows.add_facts([i for i, _ in known], [f for _, f in known])
    return rows


def _connect(cfg: BuildConfig) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection of the plan: the build's memory limit and threads, spilling beside the stages
    (DuckDB's default is a ``.tmp`` folder in the current directory)."""
    return duckdb.connect(":memory:", config=duckdb_settings(cfg.memory_limit, cfg.threads, _spill(cfg)))


def _spill(cfg: BuildConfig) -> Path:
    return cfg.stage_root / f"plan-spill-{os.getpid()}"


def _sql_text(text: str) -> str:
    return text.replace("'", "''")


def _add_values(rows: kg.FactRows, con: duckdb.DuckDBPyConnection, relation: str, sql: str) -> None:
    """Rows of one relation from a query of ``item, raw``: each distinct raw text normalized once (a
    relation of millions of items has far fewer distinct values), empty ones dropped."""
    table = con.sql(f"SELECT item, raw FROM ({sql}) WHERE raw IS NOT NULL").to_arrow_table()
    if not table.num_rows:
        return
    encoded = table["raw"].combine_chunks().dictionary_encode()
    normalized = pa.array(
        [kg.normalize_value(t, relation) for t in encoded.dictionary.to_pylist()], pa.string()
    )
    values = normalized.take(encoded.indices)
    keep = pc.not_equal(values, "")
    items = table["item"].combine_chunks().filter(keep).to_numpy()
    rows.add_arrow(items, relation, values.filter(keep))


class _Histories:
    """The users' histories in the stage's file (user, time, item), read with DuckDB as they are needed: the
    users with enough items, and the items of a block of users (a category's 30M reviews never become
    Python objects)."""

    def __init__(self, cfg: BuildConfig, path: Path) -> None:
        self.con = _connect(cfg)
        self.source = f"read_parquet('{_sql_text(str(path))}')"

    def close(self) -> None:
        self.con.close()

    def eligible(self, min_history: int) -> list[str]:
        """The users with at least `min_history` items, sorted."""
        found = self.con.sql(
            f"SELECT user_id FROM {self.source} GROUP BY user_id HAVING count(*) >= {int(min_history)}"
        ).to_arrow_table()
        return sorted(found["user_id"].to_pylist())

    def of(self, users: list[str]) -> dict[str, list[int]]:
        """The items of `users` in time order (ties by id), as catalogue indices."""
        self.con.register("wanted", pa.table({"user_id": pa.array(users, pa.string())}))
        try:
            table = self.con.sql(f"""
                SELECT user_id, item FROM {self.source} WHERE user_id IN (SELECT user_id FROM wanted)
                ORDER BY user_id, ts, parent_asin""").to_arrow_table()
        finally:
            self.con.unregister("wanted")
        out: dict[str, list[int]] = {user: [] for user in users}
        for user, item in zip(table["user_id"].to_pylist(), table["item"].to_pylist(), strict=True):
            out[user].append(item)
        return out


def _domain_queries(cfg: BuildConfig, domain: str, stage: dict[str, Any]) -> dict[str, Any]:
    """One domain's graph, catalogue rows and query rows per config and split, with its counts. Each step
    logs its time; the users' queries show a progress bar."""
    import pyarrow.parquet as pq

    with timed(f"{domain}: knowledge graph"):
        names = pq.read_schema(stage["items_path"]).names
        wanted = ["parent_asin", "title", "popularity", *(["genres"] if "genres" in names else [])]
        items = pq.read_table(stage["items_path"], columns=wanted)
        if not items.num_rows:
            raise BuildError(
                f"{domain}: no reviewed item has a title in its metadata; pass --source files whose metadata "
                "carries titles (RecBench+ answers are matched to the catalogue by title)"
            )
        rows = _fact_rows(cfg, domain, items, Path(stage["items_path"]))
        items = items.select(["parent_asin", "title", "popularity"])
        graph = kg.graph_from_rows(rows, items.num_rows, min_items=cfg.min_items, max_share=cfg.max_share)
        del rows
    if not graph.facts:
        raise BuildError(
            f"{domain}: no relation value of the metadata is held by {cfg.min_items} to {cfg.max_share:g} of "
            "the items: name other --details-keys, or lower --min-items, or raise --max-share"
        )
    catalogue = queries.Catalogue(
        graph,
        items["parent_asin"].combine_chunks(),
        items["title"].combine_chunks(),
        items["popularity"].to_numpy().astype(np.int64),
    )
    histories = _Histories(cfg, Path(stage["history_path"]))
    try:
        with timed(f"{domain}: eligible users"):
            eligible = histories.eligible(cfg.min_history)
        if not eligible:
            raise BuildError(
                f"{domain}: no user has {cfg.min_history} reviewed items with a titled metadata line; lower "
                "--min-history or pass a larger --source"
            )
        rng = random.Random(f"{cfg.seed}-{domain}")
        rng.shuffle(eligible)
        counts: dict[str, int] = {
            "eligible_users": len(eligible),
            **{f"values_{k}": v for k, v in graph.dropped.items()},
        }
        counts["values_kept"] = len(graph.facts)
        counts.update({f"{config}_skipped": 0 for config in queries.TYPES[1:]})
        counts["implicit_ambiguous"] = 0
        with timed(f"{domain}: queries"):
            out, users = _user_queries(cfg, domain, eligible, histories, catalogue, rng, counts)
        counts.update({f"{split}_users": n for split, n in users.items()})
        people = pq.read_table(stage["users_path"]).to_pylist()
        if people:
            with timed(f"{domain}: demographics"):
                out[DEMOGRAPHICS]["test"] = _demographics(cfg, domain, people, histories, catalogue, counts)
    finally:
        histories.close()
        shutil.rmtree(_spill(cfg), ignore_errors=True)
    for config in CONFIGS[:3]:  # queries by condition count, both splits
        for group in metrics.CONDITION_GROUPS:
            rows_n = [
                r for split in SPLITS for r in out[config][split]
                if metrics.condition_group(len(r["conditions"])) == group
            ]  # fmt: skip
            counts[f"{config}_{group}_condition"] = len(rows_n)
    with timed(f"{domain}: catalogue rows"):
        table = _catalogue_table(domain, items, graph)
    return {"rows": out, "catalogue": table, "counts": counts}


def _user_queries(
    cfg: BuildConfig,
    domain: str,
    eligible: list[str],
    histories: _Histories,
    catalogue: queries.Catalogue,
    rng: random.Random,
    counts: dict[str, int],
) -> tuple[dict[str, dict[str, list[dict[str, Any]]]], dict[str, int]]:
    """The query rows of the eligible users, in their shuffled order, until the test and train users wanted
    have queries; their histories are read a block of users at a time."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {c: {s: [] for s in SPLITS} for c in CONFIGS}
    wanted = {"test": cfg.users, "train": cfg.train_users}
    users = {"test": 0, "train": 0}
    holdings = queries.Holdings(catalogue.graph)
    block: dict[str, list[int]] = {}
    bar = progress.bar(
        total=cfg.users + cfg.train_users, desc=f"  {domain} queries", unit="user", leave=False
    )
    with bar:
        for n, user in enumerate(eligible):
            split = "test" if users["test"] < wanted["test"] else "train"
            if users[split] >= wanted[split]:
                break
            if user not in block:
                block = histories.of(eligible[n : n + _BLOCK_USERS])
            history = block[user]
            found = queries.candidates(
                history, catalogue.graph, min_subset=cfg.min_subset, max_subset=cfg.max_subset,
                holdings=holdings,
            )  # fmt: skip
            chosen = queries.choose(found, cfg.queries_per_user, rng)
            if not chosen:
                continue
            users[split] += 1
            bar.update(1)
            made = queries.rows_of_user(user, history, chosen, catalogue, domain, counts)
            for config in queries.TYPES:
                out[config][split] += made[config]
    return out, users


def _catalogue_table(domain: str, items: pa.Table, graph: kg.Graph) -> pa.Table:
    """The catalogue file's rows of a domain (``parent_asin, title, domain, popularity, relations``), made
    from the graph's index arrays: no Python record per item."""
    relation = pa.array([f.relation for f in graph.facts], pa.string())
    value = pa.array([f.value for f in graph.facts], pa.string())
    picked = pa.array(graph.item_values)
    facts = pa.StructArray.from_arrays(
        [relation.take(picked), value.take(picked)], names=["relation", "value"]
    )
    return pa.table(
        {
            "parent_asin": items["parent_asin"].combine_chunks(),
            "title": items["title"].combine_chunks(),
            "domain": pa.array([domain] * items.num_rows, pa.string()),
            "popularity": items["popularity"].combine_chunks().cast(pa.int64()),
            "relations": pa.ListArray.from_arrays(pa.array(graph.item_start, pa.int32()), facts),
        }
    )


def _demographics(
    cfg: BuildConfig,
    domain: str,
    people: list[dict[str, Any]],
    stored: _Histories,
    catalogue: queries.Catalogue,
    counts: dict[str, int],
) -> list[dict[str, Any]]:
    """The demographics rows of a domain with user attributes (`demographics` module docstring); every
    group is a test "user" (a group's queries are resampled together). Reads every user's history (a
    source with user attributes is MovieLens-1M's size)."""
    asins = catalogue.asins.to_pylist()
    indexed = stored.of([p["user_id"] for p in people])
    histories = {user: [asins[i] for i in items] for user, items in indexed.items() if items}
    users = {p["user_id"]: p for p in people if p["user_id"] in histories}
    raters: dict[str, int] = {}
    for user in users:
        for asin in dict.fromkeys(histories[user]):
            raters[asin] = raters.get(asin, 0) + 1
    rows = []

    def facts(asin: str) -> tuple[kg.Fact, ...]:
        return catalogue.graph.item_facts(catalogue.index_of(asin))

    chosen = demographics.groups(users, per_type=cfg.groups_per_type, min_size=cfg.min_group_size)
    noun = queries.NOUNS.get(domain, "items")
    for number, (group, members) in enumerate(chosen):
        best = demographics.distinctive(
            members, histories, raters, len(users), top=cfg.top_items, min_raters=cfg.min_group_raters
        )
        if len(best) < 2:
            continue
        top = [
            {**catalogue.to_json(catalogue.index_of(d.item)), "score": d.score, "raters": d.raters,
             "share": d.share}
            for d in best
        ]  # fmt: skip
        found = demographics.subsets(best, facts, queries=cfg.queries_per_group)
        for n, (named, subset) in enumerate(found):
            text = demographics.query_text(group, named, noun, queries.condition_phrase)
            rows.append(
                {
                    "id": f"{domain}-group{number}-{n}",
                    "user_id": group.key,
                    "domain": domain,
                    "query": text,
                    "conditions": [fact.to_json() for fact in named],
                    "ground_truth": [catalogue.to_json(catalogue.index_of(a)) for a in subset],
                    "history": [],
                    "group_type": group.type,
                    "group": group.mapping(),
                    "group_size": len(members),
                    "top_items": top,
                }
            )
    counts["demographic_groups"] = len({row["user_id"] for row in rows})
    return rows


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


def _texts(plan: dict[str, Any], dedupe: bool) -> None:
    """Count, per config, the distinct query texts of the test split and how many ground truths one text
    carries (``<config>_distinct_texts``, ``<config>_texts_several_truths``: texts asked with more than one
    ground truth, ``<config>_most_truths_per_text``); with `dedupe`, first keep each text's first row only
    (test rows first, so a train row never shares a test query's text), counted as ``<config>_deduped``."""
    counts = plan["counts"]
    for config in CONFIGS:
        seen: set[str] = set()
        for split in SPLITS:
            rows = plan["rows"][config][split]
            if dedupe:
                kept = [r for r in rows if r["query"] not in seen and not seen.add(r["query"])]
                counts[f"{config}_deduped"] = counts.get(f"{config}_deduped", 0) + len(rows) - len(kept)
                plan["rows"][config][split] = kept
        truths: dict[str, set[tuple[str, ...]]] = {}
        for row in plan["rows"][config]["test"]:
            truth = tuple(sorted(item["parent_asin"] for item in row["ground_truth"]))
            truths.setdefault(row["query"], set()).add(truth)
        counts[f"{config}_test_queries"] = len(plan["rows"][config]["test"])
        counts[f"{config}_distinct_texts"] = len(truths)
        counts[f"{config}_texts_several_truths"] = sum(len(t) > 1 for t in truths.values())
        counts[f"{config}_most_truths_per_text"] = max((len(t) for t in truths.values()), default=0)


def _plan(cfg: BuildConfig, results: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    planned = {domain: _domain_queries(cfg, domain, results[domain]) for domain in cfg.domains}
    if cfg.phrasing == "llm":
        _phrase(cfg, planned)
    for plan in planned.values():
        _texts(plan, cfg.dedupe_queries)
    if not any(p["rows"]["explicit"]["test"] for p in planned.values()):
        raise BuildError(
            f"no test query in {', '.join(cfg.domains)}: no user has {cfg.min_subset} of at least "
            f"{cfg.min_history} history items sharing a kept relation value; lower --min-subset or "
            "--min-history, raise --max-share, or name other --details-keys"
        )
    return planned


def _parquet(folder: Path, name: str, rows: list[dict[str, Any]] | pa.Table) -> str:
    """Write `rows` (records, or a table) as ``<name>-<sha12>.parquet`` under `folder`; return the relative
    path."""
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(rows), buffer)
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
    catalogue = pa.concat_tables([plan[domain]["catalogue"] for domain in cfg.domains]).combine_chunks()
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
            demographics=_demographics_note(cfg) if DEMOGRAPHICS in sizes else DEMOGRAPHICS_NOTE,
        ),  # fmt: skip
    )


def _demographics_note(cfg: BuildConfig) -> str:
    return (
        "users grouped by age band, gender and occupation (MovieLens-1M's codes as words) and by every pair "
        f"and the triple; of each combination the {cfg.groups_per_type} largest groups of at least "
        f"{cfg.min_group_size} users. A group's distinctive items are its top {cfg.top_items} by share of "
        "the group's users who rated the item times ln(all users / the item's raters) (the paper's TF-IDF), "
        f"among items rated by at least {cfg.min_group_raters} of the group; one query names the group "
        f"alone (ground truth: its {demographics.GENERAL} best items), the others the group and a relation "
        f"value shared by 2 to {demographics.MAX_SUBSET} of its distinctive items (ground truth: those "
        f"items), up to {cfg.queries_per_group} distinct subsets per group. Rows carry `group` (age, gender, "
        "occupation; null where the group does not fix it), `group_type`, `group_size` and `top_items` "
        "(each with its score, raters and share); test split only"
    )


def _summary(out: Path) -> str:
    import json

    recorded = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    built = [config for config in CONFIGS if config in recorded["queries"]]
    lines = [f"RecBench+ queries built in {out} ({', '.join(built)} configs, catalogue, card, manifest.json)"]
    if DEMOGRAPHICS not in built:
        lines.append(f"demographics: {DEMOGRAPHICS_NOTE}")
    for domain, counts in recorded["graph"].items():
        texts = [
            f"{config} {counts[f'{config}_distinct_texts']:,} texts of {counts[f'{config}_test_queries']:,} "
            f"(most ground truths of one text: {counts[f'{config}_most_truths_per_text']})"
            for config in built
            if counts.get(f"{config}_test_queries")
        ]
        lines.append(f"{domain} test queries: " + "; ".join(texts))
    return "\n".join(lines)


BUILDER = Builder(
    stage=_stage, plan=_plan, write=_write, summary=_summary, layouts=(AMAZON_LAYOUT, MOVIELENS_LAYOUT)
)
