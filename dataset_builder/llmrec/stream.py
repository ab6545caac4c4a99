"""LLMRec's rows made and written as they go: one domain at a time, whole users a chunk at a time, Arrow
tables into parquet files a row group at a time.

A domain's stage file holds its k-core interactions in each user's order (``user_id, ts, parent_asin``)
with the item's index in the sorted catalogue and the review's title and text. It is read in chunks of
about `CHUNK` interactions cut at user boundaries (`user_chunks`); each chunk's rows are made in numpy and
Arrow (histories are slices of the chunk, candidates index the catalogue) and handed to one `Sink` per
config and split, which writes a row group each time `ROW_GROUP` rows are waiting. Memory therefore follows
a chunk and the rows waiting per sink, not the build. The only Python loops per row are the ones the
protocol asks for: each row's own generator of candidates (`splits.row_rng`, the same draws as before) and
the text tasks' extraction (`text.review_targets`).

Files: the rows and their order are those of the whole-table writer this replaces; a file of at most
`ROW_GROUP` rows and `ROW_GROUP_BYTES` (in Arrow) is byte for byte the same (one row group), a larger one
holds the same rows in row groups of at most `ROW_GROUP` rows (the whole-table writer cut them at
1,048,576).
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataset_builder.llmrec.config import BuildConfig
from dataset_builder.llmrec.splits import SPLITS, row_rng
from dataset_builder.llmrec.text import TEXT_CONFIGS, document_frequency, ranked_vocabulary, review_targets

CHUNK = 4096  # interactions read at a time (whole users: a longer user's chunk grows to hold them)
ROW_GROUP = 32_768  # rows per parquet row group; a file with fewer is one row group, as before
ROW_GROUP_BYTES = 24 * 2**20  # or fewer rows, once those waiting hold this much (long histories, texts)

_TEST, _VALIDATION, _TRAIN, _NONE = 2, 1, 0, -1
SPLIT_CODES = {"train": _TRAIN, "validation": _VALIDATION, "test": _TEST}
_HISTORY_FIELDS = ("parent_asin", "title", "rating", "timestamp")
_ROWS = ("user_id", "parent_asin", "ts", "rating", "title", "item")
_TEXTS = ("review_title", "review_text")


def user_chunks(path: Path, columns: list[str], size: int = CHUNK) -> Iterator[pa.Table]:
    """The rows of a parquet file sorted by ``user_id`` as tables of whole users, about `size` rows each."""
    carry: pa.Table | None = None
    for batch in pq.ParquetFile(path).iter_batches(batch_size=size, columns=columns):
        table = pa.table(batch) if carry is None else pa.concat_tables([carry, pa.table(batch)])
        users = table["user_id"]
        last = pc.equal(users, users[-1]).to_numpy(zero_copy_only=False)
        cut = int(np.argmax(last))  # the last user's first row: held back until its rows are complete
        if cut == 0:
            carry = table
            continue
        yield table.slice(0, cut)
        carry = table.slice(cut)
    if carry is not None and carry.num_rows:
        yield carry


@dataclass(slots=True)
class Chunk:
    """Whole users' interactions in the build's order (the `--ties` rule applied), as arrays."""

    table: pa.Table
    users: list[str]  # the chunk's users, in order
    user: np.ndarray  # per row: its user's index in `users`
    start: np.ndarray  # per row: the index of its user's first row
    pos: np.ndarray  # per row: its position in its user's sequence
    size: np.ndarray  # per row: its user's number of items
    ts: np.ndarray
    tied: np.ndarray  # per row: it has the time of the item before it (position >= 1)

    @classmethod
    def of(cls, table: pa.Table) -> Chunk:
        users = table["user_id"].combine_chunks()
        n = len(users)
        change = pc.not_equal(users.slice(1), users.slice(0, n - 1)).to_numpy(zero_copy_only=False)
        starts = np.concatenate([[0], np.flatnonzero(change) + 1]).astype(np.int64)
        lengths = np.diff(np.append(starts, n))
        user = np.repeat(np.arange(len(starts)), lengths)
        start = starts[user]
        ts = table["ts"].to_numpy()
        pos = np.arange(n) - start
        tied = np.zeros(n, dtype=bool)
        tied[1:] = (ts[1:] == ts[:-1]) & (pos[1:] > 0)
        names = users.take(pa.array(starts)).to_pylist()
        return cls(table, names, user, start, pos, lengths[user], ts, tied)


def ordered(table: pa.Table, cfg: BuildConfig) -> tuple[Chunk | None, dict[str, int]]:
    """A chunk in the build's order under ``cfg.ties`` (None: every user left out), and its ties
    (`count_ties`).

    ``asin`` keeps the stage's order (equal times by ``parent_asin``), ``random`` orders equal times of a
    user by a hash of the seed, the user and the item, ``drop`` leaves out every user whose last item has the
    time of the one before it (counted before they are left out, with ``dropped_users``).
    """
    chunk = Chunk.of(table)
    if cfg.ties == "random" and chunk.tied.any():
        grouped = chunk.tied | np.append(chunk.tied[1:], False)  # the rows of a group of equal times
        key = np.zeros(len(chunk.ts), dtype=np.uint64)
        asins = table["parent_asin"].to_pylist()
        for i in np.flatnonzero(grouped):
            digest = hashlib.sha256(f"{cfg.seed}:{chunk.users[chunk.user[i]]}:{asins[i]}".encode()).digest()
            key[i] = int.from_bytes(digest[:8], "big")
        order = np.lexsort((key, chunk.ts, chunk.user))
        chunk = Chunk.of(table.take(pa.array(order)))
    counts = count_ties(chunk, cfg)
    if cfg.ties == "drop":
        last = np.flatnonzero(chunk.pos == chunk.size - 1)
        dropped = chunk.tied[last]
        counts["dropped_users"] = int(dropped.sum())
        if dropped.any():
            keep = ~dropped[chunk.user]
            chunk = Chunk.of(chunk.table.filter(pa.array(keep))) if keep.any() else None
    return chunk, counts


def split_codes(chunk: Chunk, cfg: BuildConfig) -> np.ndarray:
    """Per row, the split of the row asking about it (`SPLIT_CODES`; -1: no row), as `splits.split_of` and
    `splits.Cuts.split` decide."""
    if cfg.split == "last_out":
        codes = np.full(len(chunk.pos), _TRAIN)
        codes[chunk.pos == chunk.size - 2] = _VALIDATION
        codes[chunk.pos == chunk.size - 1] = _TEST
    else:
        later = np.where(chunk.ts >= cfg.valid_from, _VALIDATION, _TRAIN)
        codes = np.where(chunk.ts >= cfg.test_from, _TEST, later)
    codes[chunk.pos == 0] = _NONE
    return codes


def train_mask(chunk: Chunk, cfg: BuildConfig) -> np.ndarray:
    """Per row, whether it is a train interaction (`splits.train_items`)."""
    if cfg.split == "last_out":
        return chunk.pos < chunk.size - 2
    return chunk.ts < cfg.valid_from


def count_ties(chunk: Chunk, cfg: BuildConfig) -> dict[str, int]:
    """Validation and test targets, and those with the time of the item before them (a history item)."""
    codes = split_codes(chunk, cfg)
    out = {}
    for split in ("validation", "test"):
        target = codes == SPLIT_CODES[split]
        out[f"{split}_targets"] = int(target.sum())
        out[f"{split}_tied"] = int((target & chunk.tied).sum())
    return out


def _history(chunk: Chunk, rows: np.ndarray, length: int, values: pa.StructArray) -> pa.Array:
    """Each row's history: the `length` items of its user before it, oldest first."""
    first = np.maximum(chunk.start[rows], rows - min(length, len(chunk.pos)))  # a huge length: all before
    sizes = rows - first
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
    index = np.repeat(first - offsets[:-1], sizes) + np.arange(offsets[-1])
    return pa.ListArray.from_arrays(pa.array(offsets), values.take(pa.array(index)))


