"""`perrecbench synth --shape amazon`: a real category's sparsity, sizes and text lengths, written a block of
users at a time."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dataset_builder import synth
from dataset_builder.config import BuildConfigError, SynthConfig
from dataset_builder.synth import amazon
from perrec_eval.cli import main as cli_main
from tests.peak_memory import cli_peak_mb

N = 40_000


@pytest.fixture(scope="module")
def books(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("amazon")
    summary = synth.write_synthetic(out, reviews_per_domain=N, domains="Books", seed=1, shape="amazon")
    return out, summary


def _reviews(folder: Path, name: str = "Books") -> list[dict]:
    return [json.loads(line) for line in (folder / f"{name}.jsonl").read_text().splitlines()]


def test_amazon_shape_lines_are_what_json_dumps_writes(books):
    folder, _ = books
    for path in (folder / "Books.jsonl", folder / "meta_Books.jsonl"):
        for line in path.read_text().splitlines()[:2000]:
            assert json.dumps(json.loads(line)) == line


def test_amazon_shape_has_the_real_ratios_of_users_and_items(books):
    folder, summary = books
    reviews = _reviews(folder)
    users = {r["user_id"] for r in reviews}
    items = {r["parent_asin"] for r in reviews}
    real = amazon.CATEGORY_STATS["Books"]
    assert len(reviews) == N == len({(r["user_id"], r["parent_asin"]) for r in reviews})  # no repeat
    assert len(users) == pytest.approx(N * real.users / real.ratings, rel=0.05)
    assert len(items) == pytest.approx(N * real.items / real.ratings, rel=0.1)
    assert summary["domains"]["Books"]["users"] == len(users)
    assert summary["domains"]["Books"]["items"] == len(items)


def test_amazon_shape_most_users_write_one_or_two_reviews(books):
    folder, _ = books
    per_user = np.unique([r["user_id"] for r in _reviews(folder)], return_counts=True)[1]
    assert (per_user == 1).mean() > 0.5
    assert (per_user <= 2).mean() > 0.7
    assert per_user.max() > 20  # and a heavy tail


def test_amazon_shape_has_metadata_for_most_but_not_all_items(books):
    folder, summary = books
    reviewed = {r["parent_asin"] for r in _reviews(folder)}
    meta = [json.loads(line) for line in (folder / "meta_Books.jsonl").read_text().splitlines()]
    described = {m["parent_asin"] for m in meta}
    assert described < reviewed
    assert len(described) / len(reviewed) == pytest.approx(amazon.SHAPE.meta_share, abs=0.02)
    assert summary["domains"]["Books"]["items_with_metadata"] == len(described)
    titles = [m["title"] for m in meta]
    assert len(set(titles)) / len(titles) > 0.99  # titles do not repeat as the dense shape's do


def test_amazon_shape_texts_have_the_real_length(books):
    folder, _ = books
    lengths = np.array([len(r["text"]) for r in _reviews(folder)])
    real = amazon.CATEGORY_STATS["Books"]
    assert lengths.mean() == pytest.approx(4 * real.review_tokens / real.ratings, rel=0.1)
    assert np.median(lengths) < 0.8 * lengths.mean()  # a long tail of long reviews
    meta = (folder / "meta_Books.jsonl").read_text().splitlines()
    assert np.mean([len(line) for line in meta]) == pytest.approx(4 * real.meta_tokens / real.items, rel=0.2)


def test_amazon_shape_five_core_keeps_about_a_third_of_the_reviews(books):
    folder, _ = books
    pairs = [(r["user_id"], r["parent_asin"]) for r in _reviews(folder)]
    users = np.unique([u for u, _ in pairs], return_inverse=True)[1]
    items = np.unique([i for _, i in pairs], return_inverse=True)[1]
    while True:
        keep = (np.bincount(users)[users] >= 5) & (np.bincount(items)[items] >= 5)
        if keep.all():
            break
        users, items = users[keep], items[keep]
    # Books' real 5-core: 32% of the reviews (at this small size the core is a little smaller)
    assert 0.15 < users.size / len(pairs) < 0.45


def test_amazon_shape_is_deterministic_and_seeded(tmp_path, books):
    folder, _ = books
    again = tmp_path / "again"
    synth.write_synthetic(again, reviews_per_domain=N, domains="Books", seed=1, shape="amazon")
    for name in ("Books.jsonl", "meta_Books.jsonl"):
        assert (again / name).read_bytes() == (folder / name).read_bytes()
    other = tmp_path / "other"
    synth.write_synthetic(other, reviews_per_domain=N, domains="Books", seed=2, shape="amazon")
    assert (other / "Books.jsonl").read_bytes() != (folder / "Books.jsonl").read_bytes()


def test_amazon_shape_memory_grows_by_bytes_per_review(tmp_path):
    """Reviews are written a block of users at a time: four times the reviews add a few tens of bytes per
    review (the shuffled items, per-user and per-item counts), never the lines."""
    peaks = {}
    for n in (150_000, 600_000):
        argv = ["synth", "--out", str(tmp_path / str(n)), "--reviews-per-domain", str(n), "--domains",
                "Books", "--shape", "amazon", "--no-progress"]  # fmt: skip
        peaks[n] = cli_peak_mb(argv, tmp_path / f"{n}.json")
    written = sum(p.stat().st_size for p in (tmp_path / "600000").iterdir()) / 2**20
    assert peaks[600_000] - peaks[150_000] < 450_000 * 48 / 2**20, (peaks, written)  # ≈ 500 MB more lines


def test_amazon_shape_refuses_faults_and_a_full_disk(tmp_path, monkeypatch):
    with pytest.raises(BuildConfigError, match="drop --dirty"):
        SynthConfig(out=tmp_path / "x", shape="amazon", dirty=True)
    with pytest.raises(BuildConfigError, match="--shape must be one of dense, amazon"):
        SynthConfig(out=tmp_path / "x", shape="sparse")

    class Usage:
        free = 10**9

    def never(*args, **kwargs):
        raise AssertionError("the disk check comes before any line is written")

    monkeypatch.setattr("dataset_builder.synth.amazon.shutil.disk_usage", lambda path: Usage)
    monkeypatch.setattr("dataset_builder.synth.writer._write_amazon_domain", never)
    with pytest.raises(BuildConfigError, match=r"writes about 3[0-9]\.\d GB, more than the 1\.0 GB free"):
        synth.write_synthetic(tmp_path / "x", reviews_per_domain=29_500_000, domains="Books", shape="amazon")


def test_amazon_shape_cli_prints_its_counts(tmp_path, capsys):
    code = cli_main(["synth", "--out", str(tmp_path / "raw"), "--reviews-per-domain", "5000", "--domains",
                     "Video_Games", "--shape", "amazon", "--no-progress"])  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "Video_Games: 5,000 reviews" in printed
    assert cli_main(["synth", "--out", str(tmp_path / "bad"), "--shape", "amazon", "--twins"]) == 2
    assert "drop --dirty and --twins" in capsys.readouterr().err


def test_lomax_scale_gives_the_mean():
    rng = np.random.default_rng(0)
    scale = amazon.lomax_scale(6.7, 1.4, 100_000)
    draws = np.minimum(1 + np.floor(scale * rng.pareto(1.4, 2_000_000)), 100_000)
    assert draws.mean() == pytest.approx(6.7, rel=0.05)
