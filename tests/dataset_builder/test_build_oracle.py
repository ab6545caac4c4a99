"""The builder against the pure-Python oracle (`tests.dataset_builder.reference`) on small synthetic data:
the same items get a group, and each group is valid and one of the groups of the window it is drawn from."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dataset_builder.build import build
from dataset_builder.perrecbench.config import BuildConfig
from dataset_builder.synth import write_synthetic
from tests.dataset_builder import reference

PARAMS = [
    {},
    {"min_history": 10},
    {"min_history": 10, "window_days": 10, "min_gap": 0.8, "avg_scope": "all"},
    {"min_history": 5, "group_size": 4, "window_days": 60},
]


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("synth")
    write_synthetic(folder, reviews_per_domain=6000, domains="Books", seed=1, dirty=True)
    return folder


def _built_groups(raw: Path, out: Path, params: dict) -> tuple[list[dict], dict[str, float]]:
    """The built ``full`` rows, and the number of valid groups the builder counted in each chosen window."""
    cfg = BuildConfig(
        source=str(raw),
        out=out,
        domains=("Books",),
        test_groups=1,
        threads=1,
        memory_limit="1GB",
        on_bad_line="skip",
        split_rule="none",  # every group is written: the selection is under test here, not the split
        **params,
    )
    build(cfg)
    files = json.loads((out / "manifest.json").read_text())["outputs"]["full"]
    [index] = (out.parent / "out.stages" / "Books").glob("*.index.parquet")
    counts = pq.read_table(index, columns=["group_id", "window_valid_groups"]).to_pydict()
    rows = [row for path in files.values() for row in pq.read_table(out / path).to_pylist()]
    return rows, dict(zip(*counts.values(), strict=True))


@pytest.mark.parametrize(
    "params", PARAMS, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "default"
)
def test_build_oracle_same_items_and_valid_groups(raw: Path, tmp_path: Path, params: dict) -> None:
    reviews = reference.load_reviews(raw / "Books.jsonl", on_bad_line="skip")
    with (raw / "meta_Books.jsonl").open() as handle:
        titled = {m["parent_asin"] for m in map(json.loads, filter(str.strip, handle)) if m.get("title")}
    expected = reference.items_with_valid_group(reviews, query_items=titled, **params)
    groups, window_counts = _built_groups(raw, tmp_path / "out", params)
    assert expected, "the fixture must contain groups"
    assert {g["query"]["parent_asin"] for g in groups} == expected
    scope = params.get("avg_scope", "history")
    for group in sorted(groups, key=lambda g: g["group_id"])[:15]:  # the oracle re-indexes per call: slow
        asin = group["query"]["parent_asin"]
        users = [u["user_id"] for u in group["users"]]
        assert reference.why_invalid(reviews, asin, users, **params) is None
        choices = reference.window_groups(reviews, asin, **params)
        assert set(users) in [set(g) for g in choices]
        assert window_counts[group["group_id"]] == len(choices)
        truth = reference.relative_ratings(reviews, asin, users, avg_scope=scope)
        for user in group["users"]:
            avg, mode, rel = truth[user["user_id"]]
            assert user["avg_rating"] == pytest.approx(avg, abs=1e-12)
            assert user["most_common_rating"] == mode
            assert user["relative_rating"] == pytest.approx(rel, abs=1e-12)
