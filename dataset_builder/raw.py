"""One domain's raw Amazon Reviews 2023 files read into DuckDB, checked and deduplicated: the reading every
task family selects from.

:func:`read_reviews` leaves the table ``rev`` (one row per (user, item): the earliest review, ties by rating
then ``asin``), :func:`read_meta` the table ``meta`` (one row per item: the smallest record, so the choice
never depends on line order). Both check every line with the rules of
:func:`~dataset_builder.sources.review_problem` and ``meta_problem``: ``--on-bad-line error`` stops at the
first bad line with its file and number, ``skip`` counts and reports them. The review text and the richer
metadata are read only when a family asks for them (``text=True``, ``details=True``), so a family that does
not need them reads no more than it uses. The connection lives in one stage of the stage cache
(:mod:`dataset_builder.stages`), which a family's selection runs; DuckDB running out of memory or meeting a
cut file becomes a :class:`BuildError` naming the fix (:func:`duckdb_error`).

Tables (``ts`` is the review's time in ms; the optional columns in brackets):

- ``rev``: ``user_id, parent_asin, ts, rating [, title, text]``;
- ``meta``: ``parent_asin, title, author, main_category, average_rating, rating_number [, store, categories,
  details]`` (``author`` is the name of an author object or the string; ``categories`` a list of text;
  ``details`` the JSON object as text; a field of another JSON type is NULL, never a bad line).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from dataset_builder.config import BuildError, BuildSpec, OnBadLine, duckdb_settings, out_of_memory
from dataset_builder.sources import BadLines, InputFile, Source, bad_line_error, locate_bad_lines

logger = logging.getLogger(__name__)

_REVIEW_COLUMNS = (
    "'user_id': 'JSON', 'parent_asin': 'JSON', 'asin': 'VARCHAR', 'rating': 'JSON', 'timestamp': 'JSON', "
    "'sort_timestamp': 'JSON', 'sortTimestamp': 'JSON'"
)
_REVIEW_TEXT_COLUMNS = ", 'title': 'JSON', 'text': 'JSON'"
_META_COLUMNS = (
    "'parent_asin': 'JSON', 'title': 'JSON', 'author': 'JSON', 'main_category': 'VARCHAR', "
    "'average_rating': 'DOUBLE', 'rating_number': 'BIGINT'"
)
_META_DETAIL_COLUMNS = ", 'store': 'JSON', 'categories': 'JSON', 'details': 'JSON'"
_NUMBER = "('DOUBLE', 'UBIGINT', 'BIGINT')"
_INTEGER = "('UBIGINT', 'BIGINT')"
_MAX_OBJECT_BYTES = 64 * 2**20


def connect(cfg: BuildSpec, work: Path, source: Source) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the memory limit, threads and spill folder of this build."""
    work.mkdir(parents=True, exist_ok=True)
    # In-memory database: tables beyond memory_limit are offloaded to the spill folder, and nothing is
    # fsync'ed (a file-backed database checkpoints to disk, which only costs time here).
    con = duckdb.connect(":memory:", config=duckdb_settings(cfg.memory_limit, cfg.threads, work / "spill"))
    con.execute("SET enable_progress_bar = false")  # tqdm shows progress; DuckDB's bar would interleave
    source.register(con)
    return con


def duckdb_error(err: duckdb.Error, cfg: BuildSpec, domain: str, stage: str) -> BuildError | None:
    """The one-line error for DuckDB running out of memory or failing to read an input during `stage` of
    `domain`'s reading or selection; None for any other error (a bug, which keeps its traceback)."""
    if isinstance(err, duckdb.OutOfMemoryException):
        return out_of_memory(cfg.memory_limit, f"{domain}: {stage}", err)
    if isinstance(err, duckdb.IOException):
        reason = " ".join(str(err).split())[:300]
        return BuildError(
            f"{domain}: {stage}: cannot read the input ({reason}): the file is cut, damaged or "
            "unreadable (--on-bad-line skip passes over bad lines, not a cut file); download it again"
        )
    return None


