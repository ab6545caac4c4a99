"""Collaborative-filtering baselines fitted on the past only: biased MF (``mf``) and item kNN (``item-knn``).

They learn from everyone's ratings (the build's ``--with-interactions`` files, test labels removed) and
predict each user's rating of the query item; like every baseline they rank users by predicted rating minus
the user's average (:func:`baselines.ranking_scores`), so their cells sit beside the LLMs'
pointwise cells.

**The past-only rule.** For a group whose window starts at ``window_start`` (the earliest query review of its
``full`` group, written by the builder in every row), a model may use only ratings dated strictly before
that time, plus the histories the row holds for its users (each user's reviews strictly before their own
query review: what the LLM sees). Never a rating at or after the window start, never a test label.

**Affordable.**

- ``item-knn`` needs no fitted model: the adjusted cosine similarity (ratings centred by each user's mean,
  summed over the users who rated both items) between the query item and the items a user rated is
  computed for each group from the ratings strictly before its own window start, reading only the query
  item's raters. The user's ``neighbours`` most similar rated items (non-zero similarity) predict
  ``avg + Σ s·(r - avg) / (Σ|s| + 1e-8)``, avg the user's average rating — the rule of cornac's
  ``ItemKNN(mean_centered=True)``, which the tests check it against.
- ``mf``: r̂ = μ + b_u + b_i + p_u·q_i fitted by alternating least squares (ridge regressions of each user's,
  then each item's, bias and factors; the penalty ``reg`` is scaled by the row's number of ratings, as in
  ALS-WR and as SGD applies it per rating). Per domain the groups' window starts are sorted and cut into at
  most ``cuts`` buckets of equal size; one model per bucket is fitted on the ratings strictly before the
  bucket's *earliest* window start. For each group the query item is then folded in (the ALS item step) from
  its ratings strictly before the group's own window start by users the model knows, and each user is folded
  in by the same ridge regression of their history ratings on the fixed item biases and factors (items
  unknown to the model are skipped; a user with none gets b_u = 0, p_u = 0).

**Cold start.** A query item without a rating before the window start (for ``mf``: none by a user the
model knows) cannot be scored; nor can an item-kNN user without a similar rated item. Such a user is
predicted their own average (relative prediction 0: a tie with every other unscored user of the group).
Both are counted per cell in ``run.json`` (``cf.cells``: ``cold_query_items``, ``fallback_users``).

**Hyper-parameters** are chosen on the ``train`` split (``full`` config: every user of the held-out
groups) by mean tau-b over a small grid (:data:`GRIDS`), never on test, and recorded in ``run.json``; a
build without a train split uses the first grid point.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from perrec_eval.errors import DataError
from perrec_eval.tasks.perrecbench.context import Histories
from perrec_eval.tasks.perrecbench.records import Group

CF_BASELINES: tuple[str, ...] = ("mf", "item-knn")
CUTS = 4  # mf: models per domain, each at a time cut
RULE = (
    "only ratings dated strictly before the group's window_start, plus each user's history in the group "
    "row (folded in); mf: models at up to {cuts} time cuts per domain (each at the earliest window start "
    "of its bucket), the query item folded in from its ratings before the group's own window start; "
    "item-knn: similarities from the ratings before the group's own window start; a cold query item or "
    "a user the model cannot score gets the user's average (relative prediction 0)"
)
_ENTRY_BLOCK = 65_536  # ratings whose outer products are held at once (~42 MB at 8 factors)
_KNN_EPS = 1e-8
_FOLD_BLOCK = 262_144  # history items whose fold-ins are solved at once (~40 MB of temporaries)
_KNN_BLOCK_GROUPS = 64  # item-kNN groups predicted at once (their similarity tables held together)


@dataclass(frozen=True, slots=True)
class MFParams:
    """Biased matrix factorisation by alternating least squares."""

    factors: int = 8
    reg: float = 0.1
    iterations: int = 5
    seed: int = 0


@dataclass(frozen=True, slots=True)
class KNNParams:
    """Item-based neighbourhood model (adjusted cosine)."""

    neighbours: int = 20


GRIDS: dict[str, tuple[MFParams | KNNParams, ...]] = {
    "mf": (MFParams(reg=0.1), MFParams(reg=0.3)),
    "item-knn": (KNNParams(20), KNNParams(10), KNNParams(50)),
}


# --------------------------------------------------------------------------------------------- data


@dataclass(frozen=True, slots=True)
class Ratings:
    """One domain's ratings as integer codes, ordered by time (so a cut is a prefix), with each item's and
    each user's positions (in time order) for the per-group computations."""

    users: np.ndarray
    items: np.ndarray
    values: np.ndarray
    timestamps: np.ndarray
    item_codes: Mapping[str, int]
    by_item: np.ndarray
    item_edges: np.ndarray
    by_user: np.ndarray
    user_edges: np.ndarray

    @classmethod
    def make(
        cls,
        users: np.ndarray,
        items: np.ndarray,
        values: np.ndarray,
        timestamps: np.ndarray,
        item_codes: Mapping[str, int],
    ) -> Ratings:
        """Ratings from codes already in time order; builds the position indexes (int32: 4 bytes each)."""
        users, items = users.astype(np.int32), items.astype(np.int32)
        by_item = np.argsort(items, kind="stable").astype(np.int32)
        by_user = np.argsort(users, kind="stable").astype(np.int32)
        n_users = int(users.max()) + 1 if len(users) else 0
        return cls(
            users=users,
            items=items,
            values=values,
            timestamps=timestamps,
            item_codes=item_codes,
            by_item=by_item,
            item_edges=np.searchsorted(items[by_item], np.arange(len(item_codes) + 1)),
            by_user=by_user,
            user_edges=np.searchsorted(users[by_user], np.arange(n_users + 1)),
        )

    def before(self, cut: int) -> int:
        """How many ratings are dated strictly before ``cut`` (they are the first ones)."""
        return int(np.searchsorted(self.timestamps, cut, side="left"))

    def of_item(self, item: int, n: int) -> np.ndarray:
        """Positions of the item's ratings among the first ``n`` (time order)."""
        positions = self.by_item[self.item_edges[item] : self.item_edges[item + 1]]
        return positions[: np.searchsorted(positions, n)]

    def of_users(self, users: np.ndarray, n: int) -> np.ndarray:
        """Positions of these users' ratings among the first ``n``."""
        users = np.asarray(users, dtype=np.int64)
        first = self.user_edges[users]
        joined = self.by_user[_ranges(first, self.user_edges[users + 1] - first)]
        return joined[joined < n]


