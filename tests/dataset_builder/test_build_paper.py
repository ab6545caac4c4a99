"""The paper preset with the paper's options writes what the builder wrote before the large preset and twin
removal existed: a content digest of every output, pinned from that builder (commit 5294f2e)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq

from dataset_builder.build import build
from dataset_builder.synth import write_synthetic
from tests.dataset_builder.build_fixture import config

# Rows of every config x split file (sha256 of their JSON), stats.json's bytes, the manifest without package
# versions; printed by the builder of commit 5294f2e for the build below (re-printed, builder unchanged, when
# `perrecbench synth` planted its item chains). On the 60,000-review demo data the
# files themselves (parquet bytes, stats.json, manifest.json) were compared too: benchmarks/RESULTS.md.
PINNED = {
    "easy/test": "fb54c00ec736dba9",
    "easy/train": "29c713df8af226c0",
    "full/test": "a95fad067cc258b6",
    "full/train": "30f43e06c9a8d03b",
    "hard/test": "3e447e97827ce0a1",
    "hard/train": "b2bf09cec0b79199",
    "medium/test": "239b389c0562c650",
    "medium/train": "bf00e7bfa9169864",
    "stats.json": "0ed5f64ec89b6b6b",
    "manifest.json": "942ce9517fce1065",
}


def digest(folder: Path) -> dict[str, str]:
    manifest = json.loads((folder / "manifest.json").read_text())
    out = {}
    for name, splits in sorted(manifest["outputs"].items()):
        for split, path in sorted(splits.items()):
            rows = pq.read_table(folder / path).to_pylist()
            out[f"{name}/{split}"] = hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[
                :16
            ]
    out["stats.json"] = hashlib.sha256((folder / "stats.json").read_bytes()).hexdigest()[:16]
    manifest.pop("versions")
    out["manifest.json"] = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:16]
    return out


def test_build_paper_with_paper_options_is_unchanged(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    write_synthetic(raw, reviews_per_domain=6000, domains="Books", seed=1)
    out = build(config(raw, tmp_path / "out", min_history=10, test_groups=5, keep_twins=True))
    assert digest(out) == PINNED
    stats = json.loads((out / "stats.json").read_text())
    assert "resolution" not in stats and "twins" not in stats
    assert "## Resolution" in (out / "README.md").read_text()  # the card shows it all the same