def _read_json(uri: str, columns: str) -> str:
    # Explicit columns (no schema sampling); ignore_errors turns a malformed line into an all-NULL row,
    # which the check below counts, so nothing is dropped silently.
    escaped = uri.replace("'", "''")
    return (
        f"read_json('{escaped}', format='newline_delimited', columns={{{columns}}}, ignore_errors=true, "
        f"compression='auto', maximum_object_size={_MAX_OBJECT_BYTES})"
    )


def _text(column: str) -> str:
    """SQL: the JSON column as text when it holds a string, else NULL."""
    return f"CASE json_type({column}) WHEN 'VARCHAR' THEN {column} ->> '$' END AS {column}"


def _check_bad(
    con: duckdb.DuckDBPyConnection, source: Source, file: InputFile, table: str, on_bad_line: OnBadLine
) -> tuple[int, BadLines | None]:
    """Count rows failing the checks; name them (file, line, reason) with a Python pass if there are any."""
    total, bad = con.sql(f"SELECT count(*), count_if(NOT ok) FROM {table}").fetchall()[0]
    if total == 0:
        raise BuildError(
            f"{file.uri} has no lines; replace it with the full {file.kind} file of {file.domain}"
        )
    if not bad:
        return total, None
    located = locate_bad_lines(source, file, stop_at_first=on_bad_line == "error")
    if on_bad_line == "error":
        raise bad_line_error(file, located, bad)
    located.count = max(located.count, bad)
    logger.warning("%s: skipping %d bad line(s), e.g. %s", file.uri, bad, located.examples[:3])
    return total, located


def _review_rows(file: InputFile, text: bool) -> str:
    """SQL of a review file's rows: ``user_id, parent_asin, asin, rating, ts [, title, text], ok`` (``ok``:
    the line passes the checks; a bad line's values are NULL where they do not parse)."""
    columns = _REVIEW_COLUMNS + (_REVIEW_TEXT_COLUMNS if text else "")
    inner_text = f", {_text('title')}, {_text('text')}" if text else ""
    outer_text = "title, text," if text else ""
    # Each JSON value is typed and converted once, in the inner projection (written inline, DuckDB
    # evaluated json_type and the casts once per use: ≈ 5% more CPU for this stage).
    return f"""
        SELECT uid AS user_id, pid AS parent_asin, coalesce(asin, '') AS asin,
               CASE WHEN rt IN {_NUMBER} THEN r END AS rating, CASE WHEN tt IN {_INTEGER} THEN tv END AS ts,
               {outer_text}
               coalesce(ut = 'VARCHAR' AND uid <> '' AND pt = 'VARCHAR' AND pid <> ''
                        AND rt IN {_NUMBER} AND r BETWEEN 1 AND 5
                        AND tt IN {_INTEGER} AND tv >= 0, false) AS ok
        FROM (SELECT json_type(user_id) AS ut, user_id ->> '$' AS uid, json_type(parent_asin) AS pt,
                     parent_asin ->> '$' AS pid, asin, json_type(rating) AS rt,
                     TRY_CAST(rating AS DOUBLE) AS r, json_type(t) AS tt, TRY_CAST(t AS BIGINT) AS tv
                     {inner_text}
              FROM (SELECT *, coalesce("timestamp", sort_timestamp, sortTimestamp) AS t
                    FROM {_read_json(file.uri, columns)}))"""