class InteractionFiles(Mapping[str, Ratings]):
    """Domain → its interactions, read from the build's parquet file at each access (never cached), so a
    caller that takes one domain at a time holds one domain's ratings in memory.

    ``data`` is a build folder or a Hub dataset id (``ORG/NAME``, uploaded from a build made with
    ``--with-interactions``: ``manifest.json`` and ``interactions/`` are fetched through the Hub cache, a
    domain's file when it is first asked for). Each file is checked against the sha256 in ``manifest.json``
    once per instance, before it is first read (one more pass over the file: ≈ 3 s per GB here).
    """

    def __init__(self, data: str | Path) -> None:
        self._data = str(data)
        self._local = Path(data) if Path(data).is_dir() else None
        manifest = self._file("manifest.json", missing_ok=True)
        listed = json.loads(manifest.read_text()).get("interactions") if manifest is not None else None
        if not listed:
            raise DataError(missing_interactions(data))
        self._manifest, self._listed, self._verified = manifest, listed, set()
        if self._local is not None:
            for info in listed.values():
                if not (self._local / info["path"]).is_file():
                    raise DataError(
                        f"{self._local / info['path']} is listed in {manifest} but missing; rebuild with "
                        "--with-interactions"
                    )

    def _file(self, name: str, *, missing_ok: bool = False) -> Path | None:
        """A file of the build: in the folder, or fetched from the Hub dataset (cached by huggingface_hub)."""
        if self._local is not None:
            path = self._local / name
            return path if path.is_file() or not missing_ok else None
        return _hub_file(self._data, name, missing_ok=missing_ok)

    def __getitem__(self, domain: str) -> Ratings:
        info = self._listed[domain]
        path = self._file(info["path"])
        assert path is not None
        if domain not in self._verified:
            if _sha256(path) != info.get("sha256"):
                raise DataError(
                    f"{path} does not match its sha256 in {self._manifest} (changed since the build); "
                    "rebuild with --with-interactions"
                )
            self._verified.add(domain)
        return read_ratings(path)

    def __iter__(self) -> Iterator[str]:
        return iter(self._listed)

    def __len__(self) -> int:
        return len(self._listed)


def _sha256(path: Path) -> str:
    import hashlib

    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _hub_file(repo: str, name: str, *, missing_ok: bool = False) -> Path | None:
    """``name`` of the Hub dataset ``repo`` through the huggingface_hub cache (offline: the cache only).

    Raises:
        DataError: ``repo`` is not a Hub id, or the file cannot be fetched (one line naming the fix).
    """
    if repo.count("/") != 1 or repo.startswith((".", "/", "~")):
        raise DataError(
            f"--data {repo}: no such folder; build the benchmark with `perrecbench build --source RAW "
            f"--out {repo} --with-interactions` (or pass an existing folder or Hub id ORG/NAME)"
        )
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    try:
        return Path(hf_hub_download(repo_id=repo, filename=name, repo_type="dataset"))
    except EntryNotFoundError:
        if missing_ok:
            return None
        raise DataError(
            f"{name} is listed in the manifest of the Hub dataset {repo} but not there; upload a build made "
            "with --with-interactions again"
        ) from None
    except Exception as err:  # offline without a cached copy, no such repo, network: one line
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DataError(
            f"cannot fetch {name} of the Hub dataset {repo} ({reason}); pass a local build folder made with "
            "--with-interactions, or go online (HF_HUB_OFFLINE unset) once to cache it"
        ) from None


