"""One domain's group selection in DuckDB (out of core) plus a small Python search: raw files → chosen users.

Steps (each a progress tick): read + check the review file, deduplicate, per-user running counts and averages,
read the metadata, filter candidates, search groups per item (Python,
:mod:`dataset_builder.perrecbench.groups`: a seeded uniform draw in the chosen window; with ``--preset large``
several user-disjoint draws per item and level, :func:`item_groups`) into the tables ``chosen`` and
``windows`` (one group per ``gkey``), and finally hand the connection to
:func:`dataset_builder.perrecbench.assembly.write_groups`, which streams the groups with the chosen users'
histories to parquet; a small index (members and window summary per group) feeds the split and the neutrality
statistics. DuckDB running out of memory becomes a :class:`BuildError` that names ``--memory-limit``. Only the
candidates of items that pass every SQL filter reach Python objects (one item at a time); history rows stay in
DuckDB and Arrow buffers, so memory is bounded by the DuckDB limit plus a few batches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from dataset_builder import raw
from dataset_builder.perrecbench.assembly import write_groups
from dataset_builder.perrecbench.config import BuildConfig
from dataset_builder.perrecbench.groups import Candidate, Choice, find_group, find_groups, item_rng
from dataset_builder.perrecbench.interactions import export_stage
from dataset_builder.sources import InputFile, Source
from perrec_eval import progress
from perrec_eval.fileio import atomic_open

logger = logging.getLogger(__name__)

_BATCH_ROWS = 200_000
STAGES = ("read reviews", "deduplicate", "user history", "read metadata", "candidates", "search", "histories")


@dataclass(slots=True)
class DomainResult:
    """What one domain contributes: how many groups (written to the groups file) and its accounting."""

    domain: str
    groups: int
    funnel: dict[str, int]
    bad_lines: list[dict[str, Any]] = field(default_factory=list)


def run_domain(
    source: Source,
    reviews: InputFile,
    meta: InputFile,
    cfg: BuildConfig,
    work: Path,
    groups_file: Path,
    index_file: Path,
    *,
    tick: Callable[[str], None] = lambda stage: None,
    interactions_file: Path | None = None,
) -> DomainResult:
    """Select the groups of one domain.

    Args:
        source: where the files are.
        reviews: the domain's review file.
        meta: the domain's metadata file.
        cfg: the build parameters.
        work: a scratch folder for DuckDB's spill files (removed by the caller).
        groups_file: where the groups go, as a stage file of ``full`` rows (users ordered by
            relative rating, rows by ``group_id``).
        index_file: one row per group (:data:`INDEX_SCHEMA`: members and chosen window).
        tick: called with the name of each stage as it starts (progress).
        interactions_file: where to copy the deduplicated reviews (``--with-interactions``); None: no copy.

    Returns:
        The number of groups and the funnel counts.

    Raises:
        BuildError: bad input, or DuckDB ran out of memory (the message names ``--memory-limit``).
    """
    stage = ["connect"]

    def track(name: str) -> None:
        stage[0] = name
        tick(name)

    try:
        con = raw.connect(cfg, work, source)
        try:
            return _run(con, source, reviews, meta, cfg, groups_file, index_file, track, interactions_file)
        finally:
            con.close()
    except (duckdb.OutOfMemoryException, duckdb.IOException) as err:
        raise raw.duckdb_error(err, cfg, reviews.domain, stage[0]) from err


def _run(
    con: duckdb.DuckDBPyConnection,
    source: Source,
    reviews: InputFile,
    meta: InputFile,
    cfg: BuildConfig,
    groups_file: Path,
    index_file: Path,
    tick: Callable[[str], None],
    interactions_file: Path | None = None,
) -> DomainResult:
    domain = reviews.domain
    funnel: dict[str, int] = {}

    counts, bad_lines = raw.read_reviews(con, source, reviews, cfg.on_bad_line, tick=tick)
    funnel.update(counts)
    if interactions_file is not None:
        export_stage(con, "rev", interactions_file)

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
    counts, bad = raw.read_meta(con, source, meta, cfg.on_bad_line, items="SELECT parent_asin FROM act")
    funnel.update(counts)
    bad_lines += bad

    tick("candidates")
    k = min(cfg.level_sizes().values()) if cfg.preset == "large" else cfg.group_size
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
    funnel["items_with_group"] = _search(con, cfg, domain, funnel["items_with_enough_in_one_window"])
    if cfg.preset == "large":
        counts = dict(con.sql("SELECT level, count(DISTINCT gkey) FROM chosen GROUP BY level").fetchall())
        funnel.update({f"groups_{level}": counts.get(level, 0) for level in cfg.level_sizes()})

    tick("histories")
    groups = write_groups(con, domain, cfg.avg_scope, groups_file, keep_twins=cfg.keep_twins)
    _write_index(con, domain, index_file)
    return DomainResult(domain, groups, funnel, bad_lines)


def _write_index(con: duckdb.DuckDBPyConnection, domain: str, path: Path) -> None:
    """One small row per group: its members (for the split rule) and its window (for the neutrality stats)."""
    escaped = domain.replace("'", "''")
    table = con.sql(f"""
        SELECT '{escaped}:' || c.gkey AS group_id, '{escaped}' AS domain,
               list(c.user_id ORDER BY c.pos) AS user_ids, list(c.ts ORDER BY c.pos) AS timestamps,
               any_value(w.candidates) AS window_candidates, any_value(w.rel_sum) AS window_rel_sum,
               any_value(w.negatives) AS window_negatives, any_value(w.valid_groups) AS window_valid_groups,
               any_value(w.item_candidates) AS item_candidates, any_value(w.item_rel_sum) AS item_rel_sum,
               any_value(w.item_negatives) AS item_negatives, any_value(c.parent_asin) AS parent_asin,
               any_value(c.level) AS level, coalesce(any_value(t.removed), 0) AS twins_removed,
               coalesce(any_value(t.users), 0) AS twin_users
        FROM chosen c JOIN windows w USING (gkey) LEFT JOIN twin_counts t USING (gkey)
        GROUP BY c.gkey ORDER BY group_id""").to_arrow_table()
    with atomic_open(path, "wb") as handle:
        pq.write_table(table.cast(INDEX_SCHEMA), handle)


def _item_batches(con: duckdb.DuckDBPyConnection) -> Iterator[tuple[str, list[Candidate], dict[str, tuple]]]:
    """Candidates of the items that passed the SQL filters, one item at a time."""
    # On its own cursor: the search inserts the chosen members on ``con`` while this stream is open.
    cursor = con.cursor()
    reader = cursor.sql("""
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