def review_texts(con: duckdb.DuckDBPyConnection, file: InputFile, table: str) -> None:
    """The table ``texts`` (``user_id, parent_asin, title, text``): the review title and text of every
    (user, item) pair of `table` (read by :func:`read_reviews` without texts), from a second read of the
    review file keeping the lines of the table's pairs only, so that only the texts a family keeps are ever
    held (a whole category's reviews hold tens of GB of text). Of a pair reviewed more than once, the
    earliest review's texts: the review :func:`read_reviews` keeps with ``text=True`` (the texts deciding
    last among equal times, ratings and asins).
    """
    con.sql(f"""
        CREATE OR REPLACE TABLE texts AS
        SELECT user_id, parent_asin, asin, rating, ts, title, text FROM ({_review_rows(file, True)}) r
        WHERE ok AND hash(user_id, parent_asin) IN (SELECT hash(user_id, parent_asin) FROM {table})""")
    _keep_earliest(con, "texts", ", 'title': title, 'text': text")
    con.sql("ALTER TABLE texts DROP COLUMN asin")
    con.sql("ALTER TABLE texts DROP COLUMN rating")
    con.sql("ALTER TABLE texts DROP COLUMN ts")


def _keep_earliest(con: duckdb.DuckDBPyConnection, table: str, key: str, where: str = "true") -> None:
    """Delete, in place, every row of `table` but the earliest of its (user, item) pair (ties by rating,
    asin, then `key`'s further fields) and the rows failing `where`. Only the pairs with more than one row
    are looked at (found by a 64-bit hash of the pair, so no table of every pair is made): the rows' texts
    are never copied, hashed or compared unless their pair repeats."""
    con.sql(f"""
        CREATE OR REPLACE TEMP TABLE repeated AS
        SELECT h FROM (SELECT hash(user_id, parent_asin) AS h FROM {table} WHERE {where})
        GROUP BY h HAVING count(*) > 1""")
    con.sql(f"""
        CREATE OR REPLACE TEMP TABLE losers AS
        SELECT rowid AS id FROM {table}
        WHERE {where} AND hash(user_id, parent_asin) IN (SELECT h FROM repeated)
        EXCEPT
        SELECT arg_min(rowid, {{'ts': ts, 'rating': rating, 'asin': asin{key}}}) FROM {table}
        WHERE {where} AND hash(user_id, parent_asin) IN (SELECT h FROM repeated)
        GROUP BY user_id, parent_asin""")
    con.sql(f"DELETE FROM {table} WHERE NOT ({where}) OR rowid IN (SELECT id FROM losers)")
    for temp in ("repeated", "losers"):
        con.sql(f"DROP TABLE {temp}")


def read_reviews(
    con: duckdb.DuckDBPyConnection,
    source: Source,
    file: InputFile,
    on_bad_line: OnBadLine,
    *,
    text: bool = False,
    tick: Callable[[str], None] = lambda stage: None,
) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """Read, check and deduplicate a review file into the table ``rev``.

    Args:
        con: the connection (:func:`connect`).
        source: where the file is.
        file: the domain's review file.
        on_bad_line: ``error`` or ``skip``.
        text: also keep each review's ``title`` and ``text``.
        tick: called with ``read reviews`` and ``deduplicate`` as each step starts (progress).

    Returns:
        The counts ``lines, bad_lines, reviews, users, items, duplicates`` and the bad lines found
        (:meth:`dataset_builder.sources.BadLines.as_dict`, at most one entry).

    Raises:
        BuildError: an empty file, a bad line with ``on_bad_line="error"``, or no usable review.
    """
    counts: dict[str, int] = {}
    bad_lines: list[dict[str, Any]] = []
    tick("read reviews")
    con.sql(f"CREATE OR REPLACE TABLE raw AS {_review_rows(file, text)}")
    counts["lines"], bad = _check_bad(con, source, file, "raw", on_bad_line)
    if bad is not None:
        bad_lines.append(bad.as_dict())
    counts["bad_lines"] = bad.count if bad else 0

    tick("deduplicate")
    _keep_earliest(con, "raw", ", 'title': title, 'text': text" if text else "", where="ok")
    con.sql("ALTER TABLE raw DROP COLUMN ok")
    con.sql("ALTER TABLE raw DROP COLUMN asin")
    con.sql("DROP TABLE IF EXISTS rev")
    con.sql("ALTER TABLE raw RENAME TO rev")
    counts["reviews"], counts["users"], counts["items"], max_ts = con.sql(
        "SELECT count(*), count(DISTINCT user_id), count(DISTINCT parent_asin), max(ts) FROM rev"
    ).fetchall()[0]
    counts["duplicates"] = counts["lines"] - counts["bad_lines"] - counts["reviews"]
    if counts["reviews"] == 0:
        raise BuildError(f"{file.uri}: no usable review (all lines bad); check the file")
    if max_ts is not None and max_ts < 10**11:
        logger.warning("%s: timestamps look like seconds, not milliseconds (max %d)", file.uri, max_ts)
    return counts, bad_lines


