"""Evaluation memory follows a batch, not the build: a large-preset build whose histories are inflated 400×
is evaluated by the constant baseline within a fixed margin of the peak memory of the same command on the
build as it was. Holding every history item as a Python record (as `evaluate` once did) costs ~0.5 KB
per item: ~800 MB here, far over the margin.

The cap is measured by the child itself (its peak RSS, `ru_maxrss`), against the same command on the
uninflated build in the same environment: a `resource.setrlimit` address-space cap would count what the
libraries reserve (thread stacks, allocator arenas), which differs by hundreds of MB between machines.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataset_builder.build import build
from dataset_builder.perrecbench.config import BuildConfig
from dataset_builder.synth import write_synthetic
from tests.benchmark_fixture import write_manifest
from tests.peak_memory import cli_peak_mb

INFLATE = 400  # each history repeated this many times
MARGIN_MB = 250  # what the inflated build may cost beyond the original one's peak

def _inflated_users(users: pa.ChunkedArray, times: int) -> tuple[pa.Array, int]:
    """The users column with every user's history repeated `times` times (Arrow only: no Python rows),
    and the number of history items it holds."""
    users = users.combine_chunks()
    fields = dict(zip(users.type.value_type.names, users.values.flatten(), strict=True))
    history = fields["history"]
    offsets = history.offsets.to_numpy()
    lengths = np.diff(offsets)
    take = np.concatenate(
        [np.tile(np.arange(start, end), times) for start, end in zip(offsets[:-1], offsets[1:], strict=True)]
    )
    new_offsets = np.concatenate([[0], np.cumsum(lengths * times)]).astype(np.int32)
    fields["history"] = pa.ListArray.from_arrays(pa.array(new_offsets), history.values.take(pa.array(take)))
    struct = pa.StructArray.from_arrays(list(fields.values()), fields=list(users.type.value_type))
    return pa.ListArray.from_arrays(users.offsets, struct), len(take)


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int]:
    """A small large-preset build, and a copy whose test histories are inflated; the history items held."""
    root = tmp_path_factory.mktemp("memory")
    write_synthetic(root / "raw", reviews_per_domain=6000, domains="Books", seed=1)
    small = root / "small"
    build(
        BuildConfig(
            source=str(root / "raw"),
            out=small,
            domains=("Books",),
            preset="large",
            min_history=10,
            test_groups=20,
            threads=1,
            memory_limit="1GB",
        )
    )
    big = root / "big"
    shutil.copytree(small, big)
    card = (small / "README.md").read_text()
    items = 0
    for level in ("easy", "medium", "hard"):
        (old,) = (small / level).glob("test-*.parquet")
        table = pq.read_table(old)
        users, count = _inflated_users(table["users"], INFLATE)
        items += count
        (big / level / old.name).unlink()
        new = big / level / "test-inflated.parquet"  # a new name: datasets caches by name (PITFALLS 1)
        pq.write_table(table.set_column(table.schema.get_field_index("users"), "users", users), new)
        card = card.replace(f"{level}/{old.name}", f"{level}/{new.name}")
    (big / "README.md").write_text(card)
    write_manifest(big)  # the inflated files are not the build's own: a manifest naming them
    return small, big, items


def _peak_mb(data: Path, out: Path) -> float:
    """Peak RSS (MB) of `evaluate --engine baseline --model constant` on `data`, run in a child process."""
    report = out.with_suffix(".json")
    argv = ["evaluate", "--data", str(data), "--engine", "baseline", "--model", "constant"]
    argv += ["--levels", "easy,medium,hard", "--out", str(out), "--no-progress"]
    return cli_peak_mb(argv, report)


@pytest.mark.slow
def test_evaluate_memory_does_not_grow_with_the_histories(builds, tmp_path):
    small, big, items = builds
    assert items > 1_500_000  # as Python records: ~0.8 GB
    base = _peak_mb(small, tmp_path / "small")
    peak = _peak_mb(big, tmp_path / "big")
    print(f"history items {items:,}: peak {peak:.0f} MB, uninflated {base:.0f} MB")
    assert peak - base < MARGIN_MB, f"peak {peak:.0f} MB against {base:.0f} MB for the uninflated build"
    # The inflated histories change no score of the constant baseline.
    scores = [json.loads((tmp_path / name / "scores.json").read_text()) for name in ("small", "big")]
    assert [c["metrics"] for c in scores[0]["cells"]] == [c["metrics"] for c in scores[1]["cells"]]


@pytest.mark.parametrize("max_groups", [None, 3])
def test_no_profile_run_holds_only_the_retrieved_history_and_shows_the_same(tmp_path, max_groups):
    from perrec_eval.tasks.perrecbench import context, retrieval, run
    from perrec_eval.tasks.perrecbench.config import EvalConfig
    from tests.benchmark_fixture import write_tiny_benchmark

    folder = write_tiny_benchmark(tmp_path / "perrecbench")
    config = EvalConfig(
        data=str(folder),
        engine="fake",
        model="m",
        out=str(tmp_path / "r"),
        no_profile=True,
        max_groups=max_groups,
    )
    cut, retrieved = run._retrieved_only(config)
    full = run._test_groups(config)
    expected = retrieval.retrieve_groups([g for groups in full.values() for g in groups], config.k)
    assert list(cut) == list(full)
    for level, groups in full.items():
        assert [g.group_id for g in cut[level]] == [g.group_id for g in groups]
        assert all(len(user.history) <= config.k for group in cut[level] for user in group.users)
        assert any(len(user.history) > config.k for group in groups for user in group.users)
        for whole, held in zip(groups, cut[level], strict=True):
            assert context.user_views(held, retrieved, None) == context.user_views(whole, expected, None)