@dataclass(slots=True)
class Catalogue:
    """A domain's items in `parent_asin` order, and what the candidates are drawn with."""

    asins: pa.Array
    weights: np.ndarray | None  # popularity sampling: 1 + each item's train interactions (int64)
    vocabulary: dict[str, int] | None  # the text tasks' feature vocabulary (None: no text tasks)
    cumulative: np.ndarray | None = None  # 0, then the running sums of `weights` (int64)


_LOW_BITS = np.uint64(27)  # x * 2**53 split into 26 high and 27 low bits: every product fits in 64 bits
_MAX_TOTAL = 2**37


def _floor_times(x: np.ndarray, total: int) -> np.ndarray:
    """``floor(x * total)`` exactly, for numpy's uniform doubles ``x`` (each ``k / 2**53``, k an integer
    below 2**53) and an integer ``total`` below 2**37: ``(k * total) >> 53`` in 64-bit pieces.

    >>> _floor_times(np.array([0.0, 0.5, 1 - 2**-53]), 10).tolist()
    [0, 5, 9]
    """
    k = (x * 2.0**53).astype(np.uint64)
    t = np.uint64(total)
    high = (k >> _LOW_BITS) * t  # < 2**63
    low = (k & np.uint64((1 << 27) - 1)) * t  # < 2**64
    return ((high + (low >> _LOW_BITS)) >> np.uint64(26)).astype(np.int64)


