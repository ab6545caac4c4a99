"""Arrow assembly of the chosen groups into nested rows: the stage file, and the published parquet files.

:func:`write_groups` reads what :mod:`dataset_builder.perrecbench.selection` left in the DuckDB connection
(the tables ``chosen``, ``act`` and ``meta``) as three sorted Arrow streams and assembles each group's nested
row (query, users, histories) with Arrow offsets into a stage file (read back by :func:`read_stage`).
:func:`write_configs` streams the stage files into the config × split parquet files
(:class:`RowGroupWriter`: content-fixed row groups). Every file is written through
:func:`perrec_eval.fileio.atomic_open`, so it is whole or absent. No history row becomes a Python object:
what Python holds per group is its index row; histories stay in Arrow buffers (two batches at a time).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataset_builder.config import BuildError
from dataset_builder.perrecbench.config import AvgScope, BuildConfig
from dataset_builder.perrecbench.levels import level_tables
from dataset_builder.perrecbench.schema import ARROW_SCHEMA, CONFIGS
from dataset_builder.perrecbench.stats import LeakCounts, SplitFigures
from dataset_builder.perrecbench.twins import author_key, title_key
from perrec_eval import progress
from perrec_eval.fileio import atomic_open

_BATCH_ROWS = 200_000
_WRITE_BATCH = 256  # groups per Arrow batch when cutting the levels


def write_groups(
    con: duckdb.DuckDBPyConnection, domain: str, avg_scope: AvgScope, path: Path, *, keep_twins: bool = True
) -> int:
    """Stream the domain's group rows, ordered by ``group_id``, into a stage file: uncompressed Arrow IPC,
    written once per selection and read once per build (:func:`read_stage`), so nothing is encoded or
    decoded (writing and reading back every group of 1.5M synthetic reviews took 0.03 s of CPU, against
    0.33–0.5 s for zstd parquet, for a file ≈ 8× larger: ``benchmarks/RESULTS.md``).

    A group is a key of ``chosen`` (``gkey``: the item for the paper preset, ``<item>:<level>-<n>`` for the
    large one); its row's ``level`` is ``chosen.level`` (``full`` for the paper preset).

    Three sorted DuckDB streams are read in lockstep (each on its own cursor): the groups (query metadata,
    window start), their users (search order, i.e. by relative rating) and the users' histories flattened
    (every review strictly before the query review, oldest first, ties by ``parent_asin``). The nested
    rows are assembled from them with Arrow offsets, a few thousand groups at a time, so no history row
    becomes a Python object and memory stays at a few batches beyond DuckDB's limit.

    ``most_common_rating`` is the mode of the history (of all the user's reviews with ``--avg-scope all``),
    equal counts going to the value that occurs first in that chronological list — the rule of
    :func:`groups.most_common_rating`.

    Unless ``keep_twins``, a history row whose item is the query item under another id
    (:func:`dataset_builder.perrecbench.twins.are_twins`) is left out; the table ``twin_counts`` (per group:
    rows removed, members concerned) records what was. The user's average and most common rating still count
    it (they are the user's own earlier ratings, and the selection stays the paper's).

    Args:
        con: the connection holding the selection's tables ``chosen`` (the chosen users, by group key and
            search position), ``act`` (the reviews of active users) and ``meta`` (item metadata).
        domain: the category, the prefix of every ``group_id``.
        avg_scope: ``history`` or ``all``: the reviews the most common rating is taken over.
        path: the stage file to write (whole or absent; just the schema when there is no group).
        keep_twins: keep twins of the query item in the histories (the paper's behaviour).

    Returns:
        The number of groups written.
    """
    # Each chosen user (a member: group key and search position) numbered in the rows' order, and every
    # review of theirs before their query review, once (twins of the query included: the mode counts them).
    con.sql("""
        CREATE OR REPLACE TABLE members AS
        SELECT gkey, pos, user_id, ts, row_number() OVER (ORDER BY gkey, pos) - 1 AS m FROM chosen""")
    con.sql("""
        CREATE OR REPLACE TABLE earlier AS
        SELECT b.m, a.parent_asin, a.ts, a.rating
        FROM members b JOIN act a ON a.user_id = b.user_id AND a.ts < b.ts""")
    reviews = "earlier" if avg_scope == "history" else (
        "(SELECT b.m, a.parent_asin, a.ts, a.rating FROM members b JOIN act a ON a.user_id = b.user_id)"
    )  # fmt: skip
    con.sql(f"""
        CREATE OR REPLACE TABLE modes AS
        SELECT b.gkey, b.pos, o.rating AS mode
        FROM (SELECT *, row_number() OVER (PARTITION BY m ORDER BY n DESC, first) AS r
              FROM (SELECT m, rating, count(*) AS n, min({{'ts': ts, 'item': parent_asin}}) AS first
                    FROM {reviews} GROUP BY m, rating)) o
        JOIN members b USING (m)
        WHERE o.r = 1""")
    _find_twins(con, keep_twins)
    escaped = domain.replace("'", "''")
    groups = _Stream(
        con.cursor(),
        f"""SELECT '{escaped}:' || g.gkey AS group_id, '{escaped}' AS domain, g.level,
                   {{'parent_asin': m.parent_asin, 'title': m.title, 'author': m.author,
                     'main_category': m.main_category, 'average_rating': m.average_rating,
                     'rating_number': m.rating_number}} AS query,
                   g.window_start, g.gkey AS _key
            FROM (SELECT gkey, any_value(parent_asin) AS parent_asin, any_value(level) AS level,
                         min(ts) AS window_start FROM chosen GROUP BY gkey) g
            JOIN meta m USING (parent_asin)
            ORDER BY g.gkey""",
    )
    users = _Stream(
        con.cursor(),
        """SELECT c.user_id, c.rating, c.ts AS timestamp, c.avg AS avg_rating,
                  coalesce(o.mode, 'NaN'::DOUBLE) AS most_common_rating, c.rel AS relative_rating,
                  c.gkey AS _key, c.pos AS _pos
           FROM chosen c LEFT JOIN modes o USING (gkey, pos)
           ORDER BY c.gkey, c.pos""",
    )
    history = _histories(con)
    pending: pa.Table | None = None
    rows = 0
    with atomic_open(path, "wb") as handle, pa.ipc.new_file(handle, ARROW_SCHEMA) as writer:
        for table in history:
            pending = table if pending is None else pa.concat_tables([pending, table])
            keys = pending.column("_key")
            # Rows of the last item may continue in the next batch; everything before it is complete.
            cut = pc.index(keys, keys[-1]).as_py()
            if cut:
                rows += _write(writer, _assemble(pending.slice(0, cut), users, groups))
                pending = pending.slice(cut)
        if pending is not None and pending.num_rows:
            rows += _write(writer, _assemble(pending, users, groups))
        if users.take(1).num_rows or groups.take(1).num_rows:
            raise RuntimeError("internal error: a chosen user without history rows")
    return rows


def _histories(con: duckdb.DuckDBPyConnection) -> Iterator[pa.Table]:
    """The members' history rows (``_key, _pos, parent_asin, title, author, rating, timestamp``) in the
    rows' order: by group key, position, time, then ``parent_asin``, twins of the query left out.

    Sorted on integers only (the member's number, the time, the item's place in ``parent_asin`` order), the
    item's id, title and author taken afterwards from a table of the distinct history items: a member's
    reviews are read once, and no title or author string is moved by the sort.
    """
    con.sql("""
        CREATE OR REPLACE TABLE history AS
        SELECT e.* FROM earlier e
        WHERE NOT EXISTS (SELECT 1 FROM twin_rows t JOIN members b USING (gkey, pos)
                          WHERE b.m = e.m AND t.parent_asin = e.parent_asin)""")
    con.sql("""
        CREATE OR REPLACE TABLE history_items AS
        SELECT parent_asin, row_number() OVER (ORDER BY parent_asin) - 1 AS k
        FROM (SELECT DISTINCT parent_asin FROM history)""")
    items = con.sql("""
        SELECT i.parent_asin, m.title, m.author FROM history_items i LEFT JOIN meta m USING (parent_asin)
        ORDER BY i.k""").to_arrow_table()
    members = con.sql("SELECT gkey, pos FROM members ORDER BY m").to_arrow_table()
    reader = (
        con.cursor()
        .sql("""SELECT h.m, i.k, h.rating, h.ts FROM history h JOIN history_items i USING (parent_asin)
                ORDER BY h.m, h.ts, i.k""")
        .to_arrow_reader(_BATCH_ROWS)
    )
    for batch in reader:
        m, k = batch.column("m"), batch.column("k")
        yield pa.table(
            {
                "_key": members.column("gkey").take(m),
                "_pos": members.column("pos").take(m),
                "parent_asin": items.column("parent_asin").take(k),
                "title": items.column("title").take(k),
                "author": items.column("author").take(k),
                "rating": batch.column("rating"),
                "timestamp": batch.column("ts"),
            }
        )


def _write(writer: pa.ipc.RecordBatchFileWriter, table: pa.Table) -> int:
    writer.write_table(table.cast(ARROW_SCHEMA))
    return table.num_rows


def _find_twins(con: duckdb.DuckDBPyConnection, keep_twins: bool) -> None:
    """The tables ``twin_rows`` (gkey, pos, parent_asin: history rows to leave out) and ``twin_counts``
    (gkey, removed, users); both empty with ``keep_twins``.

    Twins share a title key, so only history items whose key equals the query's are compared (one Python
    key per distinct item of the chosen users' histories and the queries, computed in the ``twin_keys``
    table).
    """
    con.sql("CREATE OR REPLACE TABLE twin_rows (gkey VARCHAR, pos INTEGER, parent_asin VARCHAR)")
    con.sql("CREATE OR REPLACE TABLE twin_counts (gkey VARCHAR, removed BIGINT, users BIGINT)")
    if keep_twins:
        return
    items = con.sql("""
        SELECT parent_asin, title, author FROM meta WHERE parent_asin IN (
            SELECT parent_asin FROM chosen UNION SELECT parent_asin FROM earlier)
        ORDER BY parent_asin""").fetchall()
    keys = pa.table(
        {
            "parent_asin": [asin for asin, _, _ in items],
            "tkey": [title_key(title) for _, title, _ in items],
            "akey": [author_key(author) for _, _, author in items],
        }
    )
    con.register("twin_keys_view", keys)
    con.sql("CREATE OR REPLACE TABLE twin_keys AS SELECT * FROM twin_keys_view WHERE tkey <> ''")
    con.unregister("twin_keys_view")
    con.sql("""
        INSERT INTO twin_rows
        SELECT c.gkey, c.pos, e.parent_asin
        FROM chosen c JOIN members b USING (gkey, pos) JOIN twin_keys q ON q.parent_asin = c.parent_asin
        JOIN earlier e ON e.m = b.m AND e.parent_asin <> c.parent_asin
        JOIN twin_keys h ON h.parent_asin = e.parent_asin AND h.tkey = q.tkey
        WHERE q.akey = '' OR h.akey = '' OR q.akey = h.akey""")
    con.sql("""
        INSERT INTO twin_counts
        SELECT gkey, count(*), count(DISTINCT pos) FROM twin_rows GROUP BY gkey""")
    emptied = con.sql("""
        SELECT t.gkey, count(*) AS n FROM twin_rows t JOIN chosen c USING (gkey, pos)
        GROUP BY t.gkey, t.pos, c.user_id, c.ts
        HAVING n = (SELECT count(*) FROM act a WHERE a.user_id = c.user_id AND a.ts < c.ts)
        LIMIT 1""").fetchall()
    if emptied:
        raise BuildError(
            f"a member of group {emptied[0][0]} has only twins of the query item before it (possible with a "
            "small --min-history): raise --min-history or pass --keep-twins"
        )


class _Stream:
    """Rows of a DuckDB query, handed out ``n`` at a time (in the query's order)."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, sql: str) -> None:
        self._reader = cursor.sql(sql).to_arrow_reader(_BATCH_ROWS)
        self._buffer: list[pa.Table] = []
        self._rows = 0

    def take(self, n: int) -> pa.Table:
        """The next ``n`` rows (fewer at the end)."""
        while self._rows < n:
            try:
                batch = self._reader.read_next_batch()
            except StopIteration:
                break
            self._buffer.append(pa.Table.from_batches([batch]))
            self._rows += batch.num_rows
        if not self._buffer:
            return pa.table({})  # (slicing a column-less table would invent rows)
        table = pa.concat_tables(self._buffer)
        head, rest = table.slice(0, n), table.slice(n)
        self._buffer = [rest] if rest.num_rows else []
        self._rows = rest.num_rows
        return head


def _starts(*columns: pa.ChunkedArray) -> np.ndarray:
    """Indices where the tuple of the (sorted) key columns changes, starting with 0."""
    length = len(columns[0])
    change = np.zeros(length, dtype=bool)
    change[0] = True
    for column in columns:
        array = column.combine_chunks()
        change[1:] |= pc.not_equal(array.slice(1), array.slice(0, length - 1)).to_numpy(zero_copy_only=False)
    return np.flatnonzero(change)


def _assemble(flat: pa.Table, users: _Stream, groups: _Stream) -> pa.Table:
    """Complete groups' nested rows from their flat history rows and the matching user and group rows."""
    user_starts = _starts(flat.column("_key"), flat.column("_pos"))
    members = users.take(len(user_starts))
    first = flat.take(pa.array(user_starts))
    if not (
        members.column("_key").equals(first.column("_key"))
        and members.column("_pos").equals(first.column("_pos"))
    ):
        raise RuntimeError("internal error: users and histories are out of step")
    fields = ("parent_asin", "title", "author", "rating", "timestamp")
    entries = pa.StructArray.from_arrays(
        [flat.column(f).combine_chunks() for f in fields], names=list(fields)
    )
    offsets = pa.array(np.append(user_starts, flat.num_rows), pa.int32())
    user_fields = ("user_id", "rating", "timestamp", "avg_rating", "most_common_rating", "relative_rating")
    user_structs = pa.StructArray.from_arrays(
        [members.column(f).combine_chunks() for f in user_fields]
        + [pa.ListArray.from_arrays(offsets, entries)],
        names=[*user_fields, "history"],
    )
    group_starts = _starts(members.column("_key"))
    rows = groups.take(len(group_starts))
    if not rows.column("_key").equals(members.column("_key").take(pa.array(group_starts))):
        raise RuntimeError("internal error: groups and users are out of step")
    group_offsets = pa.array(np.append(group_starts, members.num_rows), pa.int32())
    return rows.drop_columns(["_key"]).append_column(
        "users", pa.ListArray.from_arrays(group_offsets, user_structs)
    )


def read_stage(path: Path, rows: int) -> Iterator[pa.Table]:
    """A stage file's rows, ``rows`` at a time at most, in order.

    Batches are read into memory one at a time (a memory map would keep every page read in the resident
    set until the file is closed).
    """
    with pa.OSFile(str(path)) as source:
        reader = pa.ipc.open_file(source)
        for i in range(reader.num_record_batches):
            batch = reader.get_batch(i)
            for offset in range(0, batch.num_rows, rows):
                yield pa.Table.from_batches([batch.slice(offset, rows)])


class RowGroupWriter:
    """A parquet writer with the published schema whose row groups hold exactly ``rows_per_group`` rows.

    Row-group boundaries thus depend only on the content (not on how batches arrived), so the same rows
    give the same bytes. At most one row group of rows is buffered. The rows go to a temp file (opened on
    the first non-empty write) that :meth:`close` moves to ``path``; used as a context manager, an error
    inside the block drops the temp file instead, so ``path`` is whole or absent.
    """

    def __init__(self, path: Path, rows_per_group: int = 256) -> None:
        self.path = path
        self.rows_per_group = rows_per_group
        self.rows = 0
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._writer: pq.ParquetWriter | None = None
        self._file = contextlib.ExitStack()

    def write(self, table: pa.Table) -> None:
        """Add rows (any schema castable to :data:`ARROW_SCHEMA`)."""
        if table.num_rows == 0:
            return
        self._pending.append(table.cast(ARROW_SCHEMA))
        self._pending_rows += table.num_rows
        self.rows += table.num_rows
        while self._pending_rows >= self.rows_per_group:
            self._flush(self.rows_per_group)

    def _flush(self, n: int) -> None:
        buffered = pa.concat_tables(self._pending)
        if self._writer is None:
            handle = self._file.enter_context(atomic_open(self.path, "wb"))
            self._writer = pq.ParquetWriter(handle, ARROW_SCHEMA, compression="zstd")
            self._file.callback(self._writer.close)  # the footer is written before the file moves in
        self._writer.write_table(buffered.slice(0, n), row_group_size=n)
        rest = buffered.slice(n)
        self._pending = [rest] if rest.num_rows else []
        self._pending_rows = rest.num_rows

    def close(self) -> None:
        """Write the last, shorter row group and move the file into place (nothing is created for no rows)."""
        if self._pending_rows:
            self._flush(self._pending_rows)
        self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.close()
        else:  # drop the temp file (`perrec_eval.fileio.atomic_open`)
            self._file.__exit__(exc_type, exc, tb)


def write_configs(
    folder: Path,
    cfg: BuildConfig,
    splits: dict[str, list[str]],
    results: dict[str, dict[str, Any]],
    figures: dict[str, SplitFigures],
    leaks: dict[str, LeakCounts],
) -> dict[str, dict[str, str]]:
    """Stream every domain's stage file once, in ``group_id`` order, into the config × split files (groups
    the split rule dropped are not written); the statistics count the same ``full`` rows on the way.

    The stage files are read in Arrow batches of ``_WRITE_BATCH`` groups; each batch is cut into the levels
    once (:func:`dataset_builder.perrecbench.levels.level_tables`) and a thread pool encodes and compresses
    the eight files (zstd, the only compression of the build) and counts the statistics (pyarrow releases the
    GIL) while this thread prepares the next batch. Every writer (and the statistics) gets one task per batch
    and a batch is handed out only when the previous one is done, so each file receives its rows in order and
    the bytes do not depend on the scheduling; no written file is read back.

    Returns:
        ``{config: {split: path relative to folder}}`` of the files written.
    """
    split_of = {gid: name for name, ids in splits.items() for gid in ids}
    # Rows are ordered by group_id = "<domain>:<item>": domains by that prefix, items within the stage file.
    domains = sorted(cfg.domains, key=lambda d: f"{d}:")
    workers = min(len(splits) * len(CONFIGS), cfg.threads or os.cpu_count() or 1)
    total = sum(results[d]["groups"] for d in domains)
    with (
        contextlib.ExitStack() as files_open,
        progress.bar(total=total, desc="  write configs", unit="group", leave=False) as bar,
    ):
        writers = {
            (name, label): files_open.enter_context(RowGroupWriter(folder / f".{name}-{label}.parquet"))
            for label in splits
            for name in CONFIGS
        }
        # Entered last, so it is shut down (its writes finished) before the files are closed or dropped.
        pool = files_open.enter_context(ThreadPoolExecutor(max_workers=workers))
        writing: list[Future[None]] = []
        for domain in domains:
            if not results[domain]["groups"]:
                continue
            for table in read_stage(results[domain]["groups_path"], _WRITE_BATCH):
                labels = pa.array(
                    [split_of.get(g) for g in table.column("group_id").to_pylist()], pa.string()
                )
                parts: dict[str, dict[str, pa.Table]] = {}
                for label in splits:
                    part = table.filter(pc.equal(labels, label))
                    if part.num_rows:
                        parts[label] = level_tables(part, cfg.seed, cfg.preset)
                for done in writing:
                    done.result()
                writing = [
                    pool.submit(writers[(name, label)].write, rows)
                    for label, levels in parts.items()
                    for name, rows in levels.items()
                ]
                writing.append(pool.submit(_count, parts, figures, leaks))
                bar.update(table.num_rows)
        for done in writing:
            done.result()
    files: dict[str, dict[str, str]] = {}
    for (name, label), writer in writers.items():
        if writer.rows:
            # Content-hashed names: datasets serves a stale cache for a rewritten file name (PITFALLS 1).
            relative = f"{name}/{label}-{file_sha256(writer.path)[:12]}.parquet"
            (folder / name).mkdir(exist_ok=True)
            writer.path.replace(folder / relative)
            files.setdefault(name, {})[label] = relative
    return {name: files[name] for name in CONFIGS if name in files}


def _count(
    parts: dict[str, dict[str, pa.Table]], figures: dict[str, SplitFigures], leaks: dict[str, LeakCounts]
) -> None:
    """Feed one batch's ``full`` rows of each split to the statistics, and each leak count its config's."""
    for label, levels in parts.items():
        figures[label].add(levels["full"])
        for name, counts in leaks.items():
            if name in levels:
                counts.add(label, levels[name])


def file_sha256(path: Path) -> str:
    """The hex sha256 of a file's bytes."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