def read_ratings(path: Path) -> Ratings:
    """One interactions file (``build --with-interactions``) as :class:`Ratings`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    # The id columns are read as dictionaries (codes + each distinct id once, never one string per rating),
    # one row group at a time (the reader's buffers are one group's: the whole file at once doubled the peak).
    reader = pq.ParquetFile(path, read_dictionary=["user_id", "parent_asin"], pre_buffer=False)
    columns = ["user_id", "parent_asin", "rating", "timestamp"]
    table = pa.concat_tables(
        [reader.read_row_group(i, columns=columns, use_threads=False) for i in range(reader.num_row_groups)]
    ).unify_dictionaries()
    users = table["user_id"].combine_chunks()
    items = table["parent_asin"].combine_chunks()
    timestamps = table["timestamp"].to_numpy()
    if np.any(np.diff(timestamps) < 0):
        raise DataError(f"{path} is not ordered by timestamp; rebuild with --with-interactions")
    values = table["rating"].to_numpy().astype(np.float64)
    names = items.dictionary.to_pylist()
    del table
    return Ratings.make(
        users.indices.to_numpy(),
        items.indices.to_numpy(),
        values,
        timestamps,
        {name: i for i, name in enumerate(names)},
    )


def load_interactions(data: str | Path) -> InteractionFiles:
    """Every domain's interactions listed in the build's ``manifest.json`` (read when a domain is asked for).

    Raises:
        DataError: the benchmark was built without ``--with-interactions`` (the message says how to rebuild).
    """
    return InteractionFiles(data)


def missing_interactions(data: str | Path) -> str:
    """The one-line fix when a benchmark has no interactions."""
    return (
        f"{data} has no rating interactions, which the mf and item-knn baselines fit on: rebuild it with "
        "`perrecbench build --source RAW --out DIR --with-interactions` (and pass DIR, or the Hub id it "
        "was uploaded to)"
    )


def has_interactions(data: str | Path) -> bool:
    """Whether the benchmark (folder, or Hub dataset id) lists interactions in its manifest (the files are
    checked when they are read)."""
    folder = Path(data)
    manifest = (
        folder / "manifest.json"
        if folder.is_dir()
        else _hub_file(str(data), "manifest.json", missing_ok=True)
    )
    return (
        manifest is not None
        and manifest.is_file()
        and bool(json.loads(manifest.read_text()).get("interactions"))
    )


def cut_plan(starts: Sequence[int], cuts: int) -> dict[int, int]:
    """Window start → the time cut of its model: starts sorted, split into ``cuts`` equal buckets, each cut
    at its bucket's earliest start (so every cut is at or before the windows it serves).

    >>> cut_plan([5, 1, 9, 3, 7, 3], 2)
    {1: 1, 3: 1, 5: 1, 7: 7, 9: 7}
    """
    unique = np.unique(np.asarray(starts, dtype=np.int64))
    plan: dict[int, int] = {}
    for bucket in np.array_split(unique, min(max(cuts, 1), len(unique))):
        plan.update({int(start): int(bucket[0]) for start in bucket})
    return plan


# --------------------------------------------------------------------------------------------- models


def _segments(order: np.ndarray, n: int, keys: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``n`` ratings grouped by key, from a stable key order of all of them (``by_user``,
    ``by_item``): positions (int32) and each key's edges. Within a key positions rise, so a cut is a
    prefix of each segment: one shared order serves every cut, nothing is sorted again."""
    positions = order[order < n]
    edges = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys[:n], minlength=size), out=edges[1:])
    return positions, edges


def _ridge_rows(
    positions: np.ndarray,
    edges: np.ndarray,
    columns: np.ndarray,
    target: np.ndarray,
    design: np.ndarray,
    reg: float,
) -> np.ndarray:
    """Per row r: argmin_w Σ_c (target[c] - design[columns[c]]·w)² + reg · n_r · |w|² over the n_r ratings c
    at ``positions[edges[r]:edges[r + 1]]`` (an ALS half-step). Gram matrices are summed over a block of at
    most ~:data:`_ENTRY_BLOCK` ratings at a time, so the temporaries do not grow with the data.

    >>> at, edges, cols = np.array([0, 1, 2]), np.array([0, 2, 3, 3]), np.array([0, 1, 0])
    >>> _ridge_rows(at, edges, cols, np.array([2.0, 4.0, 1.0]), np.ones((2, 1)), 0.0)[:, 0].tolist()
    [3.0, 1.0, 0.0]
    """
    dim = design.shape[1]
    rows = len(edges) - 1
    out = np.zeros((rows, dim))
    first = 0
    while first < rows:
        last = int(np.searchsorted(edges, edges[first] + _ENTRY_BLOCK, side="right")) - 1
        last = min(max(last, first + 1), rows)
        lo, hi = int(edges[first]), int(edges[last])
        if hi > lo:
            counts = np.diff(edges[first : last + 1])
            active = np.flatnonzero(counts)  # a row without ratings solves to 0
            starts = (edges[first:last] - lo)[active]
            at = positions[lo:hi]
            rows_design = design[columns[at]]
            if last - first == 1:  # one row (maybe larger than a block): its Gram matrix directly
                gram = (rows_design.T @ rows_design)[None]
            else:
                outer = (rows_design[:, :, None] * rows_design[:, None, :]).reshape(hi - lo, dim * dim)
                # Sums per row as a sparse product: the block's row indicator (rows × its ratings) @ outer.
                ends = np.append(starts[1:], hi - lo)
                indicator = sp.csr_matrix(
                    (np.ones(hi - lo), np.arange(hi - lo), np.concatenate([starts, ends[-1:]])),
                    shape=(len(active), hi - lo),
                )
                del ends
                gram = np.asarray(indicator @ outer).reshape(-1, dim, dim)
                del outer
            gram += (reg * counts[active])[:, None, None] * np.eye(dim)
            if last - first == 1:
                rhs = (rows_design.T @ target[at])[None]
            else:
                rhs = np.asarray(indicator @ (rows_design * target[at][:, None]))
            out[first + active] = np.linalg.solve(gram, rhs[..., None])[..., 0]
        first = last
    return out


def _residual(values: np.ndarray, mu: float, bias: np.ndarray, codes: np.ndarray, n: int) -> np.ndarray:
    """values - mu - bias[codes] over the first ``n`` ratings, in one array (no temporaries of size n)."""
    out = bias[codes[:n]]
    np.subtract(values[:n], out, out=out)
    out -= mu
    return out