def weighted_draw(
    rng: np.random.Generator, count: int, cumulative: np.ndarray, weights: np.ndarray, excluded: np.ndarray
) -> np.ndarray:
    """`count` distinct catalogue indices outside `excluded` (sorted), drawn in proportion to the integer
    `weights` of the items left, in draw order.

    These are the draws of numpy's ``Generator.choice(len(pool), count, replace=False, p=pool_weights /
    pool_weights.sum())`` over the pool of the items outside `excluded` (each round: ``rng.random`` for the
    draws still missing, the items already drawn given weight 0, each draw the first item whose running
    share exceeds it, repeats kept once), mapped to the catalogue; computed on exact integer running sums
    instead of a float cumulative sum of the pool, so a draw lands where numpy's lands unless numpy's
    rounding moved an item's boundary past it, and without making the pool: the work and memory of a draw
    follow `excluded` and `count`, never the catalogue (`cumulative`, the catalogue's running sums, is made
    once per domain).

    >>> weights, excluded = np.array([1, 1, 5, 1, 1, 1, 9]), np.array([0, 2])
    >>> pool = np.array([1, 3, 4, 5, 6])  # the items outside `excluded`
    >>> p = weights[pool] / weights[pool].sum()
    >>> numpy = pool[np.random.default_rng(0).choice(len(pool), 3, replace=False, p=p)]
    >>> cumulative = np.concatenate([[0], np.cumsum(weights)])
    >>> drawn = weighted_draw(np.random.default_rng(0), 3, cumulative, weights, excluded)
    >>> drawn.tolist(), drawn.tolist() == numpy.tolist()
    ([6, 5, 1], True)
    """
    total = int(cumulative[-1])
    if total >= _MAX_TOTAL:
        raise ValueError(f"popularity weights summing to {total:,} (at most {_MAX_TOTAL:,})")
    found = np.empty(0, dtype=np.int64)
    while found.size < count:
        x = rng.random(count - found.size)
        gone = np.union1d(excluded, found)
        removed = np.concatenate([[0], np.cumsum(weights[gone])])  # weight gone before each segment
        draws = _floor_times(x, total - int(removed[-1]))
        # the pool's running sum where each segment between gone items ends, then the item in that segment
        ends = cumulative[np.append(gone, len(weights))] - removed
        shift = removed[np.searchsorted(ends, draws, side="right")]
        new = np.searchsorted(cumulative, draws + shift, side="right") - 1
        first = np.unique(new, return_index=True)[1]
        first.sort()
        found = np.concatenate([found, new[first]])
    return found


def catalogue(cfg: BuildConfig, interactions: Path, items: Path, texts: bool) -> Catalogue:
    """The domain's catalogue, with what the rows need from a first pass over its train interactions
    (popularity counts, the feature vocabulary), read a chunk at a time."""
    asins = pq.read_table(items, columns=["parent_asin"])["parent_asin"].combine_chunks()
    popular = cfg.negative_sampling == "popularity"
    if not popular and not texts:
        return Catalogue(asins, None, None)
    counts = np.zeros(len(asins), dtype=np.int64)
    frequency: Counter = Counter()
    columns = ["user_id", "ts", "parent_asin", "item", *(["review_text"] if texts else [])]
    for table in user_chunks(interactions, columns):
        chunk, _ = ordered(table, cfg)
        if chunk is None:
            continue
        train = train_mask(chunk, cfg)
        if popular:
            counts += np.bincount(chunk.table["item"].to_numpy()[train], minlength=len(asins))
        if texts:
            reviews = chunk.table["review_text"].filter(pa.array(train)).to_pylist()
            document_frequency((text or "" for text in reviews), into=frequency)
    weights = 1 + counts if popular else None
    vocabulary = ranked_vocabulary(frequency) if texts else None
    cumulative = np.concatenate([[0], np.cumsum(weights)]) if weights is not None else None
    return Catalogue(asins, weights, vocabulary, cumulative)