def _search(con: duckdb.DuckDBPyConnection, cfg: BuildConfig, domain: str, n_items: int) -> int:
    """Search every item's group; the drawn members go to the DuckDB table ``chosen`` and a summary of each
    chosen window (candidates, sum of relative ratings, negatives, valid groups; and the same counts over all
    the item's candidates) to ``windows``, in chunks.

    Returns:
        The number of items with a group.
    """
    con.sql(
        "CREATE OR REPLACE TABLE chosen (parent_asin VARCHAR, gkey VARCHAR, level VARCHAR, pos INTEGER, "
        "user_id VARCHAR, ts BIGINT, rel DOUBLE, rating DOUBLE, avg DOUBLE)"
    )
    con.sql(
        "CREATE OR REPLACE TABLE windows (gkey VARCHAR, candidates INTEGER, rel_sum DOUBLE, "
        "negatives INTEGER, valid_groups DOUBLE, item_candidates INTEGER, item_rel_sum DOUBLE, "
        "item_negatives INTEGER)"
    )
    members: dict[str, list[Any]] = {name: [] for name in _CHOSEN_SCHEMA.names}
    windows: dict[str, list[Any]] = {name: [] for name in _WINDOW_SCHEMA.names}

    def flush() -> None:
        for table, columns, schema in (
            ("chosen", members, _CHOSEN_SCHEMA),
            ("windows", windows, _WINDOW_SCHEMA),
        ):
            con.register("chunk", pa.table(columns, schema=schema))
            con.sql(f"INSERT INTO {table} SELECT * FROM chunk")
            con.unregister("chunk")
            for values in columns.values():
                values.clear()

    found = 0
    bar = progress.bar(total=n_items, desc="  search items", unit="item", leave=False)
    for item, cands, extra in _item_batches(con):
        bar.update(1)
        choices = item_groups(cfg, domain, item, cands)
        found += bool(choices)
        every = [c.rel for c in cands]
        for gkey, level, choice in choices:
            for pos, cand in enumerate(choice.members):
                rating, avg = extra[cand.user_id]
                row = (item, gkey, level, pos, cand.user_id, cand.timestamp, cand.rel, rating, avg)
                for name, value in zip(_CHOSEN_SCHEMA.names, row, strict=True):
                    members[name].append(value)
            rels = [c.rel for c in choice.window]
            row = (gkey, len(rels), sum(rels), sum(r < 0 for r in rels), float(choice.n_groups))
            row += (len(every), sum(every), sum(r < 0 for r in every))
            for name, value in zip(_WINDOW_SCHEMA.names, row, strict=True):
                windows[name].append(value)
        if len(members["pos"]) >= _BATCH_ROWS:
            flush()
    flush()
    bar.close()
    return found


