"""One domain's selection for LLMRec (DuckDB over `dataset_builder.raw`'s tables): titled items, k-core."""

from __future__ import annotations

from pathlib import Path

import duckdb


def titled_interactions(con: duckdb.DuckDBPyConnection) -> int:
    """Table ``inter``: the deduplicated reviews (`rev`) of items whose metadata has a non-empty title.

    An untitled item cannot be named in a prompt or matched from a generated title, so it is left out
    before the k-core (and counted by the caller). Returns the number of interactions kept.
    """
    con.sql("""
        CREATE OR REPLACE TABLE inter AS
        SELECT rev.user_id, rev.parent_asin, rev.ts, rev.rating, trim(meta.title) AS title
        FROM rev JOIN meta USING (parent_asin)
        WHERE meta.title IS NOT NULL AND trim(meta.title) <> ''""")
    return con.sql("SELECT count(*) FROM inter").fetchall()[0][0]


def kcore(con: duckdb.DuckDBPyConnection, k: int) -> int:
    """Drop users and items with fewer than `k` interactions from ``inter`` until none is left to drop.

    Returns:
        The number of rounds (the last one dropped nothing): each round removes every user and every
        item below `k` at once, so the result is the unique largest k-core.
    """
    rounds = 0
    while True:
        rounds += 1
        dropped = con.sql(f"""
            SELECT count(*) FROM inter
            WHERE user_id IN (SELECT user_id FROM inter GROUP BY user_id HAVING count(*) < {k})
               OR parent_asin IN (SELECT parent_asin FROM inter GROUP BY parent_asin HAVING count(*) < {k})
        """).fetchall()[0][0]
        if not dropped:
            return rounds
        con.sql(f"""
            DELETE FROM inter
            WHERE user_id IN (SELECT user_id FROM inter GROUP BY user_id HAVING count(*) < {k})
               OR parent_asin IN (SELECT parent_asin FROM inter GROUP BY parent_asin HAVING count(*) < {k})
        """)


def write_sorted(con: duckdb.DuckDBPyConnection, path: Path) -> dict[str, int]:
    """``inter`` to parquet in each user's chronological order (ties by `parent_asin`); its counts."""
    con.sql(f"COPY (SELECT * FROM inter ORDER BY user_id, ts, parent_asin) TO '{path}' (FORMAT parquet)")
    users, items, interactions, longest = con.sql(
        "SELECT count(DISTINCT user_id), count(DISTINCT parent_asin), count(*), "
        "coalesce(max(n), 0) FROM inter, (SELECT max(c) AS n FROM (SELECT count(*) AS c FROM inter "
        "GROUP BY user_id))"
    ).fetchall()[0]
    return {"users": users, "items": items, "interactions": interactions, "longest_user": longest}