def _candidates(
    chunk: Chunk, rows: np.ndarray, ids: list[str], cat: Catalogue, cfg: BuildConfig
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's candidates (catalogue indices) and its target's position: the draws of
    `splits.candidates` with `splits.row_rng`, on indices. The pool of a user's unreviewed items is never
    made: a uniform draw's index among them is mapped to the catalogue, a popularity draw is made on the
    catalogue's running sums less the user's items (`weighted_draw`), so a user costs what their items do,
    not what the catalogue does."""
    item = chunk.table["item"].to_numpy().astype(np.int64)
    width = cfg.negatives + 1
    out = np.empty((len(rows), width), dtype=np.int64)
    at = np.empty(len(rows), dtype=np.int64)
    listed = np.empty(width, dtype=np.int64)  # the drawn negatives, then the target
    current, pool_size = -1, 0
    excluded = shift = np.empty(0, dtype=np.int64)
    for k, row in enumerate(rows.tolist()):
        if chunk.user[row] != current:
            current = chunk.user[row]
            first = chunk.start[row]
            excluded = np.sort(item[first : first + chunk.size[row]])
            shift = excluded - np.arange(len(excluded))
            pool_size = len(cat.asins) - len(excluded)
        rng = row_rng(cfg.seed, ids[k])
        if cat.weights is None:
            drawn = rng.choice(pool_size, size=cfg.negatives, replace=False)
            listed[: cfg.negatives] = drawn + shift.searchsorted(drawn, side="right")
        else:
            assert cat.cumulative is not None
            listed[: cfg.negatives] = weighted_draw(rng, cfg.negatives, cat.cumulative, cat.weights, excluded)
        listed[cfg.negatives] = item[row]
        order = rng.permutation(width)
        out[k] = listed[order]
        at[k] = (order == cfg.negatives).argmax()
    return out, at


def _candidate_array(drawn: np.ndarray, offset: int) -> pa.Array:
    """Each row's candidates as indices into every domain's catalogues (`Sinks.catalogue`): 4 bytes each
    while they wait to be written, the ids only in the row group being written."""
    width = drawn.shape[1]
    offsets = np.arange(0, drawn.size + 1, width, dtype=np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(drawn.ravel() + offset, pa.int32()))


@dataclass(slots=True)
class DomainCounts:
    """What one domain's rows left out or tied (the manifest's and card's accounting)."""

    ties: dict[str, int] = field(default_factory=Counter)
    text: dict[str, Counter] = field(default_factory=lambda: {name: Counter() for name in TEXT_CONFIGS})


def write_domain(
    cfg: BuildConfig, domain: str, interactions: Path, items: Path, texts: bool, sinks: Sinks
) -> DomainCounts:
    """Every config's rows of one domain, handed to `sinks` a chunk at a time (configs as in
    `builder.SCHEMAS`; sequential's rows are direct's without the candidates)."""
    cat = catalogue(cfg, interactions, items, texts)
    offset = sinks.catalogue(cat.asins)
    item_table = pq.read_table(items)
    sinks.add("items", "train", pa.table(
        {"domain": pa.array([domain] * item_table.num_rows, pa.string()),
         "parent_asin": item_table["parent_asin"], "title": item_table["title"]}
    ))  # fmt: skip
    del item_table
    counts = DomainCounts()
    columns = [*_ROWS, *(_TEXTS if texts else ())]
    for table in user_chunks(interactions, columns):
        chunk, ties = ordered(table, cfg)
        counts.ties.update(ties)
        if chunk is not None:
            _chunk_rows(cfg, domain, chunk, cat, offset, sinks, counts)
    return counts


def _chunk_rows(
    cfg: BuildConfig,
    domain: str,
    chunk: Chunk,
    cat: Catalogue,
    offset: int,
    sinks: Sinks,
    counts: DomainCounts,
) -> None:
    table = chunk.table
    n = table.num_rows
    label = pa.array([domain] * n, pa.string())
    rating = pc.cast(table["rating"], pa.float64()).combine_chunks()
    asin, title = table["parent_asin"].combine_chunks(), table["title"].combine_chunks()
    timestamp = pc.cast(table["ts"], pa.int64()).combine_chunks()
    user = table["user_id"].combine_chunks()
    train = train_mask(chunk, cfg)
    picked = pa.array(train)
    sinks.add("interactions", "train", pa.table(
        {"domain": label.filter(picked), "user_id": user.filter(picked), "parent_asin": asin.filter(picked),
         "rating": rating.filter(picked), "timestamp": timestamp.filter(picked)}
    ))  # fmt: skip
    values = pa.StructArray.from_arrays([asin, title, rating, timestamp], names=list(_HISTORY_FIELDS))
    codes = split_codes(chunk, cfg)
    if cat.vocabulary is not None:
        review_title = table["review_title"].to_pylist()
        review_text = table["review_text"].to_pylist()
    for split in SPLITS:
        rows = np.flatnonzero(codes == SPLIT_CODES[split])
        if not len(rows):
            continue
        picked = pa.array(rows)
        owners, positions = chunk.user[rows].tolist(), chunk.pos[rows].tolist()
        ids = [f"{domain}:{chunk.users[u]}:{p}" for u, p in zip(owners, positions, strict=True)]
        common = {
            "id": pa.array(ids, pa.string()),
            "domain": label.take(picked),
            "user_id": user.take(picked),
            "parent_asin": asin.take(picked),
            "title": title.take(picked),
            "timestamp": timestamp.take(picked),
            "history": _history(chunk, rows, cfg.history_length, values),
        }
        rated = rating.take(picked)
        sinks.add("rating", split, pa.table({**common, "rating": rated}))
        drawn, at = _candidates(chunk, rows, ids, cat, cfg)
        candidates = {
            "candidates": _candidate_array(drawn, offset),
            "target_position": pa.array(at, pa.int64()),
        }
        sinks.add("sequential", split, pa.table(common))  # the catalogue cell's rows: no candidates
        sinks.add("direct", split, pa.table({**common, **candidates}))
        if cat.vocabulary is not None:
            reviews = (review_title, review_text)
            _text_rows(cfg, chunk, split, rows, common, rated, reviews, train, cat, sinks, counts)


def _text_rows(
    cfg: BuildConfig,
    chunk: Chunk,
    split: str,
    rows: np.ndarray,
    common: dict[str, pa.Array],
    rated: pa.Array,
    reviews: tuple[list, list],
    train: np.ndarray,
    cat: Catalogue,
    sinks: Sinks,
    counts: DomainCounts,
) -> None:
    """The explanation and summarization rows of one split's rows of a chunk (`text.review_targets`)."""
    titles, texts = reviews
    item_titles = chunk.table["title"].to_pylist()
    kept: dict[str, tuple[list[int], list[dict[str, str]]]] = {name: ([], []) for name in TEXT_CONFIGS}
    for k, row in enumerate(rows.tolist()):
        first = chunk.start[row]
        history = item_titles[max(first, row - cfg.history_length) : row]
        earlier = None
        if split != "train":  # the user's earlier reviews: the train ones and those other rows ask about
            earlier = [
                part
                for q in range(first, row)
                if q > first or train[q]
                for part in (titles[q], texts[q])
                if part
            ]
        for name, result in review_targets(titles[row], texts[row], cat.vocabulary, earlier, history).items():
            if isinstance(result, str):
                counts.text[name][result] += 1
            else:
                kept[name][0].append(k)
                kept[name][1].append(result)
                counts.text[name][f"kept_{split}"] += 1
    for name, (index, made) in kept.items():
        if not index:
            continue
        picked = pa.array(index, pa.int64())
        base = {key: column.take(picked) for key, column in common.items()}
        if name == "explanation":
            extra = {"rating": rated.take(picked)}
            names: tuple[str, ...] = ("explanation", "feature")
        else:
            extra, names = {}, ("review_text", "summary")
        extra |= {key: pa.array([m[key] for m in made], pa.string()) for key in names}
        sinks.add(name, split, pa.table({**base, **extra}))


class Sink:
    """One config's split as a parquet file written a row group at a time, named by its content when done."""

    def __init__(
        self, folder: Path, config: str, split: str, schema: pa.Schema, names: pa.ChunkedArray | None = None
    ) -> None:
        self.folder, self.config, self.split, self.schema = folder, config, split, schema
        self.names = names  # the ids candidates index (`Sinks.catalogue`), or None: no candidates
        self.path = folder / config / f".{split}.partial.parquet"
        self.waiting: list[pa.Table] = []
        self.pending = 0  # rows waiting
        self.size = 0  # their bytes
        self.rows = 0
        self.writer: pq.ParquetWriter | None = None

    def add(self, table: pa.Table) -> None:
        if not table.num_rows:
            return
        table = table.select(self.schema.names)
        self.waiting.append(table if self.names is not None else table.cast(self.schema))
        self.pending += table.num_rows
        self.size += table.nbytes
        self.rows += table.num_rows
        while self.pending >= ROW_GROUP:
            self._flush(ROW_GROUP)
        if self.size >= ROW_GROUP_BYTES:
            self._flush(self.pending)

    def _flush(self, n: int) -> None:
        table = pa.concat_tables(self.waiting)
        if self.writer is None:
            self.path.parent.mkdir(exist_ok=True)
            self.writer = pq.ParquetWriter(self.path, self.schema)
        # one chunk per column, as a table made at once: the same pages, so the same bytes
        head = table.slice(0, n).combine_chunks()
        if self.names is not None:
            head = self._named(head)
        self.writer.write_table(head, row_group_size=n)
        rest = table.slice(n)
        self.waiting, self.pending, self.size = ([rest] if rest.num_rows else []), rest.num_rows, rest.nbytes

    def _named(self, table: pa.Table) -> pa.Table:
        """The table with its candidates' indices replaced by their ids."""
        assert self.names is not None
        lists = table["candidates"].combine_chunks()
        values = self.names.take(lists.flatten()).combine_chunks()
        offsets = np.concatenate([[0], np.cumsum(lists.value_lengths().to_numpy())]).astype(np.int32)
        named = pa.ListArray.from_arrays(pa.array(offsets), values)
        return table.set_column(table.schema.get_field_index("candidates"), "candidates", named).cast(
            self.schema
        )

    def finish(self) -> str | None:
        """Write what waits, close and name the file ``<config>/<split>-<sha12>.parquet``; None if empty."""
        if self.pending:
            self._flush(self.pending)
        if self.writer is None:
            return None
        self.writer.close()
        digest = hashlib.sha256()
        with self.path.open("rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
        name = f"{self.config}/{self.split}-{digest.hexdigest()[:12]}.parquet"
        os.replace(self.path, self.folder / name)
        return name


class Sinks:
    """A sink per config and split; `finish` gives the files and row counts in the configs' order."""

    def __init__(self, folder: Path, schemas: dict[str, pa.Schema]) -> None:
        self.folder, self.schemas = folder, schemas
        self.sinks: dict[tuple[str, str], Sink] = {}
        self.catalogues: list[pa.Array] = []
        self.names: pa.ChunkedArray | None = None

    def catalogue(self, asins: pa.Array) -> int:
        """Add a domain's catalogue to the ids candidates index; its first index."""
        offset = sum(len(c) for c in self.catalogues)
        self.catalogues.append(asins)
        self.names = pa.chunked_array(self.catalogues, pa.string())
        for sink in self.sinks.values():
            if sink.names is not None:
                sink.names = self.names
        return offset

    def add(self, config: str, split: str, table: pa.Table) -> None:
        key = (config, split)
        if key not in self.sinks:
            names = self.names if "candidates" in self.schemas[config].names else None
            self.sinks[key] = Sink(self.folder, config, split, self.schemas[config], names)
        self.sinks[key].add(table)

    def finish(self, order: tuple[str, ...]) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, int]]]:
        files: dict[str, dict[str, str]] = {}
        counts: dict[str, dict[str, int]] = {}
        written: dict[tuple[str, str], tuple[str, int]] = {}
        for (config, split), sink in self.sinks.items():
            name = sink.finish()
            if name is not None:
                written[(config, split)] = (name, sink.rows)
        for config in order:
            for split in SPLITS:
                if (config, split) in written:
                    name, rows = written[(config, split)]
                    files.setdefault(config, {})[split] = name
                    counts.setdefault(config, {})[split] = rows
        return files, counts
