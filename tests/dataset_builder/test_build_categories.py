"""Any Amazon Reviews 2023 category (synthetic and hand-made), `--domains all`, category-specific metadata,
and the provenance of a build: the synthetic marker, `source_kind` in the manifest and the card."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
import yaml

from dataset_builder import build as build_mod
from dataset_builder.build import build
from dataset_builder.config import CATEGORIES, BuildError, SynthConfig
from dataset_builder.synth import SYNTH_MARKER, write_synthetic
from perrec_eval.cli import main as cli_main
from tests.dataset_builder.build_fixture import QUERY, Scenario, config, five_users


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def card(out: Path) -> tuple[dict, str]:
    _, header, body = (out / "README.md").read_text().split("---", 2)
    return yaml.safe_load(header), body


def full_rows(out: Path) -> list[dict]:
    files = manifest(out)["outputs"]["full"]
    return [row for path in files.values() for row in pq.read_table(out / path).to_pylist()]


@pytest.fixture(scope="module")
def games(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Synthetic raw files of two non-paper categories, Video_Games and Kindle_Store (authors)."""
    folder = tmp_path_factory.mktemp("games")
    write_synthetic(folder, reviews_per_domain=20_000, domains="Video_Games,Kindle_Store", seed=0)
    return folder


def test_build_categories_list_is_the_release(tmp_path: Path) -> None:
    assert len(CATEGORIES) == 34 and CATEGORIES[-1] == "Unknown" and len(set(CATEGORIES)) == 34
    assert SynthConfig(out=tmp_path, domains="all").domains == CATEGORIES
    assert {"Books", "Clothing_Shoes_and_Jewelry", "Home_and_Kitchen", "Electronics", "Video_Games"} < set(
        CATEGORIES
    )


def test_build_categories_synth_writes_a_non_paper_category(games: Path) -> None:
    meta = {
        name: [json.loads(line) for line in (games / f"meta_{name}.jsonl").read_text().splitlines()]
        for name in ("Video_Games", "Kindle_Store")
    }
    assert {m["main_category"] for m in meta["Video_Games"]} <= {"Video Games", None}
    assert all(m["categories"][0] == "Video Games" and "author" not in m for m in meta["Video_Games"])
    authors = [m.get("author") for m in meta["Kindle_Store"]]
    assert 0.8 < sum(a is not None for a in authors) / len(authors) < 0.97
    assert all(set(a) <= {"name", "avatar", "about"} and a["name"] for a in authors if a)
    review = json.loads((games / "Video_Games.jsonl").read_text().splitlines()[0])
    assert {"rating", "parent_asin", "user_id", "timestamp"} <= set(review)


def test_build_categories_synth_marker_records_every_file(games: Path) -> None:
    marker = json.loads((games / SYNTH_MARKER).read_text())
    assert marker["generator"] == "perrecbench synth" and "SYNTHETIC" in marker["about"]
    names = [f"{p}{d}.jsonl" for d in ("Kindle_Store", "Video_Games") for p in ("", "meta_")]
    assert sorted(marker["files"]) == sorted(names)
    for name, entry in marker["files"].items():
        data = (games / name).read_bytes()
        assert entry == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "seed": 0}


def test_build_categories_non_paper_category_end_to_end(games: Path, tmp_path: Path, capsys) -> None:
    args = ["build", "--source", str(games), "--out", str(tmp_path / "bench"), "--domains", "Video_Games"]
    assert cli_main([*args, "--test-groups", "6", "--threads", "1", "--no-progress"]) == 0
    assert "groups: Video_Games" in capsys.readouterr().out
    out = tmp_path / "bench"
    test = datasets.load_dataset(str(out), "medium", split="test", cache_dir=str(tmp_path / "cache"))
    assert test.num_rows == 6
    for row in test:
        assert row["group_id"].startswith("Video_Games:") and row["domain"] == "Video_Games"
        assert row["query"]["main_category"] in ("Video Games", None) and row["query"]["author"] is None
    assert manifest(out)["parameters"]["domains"] == ["Video_Games"]


def test_build_categories_all_builds_every_category_in_the_source(games: Path, tmp_path: Path) -> None:
    source = tmp_path / "raw"
    shutil.copytree(games, source)
    (source / "notes.jsonl").write_text('{"not": "a category"}\n')  # not a category: ignored
    out = build(config(source, tmp_path / "bench", domains="all", test_groups=10))
    assert manifest(out)["parameters"]["domains"] == ["Kindle_Store", "Video_Games"]  # the release's order
    stats = json.loads((out / "stats.json").read_text())
    assert stats["split"]["test_groups_per_domain"] == {"Kindle_Store": 5, "Video_Games": 5}
    assert "| Kindle_Store | 5 |" in card(out)[1] and "| Video_Games | 5 |" in card(out)[1]
    authors = [r["query"]["author"] for r in full_rows(out) if r["domain"] == "Kindle_Store"]
    assert any(authors)


def test_build_categories_all_without_any_category_file_names_the_fix(tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "reviews.jsonl").write_text("{}\n")
    with pytest.raises(BuildError, match="--domains all: .* holds no review file of an Amazon Reviews 2023"):
        build(config(tmp_path / "raw", tmp_path / "bench", domains="all"))