def _ridge(design: np.ndarray, target: np.ndarray, reg: float) -> np.ndarray:
    """One row's ridge solution (the fold-in of one user or item): penalty reg · max(n, 1)."""
    return _ridge_segments(design, target, np.array([len(target)]), reg)[0]


def _ridge_segments(design: np.ndarray, target: np.ndarray, lengths: np.ndarray, reg: float) -> np.ndarray:
    """:func:`_ridge` of each segment: ``lengths[s]`` consecutive rows of ``design`` and ``target`` (many
    fold-ins at once).

    The segments of one length are solved as one stack (Gram matrices, right-hand sides and solves);
    numpy makes the same BLAS and LAPACK calls for each matrix of a stack as for that matrix alone, so
    each solution is bit for bit the one a segment gets alone (the tests check it), at one call per
    length instead of one per segment.

    >>> design, target = np.ones((3, 1)), np.array([2.0, 4.0, 1.0])
    >>> _ridge_segments(design, target, np.array([2, 0, 1]), 0.25)[:, 0].tolist()  # 6 / 2.5, 0, 1 / 1.25
    [2.4, 0.0, 0.8]
    """
    dim = design.shape[1]
    out = np.empty((len(lengths), dim))
    starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    for length in np.unique(lengths).tolist():
        which = np.flatnonzero(lengths == length)
        rows = starts[which][:, None] + np.arange(length)
        stack = design[rows]  # (segments, length, dim)
        gram = stack.transpose(0, 2, 1) @ stack + reg * max(length, 1) * np.eye(dim)
        rhs = stack.transpose(0, 2, 1) @ target[rows][:, :, None]
        out[which] = np.linalg.solve(gram, rhs)[:, :, 0]
    return out


def _segment_ids(lengths: np.ndarray) -> np.ndarray:
    """Each row's segment for segments of these lengths: [0] * lengths[0] + [1] * lengths[1] + ..."""
    return np.repeat(np.arange(len(lengths)), lengths)