def item_groups(
    cfg: BuildConfig, domain: str, item: str, cands: list[Candidate]
) -> list[tuple[str, str, Choice]]:
    """The groups of one item as ``(group key, level, choice)``: the paper's one 5-user group (key = the
    item, level ``full``), or with ``--preset large`` the user-disjoint groups of each level (key
    ``<item>:<level>-<n>``), each level with its own random stream."""
    if cfg.preset == "paper":
        choice = find_group(
            cands,
            window_ms=cfg.window_ms,
            min_gap=cfg.min_gap,
            group_size=cfg.group_size,
            rng=item_rng(cfg.seed, domain, item),
        )
        return [] if choice is None else [(item, "full", choice)]
    out = []
    for level, size in cfg.level_sizes().items():
        drawn = find_groups(
            cands,
            window_ms=cfg.window_ms,
            min_gap=cfg.min_gap,
            group_size=size,
            rng=item_rng(cfg.seed, domain, f"{item}:{level}"),
            max_groups=cfg.max_groups_per_item,
        )
        out += [(f"{item}:{level}-{n}", level, choice) for n, choice in enumerate(drawn)]
    return out


_CHOSEN_SCHEMA = pa.schema(
    [
        ("parent_asin", pa.string()),
        ("gkey", pa.string()),
        ("level", pa.string()),
        ("pos", pa.int32()),
        ("user_id", pa.string()),
        ("ts", pa.int64()),
        ("rel", pa.float64()),
        ("rating", pa.float64()),
        ("avg", pa.float64()),
    ]
)
_WINDOW_SCHEMA = pa.schema(
    [
        ("gkey", pa.string()),
        ("candidates", pa.int32()),
        ("rel_sum", pa.float64()),
        ("negatives", pa.int32()),
        ("valid_groups", pa.float64()),
        ("item_candidates", pa.int32()),
        ("item_rel_sum", pa.float64()),
        ("item_negatives", pa.int32()),
    ]
)
INDEX_SCHEMA = pa.schema(
    [
        ("group_id", pa.string()),
        ("domain", pa.string()),
        ("user_ids", pa.list_(pa.string())),
        ("timestamps", pa.list_(pa.int64())),
        ("window_candidates", pa.int32()),
        ("window_rel_sum", pa.float64()),
        ("window_negatives", pa.int32()),
        ("window_valid_groups", pa.float64()),
        ("item_candidates", pa.int32()),
        ("item_rel_sum", pa.float64()),
        ("item_negatives", pa.int32()),
        ("parent_asin", pa.string()),
        ("level", pa.string()),  # full (paper preset) or easy/medium/hard (large preset)
        ("twins_removed", pa.int64()),  # history rows removed as twins of the query item
        ("twin_users", pa.int64()),  # members who had at least one
    ]
)