def kindle_scenario() -> Scenario:
    """Five Kindle_Store users with one valid group; metadata in the shapes the real files have."""
    scenario = Scenario(domain="Kindle_Store")
    five_users(scenario)
    meta = scenario.meta
    meta[QUERY] = {
        "parent_asin": QUERY,
        "title": "A Kindle Book",
        "main_category": None,  # null in many real lines
        "author": {"name": "Kim Writer", "avatar": "https://x/y.jpg", "about": ["Writes.", "More."]},
        "details": {"Publisher": "P", "Print length": "300 pages", "Best Sellers Rank": {"Kindle Store": 12}},
        "price": "from 3.99",  # strings where a float is documented: never read
        "categories": [],
        "images": [{"thumb": None, "large": "x", "variant": "MAIN", "hi_res": None}],
        "subtitle": "Kindle Edition",
        "average_rating": 4.5,
        "rating_number": 12,
    }
    variants = {
        "H-U0-0": {"author": None},
        "H-U0-1": {"author": "Plain Name"},  # a bare string
        "H-U0-2": {"author": {"avatar": "z"}},  # an object without a name
        "H-U0-3": {"author": {"name": "Only Name"}},
    }
    for asin, extra in variants.items():
        meta[asin].update(extra)
    del meta["H-U0-4"]["title"]  # no title: kept in histories with a null title
    meta["H-U0-5"].pop("main_category")
    return scenario


def test_build_categories_kindle_metadata_shapes(tmp_path: Path) -> None:
    source = kindle_scenario().write(tmp_path / "raw")
    out = build(config(source, tmp_path / "bench", domains=("Kindle_Store",)))
    [row] = full_rows(out)
    assert row["group_id"] == f"Kindle_Store:{QUERY}"
    assert row["query"]["author"] == "Kim Writer" and row["query"]["main_category"] is None
    history = {h["parent_asin"]: h for u in row["users"] if u["user_id"] == "U0" for h in u["history"]}
    assert [history[f"H-U0-{i}"]["author"] for i in range(4)] == [None, "Plain Name", None, "Only Name"]
    assert history["H-U0-4"]["title"] is None and history["H-U0-5"]["title"] == "title of H-U0-5"
    assert manifest(out)["bad_lines"]["count"] == 0


def test_build_categories_synthetic_source_is_said_everywhere(games: Path, tmp_path: Path) -> None:
    out = build(config(games, tmp_path / "bench", domains=("Video_Games",), test_groups=5))
    recorded = manifest(out)
    assert recorded["source_kind"] == "synthetic"
    assert all(entry["synthetic"] for entry in recorded["inputs"])
    header, body = card(out)
    assert "synthetic" in header["tags"] and "SYNTHETIC" in header["pretty_name"]
    assert "**Synthetic data generated by `perrecbench synth`, not Amazon reviews.**" in body
    assert "Derived from **Amazon Reviews 2023**" not in body


def test_build_categories_push_of_a_synthetic_build_says_so(games: Path, tmp_path: Path, monkeypatch) -> None:
    pushed = []
    monkeypatch.setattr(
        build_mod, "push_to_hub", lambda folder, repo, synthetic: pushed.append((repo, synthetic))
    )
    out = build(
        config(games, tmp_path / "bench", domains=("Video_Games",), test_groups=5, push_to_hub="org/name")
    )
    assert pushed == [("org/name", True)]
    header, body = card(out)
    assert "synthetic" in header["tags"] and 'load_dataset("org/name"' in body


def test_build_categories_raw_source_is_derived_from_amazon(tmp_path: Path) -> None:
    source = kindle_scenario().write(tmp_path / "raw")
    out = build(config(source, tmp_path / "bench", domains=("Kindle_Store",)))
    assert manifest(out)["source_kind"] == "raw"
    assert not any(entry["synthetic"] for entry in manifest(out)["inputs"])
    header, body = card(out)
    assert "synthetic" not in header["tags"] and "Derived from **Amazon Reviews 2023**" in body
    assert "perrecbench synth" not in body


def test_build_categories_synthetic_and_raw_files_make_a_mixed_source(games: Path, tmp_path: Path) -> None:
    source = tmp_path / "raw"
    shutil.copytree(games, source)
    kindle_scenario().write(source)  # replaces the synthetic Kindle_Store files with hand-made ones
    out = build(config(source, tmp_path / "bench", domains=("Kindle_Store", "Video_Games"), test_groups=3))
    recorded = manifest(out)
    assert recorded["source_kind"] == "mixed"
    assert {e["file"]: e["synthetic"] for e in recorded["inputs"]} == {
        "Kindle_Store.jsonl": False,
        "meta_Kindle_Store.jsonl": False,
        "Video_Games.jsonl": True,
        "meta_Video_Games.jsonl": True,
    }
    header, body = card(out)
    assert "synthetic" in header["tags"] and "PARTLY SYNTHETIC" in header["pretty_name"]
    assert "Derived from **Amazon Reviews 2023**" in body and "perrecbench synth" in body


def test_build_categories_stale_marker_is_not_trusted(games: Path, tmp_path: Path, caplog) -> None:
    source = kindle_scenario().write(tmp_path / "raw")
    shutil.copy(games / SYNTH_MARKER, source / SYNTH_MARKER)  # a marker whose files are not these
    with caplog.at_level(logging.WARNING):
        out = build(config(source, tmp_path / "bench", domains=("Kindle_Store",)))
    assert manifest(out)["source_kind"] == "raw"
    assert f"{SYNTH_MARKER} is present but matches none of the input files" in caplog.text