@dataclass(frozen=True, slots=True)
class MFModel:
    """A fitted biased MF: global mean, user and item biases and factors (the domain's codes; zeros and
    ``known`` False for those without a rating before the cut)."""

    mu: float
    user_bias: np.ndarray
    user_factors: np.ndarray
    item_bias: np.ndarray
    item_factors: np.ndarray
    user_known: np.ndarray
    item_known: np.ndarray
    reg: float

    @classmethod
    def fit(cls, ratings: Ratings, n: int, params: MFParams, warm: MFModel | None = None) -> MFModel:
        """Alternating least squares on the first ``n`` ratings (those before the cut).

        With ``warm`` (the model of an earlier cut of the same domain: fitted on a prefix of these
        ratings), its item biases and factors are the starting point and a third of the iterations (at
        least 3) are run; without it, factors start from a seeded N(0, 0.1²) draw.
        """
        users, items, values = ratings.users, ratings.items, ratings.values  # the first n are read
        n_users, n_items = len(ratings.user_edges) - 1, len(ratings.item_codes)
        mu = float(values[:n].mean()) if n else 0.0
        # The cut's ratings by user and by item: prefixes of the domain's two orders (int32 positions).
        by_user, user_edges = _segments(ratings.by_user, n, users, n_users)
        by_item, item_edges = _segments(ratings.by_item, n, items, n_items)
        if warm is None:
            rng = np.random.default_rng(params.seed)
            item_w = np.hstack([np.zeros((n_items, 1)), rng.normal(0.0, 0.1, (n_items, params.factors))])
            iterations = params.iterations
        else:
            item_w = np.hstack([warm.item_bias[:, None], warm.item_factors])
            iterations = max(3, params.iterations // 3)
        user_w = np.zeros((n_users, params.factors + 1))
        for _ in range(iterations):
            residual = _residual(values, mu, item_w[:, 0], items, n)
            design = np.hstack([np.ones((n_items, 1)), item_w[:, 1:]])
            user_w = _ridge_rows(by_user, user_edges, items, residual, design, params.reg)
            residual = _residual(values, mu, user_w[:, 0], users, n)
            design = np.hstack([np.ones((n_users, 1)), user_w[:, 1:]])
            item_w = _ridge_rows(by_item, item_edges, users, residual, design, params.reg)
            del residual, design
        users, items = users[:n], items[:n]
        return cls(
            mu=mu,
            user_bias=user_w[:, 0].copy(),
            user_factors=user_w[:, 1:].copy(),
            item_bias=item_w[:, 0].copy(),
            item_factors=item_w[:, 1:].copy(),
            user_known=np.bincount(users, minlength=n_users) > 0,
            item_known=np.bincount(items, minlength=n_items) > 0,
            reg=params.reg,
        )

    def score(self, user: int, item: int) -> float:
        """A trained user's predicted rating of a trained item: μ + b_u + b_i + p_u·q_i."""
        return float(
            self.mu
            + self.user_bias[user]
            + self.item_bias[item]
            + self.user_factors[user] @ self.item_factors[item]
        )

    def fold_in_item(self, ratings: Ratings, item: int, n: int) -> np.ndarray | None:
        """The item's [bias, factors] from its ratings among the first ``n`` by users the model knows (the
        ALS item step for one item); None when there is none."""
        vectors, found = self.fold_in_items(ratings, np.array([item]), np.array([n]))
        return vectors[0] if found[0] else None

    def fold_in_items(
        self, ratings: Ratings, items: np.ndarray, ns: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`fold_in_item` of each (item, n), solved together (:func:`_ridge_segments`): the
        [bias, factors] rows, and whether each item had a rating to fold in (its row is 0 where not)."""
        empty = np.zeros(0, dtype=np.int32)
        at = [
            ratings.of_item(item, n) if item >= 0 else empty
            for item, n in zip(items.tolist(), ns.tolist(), strict=True)
        ]
        lengths = np.array([len(positions) for positions in at], dtype=np.int64)
        positions = np.concatenate(at) if at else empty
        users = ratings.users[positions]
        keep = self.user_known[users]
        kept = np.bincount(_segment_ids(lengths)[keep], minlength=len(lengths))
        users = users[keep]
        design = np.hstack([np.ones((len(users), 1)), self.user_factors[users]])
        target = ratings.values[positions][keep] - self.mu - self.user_bias[users]
        found = kept > 0
        out = np.zeros((len(lengths), self.item_factors.shape[1] + 1))
        out[found] = _ridge_segments(design, target, kept[found], self.reg)
        return out, found

    def predict(self, query: np.ndarray, items: np.ndarray, values: np.ndarray) -> float:
        """A user folded in from their history (item codes, -1 for unknown, and ratings) rates the item whose
        [bias, factors] are ``query``; items the model does not know are skipped."""
        return float(self.predict_many(query[None], items, values, np.array([len(items)]))[0])

    def predict_many(
        self, queries: np.ndarray, items: np.ndarray, values: np.ndarray, lengths: np.ndarray
    ) -> np.ndarray:
        """:meth:`predict` of many users at once: user u's history is ``lengths[u]`` consecutive entries of
        ``items`` and ``values``, the item it rates is row u of ``queries``. Bit for bit :meth:`predict`
        of each (the fold-ins by :func:`_ridge_segments`, the dot products one BLAS call per user)."""
        keep = (items >= 0) & self.item_known[np.maximum(items, 0)]
        kept = np.bincount(_segment_ids(lengths)[keep], minlength=len(lengths))
        known = items[keep]
        design = np.hstack([np.ones((len(known), 1)), self.item_factors[known]])
        users = _ridge_segments(design, values[keep] - self.mu - self.item_bias[known], kept, self.reg)
        dots = (users[:, None, 1:] @ queries[:, 1:, None])[:, 0, 0]
        return self.mu + users[:, 0] + queries[:, 0] + dots


def knn_similarities(ratings: Ratings, query: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Adjusted cosine between ``query`` and every item co-rated with it among the first ``n`` ratings.

    Ratings are centred by each user's mean over those ``n``; the sums run over the users who rated both
    items (cornac ``ItemKNN(mean_centered=True)``'s similarity). Only the query's raters are read.

    Returns:
        Sorted item codes and their similarities (0 where the numerator or a norm is 0).
    """
    raters = ratings.users[ratings.of_item(query, n)]
    at = ratings.of_users(raters, n)
    order = np.argsort(raters)
    local = order[np.searchsorted(raters[order], ratings.users[at])]
    values, items = ratings.values[at], ratings.items[at]
    means = np.bincount(local, values, len(raters)) / np.bincount(local, minlength=len(raters))
    centred = values - means[local]
    of_query = np.zeros(len(raters))
    of_query[local[items == query]] = centred[items == query]
    weight = of_query[local]
    codes, slot = np.unique(items, return_inverse=True)
    num = np.bincount(slot, weight * centred, len(codes))
    norms = np.sqrt(np.bincount(slot, weight * weight, len(codes))) * np.sqrt(
        np.bincount(slot, centred * centred, len(codes))
    )
    sims = np.divide(num, norms, out=np.zeros_like(num), where=(num != 0) & (norms > 0))
    return codes, sims


def knn_predict(
    codes: np.ndarray, sims: np.ndarray, items: np.ndarray, values: np.ndarray, avg: float, neighbours: int
) -> float | None:
    """``avg + Σ s·(r - avg) / (Σ|s| + 1e-8)`` over the ``neighbours`` most similar of the user's items with a
    non-zero similarity (None: there is none).

    >>> sims = np.array([0.5, -0.5])
    >>> round(knn_predict(np.array([1, 2]), sims, np.array([1, 2, 7]), np.array([5.0, 1.0, 3.0]), 3.0, 20), 6)
    5.0
    """
    user_sims = np.zeros(len(items))
    if len(codes):
        found = np.searchsorted(codes, items).clip(max=len(codes) - 1)
        hit = (items >= 0) & (codes[found] == items)
        user_sims[hit] = sims[found[hit]]
    usable = np.flatnonzero(user_sims != 0)
    if not len(usable):
        return None
    top = usable[np.argsort(-user_sims[usable], kind="stable")[:neighbours]]
    weights = user_sims[top]
    return float(avg + weights @ (values[top] - avg) / (np.abs(weights).sum() + _KNN_EPS))


# --------------------------------------------------------------------------------------------- groups


@dataclass(frozen=True, slots=True)
class GroupOutcome:
    """One group's predicted ratings (row order), whether its query item was cold, how many fell back."""

    ratings: list[float]
    cold: bool
    fallback: int


@dataclass(frozen=True, slots=True)
class Coded:
    """Groups' users' histories as one domain's item codes (-1: an item without a rating there) and
    ratings, 16 bytes per item where the groups' records take ~100: ``users[g]`` users in group g (in
    order), ``lengths[u]`` items of user u, then every item of every user in one pair of arrays."""

    items: np.ndarray
    values: np.ndarray
    lengths: np.ndarray
    users: np.ndarray

    def take(self, groups: np.ndarray) -> Coded:
        """The histories of these groups (indices), in this order."""
        user_starts = np.concatenate([[0], np.cumsum(self.users)])
        item_starts = np.concatenate([[0], np.cumsum(self.lengths)])
        users = _ranges(user_starts[groups], self.users[groups])
        items = _ranges(item_starts[users], self.lengths[users])
        return Coded(self.items[items], self.values[items], self.lengths[users], self.users[groups])


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``starts[0], ..., starts[0] + counts[0] - 1, starts[1], ...``: the indices of consecutive runs.

    >>> _ranges(np.array([5, 0, 9]), np.array([2, 0, 3])).tolist()
    [5, 6, 9, 10, 11]
    """
    counts = np.asarray(counts, dtype=np.int64)
    before = np.cumsum(counts) - counts
    return np.repeat(np.asarray(starts, dtype=np.int64) - before, counts) + np.arange(int(counts.sum()))


def code_histories(codes: Mapping[str, int], batches: Iterable[Histories]) -> tuple[list[str], Coded]:
    """Histories (`context.Histories`, a batch at a time) in a domain's item codes: the groups' ids and
    their histories. Each batch's distinct items are looked up once."""
    import pyarrow.compute as pc

    ids: list[str] = []
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    for batch in batches:
        ids += batch.group_ids
        encoded = batch.items.dictionary_encode()
        names = encoded.dictionary.to_pylist()
        lookup = np.array([*(codes.get(name, -1) for name in names), -1], dtype=np.int64)
        at = pc.fill_null(encoded.indices, len(names)).to_numpy()
        parts.append((lookup[at], batch.ratings, batch.lengths, batch.users))
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return ids, Coded(empty, np.zeros(0), empty, empty)
    items, values, lengths, users = (np.concatenate(column) for column in zip(*parts, strict=True))
    return ids, Coded(items, values.astype(np.float64), lengths, users)


def histories_of(ratings: Ratings, groups: Sequence[Group]) -> Coded:
    """The groups' users' histories (those the records hold) as the domain's item codes and ratings."""
    return code_histories(ratings.item_codes, [Histories.of_groups(groups)])[1]


def _outcome(group: Group, predicted: Sequence[float | None], cold: bool) -> GroupOutcome:
    ratings = [u.avg_rating if p is None else p for u, p in zip(group.users, predicted, strict=True)]
    return GroupOutcome(ratings, cold, sum(p is None for p in predicted))


def _outcomes(
    groups: Sequence[Group], users: np.ndarray, cold: np.ndarray, predicted: np.ndarray, scored: np.ndarray
) -> list[GroupOutcome]:
    """Each group's outcome from its users' predictions (row order; a user not ``scored`` falls back)."""
    values: list[float | None] = [
        value if ok else None for value, ok in zip(predicted.tolist(), scored.tolist(), strict=True)
    ]
    out, first = [], 0
    for group, count, is_cold in zip(groups, users.tolist(), cold.tolist(), strict=True):
        out.append(_outcome(group, values[first : first + count], cold=is_cold))
        first += count
    return out


def _blocks(coded: Coded, most: int | None = None) -> Iterator[np.ndarray]:
    """The groups in consecutive runs of about :data:`_FOLD_BLOCK` history items (at least one group each,
    at most `most` groups), so the fold-ins' temporaries do not grow with the data."""
    user_ends = np.cumsum(coded.users)
    item_ends = np.concatenate([[0], np.cumsum(coded.lengths)])[user_ends]  # items up to each group's end
    first = 0
    while first < len(coded.users):
        reached = item_ends[first - 1] if first else 0
        last = max(first + 1, int(np.searchsorted(item_ends, reached + _FOLD_BLOCK, side="right")))
        last = last if most is None else min(last, first + most)
        yield np.arange(first, min(last, len(coded.users)))
        first = last


def _queries(ratings: Ratings, groups: Sequence[Group]) -> tuple[np.ndarray, np.ndarray]:
    """Each group's query item code (-1: no rating) and how many ratings precede its window start."""
    items = np.array([ratings.item_codes.get(g.query.parent_asin, -1) for g in groups], dtype=np.int64)
    starts = np.array([g.window_start for g in groups], dtype=np.int64)
    return items, np.searchsorted(ratings.timestamps, starts, side="left")


def _knn_groups(
    ratings: Ratings, groups: Sequence[Group], params: KNNParams, cache: dict, coded: Coded
) -> list[GroupOutcome]:
    """Each group's item-kNN outcome, every user of a block of groups predicted at once (bit for bit
    :func:`knn_predict` of each)."""
    out: list[GroupOutcome] = []
    for block in _blocks(coded, _KNN_BLOCK_GROUPS):  # a block's similarity tables are held together
        chosen, histories = [groups[i] for i in block], coded.take(block)
        queries, ns = _queries(ratings, chosen)
        tables: list[tuple[np.ndarray, np.ndarray]] = []
        cold = np.zeros(len(chosen), dtype=bool)
        for g, (query, n) in enumerate(zip(queries.tolist(), ns.tolist(), strict=True)):
            if query < 0 or not len(ratings.of_item(query, n)):
                cold[g], table = True, (np.zeros(0, dtype=np.int64), np.zeros(0))
            else:
                if (query, n) not in cache:
                    cache[(query, n)] = knn_similarities(ratings, query, n)
                table = cache[(query, n)]
            tables.append(table)
        user_group = np.repeat(np.arange(len(chosen)), histories.users)
        item_group = np.repeat(user_group, histories.lengths)
        sims = _table_lookup(tables, item_group, histories.items)
        avgs = np.array([u.avg_rating for g in chosen for u in g.users], dtype=np.float64)
        predicted, scored = _knn_rates(sims, histories.values, histories.lengths, avgs, params.neighbours)
        out += _outcomes(chosen, histories.users, cold, predicted, scored & ~cold[user_group])
    return out


def _table_lookup(
    tables: Sequence[tuple[np.ndarray, np.ndarray]], owner: np.ndarray, items: np.ndarray
) -> np.ndarray:
    """Each item's similarity in its owner's table (sorted codes and their similarities; 0 where absent or
    the item is unknown (-1)): the searchsorted of :func:`knn_predict`, for all owners at once."""
    width = int(max((int(c[-1]) for c, _ in tables if len(c)), default=0)) + 1
    width = max(width, int(items.max(initial=0)) + 1)
    shifted = (codes.astype(np.int64) + t * width for t, (codes, _) in enumerate(tables))
    keys = np.concatenate([np.zeros(0, dtype=np.int64), *shifted])
    values = np.concatenate([np.zeros(0), *(sims for _, sims in tables)])
    out = np.zeros(len(items))
    if not len(keys):
        return out
    wanted = owner * width + items
    found = np.searchsorted(keys, wanted).clip(max=len(keys) - 1)
    hit = (items >= 0) & (keys[found] == wanted)
    out[hit] = values[found[hit]]
    return out


def _knn_rates(
    sims: np.ndarray, values: np.ndarray, lengths: np.ndarray, avgs: np.ndarray, neighbours: int
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`knn_predict`'s rule for many users at once: user u's items are ``lengths[u]`` consecutive
    entries of ``sims`` (their similarity to the query item) and ``values`` (the user's ratings). Returns
    each user's prediction and whether it has one (a similar item). The weighted sums are taken per number
    of neighbours used, one BLAS dot product per user, so each is bit for bit the one-user result."""
    owner = np.repeat(np.arange(len(lengths)), lengths)
    usable = np.flatnonzero(sims != 0)
    # per user, most similar first, ties in history order (lexsort is stable): knn_predict's argsort
    chosen = usable[np.lexsort((-sims[usable], owner[usable]))]
    run_start = np.searchsorted(owner[chosen], owner[chosen], side="left")
    chosen = chosen[np.arange(len(chosen)) - run_start < neighbours]
    counts = np.bincount(owner[chosen], minlength=len(lengths))
    starts = np.cumsum(counts) - counts
    out = np.zeros(len(lengths))
    for count in np.unique(counts[counts > 0]).tolist():
        users = np.flatnonzero(counts == count)
        at = chosen[starts[users][:, None] + np.arange(count)]
        weights, centred = sims[at], values[at] - avgs[users][:, None]
        dots = (weights[:, None, :] @ centred[:, :, None])[:, 0, 0]
        out[users] = avgs[users] + dots / (np.abs(weights).sum(axis=1) + _KNN_EPS)
    return out, counts > 0


def _mf_groups(
    model: MFModel, ratings: Ratings, groups: Sequence[Group], coded: Coded
) -> list[GroupOutcome]:
    """Each group's outcome under ``model``: the query items of a block of groups folded in together, then
    all their users (:meth:`MFModel.fold_in_items`, :meth:`MFModel.predict_many`)."""
    out: list[GroupOutcome] = []
    for block in _blocks(coded):
        chosen, histories = [groups[i] for i in block], coded.take(block)
        vectors, found = model.fold_in_items(ratings, *_queries(ratings, chosen))
        user_group = np.repeat(np.arange(len(chosen)), histories.users)
        served = found[user_group]
        entries = np.repeat(served, histories.lengths)
        predicted = np.zeros(len(user_group))
        predicted[served] = model.predict_many(
            vectors[user_group[served]],
            histories.items[entries],
            histories.values[entries],
            histories.lengths[served],
        )
        out += _outcomes(chosen, histories.users, ~found, predicted, served)
    return out


def predict_groups(
    name: str,
    interactions: Mapping[str, Ratings],
    groups: Sequence[Group],
    params: MFParams | KNNParams,
    histories: Coded | None = None,
    similarities: dict[str, dict] | None = None,
) -> tuple[list[GroupOutcome], dict[str, Any]]:
    """Predict every group under the past-only rule (module docstring).

    Groups may repeat across levels (same id, same window): each model serves them all. `histories` gives
    the groups' users' histories as item codes of each group's domain and ratings (`code_histories`, in
    the order of ``groups``); None: they are taken from the groups. `similarities`: item-kNN's
    similarities per domain, kept for another call on the same groups (another grid point: they do not
    depend on its parameters); None: dropped after each domain.

    Returns:
        One outcome per group (input order) and the fitting figures (models, seconds).
    """
    if name not in CF_BASELINES:
        raise ValueError(f"no CF baseline {name!r}; choose one of {', '.join(CF_BASELINES)}")
    out: list[GroupOutcome | None] = [None] * len(groups)
    models, seconds = 0, 0.0
    for domain in sorted({g.domain for g in groups}):
        if domain not in interactions:
            raise DataError(f"no interactions for domain {domain!r}; rebuild with --with-interactions")
        ratings = interactions[domain]
        members = [i for i, g in enumerate(groups) if g.domain == domain]
        of = (
            histories_of(ratings, [groups[i] for i in members])
            if histories is None
            else histories.take(np.array(members, dtype=np.int64))
        )
        if isinstance(params, KNNParams):
            cache = {} if similarities is None else similarities.setdefault(domain, {})
            outcomes = _knn_groups(ratings, [groups[i] for i in members], params, cache, of)
            for i, outcome in zip(members, outcomes, strict=True):
                out[i] = outcome
            continue
        plan = cut_plan([groups[i].window_start for i in members], CUTS)
        model = None
        for cut in sorted(set(plan.values())):
            started = time.perf_counter()
            model = MFModel.fit(ratings, ratings.before(cut), params, warm=model)
            seconds += time.perf_counter() - started
            models += 1
            served = [k for k, i in enumerate(members) if plan[groups[i].window_start] == cut]
            chosen = [groups[members[k]] for k in served]
            outcomes = _mf_groups(model, ratings, chosen, of.take(np.array(served, dtype=np.int64)))
            for k, outcome in zip(served, outcomes, strict=True):
                out[members[k]] = outcome
    return [o for o in out if o is not None], {"models": models, "fit_seconds": round(seconds, 3)}


def relative(group: Group, ratings: Sequence[float]) -> list[float]:
    """Ranking scores: predicted rating minus the user's average (as the pointwise method)."""
    return [value - user.avg_rating for value, user in zip(ratings, group.users, strict=True)]


def _mean_tau(groups: Sequence[Group], outcomes: Sequence[GroupOutcome]) -> float:
    from perrec_eval.ptc import group_taus

    taus, _ = group_taus(
        [g.relative_ratings for g in groups],
        [relative(g, o.ratings) for g, o in zip(groups, outcomes, strict=True)],
    )
    return float(taus.mean())


def run(
    name: str,
    interactions: Mapping[str, Ratings],
    groups_by_level: Mapping[str, Sequence[Group]],
    train: Sequence[Group],
    histories: Callable[[str], Iterable[Histories]] | None = None,
) -> tuple[dict[str, list[GroupOutcome]], dict[str, Any]]:
    """Choose the grid point on ``train``, and predict every level's groups with it.

    `histories(domain)` gives the histories of that domain's groups (`context.Histories`, a batch at a
    time: `context.stream_histories`), in the order of ``train`` then each level's groups (the given
    groups may then be held without them: only their histories' codes are kept, one domain at a time);
    None: the given groups hold them.

    Each grid point's models serve the train and the evaluated groups at once (one cut plan per domain);
    the choice reads the train groups' mean tau-b only (the first grid point on ties, or without train
    groups).

    Returns:
        Per level, one outcome per group (input order), and the ``run.json`` record ``cf``: rule, chosen
        parameters, the search, fitting figures and per-cell cold-start counts.
    """
    started = time.perf_counter()
    levels = list(groups_by_level)
    flat = [g for level in levels for g in groups_by_level[level]]
    grid = GRIDS[name] if train else GRIDS[name][:1]
    tuning: dict[str, Any] = {"split": "train", "config": "full", "groups": len(train), "grid": []}
    if not train:
        tuning["note"] = "no train split: the first grid point is used"
    # One domain at a time (its ratings read once, then dropped), every grid point on it.
    everything = [*train, *flat]
    per_point: list[list[GroupOutcome | None]] = [[None] * len(everything) for _ in grid]
    models, fit_seconds = 0, 0.0
    for domain in sorted({g.domain for g in everything}):
        members = [i for i, g in enumerate(everything) if g.domain == domain]
        if domain not in interactions:
            raise DataError(f"no interactions for domain {domain!r}; rebuild with --with-interactions")
        ratings = {domain: interactions[domain]}
        if histories is None:
            batches: Iterable[Histories] = [Histories.of_groups([everything[i] for i in members])]
        else:
            batches = histories(domain)
        ids, coded = code_histories(ratings[domain].item_codes, batches)
        if ids != [everything[i].group_id for i in members]:
            raise ValueError(f"histories({domain!r}) gave other groups than the {domain} groups to predict")
        similarities: dict[str, dict] = {}  # item-kNN's, shared by the grid points on this domain
        for point, params in enumerate(grid):
            outcomes, figures = predict_groups(
                name, ratings, [everything[i] for i in members], params, coded, similarities
            )
            models, fit_seconds = models + figures["models"], fit_seconds + figures["fit_seconds"]
            for i, outcome in zip(members, outcomes, strict=True):
                per_point[point][i] = outcome
        del ratings, coded, similarities  # before the next domain's are read
    best: tuple[float, MFParams | KNNParams, list[GroupOutcome]] | None = None
    for params, filled in zip(grid, per_point, strict=True):
        outcomes = [o for o in filled if o is not None]
        score = _mean_tau(train, outcomes[: len(train)]) if train else 0.0
        tuning["grid"].append({"params": asdict(params), "train_mean_tau_b": round(score, 4)})
        if best is None or score > best[0]:
            best = (score, params, outcomes[len(train) :])
    assert best is not None  # the grid is never empty
    _, params, outcomes = best
    by_level: dict[str, list[GroupOutcome]] = {}
    cells = {}
    for level in levels:
        count = len(groups_by_level[level])
        by_level[level], outcomes = outcomes[:count], outcomes[count:]
        cells[f"{level}/pointwise"] = {
            "groups": count,
            "users": sum(len(g.users) for g in groups_by_level[level]),
            "cold_query_items": sum(o.cold for o in by_level[level]),
            "fallback_users": sum(o.fallback for o in by_level[level]),
        }
    info = {
        "model": name,
        "rule": RULE.format(cuts=CUTS),
        "cuts": CUTS if name == "mf" else None,
        "params": asdict(params),
        "tuning": tuning,
        "models": models,
        "fit_seconds": round(fit_seconds, 3),
        "seconds": round(time.perf_counter() - started, 3),
        "cells": cells,
    }
    return by_level, info
