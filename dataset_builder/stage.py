"""One domain, raw files → 5-user groups with histories, in DuckDB (out of core) plus a small Python search.

Steps (each a progress tick): read + check the review file, deduplicate, per-user running counts and
averages, read the metadata, filter candidates, search groups per item (Python), fetch the chosen users'
histories. Only the candidates of items that pass every SQL filter and the chosen users' reviews ever reach
Python.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from dataset_builder.config import BuildConfig, BuildError
from dataset_builder.groups import Candidate, find_group, most_common_rating
from dataset_builder.sources import BadLines, InputFile, Source, bad_line_error, locate_bad_lines

logger = logging.getLogger(__name__)

_REVIEW_COLUMNS = (
    "{'user_id': 'JSON', 'parent_asin': 'JSON', 'asin': 'VARCHAR', 'rating': 'JSON', 'timestamp': 'JSON', "
    "'sort_timestamp': 'JSON', 'sortTimestamp': 'JSON'}"
)
_META_COLUMNS = (
    "{'parent_asin': 'JSON', 'title': 'VARCHAR', 'author': 'JSON', 'main_category': 'VARCHAR', "
    "'average_rating': 'DOUBLE', 'rating_number': 'BIGINT'}"
)
_NUMBER = "('DOUBLE', 'UBIGINT', 'BIGINT')"
_INTEGER = "('UBIGINT', 'BIGINT')"
_MAX_OBJECT_BYTES = 64 * 2**20
_BATCH_ROWS = 200_000
STAGES = ("read reviews", "deduplicate", "user history", "read metadata", "candidates", "search", "histories")


@dataclass(slots=True)
class DomainResult:
    """What one domain contributes: its groups (rows of the ``full`` config) and its accounting."""

    domain: str
    rows: list[dict[str, Any]]
    funnel: dict[str, int]
    bad_lines: list[dict[str, Any]] = field(default_factory=list)


def connect(cfg: BuildConfig, work: Path, source: Source) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the memory limit, threads and spill folder of this build."""
    work.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "memory_limit": cfg.memory_limit,
        "temp_directory": str(work / "spill"),
        "preserve_insertion_order": False,
    }
    if cfg.threads is not None:
        config["threads"] = cfg.threads
    # In-memory database: tables beyond memory_limit are offloaded to temp_directory, and nothing is
    # fsync'ed (a file-backed database checkpoints to disk, which only costs time here).
    con = duckdb.connect(":memory:", config=config)
    con.execute("SET enable_progress_bar = false")  # tqdm shows progress; DuckDB's bar would interleave
    source.register(con)
    return con


def _read_json(uri: str, columns: str) -> str:
    # Explicit columns (no schema sampling); ignore_errors turns a malformed line into an all-NULL row,
    # which the check below counts, so nothing is dropped silently.
    escaped = uri.replace("'", "''")
    return (
        f"read_json('{escaped}', format='newline_delimited', columns={columns}, ignore_errors=true, "
        f"compression='auto', maximum_object_size={_MAX_OBJECT_BYTES})"
    )


def _check_bad(
    con: duckdb.DuckDBPyConnection, source: Source, file: InputFile, table: str, cfg: BuildConfig
) -> tuple[int, BadLines | None]:
    """Count rows failing the checks; name them (file, line, reason) with a Python pass if there are any."""
    total, bad = con.sql(f"SELECT count(*), count_if(NOT ok) FROM {table}").fetchall()[0]
    if total == 0:
        raise BuildError(
            f"{file.uri} has no lines; replace it with the full {file.kind} file of {file.domain}"
        )
    if not bad:
        return total, None
    located = locate_bad_lines(source, file, stop_at_first=cfg.on_bad_line == "error")
    if cfg.on_bad_line == "error":
        raise bad_line_error(file, located, bad)
    located.count = max(located.count, bad)
    logger.warning("%s: skipping %d bad line(s), e.g. %s", file.uri, bad, located.examples[:3])
    return total, located


