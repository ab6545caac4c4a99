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
import random
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

from dataset_builder import raw
from dataset_builder.config import AMAZON_LAYOUT, MOVIELENS_LAYOUT, BuildError
from dataset_builder.manifest import manifest
from dataset_builder.recbench_plus import card, demographics, kg, movielens, phrasing, queries
from dataset_builder.recbench_plus.config import BuildConfig
from dataset_builder.sources import Source
from dataset_builder.stages import DomainInputs, StageOutput, StageSpec, Tick
from dataset_builder.tasks import Builder
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
    columns = {
        "user_id": pa.array([u for (u, _), _ts in history], pa.string()),
        "parent_asin": pa.array([m for (_, m), _ts in history], pa.string()),
        "ts": pa.array([ts for _, ts in history], pa.int64()),
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
        version=2,
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


def _facts(cfg: BuildConfig, domain: str, rows: list[dict[str, Any]]) -> dict[str, list[kg.Fact]]:
    """Every catalogue item's relation values before the thresholds: its metadata's (Amazon) or its genres
    and year (MovieLens-1M), and the rows of ``--item-attributes`` (items outside the catalogue ignored)."""
    if rows and "genres" in rows[0]:
        facts = {r["parent_asin"]: movielens.movie_facts(r["genres"], r["title"]) for r in rows}
    else:
        keys = kg.detail_keys(domain, cfg.details_keys)
        facts = {
            r["parent_asin"]: kg.item_facts(r["author"], r["store"], r["categories"], r["details"], keys)
            for r in rows
        }
    if cfg.item_attributes is not None:
        for asin, fact in movielens.read_item_attributes(cfg.item_attributes):
            if asin in facts and fact.key not in {f.key for f in facts[asin]}:
                facts[asin].append(fact)
    return facts


def _domain_queries(cfg: BuildConfig, domain: str, stage: dict[str, Any]) -> dict[str, Any]:
    """One domain's graph, catalogue rows and query rows per config and split, with its counts."""
    import pyarrow.parquet as pq

    rows = pq.read_table(stage["items_path"]).to_pylist()
    facts = _facts(cfg, domain, rows)
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
    counts.update({f"{config}_skipped": 0 for config in queries.TYPES[1:]})
    counts["implicit_ambiguous"] = 0
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
        for config in queries.TYPES:
            out[config][split] += made[config]
    counts.update({f"{split}_users": n for split, n in users.items()})
    people = pq.read_table(stage["users_path"]).to_pylist()
    if people:
        out[DEMOGRAPHICS]["test"] = _demographics(cfg, domain, people, histories, catalogue, counts)
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


def _demographics(
    cfg: BuildConfig,
    domain: str,
    people: list[dict[str, Any]],
    histories: dict[str, list[str]],
    catalogue: queries.Catalogue,
    counts: dict[str, int],
) -> list[dict[str, Any]]:
    """The demographics rows of a domain with user attributes (`demographics` module docstring); every
    group is a test "user" (a group's queries are resampled together)."""
    users = {p["user_id"]: p for p in people if p["user_id"] in histories}
    raters: dict[str, int] = {}
    for user in users:
        for asin in dict.fromkeys(histories[user]):
            raters[asin] = raters.get(asin, 0) + 1
    rows = []
    chosen = demographics.groups(users, per_type=cfg.groups_per_type, min_size=cfg.min_group_size)
    noun = queries.NOUNS.get(domain, "items")
    for number, (group, members) in enumerate(chosen):
        best = demographics.distinctive(
            members, histories, raters, len(users), top=cfg.top_items, min_raters=cfg.min_group_raters
        )
        if len(best) < 2:
            continue
        top = [
            {**catalogue.items[d.item].to_json(), "score": d.score, "raters": d.raters, "share": d.share}
            for d in best
        ]
        found = demographics.subsets(best, catalogue.graph, queries=cfg.queries_per_group)
        for n, (named, subset) in enumerate(found):
            text = demographics.query_text(group, named, noun, queries.condition_phrase)
            rows.append(
                {
                    "id": f"{domain}-group{number}-{n}",
                    "user_id": group.key,
                    "domain": domain,
                    "query": text,
                    "conditions": [fact.to_json() for fact in named],
                    "ground_truth": [catalogue.items[a].to_json() for a in subset],
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
