"""One domain's selection for LLMRec (DuckDB over `dataset_builder.raw`'s tables): titled items, k-core."""

from __future__ import annotations

from pathlib import Path

import duckdb


def titled_interactions(con: duckdb.DuckDBPyConnection) -> int:
    """Table ``inter``: the deduplicated reviews (`rev`, renamed after the others are deleted: nothing is
    copied) of items whose metadata has a non-empty title.

    An untitled item cannot be named in a prompt or matched from a generated title, so it is left out
    before the k-core (and counted by the caller). Returns the number of interactions kept.
    """
    con.sql("""
        CREATE OR REPLACE TEMP TABLE titled AS
        SELECT parent_asin, trim(title) AS title FROM meta WHERE title IS NOT NULL AND trim(title) <> ''""")
    con.sql("DELETE FROM rev WHERE parent_asin NOT IN (SELECT parent_asin FROM titled)")
    con.sql("DROP TABLE IF EXISTS inter")
    con.sql("ALTER TABLE rev RENAME TO inter")
    return con.sql("SELECT count(*) FROM inter").fetchall()[0][0]


def kcore(con: duckdb.DuckDBPyConnection, k: int) -> int:
    """Drop users and items with fewer than `k` interactions from ``inter`` until none is left to drop.

    The rounds run on integer codes of the users and items (a narrow table, no text key compared), then
    ``inter`` loses the rows of every user or item dropped, at once.

    Returns:
        The number of rounds (the last one dropped nothing): each round removes every user and every
        item below `k` at once, so the result is the unique largest k-core.
    """
    con.sql("CREATE OR REPLACE TEMP TABLE users AS SELECT user_id, row_number() OVER () AS u FROM "
            "(SELECT DISTINCT user_id FROM inter)")  # fmt: skip
    con.sql("CREATE OR REPLACE TEMP TABLE things AS SELECT parent_asin, row_number() OVER () AS i FROM "
            "(SELECT DISTINCT parent_asin FROM inter)")  # fmt: skip
    con.sql("""
        CREATE OR REPLACE TEMP TABLE core AS
        SELECT u, i FROM inter JOIN users USING (user_id) JOIN things USING (parent_asin)""")
    size = con.sql("SELECT count(*) FROM core").fetchall()[0][0]
    rounds = 0
    while True:
        rounds += 1
        con.sql(f"""
            CREATE OR REPLACE TEMP TABLE core AS
            SELECT u, i FROM core
            WHERE u IN (SELECT u FROM core GROUP BY u HAVING count(*) >= {k})
              AND i IN (SELECT i FROM core GROUP BY i HAVING count(*) >= {k})""")
        kept = con.sql("SELECT count(*) FROM core").fetchall()[0][0]
        if kept == size:
            break
        size = kept
    con.sql("""
        DELETE FROM inter
        WHERE user_id NOT IN (SELECT user_id FROM users WHERE u IN (SELECT DISTINCT u FROM core))
           OR parent_asin NOT IN (SELECT parent_asin FROM things WHERE i IN (SELECT DISTINCT i FROM core))""")
    for table in ("users", "things", "core"):
        con.sql(f"DROP TABLE {table}")
    return rounds


def write_sorted(con: duckdb.DuckDBPyConnection, path: Path, items: Path) -> dict[str, int]:
    """``inter`` to parquet in each user's order (time, ties by `parent_asin`), each row with its item's
    title and index in the catalogue and its review's title and text (table ``texts``,
    `dataset_builder.raw.review_texts`); the catalogue (``parent_asin`` order,
    its titles) to `items`. Returns the counts, and ``review_texts``: the reviews with a non-empty text."""
    con.sql("""
        CREATE OR REPLACE TEMP TABLE catalogue AS
        SELECT parent_asin, title, CAST(row_number() OVER (ORDER BY parent_asin) - 1 AS INTEGER) AS item
        FROM titled WHERE parent_asin IN (SELECT DISTINCT parent_asin FROM inter)""")
    con.sql(f"COPY (SELECT parent_asin, title FROM catalogue ORDER BY item) TO '{items}' (FORMAT parquet)")
    con.sql(f"""
        COPY (SELECT inter.user_id, inter.parent_asin, inter.ts, inter.rating, catalogue.title,
                     catalogue.item, texts.title AS review_title, texts.text AS review_text
              FROM inter JOIN catalogue USING (parent_asin) JOIN texts USING (user_id, parent_asin)
              ORDER BY inter.user_id, inter.ts, inter.parent_asin)
        TO '{path}' (FORMAT parquet)""")
    users, items_, interactions, longest = con.sql(
        "SELECT count(DISTINCT user_id), count(DISTINCT parent_asin), count(*), "
        "coalesce(max(n), 0) FROM inter, (SELECT max(c) AS n FROM (SELECT count(*) AS c FROM inter "
        "GROUP BY user_id))"
    ).fetchall()[0]
    texts = con.sql("""
        SELECT count(*) FROM inter JOIN texts USING (user_id, parent_asin)
        WHERE trim(coalesce(texts.text, '')) <> ''""").fetchall()[0][0]
    return {
        "users": users, "items": items_, "interactions": interactions, "longest_user": longest,
        "review_texts": texts,
    }  # fmt: skip