def run_domain(
    source: Source,
    reviews: InputFile,
    meta: InputFile,
    cfg: BuildConfig,
    work: Path,
    *,
    tick: Callable[[str], None] = lambda stage: None,
) -> DomainResult:
    """Select the groups of one domain.

    Args:
        source: where the files are.
        reviews: the domain's review file.
        meta: the domain's metadata file.
        cfg: the build parameters.
        work: a scratch folder for DuckDB's spill files (removed by the caller).
        tick: called with the name of each stage as it starts (progress).

    Returns:
        The groups as rows of the ``full`` config (users ordered by relative rating) and the funnel counts.
    """
    con = connect(cfg, work, source)
    try:
        return _run(con, source, reviews, meta, cfg, tick)
    finally:
        con.close()


def _run(
    con: duckdb.DuckDBPyConnection,
    source: Source,
    reviews: InputFile,
    meta: InputFile,
    cfg: BuildConfig,
    tick: Callable[[str], None],
) -> DomainResult:
    domain = reviews.domain
    funnel: dict[str, int] = {}
    bad_lines: list[dict[str, Any]] = []

    tick("read reviews")
    con.sql(f"""
        CREATE OR REPLACE TABLE raw AS
        WITH j AS (SELECT *, coalesce("timestamp", sort_timestamp, sortTimestamp) AS t
                   FROM {_read_json(reviews.uri, _REVIEW_COLUMNS)})
        SELECT user_id ->> '$' AS user_id, parent_asin ->> '$' AS parent_asin, coalesce(asin, '') AS asin,
               CASE WHEN json_type(rating) IN {_NUMBER} THEN TRY_CAST(rating AS DOUBLE) END AS rating,
               CASE WHEN json_type(t) IN {_INTEGER} THEN TRY_CAST(t AS BIGINT) END AS ts,
               coalesce(json_type(user_id) = 'VARCHAR' AND user_id ->> '$' <> ''
                        AND json_type(parent_asin) = 'VARCHAR' AND parent_asin ->> '$' <> ''
                        AND json_type(rating) IN {_NUMBER} AND TRY_CAST(rating AS DOUBLE) BETWEEN 1 AND 5
                        AND json_type(t) IN {_INTEGER} AND TRY_CAST(t AS BIGINT) >= 0, false) AS ok
        FROM j""")
    funnel["lines"], bad = _check_bad(con, source, reviews, "raw", cfg)
    if bad is not None:
        bad_lines.append(bad.as_dict())
    funnel["bad_lines"] = bad.count if bad else 0

    tick("deduplicate")
    con.sql("""
        CREATE OR REPLACE TABLE rev AS
        SELECT user_id, parent_asin, k.ts AS ts, k.rating AS rating
        FROM (SELECT user_id, parent_asin, min({'ts': ts, 'rating': rating, 'asin': asin}) AS k
              FROM raw WHERE ok GROUP BY user_id, parent_asin)""")
    con.sql("DROP TABLE raw")
    funnel["reviews"], funnel["users"], funnel["items"], max_ts = con.sql(
        "SELECT count(*), count(DISTINCT user_id), count(DISTINCT parent_asin), max(ts) FROM rev"
    ).fetchall()[0]
    funnel["duplicates"] = funnel["lines"] - funnel["bad_lines"] - funnel["reviews"]
    if funnel["reviews"] == 0:
        raise BuildError(f"{reviews.uri}: no usable review (all lines bad); check the file")
    if max_ts is not None and max_ts < 10**11:
        logger.warning("%s: timestamps look like seconds, not milliseconds (max %d)", reviews.uri, max_ts)

    tick("user history")
    # Only users with more than min_history + 1 reviews can have min_history + 1 reviews before another.
    # RANGE ... 1 PRECEDING on integer ms = every review strictly earlier: same-millisecond reviews are
    # excluded from the count and the sum (PITFALLS 5).
    avg = "s_before / n_before" if cfg.avg_scope == "history" else "s_all / n_all"
    con.sql(f"""
        CREATE OR REPLACE TABLE act AS
        SELECT r.user_id, r.parent_asin, r.ts, r.rating, u.n_all, u.s_all
        FROM rev r JOIN (SELECT user_id, count(*) AS n_all, sum(rating) AS s_all FROM rev
                         GROUP BY user_id HAVING count(*) > {cfg.min_history + 1}) u USING (user_id)""")
    con.sql(f"""
        CREATE OR REPLACE TABLE cand AS
        SELECT parent_asin, user_id, ts, rating, {avg} AS avg, rating - {avg} AS rel
        FROM (SELECT *, count(*) OVER w AS n_before, sum(rating) OVER w AS s_before FROM act
              WINDOW w AS (PARTITION BY user_id ORDER BY ts
                           RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING))
        WHERE n_before > {cfg.min_history}""")
    funnel["active_reviews"] = con.sql("SELECT count(*) FROM cand").fetchall()[0][0]

    tick("read metadata")
    con.sql(f"""
        CREATE OR REPLACE TABLE rawmeta AS
        SELECT parent_asin ->> '$' AS parent_asin, title, main_category, average_rating, rating_number,
               CASE json_type(author) WHEN 'OBJECT' THEN author ->> 'name'
                                      WHEN 'VARCHAR' THEN author ->> '$' END AS author,
               coalesce(json_type(parent_asin) = 'VARCHAR' AND parent_asin ->> '$' <> '', false) AS ok
        FROM {_read_json(meta.uri, _META_COLUMNS)}""")
    funnel["meta_lines"], bad = _check_bad(con, source, meta, "rawmeta", cfg)
    if bad is not None:
        bad_lines.append(bad.as_dict())
    funnel["meta_bad_lines"] = bad.count if bad else 0
    # Several lines for one item: keep the smallest record, so the choice never depends on line order.
    con.sql("""
        CREATE OR REPLACE TABLE meta AS
        SELECT parent_asin, m.title AS title, m.author AS author, m.main_category AS main_category,
               m.average_rating AS average_rating, m.rating_number AS rating_number
        FROM (SELECT parent_asin, min({'title': title, 'author': author, 'main_category': main_category,
                                       'average_rating': average_rating, 'rating_number': rating_number}) AS m
              FROM rawmeta WHERE ok AND parent_asin IN (SELECT parent_asin FROM act) GROUP BY parent_asin)""")
    con.sql("DROP TABLE rawmeta")

    tick("candidates")
    k = cfg.group_size
    con.sql("""
        CREATE OR REPLACE TABLE qc AS
        SELECT c.* FROM cand c JOIN meta m USING (parent_asin) WHERE m.title <> ''""")
    funnel["active_reviews_with_metadata"] = con.sql("SELECT count(*) FROM qc").fetchall()[0][0]
    con.sql(f"""
        CREATE OR REPLACE TABLE items_k AS
        SELECT parent_asin FROM qc GROUP BY parent_asin HAVING count(*) >= {k}""")
    funnel["items_with_enough_active_reviewers"] = con.sql("SELECT count(*) FROM items_k").fetchall()[0][0]
    con.sql(f"""
        CREATE OR REPLACE TABLE items_w AS
        SELECT parent_asin FROM (
            SELECT parent_asin, count(*) OVER (PARTITION BY parent_asin ORDER BY ts
                                               RANGE BETWEEN CURRENT ROW AND {cfg.window_ms} FOLLOWING) AS n
            FROM qc WHERE parent_asin IN (SELECT parent_asin FROM items_k))
        GROUP BY parent_asin HAVING max(n) >= {k}""")
    funnel["items_with_enough_in_one_window"] = con.sql("SELECT count(*) FROM items_w").fetchall()[0][0]

    tick("search")
    chosen = _search(con, cfg, funnel["items_with_enough_in_one_window"])
    funnel["items_with_group"] = len({member["parent_asin"] for member in chosen})

    tick("histories")
    rows = _rows(con, domain, chosen, cfg)
    return DomainResult(domain, rows, funnel, bad_lines)


