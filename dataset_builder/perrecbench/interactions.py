"""``perrecbench build --with-interactions``: each domain's ratings minus the test labels, for CF baselines.

A collaborative-filtering baseline (PerRecBench's :mod:`cf`) learns from everyone's ratings, which the group
rows do not hold. So the build can also write, per domain, the deduplicated review relation the selection
reads (one row per (user, item): the earliest review, as in PROTOCOL §1) as
``interactions/<Domain>-<sha12>.parquet`` with the columns of :data:`INTERACTIONS_SCHEMA`, ordered by
``(timestamp, parent_asin, user_id)`` (so a reader that wants the ratings before a time reads a prefix, and
the bytes do not depend on DuckDB's threads).

**Every test label is removed**: the review of its group's query item by every user of every ``test`` group
(the users of the ``full`` config, so every level's users). Train groups' reviews stay: they are the
held-out set's training data. The files hold reviews of every date; the baselines' rule (fit on reviews
strictly before a group's window) is applied when they fit, not here.

Two passes per domain: the selection copies its ``rev`` table into the domain's stage (the test split is not
known until every domain is selected), and :func:`write_interactions` streams it back through DuckDB with an
anti-join on the test labels into the output folder. The files are not a ``load_dataset`` config (the
card's ``configs:`` lists the group files only); read them with pyarrow, pandas or DuckDB.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from dataset_builder.config import BuildError, duckdb_settings
from dataset_builder.perrecbench.assembly import file_sha256
from dataset_builder.perrecbench.config import BuildConfig
from perrec_eval.fileio import atomic_open

INTERACTIONS_DIR = "interactions"
INTERACTIONS_SCHEMA = pa.schema(
    [
        ("user_id", pa.string()),
        ("parent_asin", pa.string()),
        ("rating", pa.float64()),
        ("timestamp", pa.int64()),
    ]
)
_BATCH_ROWS = 500_000
_ROW_GROUP = 1_000_000


def export_stage(con: duckdb.DuckDBPyConnection, table: str, path: Path) -> None:
    """Copy the deduplicated reviews (``user_id, parent_asin, ts, rating``) to a stage parquet file."""
    escaped = str(path).replace("'", "''")
    con.sql(f"""
        COPY (SELECT user_id, parent_asin, rating, ts AS "timestamp" FROM {table})
        TO '{escaped}' (FORMAT parquet, COMPRESSION zstd)""")


def write_interactions(
    folder: Path,
    cfg: BuildConfig,
    stages: dict[str, Path],
    test_labels: Sequence[tuple[str, str, str]],
) -> dict[str, dict[str, Any]]:
    """Write every domain's interactions without its test labels into ``folder/interactions/``.

    Args:
        folder: the output folder being written.
        cfg: the build parameters (DuckDB memory limit and threads).
        stages: domain → its stage interactions file (:func:`export_stage`).
        test_labels: ``(domain, user_id, query parent_asin)`` of every user of every test group.

    Returns:
        ``{domain: {"path", "sha256", "rows", "bytes", "test_labels_removed"}}`` (path relative to folder).

    Raises:
        BuildError: a test label was not found in its domain's reviews (the stage does not match the
            groups: rebuild with ``--overwrite``).
    """
    (folder / INTERACTIONS_DIR).mkdir(exist_ok=True)
    labels = pa.table(
        {
            "domain": [d for d, _, _ in test_labels],
            "user_id": [u for _, u, _ in test_labels],
            "parent_asin": [i for _, _, i in test_labels],
        },
        schema=pa.schema([("domain", pa.string()), ("user_id", pa.string()), ("parent_asin", pa.string())]),
    )
    written: dict[str, dict[str, Any]] = {}
    spill = cfg.stage_root / "spill-interactions"
    con = duckdb.connect(":memory:", config=duckdb_settings(cfg.memory_limit, cfg.threads, spill))
    try:
        con.execute("SET enable_progress_bar = false")
        con.register("labels", labels)
        for domain in sorted(stages):
            written[domain] = _write_domain(con, folder, domain, stages[domain])
            expected = len({(u, i) for d, u, i in test_labels if d == domain})  # a user may be in 2 groups
            if written[domain]["test_labels_removed"] != expected:
                raise BuildError(
                    f"{domain}: removed {written[domain]['test_labels_removed']} test labels from the "
                    f"interactions but the test groups have {expected} users; the stage does not match the "
                    "groups: rebuild with --overwrite and a fresh --work-dir"
                )
    finally:
        con.close()
    return written


def _write_domain(con: duckdb.DuckDBPyConnection, folder: Path, domain: str, stage: Path) -> dict[str, Any]:
    escaped_path, escaped_domain = str(stage).replace("'", "''"), domain.replace("'", "''")
    total = con.sql(f"SELECT count(*) FROM read_parquet('{escaped_path}')").fetchall()[0][0]
    reader = con.sql(f"""
        SELECT i.user_id, i.parent_asin, i.rating, i."timestamp"
        FROM read_parquet('{escaped_path}') i
        ANTI JOIN (SELECT user_id, parent_asin FROM labels WHERE domain = '{escaped_domain}') l
             USING (user_id, parent_asin)
        ORDER BY i."timestamp", i.parent_asin, i.user_id""").to_arrow_reader(_BATCH_ROWS)
    tmp = folder / INTERACTIONS_DIR / f".{domain}.parquet"
    rows = 0
    with (
        atomic_open(tmp, "wb") as handle,
        pq.ParquetWriter(handle, INTERACTIONS_SCHEMA, compression="zstd") as writer,
    ):
        for batch in reader:
            table = pa.Table.from_batches([batch]).cast(INTERACTIONS_SCHEMA)
            writer.write_table(table, row_group_size=_ROW_GROUP)
            rows += table.num_rows
    digest = file_sha256(tmp)
    relative = f"{INTERACTIONS_DIR}/{domain}-{digest[:12]}.parquet"
    tmp.replace(folder / relative)
    return {
        "path": relative,
        "sha256": digest,
        "rows": rows,
        "bytes": (folder / relative).stat().st_size,
        "test_labels_removed": total - rows,
    }


def card_section(interactions: dict[str, dict[str, Any]] | None) -> str:
    """The card's paragraph on the interactions files ("" when the build wrote none).

    >>> card_section(None)
    ''
    >>> "Books-ab" in card_section({"Books": {"path": "interactions/Books-ab.parquet", "rows": 3,
    ...                                        "bytes": 10, "test_labels_removed": 1}})
    True
    """
    if not interactions:
        return ""
    rows = "\n".join(
        f"| {domain} | `{info['path']}` | {info['rows']:,} | {info['test_labels_removed']:,} | "
        f"{info['bytes'] / 2**20:.1f} |"
        for domain, info in sorted(interactions.items())
    )
    return (
        "## Interactions (for collaborative-filtering baselines)\n\n"
        "Built with `--with-interactions`: each domain's ratings, one row per (user, item) — the earliest "
        "review, as in the groups — with columns `user_id`, `parent_asin`, `rating`, `timestamp` (ms), "
        "ordered by time. **Every test label is removed** (each test group user's review of the group's "
        "query item, for the users of the `full` config, so every level's). These files are not a "
        "`load_dataset` config; read them with pyarrow, pandas or DuckDB. They hold reviews of every date: "
        "the baselines `mf` and `item-knn` (`perrecbench evaluate --engine baseline`) fit, for each group, "
        "only on reviews dated strictly before the group's `window_start`, plus the history each user "
        "has in the group row. sha256 of each file in `manifest.json` (`interactions`).\n\n"
        "| domain | file | ratings | test labels removed | MiB |\n|---|---|---|---|---|\n" + rows + "\n\n"
    )
