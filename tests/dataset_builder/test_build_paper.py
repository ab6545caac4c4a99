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
# `perrecbench synth` planted its item chains, and again when it gave items shared authors, stores and
# publishers: stats.json unchanged, only the metadata text in the rows). On the 60,000-review demo data the
# files themselves (parquet bytes, stats.json, manifest.json) were compared too: benchmarks/RESULTS.md.
PINNED = {
    "easy/test": "9317894f7137854a",
    "easy/train": "11f00d81483bbe9b",
    "full/test": "f9bcc62bf6108ab1",
    "full/train": "423ff9c195b355c4",
    "hard/test": "0dd114ae73bd0787",
    "hard/train": "b0a90d8085161d26",
    "medium/test": "9c0f076326e1301c",
    "medium/train": "779717fb7ced32d1",
    "stats.json": "0ed5f64ec89b6b6b",
    "manifest.json": "637d4feeebdfd496",
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
    manifest.pop("checksums")  # the shared build's sha256 of the files above (issue 38), bytes not rows
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