def _item_batches(con: duckdb.DuckDBPyConnection) -> Iterator[tuple[str, list[Candidate], dict[str, tuple]]]:
    """Candidates of the items that passed the SQL filters, one item at a time."""
    reader = con.sql("""
        SELECT q.parent_asin, q.user_id, q.ts, q.rel, q.rating, q.avg FROM qc q
        WHERE q.parent_asin IN (SELECT parent_asin FROM items_w)
        ORDER BY q.parent_asin, q.ts, q.user_id""").to_arrow_reader(_BATCH_ROWS)
    current: str | None = None
    cands: list[Candidate] = []
    extra: dict[str, tuple] = {}
    for batch in reader:
        columns = batch.to_pydict()
        for item, user, ts, rel, rating, avg in zip(
            columns["parent_asin"],
            columns["user_id"],
            columns["ts"],
            columns["rel"],
            columns["rating"],
            columns["avg"],
            strict=True,
        ):
            if item != current:
                if current is not None:
                    yield current, cands, extra
                current, cands, extra = item, [], {}
            cands.append(Candidate(rel, ts, user))
            extra[user] = (rating, avg)
    if current is not None:
        yield current, cands, extra


def _search(con: duckdb.DuckDBPyConnection, cfg: BuildConfig, n_items: int) -> list[dict[str, Any]]:
    from tqdm.auto import tqdm

    chosen = []
    bar = tqdm(total=n_items, desc="  search items", unit="item", leave=False, disable=not cfg.progress)
    for item, cands, extra in _item_batches(con):
        bar.update(1)
        group = find_group(cands, window_ms=cfg.window_ms, min_gap=cfg.min_gap, group_size=cfg.group_size)
        if group is None:
            continue
        for cand in group:
            rating, avg = extra[cand.user_id]
            chosen.append(
                {
                    "parent_asin": item,
                    "user_id": cand.user_id,
                    "ts": cand.timestamp,
                    "rel": cand.rel,
                    "rating": rating,
                    "avg": avg,
                }
            )
    bar.close()
    return chosen


