"""LLMRec's popularity negatives at catalogue scale: a user's draws cost what the user's items do, not what
the catalogue does, and they are numpy's draws over the pool of the user's unreviewed items."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_builder.llmrec import stream
from dataset_builder.llmrec.config import BuildConfig

HISTORY = 300


def _catalogue(tmp_path: Path, n_items: int, cfg: BuildConfig) -> tuple[stream.Catalogue, stream.Chunk]:
    """A domain of `n_items` items, one user with `HISTORY` of them (every 7th item) and a thousand other
    users' reviews of the first items (so the weights are not all equal), as the build's stage has them."""
    mine = np.arange(HISTORY) * 7
    others = np.arange(1000) % 50
    users = ["u"] * HISTORY + [f"o{i:04d}" for i in range(1000)]
    items = np.concatenate([mine, others])
    table = pa.table(
        {
            "user_id": pa.array(users),
            "ts": pa.array(np.arange(len(users), dtype=np.int64)),
            "parent_asin": pa.array([f"I{i:08d}" for i in items]),
            "item": pa.array(items.astype(np.int32)),
        }
    ).sort_by([("user_id", "ascending"), ("ts", "ascending")])
    pq.write_table(table, tmp_path / "interactions.parquet")
    names = [f"I{i:08d}" for i in range(n_items)]
    pq.write_table(pa.table({"parent_asin": names, "title": names}), tmp_path / "items.parquet")
    cat = stream.catalogue(cfg, tmp_path / "interactions.parquet", tmp_path / "items.parquet", False)
    return cat, stream.Chunk.of(table.filter(pa.compute.equal(table["user_id"], "u")))


def _draw_peak(tmp_path: Path, n_items: int) -> tuple[int, np.ndarray]:
    """Peak traced memory (bytes) of one user's popularity candidates, the catalogue made beforehand."""
    folder = tmp_path / str(n_items)
    folder.mkdir()
    cfg = BuildConfig(source=str(folder), out=folder / "out", negative_sampling="popularity", negatives=99)
    cat, chunk = _catalogue(folder, n_items, cfg)
    rows = np.arange(1, HISTORY)
    ids = [f"Books:u:{p}" for p in rows.tolist()]
    tracemalloc.start()
    try:
        drawn, _ = stream._candidates(chunk, rows, ids, cat, cfg)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak, drawn


def test_popularity_negatives_memory_per_user_does_not_follow_the_catalogue(tmp_path):
    """A user's popularity draws made a float weight vector of the whole catalogue (and numpy's copy and
    cumulative sum of it): 78 MB at 2M items against 1 MB at 20k on the code before; now the draws work on the
    catalogue's running sums, made once per domain, less the user's items."""
    small, drawn_small = _draw_peak(tmp_path, 20_000)
    large, drawn_large = _draw_peak(tmp_path, 2_000_000)
    assert large < small + 2**20, f"{large / 2**20:.1f} MB at 2M items against {small / 2**20:.1f} MB at 20k"
    mine = set((np.arange(HISTORY) * 7).tolist())
    for drawn in (drawn_small, drawn_large):  # each row: 99 negatives outside the user's items, the target
        for row, target in zip(drawn.tolist(), (np.arange(1, HISTORY) * 7).tolist(), strict=True):
            assert len(set(row)) == 100 and target in row and mine & set(row) == {target}


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 400),
    heavy=st.floats(0.0, 1.0),
    gone=st.floats(0.0, 0.8),
    data=st.data(),
)
def test_weighted_draw_is_numpys_choice_over_the_pool(seed, n, heavy, gone, data):
    rng = np.random.default_rng(seed)
    weights = 1 + rng.integers(0, 1000, n) * (rng.random(n) < heavy)
    excluded = np.sort(rng.choice(n, min(int(gone * n), n - 1), replace=False))
    pool = np.setdiff1d(np.arange(n), excluded)
    count = data.draw(st.integers(1, pool.size))
    p = weights[pool] / weights[pool].sum()
    expected = pool[np.random.default_rng(seed + 1).choice(pool.size, count, replace=False, p=p)]
    cumulative = np.concatenate([[0], np.cumsum(weights)])
    drawn = stream.weighted_draw(np.random.default_rng(seed + 1), count, cumulative, weights, excluded)
    assert drawn.tolist() == expected.tolist()


@pytest.mark.parametrize("total", [1, 10**6, 2**37 - 1])
def test_floor_times_is_exact(total):
    k = np.array([0, 1, 2**52, 2**53 - 1, 1234567891234567], dtype=np.uint64)
    x = k.astype(np.float64) / 2.0**53
    expected = [(int(v) * total) >> 53 for v in k.tolist()]
    assert stream._floor_times(x, total).tolist() == expected
