"""``build --with-interactions``: the ratings file per domain, test labels removed, hashed, described."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
import yaml

from dataset_builder.build import build
from dataset_builder.perrecbench.interactions import INTERACTIONS_SCHEMA
from dataset_builder.synth import write_synthetic
from perrec_eval.tasks.perrecbench.context import dataset_fingerprint
from tests.dataset_builder.build_fixture import config


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("synth")
    write_synthetic(folder, reviews_per_domain=6000, domains="Books,Electronics", seed=1)
    return folder


@pytest.fixture(scope="module")
def built(raw: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    parent = tmp_path_factory.mktemp("built")
    cfg = config(
        raw,
        parent / "bench",
        domains=("Books", "Electronics"),
        min_history=10,
        test_groups=6,
        with_interactions=True,
    )
    return build(cfg)


def _rows(folder: Path, name: str, split: str) -> list[dict]:
    header = yaml.safe_load((folder / "README.md").read_text().split("---")[1])
    (entry,) = [c for c in header["configs"] if c["config_name"] == name]
    (path,) = [f["path"] for f in entry["data_files"] if f["split"] == split]
    return pq.read_table(folder / path).to_pylist()


def _interactions(folder: Path) -> dict[str, list[dict]]:
    manifest = json.loads((folder / "manifest.json").read_text())
    return {
        d: pq.read_table(folder / info["path"]).to_pylist() for d, info in manifest["interactions"].items()
    }


def test_build_interactions_never_contain_a_test_label(built: Path) -> None:
    ratings = _interactions(built)
    pairs = {(d, r["user_id"], r["parent_asin"]) for d, rows in ratings.items() for r in rows}
    labels = {
        (row["domain"], user["user_id"], row["query"]["parent_asin"])
        for row in _rows(built, "full", "test")
        for user in row["users"]
    }
    assert len(labels) >= 6 * 2
    assert not labels & pairs


def test_build_interactions_keep_train_labels_and_the_other_reviews(built: Path, raw: Path) -> None:
    ratings = _interactions(built)
    pairs = {(d, r["user_id"], r["parent_asin"]) for d, rows in ratings.items() for r in rows}
    train = {
        (row["domain"], user["user_id"], row["query"]["parent_asin"])
        for row in _rows(built, "full", "train")
        for user in row["users"]
    }
    assert train and train <= pairs
    manifest = json.loads((built / "manifest.json").read_text())
    for domain, info in manifest["interactions"].items():
        selected = manifest["selection"][domain]["reviews"]  # after deduplication
        test_users = sum(len(r["users"]) for r in _rows(built, "full", "test") if r["domain"] == domain)
        assert info["rows"] == len(ratings[domain]) == selected - test_users
        assert info["test_labels_removed"] == test_users


def test_build_interactions_are_hashed_ordered_and_typed(built: Path) -> None:
    manifest = json.loads((built / "manifest.json").read_text())
    for info in manifest["interactions"].values():
        path = built / info["path"]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == info["sha256"]
        assert info["sha256"][:12] in path.name
        table = pq.read_table(path)
        assert table.schema.equals(INTERACTIONS_SCHEMA)
        keys = list(
            zip(*(table.column(c).to_pylist() for c in ("timestamp", "parent_asin", "user_id")), strict=True)
        )
        assert keys == sorted(keys)
    assert manifest["parameters"]["with_interactions"] is True


def test_build_interactions_card_describes_them_and_configs_still_load(built: Path) -> None:
    card = (built / "README.md").read_text()
    assert "## Interactions" in card and "Every test label is removed" in card
    header = yaml.safe_load(card.split("---")[1])
    assert "interactions" not in {c["config_name"] for c in header["configs"]}
    for entry in header["configs"]:
        ds = datasets.load_dataset(str(built), entry["config_name"], split="test")
        assert ds.num_rows == 6


def test_build_interactions_off_by_default_writes_none(raw: Path, tmp_path: Path) -> None:
    out = build(config(raw, tmp_path / "bench", min_history=10, test_groups=3))
    assert not (out / "interactions").exists()
    assert "interactions" not in json.loads((out / "manifest.json").read_text())
    assert "## Interactions" not in (out / "README.md").read_text()


def test_build_interactions_are_identical_across_builds(raw: Path, built: Path, tmp_path: Path) -> None:
    again = build(
        config(
            raw,
            tmp_path / "bench",
            domains=("Books", "Electronics"),
            min_history=10,
            test_groups=6,
            with_interactions=True,
            threads=2,
        )
    )
    first = json.loads((built / "manifest.json").read_text())["interactions"]
    assert json.loads((again / "manifest.json").read_text())["interactions"] == first


def test_build_interactions_leave_the_dataset_fingerprint_unchanged(
    raw: Path, built: Path, tmp_path: Path
) -> None:
    plain = build(
        config(raw, tmp_path / "bench", domains=("Books", "Electronics"), min_history=10, test_groups=6)
    )
    assert "with_interactions" not in json.loads((plain / "manifest.json").read_text())["parameters"]
    assert dataset_fingerprint(plain) == dataset_fingerprint(built)
    other = build(
        config(raw, tmp_path / "other", domains=("Books", "Electronics"), min_history=10, test_groups=5)
    )
    assert dataset_fingerprint(other) != dataset_fingerprint(built)


def test_build_interactions_large_preset_removes_every_levels_test_labels(raw: Path, tmp_path: Path) -> None:
    out = build(
        config(
            raw, tmp_path / "large", domains=("Books", "Electronics"), min_history=10, test_groups=6,
            preset="large", with_interactions=True,
        )
    )  # fmt: skip
    ratings = _interactions(out)
    pairs = {(d, r["user_id"], r["parent_asin"]) for d, rows in ratings.items() for r in rows}
    header = yaml.safe_load((out / "README.md").read_text().split("---")[1])
    labels = {
        (row["domain"], user["user_id"], row["query"]["parent_asin"])
        for entry in header["configs"]
        for name in [entry["config_name"]]
        for row in _rows(out, name, "test")
        for user in row["users"]
    }
    assert labels and not labels & pairs
    removed = sum(
        info["test_labels_removed"]
        for info in json.loads((out / "manifest.json").read_text())["interactions"].values()
    )
    assert removed == len(labels)