def _rows(
    con: duckdb.DuckDBPyConnection, domain: str, chosen: list[dict[str, Any]], cfg: BuildConfig
) -> list[dict[str, Any]]:
    """Assemble one ``full`` row per group: query metadata, users with their histories."""
    if not chosen:
        return []
    con.register("chosen_arrow", pa.Table.from_pylist(chosen))
    con.sql("CREATE OR REPLACE TABLE chosen AS SELECT * FROM chosen_arrow")
    con.unregister("chosen_arrow")
    reviews: dict[tuple[str, str], list[tuple]] = {}
    reader = con.sql("""
        SELECT c.parent_asin AS query, c.user_id, a.parent_asin, a.ts, a.rating, m.title, m.author
        FROM chosen c JOIN act a ON a.user_id = c.user_id
        LEFT JOIN meta m ON m.parent_asin = a.parent_asin
        ORDER BY query, c.user_id, a.ts, a.parent_asin""").to_arrow_reader(_BATCH_ROWS)
    for batch in reader:
        cols = batch.to_pydict()
        for query, user, item, ts, rating, title, author in zip(
            cols["query"],
            cols["user_id"],
            cols["parent_asin"],
            cols["ts"],
            cols["rating"],
            cols["title"],
            cols["author"],
            strict=True,
        ):
            reviews.setdefault((query, user), []).append((item, ts, rating, title, author))
    queries = {
        row[0]: {
            "parent_asin": row[0],
            "title": row[1],
            "author": row[2],
            "main_category": row[3],
            "average_rating": row[4],
            "rating_number": row[5],
        }
        for row in con.sql("""
            SELECT parent_asin, title, author, main_category, average_rating, rating_number FROM meta
            WHERE parent_asin IN (SELECT parent_asin FROM chosen)""").fetchall()
    }
    by_item: dict[str, list[dict[str, Any]]] = {}
    for member in chosen:
        by_item.setdefault(member["parent_asin"], []).append(member)
    rows = []
    for item in sorted(by_item):
        members = by_item[item]
        users = [_user(m, reviews[(item, m["user_id"])], cfg) for m in members]
        rows.append(
            {
                "group_id": f"{domain}:{item}",
                "domain": domain,
                "level": "full",
                "query": queries[item],
                "window_start": min(m["ts"] for m in members),
                "users": users,
            }
        )
    return rows


def _user(member: dict[str, Any], timeline: list[tuple], cfg: BuildConfig) -> dict[str, Any]:
    history = [r for r in timeline if r[1] < member["ts"]]
    scope = history if cfg.avg_scope == "history" else timeline
    return {
        "user_id": member["user_id"],
        "rating": member["rating"],
        "timestamp": member["ts"],
        "avg_rating": member["avg"],
        "most_common_rating": most_common_rating([r[2] for r in scope]),
        "relative_rating": member["rel"],
        "history": [
            {"parent_asin": item, "title": title, "author": author, "rating": rating, "timestamp": ts}
            for item, ts, rating, title, author in history
        ],
    }
