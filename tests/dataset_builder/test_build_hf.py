"""The ``hf://`` code path, offline: a local folder served by fsspec under the ``hf`` protocol."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from fsspec.implementations.dirfs import DirFileSystem
from fsspec.implementations.local import LocalFileSystem

from dataset_builder import sources
from dataset_builder.build import build
from dataset_builder.config import HF_RAW_SOURCE
from tests.dataset_builder.build_fixture import config, five_user_source


class LocalHubFileSystem(DirFileSystem):
    """Serves ``hf://<path>`` from ``<root>/<path>``, as HfFileSystem would from the Hub."""

    protocol = "hf"

    def __init__(self, root: Path) -> None:
        super().__init__(path=str(root), fs=LocalFileSystem())


def hub_layout(flat: Path, hub_root: Path) -> None:
    """Copy flat raw files into the Hub repo layout, gzipped: review_categories/, meta_categories/."""
    raw = hub_root / HF_RAW_SOURCE.removeprefix("hf://")
    for sub, prefix in (("review_categories", ""), ("meta_categories", "meta_")):
        (raw / sub).mkdir(parents=True)
        data = (flat / f"{prefix}Books.jsonl").read_bytes()
        (raw / sub / f"{prefix}Books.jsonl.gz").write_bytes(gzip.compress(data, mtime=0))


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    flat = five_user_source(tmp_path / "flat")
    hub_layout(flat, tmp_path / "hub")
    monkeypatch.setattr(sources, "hf_filesystem", lambda: LocalHubFileSystem(tmp_path / "hub"))
    return flat


def test_build_hf_source_reads_through_registered_filesystem(hub: Path, tmp_path: Path) -> None:
    out = build(config(HF_RAW_SOURCE, tmp_path / "from-hub" / "bench"))
    local = build(config(hub, tmp_path / "from-disk" / "bench"))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["inputs"][0]["file"] == f"{HF_RAW_SOURCE}/review_categories/Books.jsonl.gz"
    for name in json.loads((local / "manifest.json").read_text())["outputs"]["full"].values():
        assert (out / name).read_bytes() == (local / name).read_bytes()


def test_build_hf_domains_all_lists_the_hub_folders(hub: Path, tmp_path: Path) -> None:
    out = build(config(HF_RAW_SOURCE, tmp_path / "bench", domains="all"))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["parameters"]["domains"] == ["Books"]
    assert manifest["source_kind"] == "raw"  # hand-made files; hashes from the served bytes
    assert all(entry["hash"].startswith("sha256:") for entry in manifest["inputs"])


def test_build_hf_bad_line_is_located_in_the_remote_gz_file(hub: Path, tmp_path: Path) -> None:
    review_file = (
        tmp_path / "hub" / HF_RAW_SOURCE.removeprefix("hf://") / "review_categories" / "Books.jsonl.gz"
    )
    lines = gzip.decompress(review_file.read_bytes()).decode().splitlines()
    lines.insert(2, '{"user_id": "u", "parent_asin": "p", "rating": 9, "timestamp": 1}')
    review_file.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    with pytest.raises(Exception, match=r"review_categories/Books\.jsonl\.gz:3: field 'rating'"):
        build(config(HF_RAW_SOURCE, tmp_path / "bench"))