def read_meta(
    con: duckdb.DuckDBPyConnection,
    source: Source,
    file: InputFile,
    on_bad_line: OnBadLine,
    *,
    items: str | None = None,
    details: bool = False,
) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """Read, check and deduplicate a metadata file into the table ``meta``.

    Args:
        con: the connection (:func:`connect`).
        source: where the file is.
        file: the domain's metadata file.
        on_bad_line: ``error`` or ``skip``.
        items: SQL of a one-column query of the ``parent_asin`` values to keep (e.g. ``SELECT parent_asin
            FROM rev``); None keeps every item.
        details: also keep ``store``, ``categories`` and ``details``.

    Returns:
        The counts ``meta_lines, meta_bad_lines`` and the bad lines found (at most one entry).

    Raises:
        BuildError: an empty file or a bad line with ``on_bad_line="error"``.
    """
    counts: dict[str, int] = {}
    bad_lines: list[dict[str, Any]] = []
    columns = _META_COLUMNS + (_META_DETAIL_COLUMNS if details else "")
    extra = (
        f" {_text('store')},"
        " CASE json_type(categories) WHEN 'ARRAY' THEN TRY_CAST(categories AS VARCHAR[]) END AS categories,"
        " CASE json_type(details) WHEN 'OBJECT' THEN details END AS details,"
        if details
        else ""
    )
    # a title that is not text (123) is missing, as a review's is: never an item named "123"
    con.sql(f"""
        CREATE OR REPLACE TABLE rawmeta AS
        SELECT parent_asin ->> '$' AS parent_asin, {_text("title")}, main_category, average_rating,
               rating_number, CASE json_type(author) WHEN 'OBJECT' THEN author ->> 'name'
                                                     WHEN 'VARCHAR' THEN author ->> '$' END AS author,{extra}
               coalesce(json_type(parent_asin) = 'VARCHAR' AND parent_asin ->> '$' <> '', false) AS ok
        FROM {_read_json(file.uri, columns)}""")
    counts["meta_lines"], bad = _check_bad(con, source, file, "rawmeta", on_bad_line)
    if bad is not None:
        bad_lines.append(bad.as_dict())
    counts["meta_bad_lines"] = bad.count if bad else 0
    kept = ", m.store AS store, m.categories AS categories, m.details AS details" if details else ""
    key = ", 'store': store, 'categories': categories, 'details': details" if details else ""
    where = f" AND parent_asin IN ({items})" if items else ""
    # Several lines for one item: keep the smallest record, so the choice never depends on line order.
    con.sql(f"""
        CREATE OR REPLACE TABLE meta AS
        SELECT parent_asin, m.title AS title, m.author AS author, m.main_category AS main_category,
               m.average_rating AS average_rating, m.rating_number AS rating_number{kept}
        FROM (SELECT parent_asin, min({{'title': title, 'author': author, 'main_category': main_category,
                                       'average_rating': average_rating, 'rating_number': rating_number
                                       {key}}}) AS m
              FROM rawmeta WHERE ok{where} GROUP BY parent_asin)""")
    con.sql("DROP TABLE rawmeta")
    return counts, bad_lines
