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
        parts = [self.by_user[self.user_edges[u] : self.user_edges[u + 1]] for u in users]
        joined = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
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
    gram = design.T @ design + reg * max(len(target), 1) * np.eye(design.shape[1])
    return np.linalg.solve(gram, design.T @ target)


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
        if item < 0:
            return None
        at = ratings.of_item(item, n)
        users = ratings.users[at]
        keep = self.user_known[users]
        if not keep.any():
            return None
        users = users[keep]
        design = np.hstack([np.ones((len(users), 1)), self.user_factors[users]])
        return _ridge(design, ratings.values[at][keep] - self.mu - self.user_bias[users], self.reg)

    def predict(self, query: np.ndarray, items: np.ndarray, values: np.ndarray) -> float:
        """A user folded in from their history (item codes, -1 for unknown, and ratings) rates the item whose
        [bias, factors] are ``query``; items the model does not know are skipped."""
        keep = (items >= 0) & self.item_known[np.maximum(items, 0)]
        known = items[keep]
        design = np.hstack([np.ones((len(known), 1)), self.item_factors[known]])
        user = _ridge(design, values[keep] - self.mu - self.item_bias[known], self.reg)
        return float(self.mu + user[0] + query[0] + user[1:] @ query[1:])


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


def histories_of(ratings: Ratings, groups: Iterable[Group]) -> list[History]:
    """Each group's users' histories as the domain's item codes (-1: an item without a rating) and ratings:
    a few bytes per item, where the groups' records are ~100 bytes per item."""
    return [_history(ratings.item_codes, group) for group in groups]


def _history(codes: Mapping[str, int], group: Group) -> History:
    return [
        (
            np.array([codes.get(h.parent_asin, -1) for h in user.history], dtype=np.int64),
            np.array([h.rating for h in user.history], dtype=np.float64),
        )
        for user in group.users
    ]


def _outcome(group: Group, predicted: list[float | None], cold: bool) -> GroupOutcome:
    ratings = [u.avg_rating if p is None else p for u, p in zip(group.users, predicted, strict=True)]
    return GroupOutcome(ratings, cold, sum(p is None for p in predicted))


# Per user of a group: the history item codes (-1: unknown) and ratings.
History = list[tuple[np.ndarray, np.ndarray]]


def _knn_group(
    ratings: Ratings, group: Group, params: KNNParams, cache: dict, history: History
) -> GroupOutcome:
    query = ratings.item_codes.get(group.query.parent_asin, -1)
    n = ratings.before(group.window_start)
    if query < 0 or not len(ratings.of_item(query, n)):
        return _outcome(group, [None] * len(group.users), cold=True)
    if (query, n) not in cache:
        cache[(query, n)] = knn_similarities(ratings, query, n)
    codes, sims = cache[(query, n)]
    predicted = [
        knn_predict(codes, sims, items, values, user.avg_rating, params.neighbours)
        for user, (items, values) in zip(group.users, history, strict=True)
    ]
    return _outcome(group, predicted, cold=False)


def _mf_group(model: MFModel, ratings: Ratings, group: Group, history: History) -> GroupOutcome:
    query = ratings.item_codes.get(group.query.parent_asin, -1)
    vector = model.fold_in_item(ratings, query, ratings.before(group.window_start))
    if vector is None:
        return _outcome(group, [None] * len(group.users), cold=True)
    predicted: list[float | None] = [
        model.predict(vector, items, values) for items, values in history
    ]
    return _outcome(group, predicted, cold=False)


def predict_groups(
    name: str,
    interactions: Mapping[str, Ratings],
    groups: Sequence[Group],
    params: MFParams | KNNParams,
    histories: Sequence[History] | None = None,
) -> tuple[list[GroupOutcome], dict[str, Any]]:
    """Predict every group under the past-only rule (module docstring).

    Groups may repeat across levels (same id, same window): each model serves them all. `histories` gives
    each group's users' histories as item codes of its domain and ratings (`histories_of`); None: they are
    taken from the groups.

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
        if histories is None:
            of = dict(zip(members, histories_of(ratings, [groups[i] for i in members]), strict=True))
        else:
            of = {i: histories[i] for i in members}
        if isinstance(params, KNNParams):
            cache: dict = {}
            for i in members:
                out[i] = _knn_group(ratings, groups[i], params, cache, of[i])
            continue
        plan = cut_plan([groups[i].window_start for i in members], CUTS)
        model = None
        for cut in sorted(set(plan.values())):
            started = time.perf_counter()
            model = MFModel.fit(ratings, ratings.before(cut), params, warm=model)
            seconds += time.perf_counter() - started
            models += 1
            for i in members:
                if plan[groups[i].window_start] == cut:
                    out[i] = _mf_group(model, ratings, groups[i], of[i])
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
    histories: Callable[[str], Iterable[Group]] | None = None,
) -> tuple[dict[str, list[GroupOutcome]], dict[str, Any]]:
    """Choose the grid point on ``train``, and predict every level's groups with it.

    `histories(domain)` gives the groups of that domain with their users' histories, in the order of
    ``train`` then each level's groups (the given groups may then be held without them: only their
    histories' codes are kept, one domain at a time); None: the given groups hold them.

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
        coded, ids = [], []
        for group in [everything[i] for i in members] if histories is None else histories(domain):
            ids.append(group.group_id)
            coded.append(_history(ratings[domain].item_codes, group))
        if ids != [everything[i].group_id for i in members]:
            raise ValueError(f"histories({domain!r}) gave other groups than the {domain} groups to predict")
        for point, params in enumerate(grid):
            outcomes, figures = predict_groups(
                name, ratings, [everything[i] for i in members], params, histories=coded
            )
            models, fit_seconds = models + figures["models"], fit_seconds + figures["fit_seconds"]
            for i, outcome in zip(members, outcomes, strict=True):
                per_point[point][i] = outcome
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
